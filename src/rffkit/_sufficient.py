"""Passes over a source that accumulate ridge regression's sufficient statistics, and their memory budget.

Ridge regression on features ``Z`` (n x D) with targets ``y`` (n x T) and an unpenalised
intercept needs the data only through ``n``, ``sum z``, ``sum z z^T``, ``sum z y^T``,
``sum y`` and ``sum y^2``: the :class:`~rffkit._ridge_statistics.RidgeStatistics` of
:mod:`rffkit._ridge_statistics`. The functions here fill them from a source, chunk by
chunk and block by block, on every rank of a distributed job (:func:`accumulate`,
:func:`add_rows`, :func:`feature_blocks`), make the second pass of exact leave-one-out
(:func:`streamed_loo`), and give the ranks one view of the data (:func:`streamed_moments`,
:func:`fitted_on_first_chunk`, :func:`agree`).

The memory a fit needs beyond its data follows from ``D`` alone
(:func:`statistics_bytes`); :func:`check_memory_budget` refuses a ``D`` whose Gram matrix
and eigendecomposition would not fit the budget, and :func:`max_components` gives the
largest one that does.
"""

from __future__ import annotations

import math
import numbers
import re

import numpy as np
import psutil
import scipy.sparse as sp
import torch

from ._ridge_path import loo_sums
from ._ridge_statistics import all_reduce_statistics
from ._streaming import RunningMoments, validation_mask
from .distributed import all_gather_object, all_reduce_sum, broadcast_object, world
from .exceptions import MemoryBudgetError

__all__ = [
    "streamed_moments",
    "fitted_on_first_chunk",
    "agree",
    "feature_blocks",
    "add_rows",
    "accumulate",
    "streamed_loo",
    "MemoryBudgetError",
    "parse_memory",
    "default_memory_budget",
    "statistics_bytes",
    "max_components",
    "block_rows_for",
    "check_memory_budget",
]

#: Share of the available memory a fit may use when no budget is given.
DEFAULT_BUDGET_FRACTION = 0.5
#: A block of features (rows x D) is kept near this size: large enough for fast products.
_BLOCK_BYTES = 64 * 2**20
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def streamed_moments(source):
    """Column means and variances of every row of ``source``, the same on every rank.

    Each rank reads its share into a :class:`~rffkit._streaming.RunningMoments`; the
    ranks' moments are gathered and merged in rank order, so every rank holds the same
    bits. One pass over the data.

    Parameters
    ----------
    source : TableSource or ArraySource

    Returns
    -------
    RunningMoments
    """
    rank, world_size = world()
    moments = RunningMoments()
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        moments.update(chunk.X)
    merged = RunningMoments()
    for part in all_gather_object(moments):
        merged.merge(part)
    return merged


def fitted_on_first_chunk(transformer, source):
    """``transformer`` fitted on the first chunk of ``source`` by rank 0, on every rank.

    Rank 0 reads the table's first chunk (whatever its share), fits, and broadcasts the
    fitted transformer, so every rank transforms with the same random draws even when
    the fit looks at the data. The other ranks' ``transformer`` is not used.

    Parameters
    ----------
    transformer : object with ``fit(X)``
    source : TableSource or ArraySource

    Returns
    -------
    The fitted transformer
    """
    if world()[0] == 0:
        transformer.fit(next(iter(source.iter_chunks())).X)
    return broadcast_object(transformer)


def agree(error):
    """Raise on every rank the first rank's error, if any rank had one (a collective call).

    A check that passes on some ranks and fails on others (a memory budget read from each
    machine's free memory) must stop all of them, or the others wait in the next
    all-reduce. ``error`` is this rank's exception or None.
    """
    errors = [item for item in all_gather_object(error) if item is not None]
    if errors:
        raise errors[0]


