"""Streamed against in-memory fits of RFFNet's 'adam' solver and of the classifiers (issue 18).

Data: SE1 (Gregorová et al. 2018, p = 18) at ``--n`` rows (default 200,000), written to a
``.npy`` memory map and to Parquet shards (row groups of 65,536) in a temporary folder; the
classifiers learn ``y > median(y)`` of the same rows ('high' / 'low'). The test set is 20,000
rows of another seed. Each fit runs in a freshly spawned process on one thread
(``rffkit.set_config(n_threads=1)``); the CPU time is the user and system time of that
process over ``fit`` alone, and the peak RSS that of the whole process
(``resource.getrusage``). The 1-minute load average is recorded beside every fit: the
machine is shared, so compare the ratios measured within one run.

Rows (``--fits``):

* ``adam``: ``RFFNetRegressor(solver='adam', n_components=500, max_iter=EPOCHS)``, in memory
  against streamed from the memory map and from Parquet (shuffle buffer of 262,144 rows).
* ``rffnet-clf``: ``RFFNetClassifier(n_components=500)`` ('varpro'), in memory against
  streamed from Parquet (relevances on a 20,000 + 20,000-row hashed sample, the logistic head
  by L-BFGS on every row).
* ``rff-clf``: ``RFFClassifier()`` (500 Gaussian features) in memory against streamed from
  Parquet.
* ``rffnet-clf-default`` (not run by default: tens of minutes): ``RFFNetClassifier()`` at its
  default width, in memory (``floor(sqrt(n) log n)`` capped at 4,000) against streamed from
  Parquet (the head's width capped at 5,000 instead, :mod:`rffkit._stream_widths`).

For the streamed fits the table gives the passes over the data (``_stream_passes``) and the
CPU seconds of one pass, timed inside the fit: a pass of the logistic loss and gradient
(``StreamedLogistic.evaluate``) for the classifiers, and for 'adam' a validation pass
(``_streamed_loss``) and a training epoch (the fit's CPU less its validation passes, over
the epochs). The bytes per all-reduce are those of the formulas of
:mod:`rffkit._adam_stream` and :mod:`rffkit._logistic_stream`, counted with
``rffkit.distributed.count_traffic`` in a two-process gloo job at two sizes
(``--traffic-sizes``) to show that they do not grow with the rows (the gathers of the first
pass, moments and the fixed-size sample, are not counted there).

Writes ``benchmarks/results/stream_adam_classifiers.md`` and ``.csv``; a run replaces the rows
(fit, data, n) it measures and keeps the others, and the bytes per all-reduce are kept in
``stream_adam_classifiers.traffic.json`` when ``--traffic-sizes`` is given no size.

Usage::

    python benchmarks/bench_stream_adam_classifiers.py                 # 200,000 rows, all fits
    python benchmarks/bench_stream_adam_classifiers.py --n 20000 --fits adam   # a quick run
    python benchmarks/bench_stream_adam_classifiers.py --fits rffnet-clf-default --traffic-sizes
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import socket
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import code_version, in_fresh_process, load_average, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
CSV_PATH, MD_PATH = RESULTS / "stream_adam_classifiers.csv", RESULTS / "stream_adam_classifiers.md"
TRAFFIC_PATH = RESULTS / "stream_adam_classifiers.traffic.json"
FIELDS = ["fit", "how", "n", "D", "version", "cpu_s", "peak_rss_mb", "passes", "cpu_s_per_pass", "cpu_s_per_epoch",
          "epochs_or_iterations", "test_metric", "metric", "load_before", "load_after"]
N_TEST, ROW_GROUP, D, EPOCHS = 20_000, 65_536, 500, 5
FITS = ["adam", "rffnet-clf", "rff-clf", "rffnet-clf-default"]  # the table's order
TRAFFIC_FITS = FITS[:3]  # the fits whose bytes per all-reduce are counted


def write_data(folder, n, seed=0):
    """SE1 at ``n`` rows as a memory map (X.npy, y.npy) and Parquet shards of 500,000 rows at most."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rffkit.datasets import make_gregorova_se1

    X, y = make_gregorova_se1(n, random_state=seed)
    np.save(folder / "X.npy", X)
    np.save(folder / "y.npy", y)
    labels = np.where(y > np.median(y), "high", "low")
    (folder / "shards").mkdir()
    for number, rows in enumerate(np.array_split(np.arange(n), max(1, n // 500_000))):
        columns = {f"x{j}": X[rows, j] for j in range(X.shape[1])}
        pq.write_table(pa.table({**columns, "y": y[rows], "label": labels[rows]}),
                       folder / "shards" / f"part-{number}.parquet", row_group_size=ROW_GROUP)
    return float(np.median(y))


def _estimator(fit):
    from rffkit import RFFClassifier, RFFNetClassifier, RFFNetRegressor

    if fit == "adam":
        return RFFNetRegressor(solver="adam", n_components=D, max_iter=EPOCHS, random_state=0)
    if fit == "rffnet-clf":
        return RFFNetClassifier(n_components=D, random_state=0)
    if fit == "rffnet-clf-default":
        return RFFNetClassifier(random_state=0)
    return RFFClassifier(random_state=0)  # its default map: 500 Gaussian features, gamma='scale'


def _fit_process(fit, how, folder, median, queue):
    import warnings

    import pandas as pd
    import rffkit
    from rffkit.datasets import make_gregorova_se1
    from rffkit.io import open_table

    import rffkit._adam_stream as adam_stream
    import rffkit._logistic_stream as logistic_stream

    rffkit.set_config(n_threads=1)
    timed = {"cpu": 0.0, "calls": 0}

    def timing(function):
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                timed["cpu"] += time.process_time() - start
                timed["calls"] += 1
        return wrapper

    logistic_stream.StreamedLogistic.evaluate = timing(logistic_stream.StreamedLogistic.evaluate)
    adam_stream._streamed_loss = timing(adam_stream._streamed_loss)
    folder = Path(folder)
    classify = fit != "adam"
    target = "label" if classify else "y"
    names = [f"x{j}" for j in range(18)]
    X_test, y_test = make_gregorova_se1(N_TEST, random_state=1)
    labels_test = np.where(y_test > median, "high", "low")
    model = _estimator(fit)
    if how == "in memory":
        X = np.load(folder / "X.npy")
        y = np.load(folder / "y.npy")
        data = (X, np.where(y > median, "high", "low") if classify else y)
    elif how == "memmap":
        data = (np.load(folder / "X.npy", mmap_mode="r"), np.load(folder / "y.npy"))
    else:
        data = (open_table(str(folder / "shards" / "*.parquet"), target=target, features=names),)
        X_test = pd.DataFrame(X_test, columns=names)
    load_before = os.getloadavg()[0]
    start = os.times()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(*data)
    end = os.times()
    cpu = (end.user - start.user) + (end.system - start.system)
    if classify:
        metric, value = "accuracy", float(np.mean(model.predict(X_test) == labels_test))
    else:
        metric, value = "MSE", float(np.mean((model.predict(X_test) - y_test) ** 2))
    passes = getattr(model, "_stream_passes", None)
    per_pass = round(timed["cpu"] / timed["calls"], 3) if timed["calls"] and passes else None
    per_epoch = round((cpu - timed["cpu"]) / model.n_iter_, 3) if fit == "adam" and passes else None
    width = getattr(model, "n_components_", None) or getattr(getattr(model, "features_", None), "n_components", "")
    queue.put({"fit": fit, "how": how, "D": width, "version": code_version(), "cpu_s": round(cpu, 2),
               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
               "passes": passes, "cpu_s_per_pass": per_pass, "cpu_s_per_epoch": per_epoch,
               "epochs_or_iterations": int(model.n_iter_), "test_metric": round(value, 4), "metric": metric,
               "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)})


def _traffic_rank(rank, world_size, port, folder, output):
    import warnings

    import torch.distributed as dist
    import rffkit
    from rffkit.distributed import count_traffic
    from rffkit.io import open_table

    rffkit.set_config(n_threads=1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        report = {}
        for fit in TRAFFIC_FITS:
            model = _estimator(fit).set_params(**({"max_iter": 1} if fit == "adam" else {}))
            with warnings.catch_warnings(), count_traffic() as log:
                warnings.simplefilter("ignore")
                model.fit(open_table(str(Path(folder) / "shards" / "*.parquet"),
                                     target="label" if fit != "adam" else "y",
                                     features=[f"x{j}" for j in range(18)]))
            report[fit] = sorted(set(log.all_reduce_bytes))
        if rank == 0:
            Path(output).write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def traffic(n):
    """Bytes of the all-reduces of each fit in a two-process gloo job on ``n`` rows."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        write_data(Path(folder), n)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        output = Path(folder) / "traffic.json"
        mp.start_processes(_traffic_rank, args=(2, port, folder, str(output)), nprocs=2, start_method="spawn")
        return json.loads(output.read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--fits", nargs="+", default=["adam", "rffnet-clf", "rff-clf"],
                        choices=FITS)
    parser.add_argument("--traffic-sizes", nargs="*", type=int, default=[10_000, 20_000])
    args = parser.parse_args()
    kept = list(csv.DictReader(CSV_PATH.open())) if CSV_PATH.exists() else []
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        median = write_data(Path(folder), args.n)
        for fit in args.fits:
            for how in (("in memory", "memmap", "parquet") if fit == "adam" else ("in memory", "parquet")):
                print(f"{fit} {how} ... load {load_average()}", flush=True)
                row = in_fresh_process(_fit_process, fit, how, folder, median)
                row["n"] = args.n
                rows.append(row)
                print(row, flush=True)
    measured = {(row["fit"], row["how"], str(row["n"])) for row in rows}
    rows = [row for row in kept if (row["fit"], row["how"], row["n"]) not in measured] + rows
    rows.sort(key=lambda row: FITS.index(row["fit"]))  # stable: data kinds keep their order
    if args.traffic_sizes:
        traffic_rows = {str(n): traffic(n) for n in args.traffic_sizes}
        TRAFFIC_PATH.write_text(json.dumps(traffic_rows, indent=1) + "\n")
    else:
        traffic_rows = json.loads(TRAFFIC_PATH.read_text()) if TRAFFIC_PATH.exists() else {}
    write_csv_atomically(CSV_PATH, FIELDS, rows)
    def cell(row, key):
        value = row.get(key)
        return "" if value in (None, "", "None") else value

    lines = [
        "# Streamed against in-memory fits: RFFNet 'adam' and the classifiers",
        "",
        "Produced by `benchmarks/bench_stream_adam_classifiers.py` (each row's code in its version column); "
        f"SE1 at n rows, p = 18, D = {D} (the 'rffnet-clf-default' rows: the "
        "estimator's default width, given in the D column), one thread per fit, CPU seconds of the fitting "
        f"process (user + sys) over `fit`; 'adam' runs {EPOCHS} epochs. Load average of the shared 2-core "
        "machine beside each fit.",
        "",
        "| fit | data | n | D | CPU s | peak RSS MB | passes | CPU s / pass | CPU s / epoch | epochs / iterations | test "
        "| load | version |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['fit']} | {row['how']} | {int(row['n']):,} | {cell(row, 'D') or D} | {row['cpu_s']} | {row['peak_rss_mb']} | "
                     f"{cell(row, 'passes')} | {cell(row, 'cpu_s_per_pass')} | {cell(row, 'cpu_s_per_epoch')} | "
                     f"{row['epochs_or_iterations']} | {row['metric']} {row['test_metric']} | "
                     f"{row['load_before']} -> {row['load_after']} | {row['version']} |")
    lines += ["", "Bytes per all-reduce (distinct sizes, two gloo processes; 'adam' one epoch):", "",
              "| n | " + " | ".join(TRAFFIC_FITS) + " |", "|---|" + "---|" * len(TRAFFIC_FITS)]
    for n, report in traffic_rows.items():
        lines.append(f"| {n} | " + " | ".join(", ".join(map(str, report.get(fit, []))) for fit in TRAFFIC_FITS) + " |")
    MD_PATH.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
