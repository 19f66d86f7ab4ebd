"""A fit on a machine with one core kept busy, before and after rffkit bounds its threads.

Fits ``RFFNetRegressor`` (defaults, ``random_state=0``) on 2,000 rows of SE1 in a fresh
child process, four ways, interleaved over ``--reps`` rounds so that background load on
a shared machine falls on all of them alike:

- before / idle: ``n_threads='inherit'``, torch's default of one thread per core;
- before / busy: the same while another process spins on one core;
- after / idle and after / busy: rffkit's default ``n_threads='auto'``.

The busy process is ``python -c "while True: pass"``, started a second before the fit
and killed after it. Each fit is stopped at ``--timeout`` seconds (reported as ``>``).
Writes ``benchmarks/results/busy_machine.csv`` and ``busy_machine.md`` with the median
times, the busy/idle ratios, the threads each fit ran on and the load average.

    python benchmarks/bench_busy_machine.py [--rows 2000] [--reps 2] [--timeout 900]
        [--settings auto inherit] [--keep]

``--keep`` adds this run's fits to those already in ``busy_machine.csv`` (same ``--rows``)
before taking the medians, so slow settings need not be run again.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_quiet_argument, progress, say

RESULTS = Path(__file__).resolve().parent / "results"

CHILD = """
import json, sys, time, warnings
import torch
import rffkit
from rffkit._guards import auto_threads
from rffkit.datasets import make_gregorova_se1

setting, rows = sys.argv[1], int(sys.argv[2])
X, y = make_gregorova_se1(rows, random_state=0)
torch_default = torch.get_num_threads()
used = torch_default if setting == "inherit" else auto_threads(torch_default)
started = time.perf_counter()
with warnings.catch_warnings(), rffkit.config_context(n_threads=setting):
    warnings.simplefilter("ignore")
    rffkit.RFFNetRegressor(random_state=0).fit(X, y)
print(json.dumps({"seconds": time.perf_counter() - started, "threads": used, "torch_default": torch_default}))
"""


def fit_once(setting, rows, busy, timeout):
    """One fit in a child process: ``{'seconds', 'threads', 'load', ...}``."""
    environment = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    spinner = None
    if busy:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)
    load = os.getloadavg()[0]
    try:
        result = subprocess.run(
            [sys.executable, "-c", CHILD, setting, str(rows)], capture_output=True, text=True, env=environment,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-2000:])
        record = json.loads(result.stdout.strip().splitlines()[-1])
        record["timed_out"] = False
    except subprocess.TimeoutExpired:
        record = {"seconds": float(timeout), "threads": None, "torch_default": None, "timed_out": True}
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    record.update(setting=setting, busy=busy, load=load)
    return record


def _earlier_records():
    path = RESULTS / "busy_machine.csv"
    if not path.exists():
        return []
    records = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            records.append({
                "setting": row["setting"], "busy": row["busy"] == "True", "seconds": float(row["seconds"]),
                "timed_out": row["timed_out"] == "True", "threads": int(row["threads"]) if row["threads"] else None,
                "torch_default": int(row["torch_default"]) if row["torch_default"] else None,
                "load": float(row["load"]), "rows": int(row.get("rows") or 2000),
            })
    return records


def summarise(records):
    """Median seconds per (setting, busy), and the busy/idle ratio per setting with runs of both."""
    table = {}
    for setting in ("inherit", "auto"):
        row = {}
        if not all(any(r["setting"] == setting and r["busy"] == busy for r in records) for busy in (False, True)):
            continue  # e.g. --settings auto without --keep: no 'inherit' row
        for busy in (False, True):
            runs = [r for r in records if r["setting"] == setting and r["busy"] == busy]
            row[busy] = {
                "seconds": statistics.median(r["seconds"] for r in runs),
                "timed_out": any(r["timed_out"] for r in runs),
                "threads": sorted({r["threads"] for r in runs if r["threads"] is not None}),
                "load": statistics.median(r["load"] for r in runs),
                "runs": len(runs),
            }
        row["ratio"] = row[True]["seconds"] / row[False]["seconds"]
        table[setting] = row
    return table


def write(records, table, args):
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "busy_machine.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["setting", "busy", "seconds", "timed_out", "threads", "torch_default", "load", "rows"])
        writer.writeheader()
        for record in records:
            writer.writerow({key: record.get(key) for key in writer.fieldnames})

    def seconds(cell):
        return (">" if cell["timed_out"] else "") + f"{cell['seconds']:.1f}"

    names = {"inherit": "before: torch's default threads (`n_threads='inherit'`)",
             "auto": "after: rffkit's default (`n_threads='auto'`)"}
    lines = [
        "# A fit on a busy machine",
        "",
        f"`RFFNetRegressor()` (defaults, `random_state=0`) on {args.rows:,} rows of SE1, each fit in a fresh process;",
        "busy: another process spins on one core during the fit. Median of "
        "the runs below (count per cell in the last column), interleaved idle/busy; written by "
        "`benchmarks/bench_busy_machine.py`.",
        f"Machine: {os.cpu_count()} cores; the load average (1 min) when each fit started is given, since the",
        "machine is shared and other work adds to it.",
        "",
        "| threads | idle: s | busy: s | busy / idle | threads used (idle; busy) | load average (idle; busy) | runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for setting, row in table.items():
        lines.append(
            f"| {names[setting]} | {seconds(row[False])} | {seconds(row[True])} | {row['ratio']:.2f} | "
            f"{row[False]['threads']}; {row[True]['threads']} | {row[False]['load']:.1f}; {row[True]['load']:.1f} | "
            f"{row[False]['runs']}; {row[True]['runs']} |"
        )
    if "inherit" in table and "auto" in table:
        before, after = table["inherit"], table["auto"]
        lines += [
            "",
            f"Busy machine, after against before: {after[True]['seconds']:.1f} s against "
            f"{seconds(before[True])} s ({before[True]['seconds'] / after[True]['seconds']:.1f} times faster).",
        ]
    lines.append("")
    (RESULTS / "busy_machine.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--settings", nargs="+", choices=["auto", "inherit"], default=["auto", "inherit"])
    parser.add_argument("--keep", action="store_true", help="add to the fits already in busy_machine.csv")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    records = _earlier_records() if args.keep else []
    plan = [(round_, busy, setting) for round_ in range(args.reps) for busy in (False, True) for setting in args.settings]
    for round_, busy, setting in progress(plan, desc="bench_busy_machine", quiet=args.quiet,
                                          label=lambda u: f"round {u[0] + 1} {u[2]} {'busy' if u[1] else 'idle'}"):
        record = fit_once(setting, args.rows, busy, args.timeout)
        record["rows"] = args.rows
        records.append(record)
        say(f"round {round_ + 1}: {setting:7s} {'busy' if busy else 'idle'}: {record['seconds']:.1f} s "
            f"on {record['threads']} threads (load {record['load']:.1f})")
    records = [record for record in records if record.get("rows", args.rows) == args.rows]
    write(records, summarise(records), args)


if __name__ == "__main__":
    main()
