"""Two processes with gloo give the single-process model; the helpers are identities alone.

The two-process tests start a job with ``torch.multiprocessing`` on 127.0.0.1 (a free port,
gloo, a 120 s limit); a slow one runs a user's script under ``torchrun --standalone``. Each rank fits ``RFFRidge`` on its share of Parquet shards written to
``tmp_path`` and saves its predictions and the bytes of every all-reduce; the test compares
both ranks with the single-process fit on the same files (predictions within 1e-6 relative;
they agree to about 1e-12) and checks that the bytes follow ``1 + D + D (D + 1) / 2 + D T + 2 T``
float64s whatever the number of rows. The same job fits a small streamed ``RFFNetRegressor`` at
both sizes: the same all-reduces (its paired comparisons send three float64s), and no broadcast
or gathered object that grows with the rows.
"""

import glob
import json
import os
import pickle
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import rffkit
from rffkit import RandomFourierFeatures, RFFNetRegressor, RFFRidge
from rffkit._sufficient import MemoryBudgetError, all_reduce_bytes
from rffkit.distributed import (
    all_gather_object,
    all_reduce_sum,
    broadcast_object,
    count_traffic,
    is_main_process,
    process_group,
    world,
)
from rffkit.io import open_table

TIMEOUT_SECONDS = 120
D = 64

CONFIGURATIONS = {
    "gcv": dict(features=RandomFourierFeatures(n_components=D, length_scale=2.0), alpha_selection="gcv"),
    "default features": dict(),
    "loo": dict(features=RandomFourierFeatures(n_components=D, length_scale=2.0), alpha_selection="loo"),
    "holdout": dict(features=RandomFourierFeatures(n_components=D, length_scale=2.0), alpha_selection="holdout"),
}


def test_helpers_are_identities_in_one_process():
    assert world() == (0, 1) and is_main_process()
    tensor = torch.arange(3.0)
    with count_traffic() as log:
        assert all_reduce_sum(tensor) is tensor
    assert tensor.tolist() == [0.0, 1.0, 2.0] and log.all_reduce_bytes == [] and log.total_bytes == 0
    assert broadcast_object({"a": 1}) == {"a": 1} and all_gather_object(5) == [5]
    with process_group() as (rank, world_size):
        assert (rank, world_size) == (0, 1)
    assert not dist.is_initialized()


