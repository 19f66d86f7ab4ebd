"""Threads: rffkit.config_context / set_config bound torch's and the BLAS's threads in every
fit, predict and transform, and put them back afterwards, also when the call fails.

The numerics are spied on from inside (a function each estimator calls during ``fit``
records ``torch.get_num_threads()`` and the BLAS thread counts); ``'auto'`` is checked with
a stubbed measurement of the busy cores, and, under ``-m slow``, against a real spinning
process.
"""

import subprocess
import sys
import time
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

import rffkit
import rffkit._guards as guards
from rffkit import RandomFourierFeatures, RFFNetRegressor, RFFRidge, SRFFRegressor


@pytest.fixture
def torch_threads():
    """Run the test with torch on 2 threads (the suite runs with OMP_NUM_THREADS=1)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(previous)


@pytest.fixture
def spy(monkeypatch):
    """Record the thread counts seen inside the numerics of RFFRidge, SRFF and RFFNet."""
    seen = []

    def record():
        blas = {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}
        seen.append((torch.get_num_threads(), blas))

    import rffkit._search as search_module
    import rffkit.ridge as ridge_module
    import rffkit.srff as srff_module

    for module, name in ((ridge_module, "ridge_spectrum"), (srff_module, "alpha_grid"), (search_module, "search_schedule")):
        if hasattr(module, name):
            original = getattr(module, name)

            def wrapped(*args, _original=original, **kwargs):
                record()
                return _original(*args, **kwargs)

            monkeypatch.setattr(module, name, wrapped)
    return seen


def _data(n=60):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, np.sin(X[:, 0])


FAST = [
    RFFRidge(features=RandomFourierFeatures(n_components=16), random_state=0),
    SRFFRegressor(n_components=10, alphas=3, max_iter=5, random_state=0),
    RFFNetRegressor(n_components=16, max_iter=5, random_state=0),
]


@pytest.mark.parametrize("estimator", FAST, ids=lambda e: type(e).__name__)
def test_fit_runs_on_the_configured_threads_and_restores_them(estimator, torch_threads, spy):
    X, y = _data()
    with rffkit.config_context(n_threads=1):
        estimator.fit(X, y)
    assert spy and all(threads == 1 and blas <= {1} for threads, blas in spy), spy
    assert torch.get_num_threads() == torch_threads


def test_a_failing_fit_restores_the_threads(torch_threads):
    X, y = _data()
    with rffkit.config_context(n_threads=1):
        with pytest.raises(ValueError):
            RFFRidge().fit(X, y[:-1])
    assert torch.get_num_threads() == torch_threads


def test_predict_and_transform_are_bounded_too(torch_threads, monkeypatch):
    X, y = _data()
    features = RandomFourierFeatures(n_components=16, random_state=0).fit(X)
    seen = []
    original = RandomFourierFeatures.transform.__wrapped__

    def spying_transform(self, X):
        seen.append(torch.get_num_threads())
        return original(self, X)

    monkeypatch.setattr(RandomFourierFeatures, "transform", guards.within_limits(spying_transform))
    with rffkit.config_context(n_threads=1):
        features.transform(X)
    assert seen == [1] and torch.get_num_threads() == torch_threads


def test_inherit_leaves_the_threads_alone(torch_threads, spy):
    X, y = _data()
    with rffkit.config_context(n_threads="inherit"):
        RFFRidge(features=RandomFourierFeatures(n_components=16), random_state=0).fit(X, y)
    assert spy and all(threads == torch_threads for threads, _ in spy)


def test_auto_takes_the_busy_cores_away(torch_threads, spy, monkeypatch):
    monkeypatch.setattr(guards, "_available_cores", lambda: 2)
    X, y = _data()
    for busy, expected in ((0.0, 2), (0.4, 2), (0.6, 1), (1.0, 1), (3.0, 1)):
        monkeypatch.setattr(guards, "busy_cores", lambda busy=busy: busy)
        guards._load_cache["time"] = -float("inf")  # measure again
        spy.clear()
        RFFRidge(features=RandomFourierFeatures(n_components=16), random_state=0).fit(X, y)
        assert {threads for threads, _ in spy} == {expected}, (busy, spy)
    assert torch.get_num_threads() == torch_threads


def test_auto_never_exceeds_torchs_own_count_and_measures_at_most_every_few_seconds(monkeypatch):
    calls = []
    monkeypatch.setattr(guards, "_available_cores", lambda: 8)
    monkeypatch.setattr(guards, "busy_cores", lambda: calls.append(1) or 0.0)
    guards._load_cache["time"] = -float("inf")
    assert guards.auto_threads(3) == 3
    assert guards.auto_threads(3) == 3
    assert len(calls) == 1  # cached
    assert guards.auto_threads(1) == 1  # one thread allowed: nothing to measure


def test_config_is_validated_and_scoped():
    assert rffkit.get_config() == {"n_threads": "auto", "check_memory": True}
    with rffkit.config_context(n_threads=3, check_memory=False):
        assert rffkit.get_config() == {"n_threads": 3, "check_memory": False}
        with rffkit.config_context(n_threads="inherit"):
            assert rffkit.get_config()["n_threads"] == "inherit"
        assert rffkit.get_config()["n_threads"] == 3
    assert rffkit.get_config() == {"n_threads": "auto", "check_memory": True}
    for bad in (0, -1, 1.5, "all", True):
        with pytest.raises(ValueError, match="n_threads must be 'auto', 'inherit' or a positive integer"):
            rffkit.set_config(n_threads=bad)
    rffkit.set_config(n_threads=2)
    try:
        assert rffkit.get_config()["n_threads"] == 2
    finally:
        rffkit.set_config(n_threads="auto")


def test_nested_fits_measure_once(torch_threads, monkeypatch):
    calls = []
    monkeypatch.setattr(guards, "_available_cores", lambda: 2)
    monkeypatch.setattr(guards, "busy_cores", lambda: calls.append(1) or 0.0)
    monkeypatch.setattr(guards, "_LOAD_TTL", 0.0)  # no cache: every outer call measures
    X, y = _data()
    RFFRidge(features=RandomFourierFeatures(n_components=16), random_state=0).fit(X, y)  # fits its features inside
    assert len(calls) == 1


@pytest.mark.slow
def test_busy_cores_sees_a_spinning_process():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        baseline = guards.busy_cores(window=0.5)
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.5)
            busy = guards.busy_cores(window=0.5)
        finally:
            spinner.kill()
            spinner.wait()
    assert busy >= min(baseline, guards._available_cores() - 1) + 0.5, (baseline, busy)


def test_the_blas_runs_on_one_thread_beside_torchs_except_for_a_large_gram(torch_threads, spy, monkeypatch):
    """Torch gets the threads; NumPy's and SciPy's BLAS one, but for a Gram matrix above the threshold."""
    import rffkit._dense as dense

    X, y = _data()
    with rffkit.config_context(n_threads=2):
        RFFNetRegressor(n_components=16, max_iter=5, random_state=0).fit(X, y)
    assert spy and all(threads == 2 and blas <= {1} for threads, blas in spy), spy

    seen = []
    original = dense.large_blas_call

    def blas():
        return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    @contextmanager
    def spying_call():
        with original():
            seen.append(blas())
            yield

    monkeypatch.setattr(dense, "large_blas_call", spying_call)
    Z = torch.randn(2000, 80, dtype=torch.float64)  # 1.3e7 multiply-adds: syrk, below the threaded size
    with rffkit.config_context(n_threads=2), guards.limited_threads():
        small = dense.gram_matrix(Z)
        assert seen == [] and blas() == {1}
        monkeypatch.setattr(dense, "_THREADED_WORK", 1e7)
        large = dense.gram_matrix(Z)
        assert seen == [{2}] and blas() == {1}
    torch.testing.assert_close(small, Z.T @ Z)
    torch.testing.assert_close(large, Z.T @ Z)
    seen.clear()
    with rffkit.config_context(n_threads="inherit"), guards.limited_threads():
        dense.gram_matrix(Z)  # no limits under 'inherit': the BLAS keeps its own count
    assert seen == [blas()]
