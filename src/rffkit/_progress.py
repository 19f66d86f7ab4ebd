"""Progress of a long fit: one tqdm bar, messages through :mod:`logging`.

``verbose=0`` shows nothing. ``verbose=1`` shows one progress bar whose description
names what the fit is doing (the search at a penalty and from a start, the stage, the
refinement move, the epoch) and ends with one summary line. ``verbose=2`` adds a
line per iteration. Every line goes through the ``rffkit`` logger, so an application
can route or silence it with the standard :mod:`logging` configuration; when neither
that logger nor the root logger has a handler, the lines are written to standard
error (through ``tqdm.write``, so they do not break the bar).
"""

from __future__ import annotations

import logging
import sys
import time

from tqdm.auto import tqdm

from ._guards import rebalance_threads

__all__ = ["FitProgress", "logger"]

logger = logging.getLogger("rffkit")


class _TqdmHandler(logging.Handler):
    """Writes records above the bar instead of through it."""

    def emit(self, record):
        tqdm.write(self.format(record), file=sys.stderr)


class FitProgress:
    """The progress bar and log lines of one fit; a context manager.

    Parameters
    ----------
    owner : str
        The estimator's name, which starts every line.
    verbose : int
        0: silent; 1: the bar and a summary line; 2: also a line per iteration.
    total : int or None, default=None
        Steps expected (epochs); None when unknown (L-BFGS iterations).
    unit : str, default='it'
    """

    def __init__(self, owner, verbose, *, total=None, unit="it"):
        self.owner, self.verbose = owner, int(verbose)
        self.total, self.unit = total, unit
        self._bar, self._handler, self._level = None, None, None
        self.start = time.perf_counter()

    def __enter__(self):
        self.start = time.perf_counter()
        if self.verbose > 0:
            if not logger.hasHandlers():  # nobody routes rffkit's logs: show them
                self._handler = _TqdmHandler()
                logger.addHandler(self._handler)
            if logger.getEffectiveLevel() > logging.INFO:
                self._level = logger.level
                logger.setLevel(logging.INFO)
            self._bar = tqdm(total=self.total, unit=self.unit, desc=self.owner, file=sys.stderr, leave=False,
                             dynamic_ncols=True)
        return self

    def __exit__(self, *exc_info):
        if self._bar is not None:
            self._bar.close()
        if self._level is not None:
            logger.setLevel(self._level)
        if self._handler is not None:
            logger.removeHandler(self._handler)
        return False

    @property
    def elapsed(self):
        """Seconds since the fit started."""
        return time.perf_counter() - self.start

    def stage(self, description):
        """Name what the fit does now (shown as the bar's description)."""
        rebalance_threads()
        if self._bar is not None:
            self._bar.set_description_str(f"{self.owner}: {description}", refresh=False)

    def step(self, message=None, **postfix):
        """One iteration done; ``postfix`` is shown on the bar, ``message`` logged at ``verbose >= 2``."""
        rebalance_threads()
        if self._bar is None:
            return
        if postfix:
            self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(1)
        if message is not None and self.verbose >= 2:
            logger.info("%s: %s", self.owner, message)

    def summary(self, message):
        """The closing line (logged at INFO when ``verbose >= 1``), after the bar is closed: ``tqdm.write``
        would draw an open bar again below it, which a log file keeps after the summary."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self.verbose > 0:
            logger.info("%s: %s", self.owner, message)
