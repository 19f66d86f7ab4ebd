"""Does a categorical column of noise rank below the columns that matter? Grouped relevances.

RFFNet learns one relevance per column it sees; a one-hot encoded column with ``L``
levels gives it ``L`` indicator columns, and :func:`rffkit.inspection.grouped_importances`
combines their shares into one value per table column. This benchmark measures how each
way of combining them ranks a categorical column of pure noise, against the tool a user
would otherwise pick: gradient boosting (``HistGradientBoostingRegressor`` with native
categorical support) and its permutation importance on held-out rows.

The table (``n`` rows, a 75 / 25 split): ``x1`` and ``x2`` numeric and relevant, ``x3``
numeric noise; ``cat_sig`` (3 levels, one of which shifts the target), ``cat_spread``
(10 levels, each with its own shift) and ``cat_noise`` (``L`` equally likely levels, no
effect), for ``L`` in ``--levels`` and seeds in ``--seeds``::

    y = sin(2 x1) + 0.5 x2 + 0.5 [cat_sig = a] + shift[cat_spread] + 0.1 e

RFFNet at its defaults in a pipeline (``OneHotEncoder`` for the labels,
``StandardScaler`` for the numbers), its relevances grouped by ``'norm'`` (the default for
rffkit's estimators), ``'sum'`` and ``'max'``; HGB's permutation importance (5 repeats) on
the test rows. For each: the rank of ``cat_noise`` among the 6 columns and whether it
ranks below all four relevant ones. Every fit on one thread. Writes
``benchmarks/results/categorical_relevance.md`` and ``.csv``.

Usage: python benchmarks/bench_categorical_relevance.py [--levels 10 30 100] [--seeds 0 1 2] [--rows 2000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.inspection import permutation_importance
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from threadpoolctl import threadpool_limits

import rffkit
from _common import add_quiet_argument, code_version, load_average, progress, say, write_csv_atomically
from rffkit.inspection import grouped_importances

RESULTS = Path(__file__).resolve().parent / "results"
RELEVANT = ("x1", "x2", "cat_sig", "cat_spread")
CATEGORICAL = ["cat_sig", "cat_spread", "cat_noise"]
WAYS = ("RFFNet, norm", "RFFNet, sum", "RFFNet, max", "HGB permutation")


def make_table(rows, levels, seed):
    """The table of the module docstring and its target."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "x1": rng.normal(size=rows), "x2": rng.normal(size=rows), "x3": rng.normal(size=rows),
        "cat_sig": rng.choice(list("abc"), rows),
        "cat_spread": [f"S{k}" for k in rng.integers(0, 10, rows)],
        "cat_noise": [f"L{k}" for k in rng.integers(0, levels, rows)],
    })
    shifts = rng.normal(scale=0.3, size=10)
    y = (np.sin(2 * X["x1"]) + 0.5 * X["x2"] + 0.5 * (X["cat_sig"] == "a")
         + shifts[X["cat_spread"].str[1:].astype(int)] + 0.1 * rng.normal(size=rows))
    return X, y.to_numpy()


def _rank_of_noise(importances):
    order = sorted(importances, key=lambda name: -importances[name])
    rank = order.index("cat_noise")
    return rank + 1, all(order.index(name) < rank for name in RELEVANT)


def run_one(rows, levels, seed):
    """Every way's rank of ``cat_noise`` on one table: rows of the result table."""
    X, y = make_table(rows, levels, seed)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=seed)
    numeric = ["x1", "x2", "x3"]
    net = Pipeline([
        ("prep", ColumnTransformer([("labels", OneHotEncoder(handle_unknown="ignore", sparse_output=False), CATEGORICAL),
                                    ("numbers", StandardScaler(), numeric)])),
        ("rffnet", rffkit.RFFNetRegressor(random_state=seed)),
    ])
    start = time.process_time()
    net.fit(X_train, y_train)
    net_seconds, net_r2 = time.process_time() - start, net.score(X_test, y_test)
    hgb = Pipeline([
        ("prep", ColumnTransformer([("labels", OrdinalEncoder(), CATEGORICAL)], remainder="passthrough")),
        ("hgb", HistGradientBoostingRegressor(categorical_features=[0, 1, 2], random_state=seed)),
    ])
    start = time.process_time()
    hgb.fit(X_train, y_train)
    permuted = permutation_importance(hgb, X_test, y_test, n_repeats=5, random_state=seed)
    hgb_seconds, hgb_r2 = time.process_time() - start, hgb.score(X_test, y_test)
    importances = {f"RFFNet, {how}": dict(grouped_importances(net, aggregate=how)) for how in ("norm", "sum", "max")}
    importances["HGB permutation"] = dict(zip(X.columns, permuted.importances_mean))
    result = []
    for way in WAYS:
        rank, below = _rank_of_noise(importances[way])
        rffnet = way.startswith("RFFNet")
        result.append(dict(
            levels=levels, seed=seed, way=way, noise_rank=rank, noise_below_relevant=below,
            noise_value=round(float(importances[way]["cat_noise"]), 4),
            test_r2=round(net_r2 if rffnet else hgb_r2, 4),
            cpu_s=round(net_seconds if rffnet else hgb_seconds, 2), load=load_average(),
        ))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", type=int, default=2000)
    add_quiet_argument(parser)
    args = parser.parse_args()
    units = [(levels, seed) for levels in args.levels for seed in args.seeds]
    rows = []
    with threadpool_limits(1), rffkit.config_context(n_threads=1):
        for levels, seed in progress(units, desc="categorical relevance", quiet=args.quiet,
                                     label=lambda unit: f"{unit[0]} levels, seed {unit[1]}"):
            rows.extend(run_one(args.rows, levels, seed))
            say(rows[-4:])
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomically(RESULTS / "categorical_relevance.csv", list(rows[0]), rows)
    by = {(r["levels"], r["seed"], r["way"]): r for r in rows}
    lines = [
        "# A categorical column of noise: where do grouped relevances rank it?",
        "",
        f"Written by `benchmarks/bench_categorical_relevance.py` at {code_version()}; {args.rows:,} rows "
        "(75 / 25 split), one thread. Columns: x1, x2 relevant; x3 noise; cat_sig (3 levels), cat_spread "
        "(10 levels) relevant; cat_noise (L levels) noise. Each cell: the rank of cat_noise among the 6 "
        "columns (1 = most relevant), and whether it ranks below all 4 relevant columns.",
        "",
        "| L | seed | " + " | ".join(WAYS) + " | test R^2 RFFNet / HGB | load |",
        "|---|---|" + "---|" * (len(WAYS) + 2),
    ]
    for levels, seed in units:
        cells = [f"{by[levels, seed, w]['noise_rank']} ({'below' if by[levels, seed, w]['noise_below_relevant'] else 'ABOVE'})"
                 for w in WAYS]
        r2 = f"{by[levels, seed, WAYS[0]]['test_r2']:.3f} / {by[levels, seed, WAYS[-1]]['test_r2']:.3f}"
        lines.append(f"| {levels} | {seed} | " + " | ".join(cells) + f" | {r2} | "
                     f"{by[levels, seed, WAYS[0]]['load'].split(',')[0]} |")
    totals = [sum(by[levels, seed, w]["noise_below_relevant"] for levels, seed in units) for w in WAYS]
    lines += ["", "cat_noise below every relevant column: "
              + "; ".join(f"{w} {t} of {len(units)}" for w, t in zip(WAYS, totals)) + "."]
    (RESULTS / "categorical_relevance.md").write_text("\n".join(lines) + "\n")
    say("\n".join(lines))


if __name__ == "__main__":
    main()
