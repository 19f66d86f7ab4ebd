"""Threads: rffkit.config_context / set_config bound torch's and the BLAS's threads in every
fit, predict and transform, and put them back afterwards, also when the call fails.

The numerics are spied on from inside (a function each estimator calls during ``fit``
records ``torch.get_num_threads()`` and the BLAS thread counts); ``'auto'`` is checked with
a stubbed measurement of the busy cores, and, under ``-m slow``, against a real spinning
process.
"""

import subprocess
import sys
import threading
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


@pytest.fixture
def fake_clock(monkeypatch):
    """Load measurements of a running call under test control: ``state['busy']`` other cores busy,
    ``state['t']`` the seconds on the clock of its looks."""
    state = {"t": 0.0, "busy": 0.0}
    monkeypatch.setattr(guards, "busy_cores", lambda: 0.0)  # the call's first look: an idle machine
    guards._load_cache["time"] = -float("inf")
    monkeypatch.setattr(guards, "_clock", lambda: state["t"])
    monkeypatch.setattr(guards, "_busy_between", lambda before, after: state["busy"])
    return state


def test_a_running_call_moves_its_threads_with_the_load(fake_clock, monkeypatch):
    # two processes that start together both find an idle machine and take every core; each must give
    # cores back once it sees the other busy, and take them again when the other is done
    monkeypatch.setattr(guards, "_available_cores", lambda: 4)
    previous = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        seen = []

        def look(busy, seconds):
            fake_clock["busy"], fake_clock["t"] = busy, fake_clock["t"] + seconds
            guards.rebalance_threads()
            seen.append(torch.get_num_threads())

        with guards.limited_threads():
            seen.append(torch.get_num_threads())
            look(3.0, 0.1)  # the first look only starts the measure
            with guards.blas_threads().limit(limits=1):  # as around L-BFGS: its exit must not undo the move
                look(3.0, 1.0)
            seen.append(torch.get_num_threads())
            with guards.large_blas_call():  # the BLAS's large products follow
                blas = {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}
            look(0.0, 0.1)  # too soon after the last look: nothing changes
            look(1.2, 1.0)
            look(0.0, 1.0)
            look(3.0, 1.0)
        assert seen == [4, 4, 1, 1, 1, 3, 4, 1] and blas <= {1}
        # the count before the call is back, for torch and for the threads started after it
        assert torch.get_num_threads() == 4
        later = []
        worker = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
        worker.start()
        worker.join()
        assert later == [4]
        guards.rebalance_threads()  # outside a call: nothing to move
        assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(previous)


def test_a_running_call_stays_under_torchs_own_count_and_never_moves_a_fixed_count(fake_clock, monkeypatch):
    monkeypatch.setattr(guards, "_available_cores", lambda: 4)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)  # torch's own count (OMP_NUM_THREADS, set_num_threads) caps 'auto'
    try:
        with guards.limited_threads():
            fake_clock["t"] += 1.0
            guards.rebalance_threads()
            assert torch.get_num_threads() == 2
        with rffkit.config_context(n_threads=3), guards.limited_threads():
            fake_clock["busy"], fake_clock["t"] = 3.0, fake_clock["t"] + 1.0
            guards.rebalance_threads()
            assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(previous)


def test_a_fit_looks_at_the_load_while_it_runs(torch_threads, spy, fake_clock, monkeypatch):
    # the fit starts on both cores of an idle machine; its looks while it runs find one busy: it moves to one thread
    monkeypatch.setattr(guards, "_available_cores", lambda: 2)
    fake_clock["busy"] = 1.0

    def ticking():  # every look is due
        fake_clock["t"] += 1.0
        return fake_clock["t"]

    monkeypatch.setattr(guards, "_clock", ticking)
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        RFFNetRegressor(n_components=16, random_state=0, rescale_groups=False, align_frequencies=False,
                        prune_relevances=False).fit(X, y)
    assert spy and spy[-1][0] == 1
    assert torch.get_num_threads() == torch_threads


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
