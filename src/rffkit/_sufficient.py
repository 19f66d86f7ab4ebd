"""Sufficient statistics of ridge regression, accumulated chunk by chunk and over ranks.

Ridge regression on features ``Z`` (n x D) with targets ``y`` (n x T) and an unpenalised
intercept needs the data only through

    n,   sum z,   sum z z^T,   sum z y^T,   sum y,   sum y^2 (per target),

so a fit streams the rows once and never holds more than a chunk of ``Z``.
:class:`RidgeStatistics` accumulates them in float64 (the products of one block in the
block's dtype: float32 features give float32 products, summed in float64 over blocks),
merges statistics of disjoint rows (:meth:`RidgeStatistics.merge`) and sums them over the
ranks of a distributed job (:func:`all_reduce_statistics`). :meth:`RidgeStatistics.spectrum`
turns them into the primal :class:`~rffkit._ridge_path.RidgeSpectrum` that the GCV path,
the held-out path and the coefficients of :mod:`rffkit._ridge_path` work on.

Cancellation. The centred Gram matrix ``Zc^T Zc = sum z z^T - n m m^T`` loses about
``log10(|m|^2 / var)`` digits when computed from raw sums. The sums are therefore taken
of ``z - c`` and ``y - t`` for a shift ``(c, t)`` set to the means of the first block:
then ``S1 = sum (z - c) = n (m - c)`` is of order ``n sd / sqrt(block rows)`` and the
correction ``S1 S1^T / n`` is a small fraction of ``S2 = sum (z - c)(z - c)^T``, whatever
the offset of the features. Statistics with different shifts are re-expressed at a common
shift before they are added (:meth:`RidgeStatistics.reshift`, exact algebra).

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

from ._ridge import gram_matrix
from ._ridge_path import RidgeSpectrum, loo_sums
from ._streaming import RunningMoments, validation_mask
from .distributed import all_gather_object, all_reduce_sum, broadcast_object, world
from .exceptions import MemoryBudgetError

__all__ = [
    "RidgeStatistics",
    "all_reduce_statistics",
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


def _tensor(array, device):
    """A tensor on ``device`` sharing memory with ``array`` where it can (float32/float64 kept)."""
    if isinstance(array, torch.Tensor):
        tensor = array
    else:
        array = np.asarray(array)
        if array.dtype not in (np.float32, np.float64):
            array = array.astype(np.float64)
        if not array.flags.writeable:  # torch warns on read-only buffers (memory maps)
            array = array.copy()
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.to(device)


def _symmetric(gram):
    """The symmetric matrix whose upper triangle (diagonal included) is that of ``gram``."""
    upper = torch.triu(gram)
    return upper + torch.triu(gram, diagonal=1).T


class RidgeStatistics:
    """Shifted sums of ``z``, ``z z^T``, ``z y^T``, ``y`` and ``y^2`` over the rows seen.

    Parameters
    ----------
    n_features : int
        ``D``, the width of the feature blocks.
    n_targets : int, default=1
        ``T``.
    fit_intercept : bool, default=True
        False keeps the shift at zero: the sums are then the uncentred products the
        no-intercept problem needs.
    device : str or torch.device, default='cpu'
        Where the sums live and the products run (blocks are moved there).

    Attributes
    ----------
    count : int
        Rows seen.
    feature_shift : Tensor of shape (D,) or None
        ``c`` (None before the first rows).
    target_shift : Tensor of shape (T,) or None
        ``t``.
    feature_sum : Tensor of shape (D,)
        ``sum (z - c)``.
    gram : Tensor of shape (D, D)
        ``sum (z - c)(z - c)^T``, kept up to date on and above the diagonal only (the
        readers mirror it).
    cross : Tensor of shape (D, T)
        ``sum (z - c)(y - t)^T``.
    target_sum : Tensor of shape (T,)
        ``sum (y - t)``.
    target_squares : Tensor of shape (T,)
        ``sum (y - t)^2``.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit._sufficient import RidgeStatistics
    >>> rng = np.random.default_rng(0)
    >>> Z, y = rng.normal(size=(100, 3)) + 1e6, rng.normal(size=100)
    >>> statistics = RidgeStatistics(3).update(Z[:40], y[:40]).update(Z[40:], y[40:])
    >>> gram, cross, y_norm2, mean_z, mean_y = statistics.centred()
    >>> Zc = Z - Z.mean(axis=0)
    >>> bool(np.allclose(gram.numpy(), Zc.T @ Zc, rtol=1e-10))
    True
    """

    def __init__(self, n_features, n_targets=1, *, fit_intercept=True, device="cpu"):
        self.n_features, self.n_targets = int(n_features), int(n_targets)
        self.fit_intercept = bool(fit_intercept)
        self.device = torch.device(device)
        self.count = 0
        self.feature_shift = self.target_shift = None
        options = dict(dtype=torch.float64, device=self.device)
        self.feature_sum = torch.zeros(self.n_features, **options)
        self.gram = torch.zeros(self.n_features, self.n_features, **options)
        self.cross = torch.zeros(self.n_features, self.n_targets, **options)
        self.target_sum = torch.zeros(self.n_targets, **options)
        self.target_squares = torch.zeros(self.n_targets, **options)

    def _set_shift(self, feature_shift, target_shift):
        self.feature_shift = feature_shift.to(device=self.device, dtype=torch.float64)
        self.target_shift = target_shift.to(device=self.device, dtype=torch.float64)

    def update(self, Z, y):
        """Add a block of rows: features ``Z`` (m, D) and targets ``y`` (m,) or (m, T).

        ``Z`` may be a NumPy array or a tensor, float32 or float64: its products run in
        its dtype, on ``device``, and are added to the float64 sums. Returns ``self``.
        """
        Z = _tensor(Z, self.device)
        y = _tensor(y, self.device).to(torch.float64)
        y = y[:, None] if y.ndim == 1 else y
        if Z.ndim != 2 or Z.shape[1] != self.n_features or y.shape != (Z.shape[0], self.n_targets):
            raise ValueError(
                f"RidgeStatistics: a block of shape {tuple(Z.shape)} with targets {tuple(y.shape)} "
                f"does not match n_features={self.n_features}, n_targets={self.n_targets}.")
        if Z.shape[0] == 0:
            return self
        if self.feature_shift is None:
            if self.fit_intercept:  # the block's means, as the block's dtype holds them
                self._set_shift(Z.to(torch.float64).mean(dim=0).to(Z.dtype), y.mean(dim=0))
            else:
                self._set_shift(torch.zeros(self.n_features), torch.zeros(self.n_targets))
        shifted = Z - self.feature_shift.to(Z.dtype) if self.fit_intercept else Z
        targets = y - self.target_shift
        self.feature_sum += shifted.sum(dim=0).to(torch.float64)  # a cascade sum in the block's dtype
        self.gram += gram_matrix(shifted, upper_only=True).to(torch.float64)  # readers mirror it: _symmetric
        self.cross += (shifted.T @ targets.to(Z.dtype)).to(torch.float64)
        self.target_sum += targets.sum(dim=0)
        self.target_squares += (targets * targets).sum(dim=0)
        self.count += Z.shape[0]
        return self

    def reshift(self, feature_shift, target_shift):
        """Re-express the sums at another shift ``(c', t')`` (exact algebra); returns ``self``.

        With ``d = c - c'`` and ``e = t - t'``: ``S1 += n d``,
        ``S2 += d S1^T + S1 d^T + n d d^T``, ``Szy += d Sy^T + S1 e^T + n d e^T``,
        ``Syy += 2 e Sy + n e^2`` and ``Sy += n e`` (right-hand sides at the old shift).
        """
        feature_shift = torch.as_tensor(feature_shift, dtype=torch.float64, device=self.device)
        target_shift = torch.as_tensor(target_shift, dtype=torch.float64, device=self.device)
        if self.feature_shift is None:
            self._set_shift(feature_shift, target_shift)
            return self
        d, e, n = self.feature_shift - feature_shift, self.target_shift - target_shift, self.count
        s1, sy = self.feature_sum, self.target_sum
        self.gram += torch.outer(d, s1) + torch.outer(s1, d) + n * torch.outer(d, d)
        self.cross += torch.outer(d, sy) + torch.outer(s1, e) + n * torch.outer(d, e)
        self.target_squares += 2.0 * e * sy + n * e * e
        self.feature_sum = s1 + n * d
        self.target_sum = sy + n * e
        self._set_shift(feature_shift, target_shift)
        return self

    def copy(self):
        """An independent copy."""
        twin = RidgeStatistics(self.n_features, self.n_targets, fit_intercept=self.fit_intercept,
                               device=self.device)
        twin.count = self.count
        for name in ("feature_sum", "gram", "cross", "target_sum", "target_squares"):
            setattr(twin, name, getattr(self, name).clone())
        if self.feature_shift is not None:
            twin._set_shift(self.feature_shift.clone(), self.target_shift.clone())
        return twin

    def merge(self, other):
        """Add the statistics of other rows (disjoint from ours); returns ``self``."""
        if (other.n_features, other.n_targets, other.fit_intercept) != (
                self.n_features, self.n_targets, self.fit_intercept):
            raise ValueError("RidgeStatistics.merge: the statistics differ in n_features, "
                             "n_targets or fit_intercept.")
        if other.count == 0:
            return self
        if self.count == 0:
            self._set_shift(other.feature_shift, other.target_shift)
        other = other.copy().reshift(self.feature_shift, self.target_shift)
        self.count += other.count
        for name in ("feature_sum", "gram", "cross", "target_sum", "target_squares"):
            setattr(self, name, getattr(self, name) + getattr(other, name).to(self.device))
        return self

    def _require_rows(self, at_least=1):
        if self.count < at_least:
            raise ValueError(f"RidgeStatistics: {self.count} row(s) seen; at least {at_least} "
                             "are needed.")

    def centred(self):
        """The statistics of the centred problem.

        Returns
        -------
        gram : Tensor of shape (D, D)
            ``Zc^T Zc`` (symmetrised); uncentred ``Z^T Z`` without intercept.
        cross : Tensor of shape (D, T)
            ``Zc^T yc``.
        y_norm2 : Tensor of shape (T,)
            ``||yc||^2``.
        feature_mean : Tensor of shape (D,)
            Zeros without intercept.
        target_mean : Tensor of shape (T,)
            Zeros without intercept.
        """
        self._require_rows()
        n, s1, sy = self.count, self.feature_sum, self.target_sum
        if self.fit_intercept:
            gram = _symmetric(self.gram) - torch.outer(s1, s1) / n
            cross = self.cross - torch.outer(s1, sy) / n
            y_norm2 = self.target_squares - sy * sy / n
            feature_mean, target_mean = self.feature_shift + s1 / n, self.target_shift + sy / n
        else:
            gram, cross, y_norm2 = _symmetric(self.gram), self.cross, self.target_squares
            feature_mean, target_mean = torch.zeros_like(s1), torch.zeros_like(sy)
        gram = (gram + gram.T) / 2.0  # the rank-one correction's rounding
        return gram, cross, torch.clamp(y_norm2, min=0.0), feature_mean, target_mean

    def centred_at(self, feature_mean, target_mean):
        """``(sum (z - m)(z - m)^T, sum (z - m)(y - u)^T, sum (y - u)^2)`` for given means.

        The statistics of held-out rows about the training means, as
        :func:`~rffkit._ridge_path.heldout_path` takes them.
        """
        self._require_rows()
        moved = self.copy().reshift(feature_mean, target_mean)
        gram = _symmetric(moved.gram)
        return (gram + gram.T) / 2.0, moved.cross, torch.clamp(moved.target_squares, min=0.0)

    def spectrum(self):
        """The primal :class:`~rffkit._ridge_path.RidgeSpectrum` of these rows (float64).

        One symmetric eigendecomposition of the centred ``D x D`` Gram matrix,
        O(D^3); needs 2 rows with an intercept, 1 without.
        """
        self._require_rows(2 if self.fit_intercept else 1)
        gram, cross, y_norm2, feature_mean, target_mean = self.centred()
        eigenvalues, eigenvectors = torch.linalg.eigh(gram)
        del gram
        return RidgeSpectrum(
            form="primal",
            eigenvalues=torch.clamp(eigenvalues, min=0.0),
            eigenvectors=eigenvectors,
            projections=eigenvectors.T @ cross,
            y_norm2=y_norm2,
            n_samples=self.count,
            intercept=self.fit_intercept,
            feature_mean=feature_mean.cpu().numpy(),
            target_mean=target_mean.cpu().numpy(),
        )

    def _pack(self):
        upper = torch.triu_indices(self.n_features, self.n_features, device=self.device)
        return torch.cat([
            torch.tensor([float(self.count)], dtype=torch.float64, device=self.device),
            self.feature_sum, self.gram[upper[0], upper[1]], self.cross.reshape(-1),
            self.target_sum, self.target_squares,
        ])

    def _unpack(self, buffer):
        D, T = self.n_features, self.n_targets
        sizes = [1, D, D * (D + 1) // 2, D * T, T, T]
        count, feature_sum, upper_values, cross, target_sum, squares = torch.split(buffer, sizes)
        self.count = int(round(float(count[0])))
        self.feature_sum, self.target_sum, self.target_squares = feature_sum.clone(), target_sum.clone(), squares.clone()
        self.cross = cross.reshape(D, T).clone()
        upper = torch.triu_indices(D, D, device=self.device)
        gram = torch.zeros(D, D, dtype=torch.float64, device=self.device)
        gram[upper[0], upper[1]] = upper_values
        gram[upper[1], upper[0]] = upper_values
        self.gram = gram


def all_reduce_statistics(*statistics):
    """Sum statistics over the ranks of the default process group, in place.

    Two all-reduces whatever the number of rows: first the row-weighted mean of the
    ranks' shifts (``1 + D + T`` values per statistics), at which every rank then
    re-expresses its sums; then the sums themselves, the upper triangle of the Gram
    matrix only: ``1 + D + D (D + 1) / 2 + D T + 2 T`` float64 values per statistics,
    all statistics in one message. A single process returns at once.

    Parameters
    ----------
    *statistics : RidgeStatistics
        The same shapes on every rank, in the same order.
    """
    statistics = [item for item in statistics if item is not None]
    if world()[1] == 1 or not statistics:
        return
    shifts = []
    for item in statistics:
        if item.feature_shift is None:
            shifts.append(torch.zeros(1 + item.n_features + item.n_targets, dtype=torch.float64,
                                      device=item.device))
        else:
            shifts.append(torch.cat([
                torch.tensor([float(item.count)], dtype=torch.float64, device=item.device),
                item.count * item.feature_shift, item.count * item.target_shift]))
    shifts = all_reduce_sum(torch.cat(shifts))
    start = 0
    for item in statistics:
        part = shifts[start:start + 1 + item.n_features + item.n_targets]
        start += part.shape[0]
        total = float(part[0])
        common = part[1:] / total if total > 0 else torch.zeros_like(part[1:])
        item.reshift(common[:item.n_features], common[item.n_features:])
    packed = [item._pack() for item in statistics]
    buffer = all_reduce_sum(torch.cat(packed))
    start = 0
    for item, piece in zip(statistics, packed):
        item._unpack(buffer[start:start + piece.shape[0]])
        start += piece.shape[0]


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
