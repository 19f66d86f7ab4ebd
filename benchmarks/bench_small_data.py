"""Issue 19, item 2: RFFNet's default fit on small data -- its time and test error.

On a training split of at most ``first_stage_rows`` rows (2,000; the estimator holds
out 10% for validation, so up to about 2,220 rows) ``alpha='auto'`` repeats the
relevance search at ``small_sample_alphas`` from two starts. This benchmark fits
``RFFNetRegressor(random_state=seed)`` on Gregorová's SE1 and SE2 (the problems of
the SRFF tables) at 1,000 rows, and on SE1 at 2,000 rows (a small split) and 2,300
rows (not), 2,000 test rows, one thread, each fit in a fresh process (wall and CPU
seconds recorded); ``--settings``
runs it with other :class:`rffkit._settings.RFFNetSettings` values, and ``--label``
names such a variant in the table. The load average is recorded with every row.

Writes ``benchmarks/results/small_data.md`` and ``.csv`` (rows of earlier runs with
other labels are kept, so variants compare side by side).

Usage: python benchmarks/bench_small_data.py [--seeds 4] [--settings '{"small_sample_alphas": [0.001, 0.03]}'] [--label two-alphas]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from pathlib import Path

import numpy as np

from _common import code_version, in_fresh_process, load_average, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
CASES = (("gregorova_se1", 1000), ("gregorova_se2", 1000), ("gregorova_se1", 2000), ("gregorova_se1", 2300))
FIELDS = ["label", "problem", "n_train", "seed", "fit_s", "cpu_s", "test_mse", "support_found", "load_average",
          "version"]


def _fit_one(problem, n_train, seed, settings, queue):
    os.environ["OMP_NUM_THREADS"] = "1"
    import dataclasses

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    from rffkit import RFFNetRegressor
    from rffkit.datasets import SYNTHETIC_PROBLEMS

    X, y, support = SYNTHETIC_PROBLEMS[problem](n_train + 2000, random_state=seed, return_support=True)
    mean, std = X[:n_train].mean(axis=0), X[:n_train].std(axis=0)
    X = (X - mean) / std
    model = RFFNetRegressor(random_state=seed)
    if settings:
        model._settings = dataclasses.replace(
            model._settings, **{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
    with threadpool_limits(1):
        start, cpu = time.perf_counter(), time.process_time()
        model.fit(X[:n_train], y[:n_train])
        fit_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        mse = float(np.mean((model.predict(X[n_train:]) - y[n_train:]) ** 2))
    top = np.argsort(-model.feature_importances_)[: len(support)]
    queue.put({"problem": problem, "n_train": n_train, "seed": seed, "fit_s": fit_s, "cpu_s": cpu_s, "test_mse": mse,
               "support_found": bool(set(top.tolist()) == set(support.tolist())),
               "load_average": load_average()})


def run(problem, n_train, seed, settings):
    return in_fresh_process(_fit_one, problem, n_train, seed, settings)


def read_rows(path):
    if not path.exists():
        return []
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        row["n_train"], row["seed"] = int(row["n_train"]), int(row["seed"])
        row["fit_s"], row["cpu_s"], row["test_mse"] = float(row["fit_s"]), float(row["cpu_s"]), float(row["test_mse"])
        row["support_found"] = row["support_found"] == "True"
    return rows


def markdown(rows):
    labels = list(dict.fromkeys(r["label"] for r in rows))
    lines = [
        "# RFFNet on small data: time and test error",
        "",
        "Produced by `benchmarks/bench_small_data.py`: `RFFNetRegressor(random_state=seed)` on 1 thread, each fit in "
        "a fresh process, 2,000 test rows; the machine is shared (2 cores): times are CPU seconds of the fitting "
        "process (user + system), which the load barely changes; wall seconds are in the CSV. Variants (`label`) ran with the settings and code named below.",
        "",
    ]
    for label in labels:
        sel = [r for r in rows if r["label"] == label]
        lines.append(f"- `{label}`: {sel[0]['version']}; load average {sel[0]['load_average']} to "
                     f"{sel[-1]['load_average']}")
    lines += ["", "| problem | n_train | " + " | ".join(f"{label}: test MSE mean (sd) | {label}: CPU s mean | "
                                                      f"{label}: relevant first" for label in labels) + " |",
              "|---|---|" + "---|---|---|" * len(labels)]
    extra = sorted({(r["problem"], r["n_train"]) for r in rows} - set(CASES), key=lambda case: (case[1], case[0]))
    for problem, n_train in (*CASES, *extra):
        cells = []
        for label in labels:
            sel = [r for r in rows if r["label"] == label and r["problem"] == problem and r["n_train"] == n_train]
            if not sel:
                cells += ["-", "-", "-"]
                continue
            mse = np.array([r["test_mse"] for r in sel])
            cells += [f"{mse.mean():.4f} ({mse.std(ddof=1) if len(sel) > 1 else 0:.4f}), {len(sel)} seeds",
                      f"{np.mean([r['cpu_s'] for r in sel]):.1f}", f"{sum(r['support_found'] for r in sel)}/{len(sel)}"]
        lines.append(f"| {problem} | {n_train:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--settings", type=json.loads, default=None)
    parser.add_argument("--label", default="defaults")
    parser.add_argument("--cases", nargs="+", default=None, help="problem:n_train pairs (default: all four)")
    parser.add_argument("--markdown-only", action="store_true")
    args = parser.parse_args()
    csv_path, md_path = RESULTS / "small_data.csv", RESULTS / "small_data.md"
    rows = read_rows(csv_path)
    cases = CASES if args.cases is None else [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases]
    if not args.markdown_only:
        version = code_version() + (f", settings {json.dumps(args.settings)}" if args.settings else "")
        rows = [r for r in rows if r["label"] != args.label]
        for problem, n_train in cases:
            for seed in range(args.seeds):
                row = run(problem, n_train, seed, args.settings)
                row.update(label=args.label, version=version)
                print(row, flush=True)
                rows.append(row)
                write_csv_atomically(csv_path, FIELDS, rows)
    md_path.write_text(markdown(rows))


if __name__ == "__main__":
    main()
