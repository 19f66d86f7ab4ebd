"""rffkit fit in a torchrun job: only rank 0 prints and writes; a fit from memory refuses to run."""

import contextlib
import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rffkit
from rffkit import _cli_commands, _cli_support, cli
from rffkit._cli_support import predictions
from rffkit.distributed import process_group
from rffkit.io import ArraySource, TableSource
from rffkit.ridge import RFFRidge


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(0)
    for part in range(2):
        x, z = rng.normal(size=200), rng.normal(size=200)
        pq.write_table(pa.table({"x": x, "z": z, "y": np.sin(x) + 0.1 * z}),
                       tmp_path / f"part-{part}.parquet", row_group_size=50)
    return tmp_path


class ReadsSources(RFFRidge):
    """An RFFRidge that also takes a source, by reading its chunks."""

    def fit(self, X, y=None):
        if isinstance(X, (TableSource, ArraySource)):
            chunks = list(X.iter_chunks())
            X, y = (np.concatenate([c[k] for c in chunks]) for k in (0, 1))
        return super().fit(X, y)


def _as_rank(monkeypatch, rank, world_size, estimator=ReadsSources):
    @contextlib.contextmanager
    def group(device="cpu"):
        yield rank, world_size

    monkeypatch.setattr(_cli_commands, "process_group", group)
    estimators = _cli_support.estimators()
    estimators["ridge", "regression"] = (estimator, True)
    monkeypatch.setattr(_cli_commands, "estimators", lambda: estimators)


def _fit(shards, capsys, name, *options):
    status = cli.main(["fit", str(shards / "*.parquet"), "--target", "y", "--model", "ridge",
                       *options, "--output", str(shards / name)])
    return status, *capsys.readouterr()


def test_only_rank_0_prints_and_writes(shards, capsys, monkeypatch):
    saved = []
    monkeypatch.setattr(_cli_commands, "save", lambda obj, path: saved.append(path))
    _as_rank(monkeypatch, 1, 2)
    assert _fit(shards, capsys, "m.rffkit", "--set", "features__n_components=30") == (0, "", "")
    assert saved == []
    _as_rank(monkeypatch, 0, 2)
    status, out, _ = _fit(shards, capsys, "m.rffkit", "--set", "features__n_components=30")
    assert status == 0 and "reads the training rows from the files chunk by chunk in float32 (on 2 processes)" in out
    assert saved == [str(shards / "m.rffkit")]


def test_a_fit_from_memory_refuses_several_processes(shards, capsys, monkeypatch):
    _as_rank(monkeypatch, 0, 2)
    monkeypatch.setattr(_cli_commands, "estimators", lambda: {("ridge", "regression"): (rffkit.SRFFRegressor, False)})
    status, _, err = _fit(shards, capsys, "m.rffkit", "--set", "max_iter=5")
    assert status == 2 and "SRFFRegressor fits in one process only" in err
    assert not (shards / "m.rffkit").exists()


def test_process_group_outside_torchrun(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with process_group() as world:
        assert world == (0, 1)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None,
                    reason="torchrun is not installed beside this Python")
@pytest.mark.parametrize("model, settings", [("ridge", ["features__n_components=50"]),
                                             ("rffnet", ["n_components=60", "max_iter=15", "alpha=0.001"])])
def test_torchrun_two_processes_give_the_single_process_model(shards, capsys, model, settings):
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    # float64: the sums of 1 and 2 processes then agree to the tolerances of issue 18
    argv = [str(shards / "*.parquet"), "--target", "y", "--model", model, "--dtype", "float64"]
    for setting in settings:
        argv += ["--set", setting]
    done = subprocess.run([torchrun, "--standalone", "--nproc_per_node=2", "-m", "rffkit", "fit", *argv,
                           "--output", str(shards / "two.rffkit")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("saved to") == 1 and "on 2 processes" in done.stdout
    with rffkit.config_context(n_threads=1):  # as each rank: RFFNet's float32 search depends on the threads
        assert cli.main(["fit", *argv, "--stream", "always", "--output", str(shards / "one.rffkit")]) == 0
    two, one = rffkit.load(shards / "two.rffkit"), rffkit.load(shards / "one.rffkit")
    assert two["meta"]["world_size"] == 2 and one["meta"]["world_size"] == 1
    X = np.random.default_rng(1).normal(size=(100, 2))
    tolerance = 1e-6 if model == "ridge" else 1e-5
    expected = predictions(one["estimator"], X)
    assert np.max(np.abs(predictions(two["estimator"], X) - expected)) <= tolerance * np.max(np.abs(expected))
    # RFFNet at a fixed alpha: y here is a noiseless function of the inputs, and 'auto' would choose among
    # the smallest alphas, whose validation errors differ by rounding only (1e-8 on 2 ranks, 3e-8 on 1)
    if model == "rffnet":  # the same relevances: rank 0 searched on the same hashed sample
        np.testing.assert_allclose(two["estimator"].relevances_, one["estimator"].relevances_, rtol=1e-5)
    assert two["meta"]["score"]["r2"] == pytest.approx(one["meta"]["score"]["r2"], rel=1e-6)
