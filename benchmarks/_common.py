"""Helpers shared by the benchmark scripts: progress, peak memory, the code version, result files.

Progress: every script that runs longer than about a minute wraps its units of work (a
fit of one method on one data set and seed, one problem size, ...) in :func:`progress`.
The bar goes to standard error and names the unit being worked on; it is off with the
script's ``--quiet`` (:func:`add_quiet_argument`) and whenever standard error is not a
terminal (``make bench > log 2>&1``, a job scheduler), so logs get no carriage-return
clutter. Lines a script prints per unit go through :func:`say`, which writes them above
the bar instead of through it.
"""

from __future__ import annotations

import csv
import ctypes
import json
import os
import platform
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def add_quiet_argument(parser):
    """Give an ``argparse`` parser the ``--quiet`` flag that turns :func:`progress` off."""
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (there is none either when standard error is not a terminal)")
    return parser


def _describe(unit):
    return " ".join(str(part) for part in unit) if isinstance(unit, tuple) else str(unit)


def progress(units, *, desc, quiet=False, unit="fit", label=_describe):
    """Yield ``units`` one by one under a tqdm bar on standard error.

    The bar counts the units done out of ``len(units)`` and shows ``label(unit)`` for the
    unit in progress (by default its parts, space-separated). It is off when ``quiet`` is
    true or standard error is not a terminal.
    """
    from tqdm import tqdm

    units = list(units)
    with tqdm(total=len(units), desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
              disable=True if quiet else None) as bar:
        for item in units:
            bar.set_postfix_str(label(item))
            yield item
            bar.update()


def say(*values):
    """``print(*values, flush=True)`` to standard output, above a :func:`progress` bar rather than through it."""
    from tqdm import tqdm

    tqdm.write(" ".join(str(value) for value in values), file=sys.stdout)
    sys.stdout.flush()


def release_freed_memory():
    """Return freed heap pages to the OS (glibc) so that earlier work does not mask this block's peak."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakRSS:
    """Samples this process's resident set size every 5 ms; ``peak_mb`` above start.

    Freed heap pages are returned to the OS first, so the start is not inflated by earlier fits.
    """

    def __enter__(self):
        release_freed_memory()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._start = self._peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _rss(self):
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * self._page

    def _watch(self):
        while not self._stop.wait(0.005):
            self._peak = max(self._peak, self._rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._rss())
        self.peak_mb = (self._peak - self._start) / 2**20


def git_commit():
    """The short hash of the checkout's HEAD, or None outside a git checkout (a snapshot)."""
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def code_version():
    """The commit the library was run at, and any uncommitted changes to its sources.

    When ``rffkit`` is imported from outside this checkout (``PYTHONPATH`` naming a
    copy, e.g. an older commit's ``git archive``), the copy's path and the commit
    named by ``RFFKIT_COMMIT`` instead; ``RFFKIT_COMMIT`` also wins over git inside the
    checkout (a copy of it on the lent GPU machine carried a stale ``.git``).
    """
    import subprocess

    import rffkit

    location = Path(rffkit.__file__).resolve().parent
    if not location.is_relative_to(Path(ROOT).resolve()):
        return f"commit {os.environ.get('RFFKIT_COMMIT', '(not named)')} (a copy at {location})"
    given = os.environ.get("RFFKIT_COMMIT")
    if given:  # a snapshot (no git metadata, or another machine's copy): its runner names the commit
        return f"commit {given} (a snapshot; commit named by RFFKIT_COMMIT)"
    commit = git_commit()
    if commit is None:
        return "an unknown commit"
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src/rffkit"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    changed = [line[3:].split("/")[-1] for line in dirty if line.strip()]
    return f"commit {commit}" + (f" with uncommitted changes to {', '.join(changed)}" if changed else "")


def write_csv_atomically(path, fields, rows):
    """Write ``rows`` (dicts; missing keys empty) to a temporary file renamed over ``path``.

    A run interrupted mid-write leaves the previous complete file, never a half-written one.
    """
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows({key: row.get(key, "") for key in fields} for row in rows)
    os.replace(temporary, path)


def load_notes(notes_path, added=()):
    """The notes persisted in ``notes_path`` plus ``added`` (each kept once, in order).

    Hand-written notes describe rows that later runs keep, so a table merged from many
    runs keeps them too; the file is saved back when ``added`` brings new ones.
    """
    notes = json.loads(notes_path.read_text()) if notes_path.exists() else []
    fresh = [note for note in added if note not in notes]
    if fresh:
        notes = notes + fresh
        notes_path.write_text(json.dumps(notes, indent=1, ensure_ascii=False) + "\n")
    return notes


def in_fresh_process(target, *args):
    """``target(*args, queue)`` in a freshly spawned process; returns what it put on ``queue``.

    Each fit then starts from a clean interpreter: no memory, threads or caches left by
    earlier fits, so times and peak memory are the fit's own. An exception in the child
    is raised here as a RuntimeError with the child's traceback, and so is a child that
    exits without a result (killed for memory, say): the parent never waits for ever.
    """
    import multiprocessing as mp
    import queue as queues

    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_reporting, args=(target, *args, queue))
    process.start()
    while True:
        try:
            result = queue.get(timeout=1.0)
            break
        except queues.Empty:
            if not process.is_alive():
                try:  # a result put just before the child exited
                    result = queue.get(timeout=1.0)
                    break
                except queues.Empty:
                    raise RuntimeError(f"{getattr(target, '__name__', target)}: the child process exited "
                                       f"(code {process.exitcode}) without a result") from None
    process.join()
    if not isinstance(result, ChildFailure) and process.exitcode != 0:
        try:  # a target that put its result and then raised: its failure follows the result
            result = queue.get(timeout=1.0)
        except queues.Empty:
            result = ChildFailure(f"the child process exited with code {process.exitcode} after its result")
    if isinstance(result, ChildFailure):
        raise RuntimeError(f"{getattr(target, '__name__', target)} failed in its child process:\n{result.text}")
    return result


class ChildFailure:
    """What :func:`in_fresh_process`'s child puts on its queue when ``target`` raises: the traceback."""

    def __init__(self, text):
        self.text = text


def _reporting(target, *args):
    """Run ``target(*args)`` (its last argument the queue), putting a :class:`ChildFailure` there if it raises."""
    import traceback

    try:
        target(*args)
    except BaseException:
        args[-1].put(ChildFailure(traceback.format_exc()))
        raise


def cpu_name():
    """The CPU's model name (``/proc/cpuinfo``; else the platform's), recorded beside the results: the
    relevance search runs in float32 and follows the rounding of the kernels NumPy, OpenBLAS and torch
    pick by CPU (README, quick start), so a rerun on another CPU can change a score."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpus_of(rows):
    """The CPUs the rows' ``cpu`` fields name, as text (``'CPU unrecorded'`` for rows without one)."""
    return ", ".join(sorted({row.get("cpu") or "CPU unrecorded" for row in rows}))


def load_average():
    """The 1-, 5- and 15-minute load averages as text (``'2.1, 1.8, 1.5'``), recorded beside each timing."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())
