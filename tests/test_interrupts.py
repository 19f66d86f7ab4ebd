"""Interrupted and failing fits leave the estimator as it was, and no files behind.

- A ``KeyboardInterrupt`` raised at the k-th Python call after the input was validated (for
  a spread of k, so inside the solvers and inside the setting of the fitted attributes) and
  any other exception raised there (a diverging solver, a data source failing mid-stream)
  propagate unchanged and leave a fitted estimator exactly as it was (same objects, same
  contents) and an unfitted one unfitted: ``rffkit._guards.atomic_fit``.
- A real SIGINT sent to a child process in the middle of a long RFFNet fit on 30 columns,
  after a fit on 5: the child gets ``KeyboardInterrupt`` promptly, still predicts with the
  5-column model, writes no temporary file, and an unfitted estimator stays unfitted.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone, is_classifier, is_regressor

import rffkit._validation as validation_module
from rffkit import (
    RandomBinningFeatures,
    RandomFourierFeatures,
    RFFClassifier,
    RFFNetClassifier,
    RFFNetRegressor,
    RFFRidge,
    SRFFRegressor,
)
from rffkit.io import ArraySource

from _state import assert_state_unchanged, state_of

ESTIMATORS = {
    "RFFRidge": RFFRidge(features=RandomFourierFeatures(n_components=20), random_state=0),
    "RFFClassifier": RFFClassifier(features=RandomFourierFeatures(n_components=20), max_iter=20, random_state=0),
    "SRFFRegressor": SRFFRegressor(n_components=10, alphas=3, max_iter=5, random_state=0),
    "RFFNetRegressor": RFFNetRegressor(n_components=16, max_iter=5, random_state=0),
    "RFFNetRegressor-adam": RFFNetRegressor(n_components=16, max_iter=5, solver="adam", random_state=0),
    "RFFNetClassifier": RFFNetClassifier(n_components=16, max_iter=5, solver="adam", random_state=0),
    "RandomFourierFeatures": RandomFourierFeatures(n_components=16, random_state=0),
    "RandomBinningFeatures": RandomBinningFeatures(n_components=5, random_state=0),
}
# where the interrupt is raised: the k-th of the N Python calls a fit makes after validating
# its input, k = max(1, fraction * N) (1.0: the last call, in the setting of the attributes)
FRACTIONS = [0.0, pytest.param(0.3, marks=pytest.mark.slow), 0.7, 1.0]  # 0.3 only in the full run (make test-all)


def _data(estimator, n_features, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, n_features))
    if is_classifier(estimator):
        return X, (X[:, 0] > 0).astype(int)
    if is_regressor(estimator):
        return X, np.sin(X[:, 0])
    return X, None


def _fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(X) if y is None else estimator.fit(X, y)


class _InterruptAfterValidation:
    """A tracer that raises ``exception`` at the k-th Python call after ``check_input`` returned."""

    def __init__(self, k, exception):
        self.k, self.exception, self.calls, self.validated, self.raised = k, exception, 0, False, False

    def __enter__(self):
        original = validation_module.check_input
        self._original = original

        def check_input(*args, **kwargs):
            result = original(*args, **kwargs)
            self.validated = True
            return result

        # the estimator modules imported the name: patch it where it is looked up
        import rffkit.binning, rffkit.features, rffkit.logistic, rffkit.rffnet, rffkit.ridge, rffkit.srff

        self._modules = [rffkit.binning, rffkit.features, rffkit.logistic, rffkit.rffnet, rffkit.ridge, rffkit.srff]
        for module in self._modules:
            module.check_input = check_input
        sys.settrace(self._trace)
        return self

    def _trace(self, frame, event, arg):
        if event == "call" and self.validated and not self.raised:
            self.calls += 1
            if self.calls >= self.k:
                self.raised = True
                raise self.exception
        return None

    def __exit__(self, *exc_info):
        sys.settrace(None)
        for module in self._modules:
            module.check_input = self._original
        return False


def _calls_after_validation(estimator, X, y):
    """N: the Python calls a fit of a clone of ``estimator`` makes after validating ``X``.

    The fewest of three fits: a first fit in a process can make many more (the modules rffkit
    loads on first use), and a second a few more (caches it fills): RFFNetRegressor-adam made
    665,099, 5,079 and then 5,075 calls on every later fit, so with two fits N exceeded the
    traced fit's calls and the last-call interrupt never came.
    """
    counts = []
    for _ in range(3):
        model = clone(estimator)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with _InterruptAfterValidation(float("inf"), KeyboardInterrupt()) as tracer:
                model.fit(X) if y is None else model.fit(X, y)
                counts.append(tracer.calls)  # read before leaving the block, which is a call too
    return min(counts)


def _fit_traced(estimator, X, y, tracer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tracer:
            estimator.fit(X) if y is None else estimator.fit(X, y)


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("fitted", [False, True], ids=["unfitted", "fitted"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_interrupt_after_validation_leaves_the_estimator_as_it_was(name, fitted, fraction):
    estimator = clone(ESTIMATORS[name])
    X_old, y_old = _data(estimator, 5, seed=0)
    if fitted:
        _fit(estimator, X_old, y_old)
    before = state_of(estimator)
    X_new, y_new = _data(estimator, 30, seed=1)
    k = max(1, int(fraction * _calls_after_validation(estimator, X_new, y_new)))
    tracer = _InterruptAfterValidation(k, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        _fit_traced(estimator, X_new, y_new, tracer)
    assert tracer.raised
    assert_state_unchanged(estimator, before)
    assert torch.is_grad_enabled()  # even when the interrupt hit the exit of a torch.no_grad() block
    if fitted:  # still the 5-column model
        method = "transform" if hasattr(estimator, "transform") else "predict"
        assert getattr(estimator, method)(X_old).shape[0] == X_old.shape[0]
    else:
        assert not [name for name in vars(estimator) if name.endswith("_") and not name.startswith("_")]


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_any_exception_after_validation_leaves_the_estimator_as_it_was(name):
    estimator = clone(ESTIMATORS[name])
    X_old, y_old = _data(estimator, 5, seed=0)
    _fit(estimator, X_old, y_old)
    before = state_of(estimator)
    X_new, y_new = _data(estimator, 30, seed=1)
    failure = RuntimeError("the solver diverged")
    k = max(1, _calls_after_validation(estimator, X_new, y_new) // 2)
    with pytest.raises(RuntimeError, match="diverged") as raised:
        _fit_traced(estimator, X_new, y_new, _InterruptAfterValidation(k, failure))
    assert raised.value is failure
    assert_state_unchanged(estimator, before)


class _FailingSource(ArraySource):
    """A source whose second chunk fails, as a broken file or network share would."""

    def iter_chunks(self, chunk_rows=None, *, rank=0, world_size=1):
        for index, chunk in enumerate(super().iter_chunks(chunk_rows, rank=rank, world_size=world_size)):
            if index == 1:
                raise OSError("the disk went away")
            yield chunk


def test_a_source_failing_mid_stream_leaves_the_estimator_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 4)), rng.normal(size=300)
    estimator = RFFRidge(features=RandomFourierFeatures(n_components=20), random_state=0)
    _fit(estimator, X[:, :3], y)
    before = state_of(estimator)
    with pytest.raises(OSError, match="disk went away"):
        _fit(estimator, _FailingSource(X, y, chunk_rows=100), None)
    assert_state_unchanged(estimator, before)
    assert list(tmp_path.iterdir()) == []


# -- a real SIGINT in a child process ----------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, tempfile, time, warnings
    import numpy as np
    from rffkit import RFFNetRegressor

    # SIGINT raises KeyboardInterrupt, as in a terminal. A process started in the background
    # by a non-interactive shell (`make test &`) inherits SIGINT ignored, and CPython then
    # leaves it ignored in every process below it: the signals would be lost.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    X5 = rng.normal(size=(200, 5)); y5 = np.sin(X5[:, 0])
    fitted = RFFNetRegressor(n_components=32, max_iter=10, random_state=0).fit(X5, y5)
    expected = fitted.predict(X5)
    fitted.set_params(n_components=None, max_iter=100)  # the defaults: a fit of a minute or more
    unfitted = RFFNetRegressor(random_state=0)
    X30 = rng.normal(size=(20000, 30)); y30 = np.sin(X30[:, 0]) + X30[:, 1] ** 2
    report = {}
    for name, model in (("fitted", fitted), ("unfitted", unfitted)):
        print("fitting", name, flush=True)
        started = time.perf_counter()
        try:
            model.fit(X30, y30)
            report[name] = {"interrupted": False}
        except KeyboardInterrupt:
            report[name] = {
                "interrupted": True,
                "seconds_in_fit": time.perf_counter() - started,
                "n_features_in_": getattr(model, "n_features_in_", None),
                "fitted_attributes": sorted(k for k in vars(model) if k.endswith("_") and not k.startswith("_")),
            }
            if name == "fitted":
                report[name]["same_predictions"] = bool(np.array_equal(model.predict(X5), expected))
        report[name]["interrupt_handled_at"] = time.time()
    report["temporary_files"] = os.listdir(tempfile.gettempdir())
    print(json.dumps(report), flush=True)
    """
)


