"""Package settings: how many threads rffkit computes on, and its memory check.

Threads
-------
Every ``fit``, ``predict``, ``predict_proba``, ``decision_function`` and ``transform`` of
rffkit runs torch's intra-op thread pool on a bounded number of threads, and the BLAS
under NumPy and SciPy on one thread (on torch's count only for a large Gram matrix, which
SciPy's ``syrk`` computes): the algebra is torch's, and where calls alternate between the
two libraries the idle threads of one pool spin while the other's want the cores. Both
counts are set back to what they were when the call returns (or raises). Choose the
number for a block of code or for the rest of the session::

    import rffkit

    with rffkit.config_context(n_threads=4):
        model.fit(X, y)             # four threads inside this block

    rffkit.set_config(n_threads=1)  # one thread from now on
    rffkit.get_config()             # {'n_threads': 1, 'check_memory': True}

``n_threads`` takes

- ``'auto'`` (the default): the cores that are not busy. rffkit caps it at the threads
  torch would use on its own (``OMP_NUM_THREADS``, or ``torch.set_num_threads`` called
  outside rffkit, counts) and at the cores this process may run on, then takes
  away the cores that other processes kept busy during a 0.1 s look at the machine's CPU
  times (``psutil.cpu_times``; measured at most once every 5 s), and keeps at least one.
  While a fit runs it looks again, at most every half second, from the loops of its search,
  its logistic head and its progress (without waiting: the CPU times since its last look),
  and moves its threads to the cores now free, within the same cap. Two processes that
  start fits together each find an idle machine at first; a count chosen once would keep
  every core for both (``benchmarks/results/fits_together.md``).
  On an idle machine that is every core; with other work on one of two cores it is one
  thread. torch's default of a thread per core makes its threads wait for each other while
  one of them waits for a core: on a shared two-core machine a 2,000-row RFFNet fit took
  522 s on two threads against 43 s on the one ``'auto'`` chose, and with one more core
  kept busy ``'auto'`` took 64 s (1.5 times its idle time) where two threads passed 600 s
  (``benchmarks/results/busy_machine.md``).
- a positive integer: that many threads, whatever the load;
- ``'inherit'``: no control; the calls run on the threads torch and the BLAS already have
  (torch's default is one per core, or what ``torch.set_num_threads`` set).

The setting is per Python thread, as scikit-learn's ``config_context`` is, but the thread
counts it sets are the process's. Run several fits at once in several processes, not in
Python threads: SciPy's BLAS and LAPACK wrappers, which form a fit's Gram matrices and
solve its systems, hold the GIL, so the fits of two threads of one process take turns
(two 6,000-row fits on one thread each ran 1.11 times as fast as one after the other, in
two joblib processes 1.85 times: ``benchmarks/results/threads.md``). Settings do not
travel to joblib's worker processes (``cross_val_score(..., n_jobs=4)``): each worker
starts with ``'auto'``, which counts the other busy workers, or follows ``OMP_NUM_THREADS``.

Memory
------
Before it allocates its feature matrices, a fit (and a transform) estimates the peak
memory of its in-memory path and raises :class:`rffkit.InsufficientMemoryError`, a
``MemoryError``, when the estimate exceeds the memory available (``psutil``), naming the
parameter that lowers it. ``check_memory=False`` turns the check off (for a machine whose
swap you mean to use, say).
"""

from __future__ import annotations

import numbers
import threading
from contextlib import contextmanager

__all__ = ["get_config", "set_config", "config_context"]

_DEFAULTS = {"n_threads": "auto", "check_memory": True}
_global_config = dict(_DEFAULTS)
_local = threading.local()


def _config():
    """This Python thread's settings, initialised from the global ones."""
    if not hasattr(_local, "config"):
        _local.config = dict(_global_config)
    return _local.config


def _check_n_threads(n_threads):
    if isinstance(n_threads, str) and n_threads in ("auto", "inherit"):
        return n_threads
    if isinstance(n_threads, numbers.Integral) and not isinstance(n_threads, bool) and n_threads >= 1:
        return int(n_threads)
    raise ValueError(f"rffkit config: n_threads must be 'auto', 'inherit' or a positive integer; got {n_threads!r}.")


def get_config():
    """The current settings of this Python thread.

    Returns
    -------
    config : dict
        ``{'n_threads': ..., 'check_memory': ...}``, a copy: changing it changes nothing.
    """
    return dict(_config())


def set_config(*, n_threads=None, check_memory=None):
    """Change settings for the rest of the session (this Python thread and new ones).

    Parameters
    ----------
    n_threads : 'auto', 'inherit', int or None, default=None
        Threads for torch and the BLAS inside rffkit's methods: ``'auto'`` (the default
        setting), a positive integer, or ``'inherit'`` for no control (see
        :mod:`rffkit.config`). None leaves the setting unchanged.
    check_memory : bool or None, default=None
        Whether fits estimate their peak memory and refuse to start without it. None
        leaves the setting unchanged.

    Examples
    --------
    >>> import rffkit
    >>> rffkit.set_config(n_threads=1)
    >>> rffkit.get_config()["n_threads"]
    1
    >>> rffkit.set_config(n_threads="auto")
    """
    changes = {}
    if n_threads is not None:
        changes["n_threads"] = _check_n_threads(n_threads)
    if check_memory is not None:
        changes["check_memory"] = bool(check_memory)
    _global_config.update(changes)
    _config().update(changes)


@contextmanager
def config_context(*, n_threads=None, check_memory=None):
    """Settings for the duration of a ``with`` block, in this Python thread.

    Parameters
    ----------
    n_threads : 'auto', 'inherit', int or None, default=None
        As in :func:`set_config`; None keeps the current setting.
    check_memory : bool or None, default=None
        As in :func:`set_config`; None keeps the current setting.

    Examples
    --------
    >>> import numpy as np, rffkit
    >>> X = np.random.default_rng(0).normal(size=(50, 3)); y = X[:, 0]
    >>> with rffkit.config_context(n_threads=1):
    ...     model = rffkit.RFFRidge(random_state=0).fit(X, y)
    """
    config = _config()
    saved = dict(config)
    if n_threads is not None:
        config["n_threads"] = _check_n_threads(n_threads)
    if check_memory is not None:
        config["check_memory"] = bool(check_memory)
    try:
        yield
    finally:
        config.clear()
        config.update(saved)