def write_shards(folder, n_rows, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + 0.1 * rng.normal(size=n_rows)
    folder.mkdir(parents=True)
    for number, rows in enumerate(np.array_split(np.arange(n_rows), 3)):
        table = pa.table({**{f"x{j}": X[rows, j] for j in range(4)}, "y": y[rows]})
        pq.write_table(table, folder / f"part-{number}.parquet", row_group_size=150)
    X_test = pd.DataFrame(rng.normal(size=(50, 4)), columns=[f"x{j}" for j in range(4)])
    return str(folder / "*.parquet"), X_test


def _rank_main(rank, world_size, port, tables, output):
    """One rank of the job: fit every configuration on its share of each table, save the results."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    try:
        report = {}
        for n_rows, (pattern, X_test) in tables.items():
            for name, parameters in CONFIGURATIONS.items():
                with count_traffic() as log:
                    source = open_table(pattern, target="y", chunk_rows=100)
                    model = RFFRidge(random_state=0, **parameters).fit(source)
                report[f"{n_rows} {name}"] = {
                    "predictions": model.predict(X_test).tolist(), "alpha": model.alpha_,
                    "rows": model.n_rows_seen_, "all_reduce_bytes": log.all_reduce_bytes}
        for n_rows, (pattern, _) in tables.items():
            report[f"{n_rows} rffnet"] = _rffnet_traffic(pattern)
        pattern, X_test = tables[1800]
        X_mine, y_mine = arrays_of(pattern, rank)  # arrays are the rank's own, never split further
        holdout = RFFRidge(features=RandomFourierFeatures(n_components=D), alpha_selection="holdout", random_state=0)
        report["arrays holdout"] = holdout.fit(X_mine, y_mine).predict(X_test).tolist()
        try:  # rank 1 alone is short of memory: every rank must stop, not wait in an all-reduce
            RFFRidge(features=RandomFourierFeatures(n_components=D), memory_budget=10**10 - rank * (10**10 - 10**6)
                     ).fit(open_table(pattern, target="y"))
        except MemoryBudgetError as error:
            report["budget error"] = str(error)
        with open(f"{output}-{rank}.json", "w") as handle:
            json.dump(report, handle)
    finally:
        dist.destroy_process_group()


#: A small streamed RFFNet fit whose refinement is the linear term (always confirmed on every
#: row) and the linear-only comparison: two paired comparisons of validation losses.
RFFNET = dict(n_components=48, alpha=1e-3, max_iter=5, random_state=0, rescale_groups=False, align_frequencies=False,
              prune_relevances=False)


def _rffnet_traffic(pattern):
    """Bytes of every all-reduce of a streamed RFFNet fit, and the pickled bytes of every object it
    broadcasts or gathers (after the first pass, whose sample has a fixed number of rows)."""
    import rffkit._rffnet_stream as stream
    import rffkit._streamed_heads as heads

    objects, saved = [], stream.STREAM_SETTINGS
    originals = {(module, name): getattr(module, name) for module in (stream, heads)
                 for name in ("broadcast_object", "all_gather_object") if hasattr(module, name)}

    def counted(function):
        def call(obj, *args, **kwargs):
            objects.append(len(pickle.dumps(obj)))
            return function(obj, *args, **kwargs)
        return call

    stream.STREAM_SETTINGS = stream.StreamSettings(search_rows=200, validation_rows=40)
    for (module, name), function in originals.items():
        setattr(module, name, counted(function))
    try:
        with count_traffic() as log:
            RFFNetRegressor(**RFFNET).fit(open_table(pattern, target="y", chunk_rows=100))
    finally:
        stream.STREAM_SETTINGS = saved
        for (module, name), function in originals.items():
            setattr(module, name, function)
    return {"all_reduce_bytes": log.all_reduce_bytes, "object_bytes": objects}


def arrays_of(pattern, rank):
    """Rows ``rank::2`` of the table, as arrays."""
    table = pq.read_table(sorted(glob.glob(pattern))).to_pandas()
    return table[[f"x{j}" for j in range(4)]].iloc[rank::2], table["y"].to_numpy()[rank::2]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_job(tables, output, world_size=2):
    context = mp.start_processes(_rank_main, args=(world_size, free_port(), tables, str(output)),
                                 nprocs=world_size, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not context.join(timeout=1.0):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {world_size}-process job did not finish in {TIMEOUT_SECONDS} s")
    reports = []
    for rank in range(world_size):
        with open(f"{output}-{rank}.json") as handle:
            reports.append(json.load(handle))
    return reports


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One 2-process job on tables of 900 and 1,800 rows: both ranks' reports, single-process fits."""
    folder = tmp_path_factory.mktemp("job")
    tables = {n_rows: write_shards(folder / f"rows{n_rows}", n_rows) for n_rows in (900, 1800)}
    single = {(n_rows, name): RFFRidge(random_state=0, **parameters).fit(open_table(pattern, target="y"))
              for n_rows, (pattern, _) in tables.items() for name, parameters in CONFIGURATIONS.items()}
    return run_job(tables, folder / "report"), single, tables


@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_two_gloo_processes_fit_the_single_process_model(job, name):
    reports, single, tables = job
    for n_rows, (_, X_test) in tables.items():
        model = single[n_rows, name]
        expected = model.predict(X_test)
        for report in reports:  # every rank ends with the same model
            got = report[f"{n_rows} {name}"]
            assert np.max(np.abs(np.asarray(got["predictions"]) - expected)) <= 1e-6 * np.max(np.abs(expected))
            assert got["alpha"] == model.alpha_ and got["rows"] == n_rows


def test_bytes_per_all_reduce_do_not_grow_with_the_rows(job):
    report = job[0][0]
    small, large = report["900 gcv"]["all_reduce_bytes"], report["1800 gcv"]["all_reduce_bytes"]
    # the ranks' shifts (1 + D + T values), then the sums: 1 + D + D (D + 1) / 2 + D T + 2 T
    assert small == large == [8 * (1 + D + 1), all_reduce_bytes(D)]
    assert all_reduce_bytes(D) == 8 * (1 + D + D * (D + 1) // 2 + D + 2)
    holdout = report["900 holdout"]["all_reduce_bytes"]
    assert holdout == [2 * 8 * (1 + D + 1), all_reduce_bytes(D, n_statistics=2)]
    assert report["900 loo"]["all_reduce_bytes"][2:] == [8 * 11]  # the second pass: a sum per alpha


def test_rffnet_communication_does_not_grow_with_the_rows(job):
    """A streamed RFFNet fit on 2 ranks: the same all-reduces at 900 and 1,800 rows, among them the
    paired comparisons' three sums (count, sum and sum of squares of the loss differences), and no
    broadcast or gathered object that grows with the rows."""
    report = job[0][0]
    small, large = report["900 rffnet"], report["1800 rffnet"]
    assert small["all_reduce_bytes"] == large["all_reduce_bytes"]
    # the linear term, the linear-only model before the other moves, and the linear-only model at the end
    assert small["all_reduce_bytes"].count(3 * 8) == 3
    width = RFFNET["n_components"] + 4  # the head's random features and its linear columns
    assert max(small["all_reduce_bytes"]) == all_reduce_bytes(width, n_statistics=2)
    assert len(small["object_bytes"]) == len(large["object_bytes"])
    first_pass = 1  # the moments and the sample, of at most search_rows + validation_rows rows
    for before, after in zip(small["object_bytes"][first_pass:], large["object_bytes"][first_pass:]):
        assert abs(after - before) <= 64, (small["object_bytes"], large["object_bytes"])


SCRIPT = """
import sys
import numpy as np
import rffkit
from rffkit.distributed import is_main_process, process_group, world
from rffkit.io import open_table

with process_group(backend="gloo"):
    rank, world_size = world()
    model = rffkit.RFFRidge(features=rffkit.RandomFourierFeatures(n_components=32), random_state=0)
    model.fit(open_table(sys.argv[1], target="y"))
    if is_main_process():
        rffkit.save(model, sys.argv[2])
        print("world", world_size)
"""


@pytest.mark.slow
def test_a_users_torchrun_script_writes_the_model_on_rank_0(tmp_path):
    pattern, X_test = write_shards(tmp_path / "shards", 600)
    (tmp_path / "fit.py").write_text(SCRIPT)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(tmp_path / "fit.py"), pattern, str(tmp_path / "model.rffkit")]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "world 2" in finished.stdout
    single = RFFRidge(features=RandomFourierFeatures(n_components=32), random_state=0)
    expected = single.fit(open_table(pattern, target="y")).predict(X_test)
    got = rffkit.load(tmp_path / "model.rffkit").predict(X_test)
    assert np.max(np.abs(got - expected)) <= 1e-6 * np.max(np.abs(expected))


def test_a_rank_short_of_memory_stops_every_rank(job):
    for report in job[0]:
        assert "memory_budget=1000000" in report["budget error"]
        assert "lower features__n_components" in report["budget error"]


def test_arrays_are_fitted_by_each_rank_alone(job):
    reports, _, tables = job
    pattern, X_test = tables[1800]
    for rank, report in enumerate(reports):
        X_mine, y_mine = arrays_of(pattern, rank)
        alone = RFFRidge(features=RandomFourierFeatures(n_components=D), alpha_selection="holdout", random_state=0)
        expected = alone.fit(X_mine, y_mine).predict(X_test)
        np.testing.assert_allclose(report["arrays holdout"], expected, rtol=1e-10)