def _interrupted_child(tmp_path):
    """Run CHILD, sending SIGINT 1 s into each fit: ``(report, times the signals were sent)``."""
    environment = dict(os.environ, TMPDIR=str(tmp_path), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    sent = {}
    try:
        for name in ("fitted", "unfitted"):
            line = child.stdout.readline()
            assert line.strip() == f"fitting {name}", (line, child.stderr.read() if not line else "")
            time.sleep(1.0)  # inside the fit: validation and the first search stage
            sent[name] = time.time()
            child.send_signal(signal.SIGINT)
        output, errors = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, errors
    return json.loads(output.strip().splitlines()[-1]), sent


def test_sigint_mid_fit_in_a_child_process(tmp_path):
    report, sent = _interrupted_child(tmp_path)
    for name in ("fitted", "unfitted"):
        assert report[name]["interrupted"], report
        # promptly: within a few seconds on a loaded two-core machine (the search's
        # L-BFGS calls back into Python between evaluations)
        assert report[name]["interrupt_handled_at"] - sent[name] < 5.0, report
    assert report["fitted"]["n_features_in_"] == 5
    assert report["fitted"]["same_predictions"] is True
    assert report["unfitted"]["fitted_attributes"] == []
    assert report["unfitted"]["n_features_in_"] is None
    assert report["temporary_files"] == []
    assert list(tmp_path.iterdir()) == []