def feature_blocks(transform, X, block_rows):
    """``(start, stop, Z)`` over blocks of rows of ``X``, ``Z = transform(X[start:stop])`` dense.

    Parameters
    ----------
    transform : callable
        Maps a block of inputs (b, p) to its features (b, D): an ndarray, a tensor or a
        scipy sparse matrix (made dense here).
    X : ndarray of shape (m, p)
        A chunk of inputs.
    block_rows : int
        Rows per block (see :func:`block_rows_for`).

    Yields
    ------
    start, stop : int
    Z : ndarray or Tensor of shape (stop - start, D)
    """
    for start in range(0, X.shape[0], block_rows):
        stop = min(start + block_rows, X.shape[0])
        Z = transform(X[start:stop])
        yield start, stop, Z.toarray() if sp.issparse(Z) else Z


def add_rows(transform, X, y, rows, train, heldout=None, *, validation_fraction=0.0, seed=0,
             block_rows=None):
    """Featurise a chunk block by block and add its rows to the statistics.

    Rows that :func:`~rffkit._streaming.validation_mask` holds out (by their global index
    ``rows``) go to ``heldout``, the others to ``train``; without ``heldout`` every row
    trains.

    Parameters
    ----------
    transform : callable
        Inputs (b, p) to features (b, D), as in :func:`feature_blocks`.
    X : ndarray of shape (m, p)
    y : ndarray of shape (m, T)
        Float targets.
    rows : ndarray of int of shape (m,)
        Global row indices.
    train : RidgeStatistics
    heldout : RidgeStatistics, optional
    validation_fraction : float, default=0.0
    seed : int, default=0
        Of the held-out split.
    block_rows : int, optional
        Default :func:`block_rows_for` the width of ``train``.
    """
    block_rows = block_rows or block_rows_for(train.n_features, np.dtype(X.dtype).itemsize)
    held = validation_mask(rows, validation_fraction, seed) if heldout is not None else None
    for start, stop, Z in feature_blocks(transform, X, block_rows):
        if held is None:
            train.update(Z, y[start:stop])
            continue
        mask = held[start:stop]
        index = torch.as_tensor(mask) if isinstance(Z, torch.Tensor) else mask
        train.update(Z[~index], y[start:stop][~mask])
        heldout.update(Z[index], y[start:stop][mask])


def accumulate(source, transform, train, heldout=None, *, target, validation_fraction=0.0, seed=0):
    """One pass over this rank's share of ``source`` into the statistics, then the all-reduce.

    Parameters
    ----------
    source : TableSource or ArraySource
        Read with ``iter_chunks(rank=rank, world_size=world_size)`` of :func:`world`.
    transform : callable
        Inputs (b, p) to features (b, D).
    train, heldout : RidgeStatistics
        ``heldout`` optional (see :func:`add_rows`).
    target : callable
        ``chunk.y`` to float targets of shape (m, T).
    validation_fraction, seed : float, int
        The held-out split, when ``heldout`` is given.

    Returns
    -------
    train, heldout : RidgeStatistics
        Summed over every rank (the same on all of them).
    """
    rank, world_size = world()
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        add_rows(transform, chunk.X, target(chunk.y), chunk.rows, train, heldout,
                 validation_fraction=validation_fraction, seed=seed)
    all_reduce_statistics(train, heldout)
    return train, heldout


def streamed_loo(source, transform, spectrum, alphas, *, target):
    """Exact leave-one-out mean squared error of every alpha by a second pass: (n_alphas, T).

    The hat diagonal ``h_ii`` needs each row's features, so exact LOO cannot come from
    the statistics alone: every rank re-reads its share, adds
    :func:`~rffkit._ridge_path.loo_sums` block by block, and the sums are all-reduced.

    Parameters
    ----------
    source : TableSource or ArraySource
    transform : callable
        The same feature map as the first pass.
    spectrum : RidgeSpectrum
        Primal, from the statistics of all the rows.
    alphas : ndarray of shape (n_alphas,)
    target : callable
        ``chunk.y`` to float targets of shape (m, T).

    Returns
    -------
    Tensor of shape (n_alphas, T), float64
    """
    rank, world_size = world()
    T = spectrum.projections.shape[1]
    V = spectrum.eigenvectors
    total = torch.zeros(len(alphas), T, dtype=torch.float64, device=V.device)
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        y = target(chunk.y)
        block_rows = block_rows_for(V.shape[0], 8)
        for start, stop, Z in feature_blocks(transform, chunk.X, block_rows):
            total += loo_sums(spectrum, alphas, Z, y[start:stop])
    return all_reduce_sum(total) / spectrum.n_samples


