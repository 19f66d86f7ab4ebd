"""What wraps every public entry point: bounded threads, a memory check, all-or-nothing fits.

:func:`atomic_fit` decorates ``fit``: the estimator's ``__dict__`` is copied before the fit
and put back on any exception, ``KeyboardInterrupt`` included, so a failed or interrupted
fit leaves a fitted estimator exactly as it was and an unfitted one unfitted (scikit-learn's
``validate_data`` sets ``n_features_in_`` before the fit can fail). It goes above
``_fit_context``::

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y): ...

The copy is shallow: a fit must build new fitted attributes, never change the old ones in
place (every fit here does). :func:`within_limits` decorates ``predict``, ``transform`` and
the like. The data warnings of the fit's input check (too few rows) are issued only once
the fit has succeeded. Both run the call on the threads :mod:`rffkit.config` asks for,
restore the thread counts afterwards, and check the memory the call needs first
(:mod:`rffkit._memory`). Nested calls (a fit that transforms with its feature map) inherit
the outer call's threads.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from contextlib import contextmanager

import psutil
import torch

from ._memory import check_memory
from ._validation import deferred_warnings
from .config import get_config
from .exceptions import InsufficientMemoryError

__all__ = [
    "atomic_fit", "within_limits", "limited_threads", "auto_threads", "busy_cores", "rebalance_threads",
    "blas_threads", "large_blas_call",
]

#: Seconds a measurement of the machine's load stays valid, and the look it takes.
_LOAD_TTL = 5.0
_LOAD_WINDOW = 0.1
#: Seconds between the looks of a running call on 'auto' threads (rebalance_threads), on this clock.
_RECHECK_S = 0.5
_clock = time.perf_counter

_state = threading.local()
_load_cache = {"time": -float("inf"), "busy": 0.0}
_load_lock = threading.Lock()
_blas_controller = None


def _available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _cpu_snapshot():
    """``(per-core CPU times, this process's CPU times, perf_counter)``: one end of a load measurement."""
    return psutil.cpu_times(percpu=True), psutil.Process().cpu_times(), _clock()


def _busy_between(before, after):
    """Cores kept busy by other processes between two :func:`_cpu_snapshot` calls.

    Busy time of the cores this process may run on (idle and I/O wait count as free)
    less this process's own CPU time over the same seconds; None where the number of
    cores changed in between.
    """
    (cores_before, own_before, start), (cores_after, own_after, end) = before, after
    if len(cores_before) != len(cores_after):  # cores added or removed in between: no measure
        return None
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = range(len(cores_after)) if allowed is None else [core for core in allowed if core < len(cores_after)]
    busy = 0.0
    for core in cores:
        total = sum(cores_after[core]) - sum(cores_before[core])
        free = (cores_after[core].idle - cores_before[core].idle) + (
            getattr(cores_after[core], "iowait", 0.0) - getattr(cores_before[core], "iowait", 0.0)
        )
        if total > 0:
            busy += min(max(1.0 - free / total, 0.0), 1.0)
    own = (own_after.user + own_after.system - own_before.user - own_before.system) / max(end - start, 1e-9)
    return max(busy - own, 0.0)


def busy_cores(window=_LOAD_WINDOW):
    """Cores kept busy by other processes, measured over ``window`` seconds (``psutil.cpu_times``)."""
    before = _cpu_snapshot()
    time.sleep(window)
    busy = _busy_between(before, _cpu_snapshot())
    return 0.0 if busy is None else busy


def _thread_cap(ceiling):
    """What ``'auto'`` may take: ``ceiling`` (torch's own count) and the cores this process may run on, at least 1."""
    return max(1, min(int(ceiling), _available_cores()))


def _free_threads(cap, busy):
    """The threads ``'auto'`` takes with ``busy`` cores held by other work: the rest, within ``cap``, at least 1."""
    return max(1, min(cap, _available_cores() - int(round(busy))))


def auto_threads(ceiling):
    """``n_threads='auto'``: ``ceiling`` less the cores busy with other work, at least 1."""
    cap = _thread_cap(ceiling)
    if cap == 1:
        return 1
    with _load_lock:
        now = time.monotonic()
        if now - _load_cache["time"] > _LOAD_TTL:
            _load_cache["busy"] = busy_cores()
            _load_cache["time"] = time.monotonic()
        busy = _load_cache["busy"]
    return _free_threads(cap, busy)


def rebalance_threads():
    """Inside a call on ``n_threads='auto'``: move torch's threads to the cores now free.

    A call chooses its threads by a look at the machine when it starts; two processes that
    start together each find the other still loading its data, both take every core, and
    their threads then wait for each other (``benchmarks/results/fits_together.md``). The
    long loops of a fit (the search's and the logistic head's evaluations, the progress
    steps) call this; at most every ``_RECHECK_S`` seconds it counts the cores other
    processes kept busy since its last look, without waiting (:func:`_busy_between`; the
    first look of a call only starts the measure), and sets torch's threads and
    :func:`large_blas_call`'s to what is free, within :func:`auto_threads`' cap.
    """
    watch = getattr(_state, "watch", None)
    if watch is None:
        return
    if watch["snapshot"] is not None and _clock() - watch["snapshot"][2] < _RECHECK_S:
        return
    snapshot = _cpu_snapshot()
    before, watch["snapshot"] = watch["snapshot"], snapshot
    busy = None if before is None else _busy_between(before, snapshot)
    if busy is None:  # the first look, or the machine's cores changed in between
        return
    n_threads = _free_threads(watch["cap"], busy)
    if n_threads != _state.threads:
        torch.set_num_threads(n_threads)
        _state.threads = n_threads


def blas_threads():
    """One threadpoolctl controller over the BLAS libraries loaded (NumPy's, SciPy's), and only them.

    Its ``limit`` blocks set back only the BLAS's counts on exit: a controller over every
    library would also set OpenMP's, torch's threads, back to their count at the block's
    start, undoing what :func:`rebalance_threads` set inside it.
    """
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController

        _blas_controller = ThreadpoolController().select(user_api="blas")
    return _blas_controller


@contextmanager
def limited_threads():
    """Run the block on the threads the configuration asks for, then restore them."""
    if getattr(_state, "threads", None):  # inside another rffkit call: its counts hold
        yield
        return
    setting = get_config()["n_threads"]
    if setting == "inherit":
        yield
        return
    previous = torch.get_num_threads()
    n_threads = auto_threads(previous) if setting == "auto" else int(setting)
    cap = _thread_cap(previous)
    # on 'auto' with more than one core to share, the call's long loops look again (rebalance_threads);
    # the first of them takes the snapshot its next look measures from
    watch = {"snapshot": None, "cap": cap} if setting == "auto" and cap > 1 else None
    _state.threads, _state.watch = n_threads, watch
    try:
        if n_threads != previous:
            torch.set_num_threads(n_threads)
        # The BLAS under NumPy and SciPy runs on one thread except inside large_blas_call:
        # rffkit's algebra is torch's, and when calls alternate between the two libraries
        # (SciPy's L-BFGS-B around a torch objective, a SciPy product between torch ones)
        # the idle threads of each pool spin while the other's want the cores (a
        # 1,500-row RFFNet fit on 2 threads took 10 s, 3.3 s with this, 4.7 s on 1 thread).
        with blas_threads().limit(limits=1, user_api="blas"):
            yield
    finally:
        moved = _state.threads != previous
        _state.threads = _state.watch = None
        if moved or torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


@contextmanager
def large_blas_call():
    """Let the block's BLAS calls use the threads torch has inside :func:`limited_threads`.

    For a product large enough that the BLAS threads gain more than their hand-over to
    and from torch's threads costs (a Gram matrix by ``syrk``); elsewhere, and under
    ``n_threads='inherit'``, the block runs as it is.
    """
    n_threads = getattr(_state, "threads", None)
    if not n_threads or n_threads == 1:
        yield
        return
    with blas_threads().limit(limits=n_threads, user_api="blas"):
        yield


def atomic_fit(fit):
    """Decorate ``fit``: bounded threads, a memory check, and on any exception the old state.

    The old state includes torch's autograd mode: an exception (a ``KeyboardInterrupt``
    above all) raised while a ``torch.no_grad()`` block exits would otherwise leave
    gradients off for the rest of the caller's session.

    When the memory check fails and the estimator's class defines
    ``_fit_in_chunks_instead(self, X, *args, error, **kwargs)``, that method fits instead
    (it re-raises ``error`` when the chunked path does not fit either).
    """

    @functools.wraps(fit)
    def wrapper(estimator, X=None, *args, **kwargs):
        saved, grad_mode = dict(vars(estimator)), torch.is_grad_enabled()
        # the standardisation of the source of an earlier fit (rffkit._source_checks.record_source_columns)
        # no longer describes the model: a fit on a source records its own, one on arrays none
        vars(estimator).pop("_source_scaling", None)
        try:
            with limited_threads(), deferred_warnings() as pending:
                fit_now = fit
                if get_config()["check_memory"]:
                    try:
                        check_memory(estimator, X, "fit")
                    except InsufficientMemoryError as error:
                        # an estimator that can stream the same rows in chunks does so instead
                        chunked = getattr(type(estimator), "_fit_in_chunks_instead", None)
                        if chunked is None:
                            raise
                        fit_now = functools.partial(chunked, error=error)
                fitted = fit_now(estimator, X, *args, **kwargs)
            # inside the try: a warning turned into an error (simplefilter('error')) fails the fit too
            for message, category in pending:
                warnings.warn(message, category, stacklevel=2)
        except BaseException:
            torch.set_grad_enabled(grad_mode)
            state = vars(estimator)
            state.clear()
            state.update(saved)
            raise
        return fitted

    return wrapper


def within_limits(method):
    """Decorate ``predict``/``transform``-like methods: bounded threads and a memory check."""

    @functools.wraps(method)
    def wrapper(estimator, X=None, *args, **kwargs):
        with limited_threads():
            if get_config()["check_memory"]:
                check_memory(estimator, X, method.__name__)
            return method(estimator, X, *args, **kwargs)

    return wrapper
