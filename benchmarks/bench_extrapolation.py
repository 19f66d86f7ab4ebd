"""How much of RFFNet's test error on bench_real's tables comes from inputs beyond the training range.

A stationary kernel's part of the model has no trend to follow past the training rows, and
random Fourier features there take pseudo-random values; a tree ensemble predicts a
constant there instead. For each data set and split of ``bench_real.py`` (same tables,
noise columns, splits and preprocessing), this fits ``RFFNetRegressor(random_state=seed)``
once and scores its test predictions twice: on the test inputs as they are, and with each
numeric column clipped to its training range (both the kernel and the linear part see the
clipped inputs). It reports the test rows with an input out of range, whether the fitted
model kept its linear term, and the R^2 of both predictions, beside RidgeCV's.

Usage::

    python benchmarks/bench_extrapolation.py --datasets flights movies --seeds 0 1 2

Writes ``benchmarks/results/extrapolation.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from bench_real import load, make_model, split
from _common import code_version

RESULTS = Path(__file__).resolve().parent / "results"


def measure(name, seed, data):
    """One split: R^2 of RFFNet on the test inputs as given and clipped, RidgeCV's, rows out of range."""
    from sklearn.metrics import r2_score

    X, y, categorical = data
    X_train, X_test, y_train, y_test = split(name, X, y, seed)
    numeric = [column for column in X.columns if column not in categorical]
    model = make_model("rffnet", "regression", categorical, numeric, seed).fit(X_train, y_train)
    linear = make_model("linear", "regression", categorical, numeric, seed).fit(X_train, y_train)
    clipped = X_test.copy()
    clipped[numeric] = X_test[numeric].clip(X_train[numeric].min(), X_train[numeric].max(), axis=1)
    outside = (clipped[numeric] != X_test[numeric]).any(axis=1)
    columns = sorted({column for column in numeric if (clipped[column] != X_test[column]).any()})
    return {"data": name, "seed": seed, "rows out of range": int(outside.sum()),
            "columns out of range": ", ".join(columns) or "-",
            "linear term kept": model[-1].model_.rff.has_linear,
            "R^2": r2_score(y_test, model.predict(X_test)), "R^2 clipped": r2_score(y_test, model.predict(clipped)),
            "RidgeCV R^2": r2_score(y_test, linear.predict(X_test))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["flights", "movies"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--max-rows", type=int, default=50_000, help="bench_real's cap on the table's rows")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import rffkit

    rffkit.set_config(n_threads=args.threads)
    rows, load_before = [], os.getloadavg()[0]
    for name in args.datasets:
        data = load(name, max_rows=args.max_rows)
        for seed in args.seeds:
            rows.append(measure(name, seed, data))
            print(rows[-1], flush=True)
    header = list(rows[0])
    lines = ["# RFFNet's test error from inputs beyond the training range", "",
             f"Produced by `benchmarks/bench_extrapolation.py` ({code_version()}, {time.strftime('%Y-%m-%d')}, "
             f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} thread(s), 1-minute load "
             f"{load_before:.1f} before / {os.getloadavg()[0]:.1f} after). bench_real's tables (at most "
             f"{args.max_rows:,} rows, 10 noise columns), splits and preprocessing; 'R^2 clipped': the same "
             "fitted model on the test inputs clipped, column by column, to the training range.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(f"{value:.4f}" if isinstance(value, float) else str(value)
                                       for value in row.values()) + " |")
    (RESULTS / "extrapolation.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'extrapolation.md'}")


if __name__ == "__main__":
    main()