def all_reduce_bytes(n_features, n_targets=1, n_statistics=1):
    """Bytes of the larger all-reduce of :func:`all_reduce_statistics` (independent of n)."""
    D, T = n_features, n_targets
    return 8 * n_statistics * (1 + D + D * (D + 1) // 2 + D * T + 2 * T)


def parse_memory(value):
    """Bytes from an int or a string such as ``'2GB'``, ``'512MiB'`` or ``'1.5e9'``.

    Decimal units (kB, MB, GB, TB: powers of 1000) and binary ones (KiB, MiB, GiB, TiB),
    case-insensitive. None gives :func:`default_memory_budget`.

    Examples
    --------
    >>> from rffkit._sufficient import parse_memory
    >>> parse_memory("2GB"), parse_memory("512MiB"), parse_memory(10**6)
    (2000000000, 536870912, 1000000)
    """
    if value is None:
        return default_memory_budget()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"a memory budget must be positive; got {value}.")
        return int(value)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS or float(match.group(1)) <= 0:
        raise ValueError(f"cannot read the memory budget {value!r}; give bytes as an integer or a "
                         "string such as '2GB', '500MB' or '1.5GiB'.")
    return int(float(match.group(1)) * _UNITS[unit])


def default_memory_budget():
    """Half the memory the operating system can give this process now (psutil)."""
    return int(DEFAULT_BUDGET_FRACTION * psutil.virtual_memory().available)


def block_rows_for(n_features, itemsize=8):
    """Rows per feature block: about 64 MiB of ``rows x D`` features, 256 to 16,384 rows."""
    return int(min(16_384, max(256, _BLOCK_BYTES // max(1, n_features * itemsize))))


def statistics_bytes(n_features, n_targets=1, *, n_statistics=1, itemsize=8):
    """Memory a streamed ridge fit needs beyond its data, in bytes (an estimate).

    ``n_statistics`` Gram matrices (``8 D^2`` bytes each, two with a held-out split), the
    eigendecomposition of one (about ``4 x 8 D^2``: the centred copy, the eigenvectors and
    LAPACK's workspace) and three blocks of features of :func:`block_rows_for` rows.
    """
    D = int(n_features)
    sums = 8 * n_statistics * (D * D + D * (n_targets + 2))
    return sums + 8 * 4 * D * D + 3 * block_rows_for(D, itemsize) * D * itemsize


def max_components(budget, n_targets=1, *, n_statistics=1, itemsize=8):
    """The largest ``D`` whose :func:`statistics_bytes` fit ``budget`` (bytes or a string).

    Examples
    --------
    >>> from rffkit._sufficient import max_components
    >>> max_components("1GB")
    4468
    """
    budget = parse_memory(budget)
    high = int(math.sqrt(budget / 8)) + 2
    low = 0
    while low < high:  # statistics_bytes grows with D: bisect
        middle = (low + high + 1) // 2
        if statistics_bytes(middle, n_targets, n_statistics=n_statistics, itemsize=itemsize) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def check_memory_budget(n_features, budget, *, n_targets=1, n_statistics=1, itemsize=8, owner,
                        parameter, lower):
    """Raise :class:`MemoryBudgetError` when ``D = n_features`` does not fit ``budget``.

    ``parameter`` names the budget, ``lower`` the parameter that lowers ``D``.
    """
    budget_bytes = parse_memory(budget)
    needed = statistics_bytes(n_features, n_targets, n_statistics=n_statistics, itemsize=itemsize)
    if needed > budget_bytes:
        largest = max_components(budget_bytes, n_targets, n_statistics=n_statistics, itemsize=itemsize)
        given = "the default (half the available memory)" if budget is None else repr(budget)
        raise MemoryBudgetError(
            f"{owner}: {n_features} features need about {needed / 1e9:.3g} GB for the D x D "
            f"statistics and their eigendecomposition, more than {parameter}={given} "
            f"({budget_bytes / 1e9:.3g} GB); lower {lower} (at most {largest} fit) or raise "
            f"{parameter}.")
    return budget_bytes
