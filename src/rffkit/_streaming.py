"""Streaming numerics: statistics and samples built chunk by chunk, then merged.

Everything here takes NumPy arrays (or CPU torch tensors) and returns NumPy arrays; nothing
reads files. Each result depends only on the rows seen and their global row indices, never on
how the rows were cut into chunks or split over ranks, so the ranks of a distributed job can
each stream their share and merge the pieces at the end.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "RunningMoments",
    "BottomKSample",
    "row_hash",
    "validation_mask",
    "rechunk",
    "numeric_target",
]

_UINT64_MASK = (1 << 64) - 1
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
# One salt per use, so the validation split and the sample are independent for one seed.
_VALIDATION_SALT = 0x56414C4944415445
_SAMPLE_SALT = 0x53414D504C455321


def _splitmix64_finalizer(values):
    """The splitmix64 output mix, elementwise on a uint64 array (wraps modulo 2**64)."""
    values = (values ^ (values >> np.uint64(30))) * _MIX_1
    values = (values ^ (values >> np.uint64(27))) * _MIX_2
    return values ^ (values >> np.uint64(31))


def _as_rows(rows):
    rows = np.asarray(rows)
    if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError("rows must be a 1-D integer array; "
                         f"got shape {rows.shape} and dtype {rows.dtype}.")
    if rows.size and rows.min() < 0:
        raise ValueError("rows must be non-negative global row indices.")
    return rows


def row_hash(rows, seed, salt=0):
    """A 64-bit hash of each global row index, fixed by ``seed`` and ``salt``.

    The hash of row ``r`` is output ``r`` of a splitmix64 generator whose state starts from
    the mixed ``seed ^ salt``; it depends on nothing but the row index, the seed and the salt.

    Parameters
    ----------
    rows : array-like of int, shape (m,)
        Non-negative global row indices.
    seed : int
        Any Python or NumPy integer (taken modulo 2**64).
    salt : int, default=0
        Separates uses of the same seed (the validation split, the sample).

    Returns
    -------
    keys : ndarray of uint64, shape (m,)
        One key per row, in the order of ``rows``.

    Examples
    --------
    >>> from rffkit._streaming import row_hash
    >>> bool((row_hash([0, 1, 2], seed=7) == row_hash([0, 1, 2], seed=7)).all())
    True
    """
    rows = _as_rows(rows)
    if not isinstance(seed, numbers.Integral) or not isinstance(salt, numbers.Integral):
        raise TypeError("seed and salt must be integers; "
                        f"got {type(seed).__name__} and {type(salt).__name__}.")
    start = np.array([(int(seed) ^ int(salt)) & _UINT64_MASK], dtype=np.uint64)
    start = _splitmix64_finalizer(start)
    state = (rows.astype(np.uint64) + np.uint64(1)) * _GOLDEN_GAMMA + start
    return _splitmix64_finalizer(state)


def _unit_interval(keys):
    """Map uint64 keys to floats in [0, 1) with their top 53 bits."""
    return (keys >> np.uint64(11)).astype(np.float64) * 2.0**-53


def validation_mask(rows, fraction, seed=0):
    """Deterministic hold-out membership of each global row.

    Row ``r`` is held out when the hash of ``r`` (see :func:`row_hash`), mapped to [0, 1),
    falls below ``fraction``. The answer for a row is the same in every chunk, pass and rank,
    so a streamed fit can hold out a validation set without storing it.

    Parameters
    ----------
    rows : array-like of int, shape (m,)
        Global row indices, such as ``Chunk.rows``.
    fraction : float
        Expected share of rows held out, in [0, 1].
    seed : int, default=0
        Different seeds give independent splits.

    Returns
    -------
    mask : ndarray of bool, shape (m,)
        True for held-out rows; about ``fraction * m`` of them (binomially distributed).

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit._streaming import validation_mask
    >>> mask = validation_mask(np.arange(100_000), 0.2, seed=0)
    >>> bool(abs(mask.mean() - 0.2) < 0.01)
    True
    """
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must lie in [0, 1]; got {fraction}.")
    return _unit_interval(row_hash(rows, seed, _VALIDATION_SALT)) < fraction


def _as_float64(array):
    if hasattr(array, "detach"):  # a torch tensor
        array = array.detach().cpu().numpy()
    return np.asarray(array, dtype=np.float64)


class RunningMoments:
    """Count, mean and variance per column, updated chunk by chunk and mergeable.

    Each chunk's moments are computed with two passes over the chunk, then combined with
    the running ones by the pairwise formulas of Chan, Golub & LeVeque. The data are shifted
    by the first row seen before anything is summed, so a large common offset (values near
    1e8 with small spread) costs no precision.

    Attributes
    ----------
    count : int
        Rows seen.
    mean : ndarray of shape (p,)
    variance : ndarray of shape (p,)
        Population variance (ddof=0).
    std : ndarray of shape (p,)
    m2 : ndarray of shape (p,)
        Sum of squared deviations from the mean.
    minimum, maximum : ndarray of shape (p,)
        The smallest and largest value seen.

    Notes
    -----
    For parts a and b with counts n_a, n_b, means m_a, m_b and sums of squared deviations
    M_a, M_b, with n = n_a + n_b and d = m_b - m_a::

        mean = m_a + d * n_b / n
        M2   = M_a + M_b + d**2 * n_a * n_b / n

    References
    ----------
    T. F. Chan, G. H. Golub and R. J. LeVeque (1979), "Updating formulae and a pairwise
    algorithm for computing sample variances", Stanford report STAN-CS-79-773; and
    "Algorithms for computing the sample variance: analysis and recommendations",
    The American Statistician 37 (1983), for the shift.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit._streaming import RunningMoments
    >>> X = np.arange(12.0).reshape(6, 2)
    >>> left, right = RunningMoments(), RunningMoments()
    >>> _ = left.update(X[:2]); _ = right.update(X[2:])
    >>> left.merge(right).mean.tolist(), float(left.variance[0])
    ([5.0, 6.0], 11.666666666666666)
    """

    def __init__(self):
        self.count = 0
        self._shift = None
        self._shifted_mean = None
        self.m2 = None
        self.minimum = self.maximum = None

    def update(self, X):
        """Add a chunk of rows.

        Parameters
        ----------
        X : array-like or torch.Tensor of shape (m, p) or (m,)
            The rows; every chunk has the shape of the first after its first axis.

        Returns
        -------
        self : RunningMoments
            Updated in place.
        """
        X = _as_float64(X)
        if X.shape[0] == 0:
            return self
        if self._shift is None:
            self._shift = X[0].copy()
            self._shifted_mean = np.zeros_like(self._shift)
            self.m2 = np.zeros_like(self._shift)
        elif X.shape[1:] != self._shift.shape:
            raise ValueError(
                f"chunk rows have shape {X.shape[1:]}, earlier ones {self._shift.shape}.")
        self._extend_range(X.min(axis=0), X.max(axis=0))
        deviations = X - self._shift
        chunk_mean = deviations.mean(axis=0)
        deviations -= chunk_mean
        chunk_m2 = np.einsum("i...,i...->...", deviations, deviations)
        self._combine(X.shape[0], chunk_mean, chunk_m2)
        return self

    def merge(self, other):
        """Fold in the moments of another part of the rows.

        Parameters
        ----------
        other : RunningMoments
            Moments of rows disjoint from ours (another rank's share, say); not changed.

        Returns
        -------
        self : RunningMoments
            The moments of both parts together.
        """
        if not isinstance(other, RunningMoments):
            raise TypeError(
                f"can only merge another RunningMoments, not {type(other).__name__}.")
        if other.count == 0:
            return self
        if self.count == 0:
            self.count = other.count
            self._shift = other._shift.copy()
            self._shifted_mean = other._shifted_mean.copy()
            self.m2 = other.m2.copy()
            self.minimum, self.maximum = other.minimum.copy(), other.maximum.copy()
            return self
        if other._shift.shape != self._shift.shape:
            raise ValueError(f"cannot merge moments of shape {other._shift.shape} into "
                             f"{self._shift.shape}.")
        # Re-express the other mean relative to our shift; both shifts are data values,
        # so their difference is small when the data share a large offset.
        other_mean = other._shifted_mean + (other._shift - self._shift)
        self._combine(other.count, other_mean, other.m2)
        self._extend_range(other.minimum, other.maximum)
        return self

    def _extend_range(self, minimum, maximum):
        self.minimum = minimum.copy() if self.minimum is None else np.minimum(self.minimum, minimum)
        self.maximum = maximum.copy() if self.maximum is None else np.maximum(self.maximum, maximum)

    def _combine(self, count, shifted_mean, m2):
        total = self.count + count
        delta = shifted_mean - self._shifted_mean
        self._shifted_mean = self._shifted_mean + delta * (count / total)
        self.m2 = self.m2 + m2 + delta**2 * (self.count * count / total)
        self.count = total

    def _require_rows(self):
        if self.count == 0:
            raise ValueError("RunningMoments has seen no rows yet; call update() first.")

    @property
    def mean(self):
        self._require_rows()
        return self._shift + self._shifted_mean

    @property
    def variance(self):
        self._require_rows()
        return self.m2 / self.count

    @property
    def std(self):
        return np.sqrt(self.variance)


class BottomKSample:
    """A uniform sample of ``k`` rows, deterministic and mergeable over chunks and ranks.

    Every row gets a key, a hash of its global row index and ``seed`` (see :func:`row_hash`;
    independent of :func:`validation_mask` for the same seed); the sample is the ``k`` rows
    with the smallest keys. Keys depend only on row indices, so the sample is the same however
    the rows are chunked or split over ranks, and since the keys behave like independent
    uniform draws it is a uniform sample without replacement (bottom-k sampling).

    Parameters
    ----------
    k : int
        Sample size; fewer rows are returned when fewer were seen.
    seed : int, default=0
        Fixes the keys; the same seed gives the same sample of the same rows.

    Attributes
    ----------
    n_seen : int
        Rows offered so far (merged counts included).

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit._streaming import BottomKSample
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> first, second = BottomKSample(3, seed=1), BottomKSample(3, seed=1)
    >>> _ = first.update(X[:6], None, np.arange(6))
    >>> _ = second.update(X[6:], None, np.arange(6, 10))
    >>> whole = BottomKSample(3, seed=1).update(X, None, np.arange(10))
    >>> bool((first.merge(second).result()[2] == whole.result()[2]).all())
    True
    """

    def __init__(self, k, seed=0):
        if not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"k must be a positive integer; got {k!r}.")
        self.k = int(k)
        self.seed = seed
        self.n_seen = 0
        self._keys = None
        self._X = None
        self._y = None
        self._rows = None

    def update(self, X, y, rows):
        """Offer the rows of one chunk.

        Parameters
        ----------
        X : array-like of shape (m, ...)
            The rows.
        y : array-like of shape (m,) or None
            Their target; None in every chunk or in none.
        rows : array-like of int, shape (m,)
            Their global row indices, disjoint from those offered before.

        Returns
        -------
        self : BottomKSample
            Updated in place.
        """
        X = np.asarray(X)
        rows = _as_rows(rows)
        if X.shape[0] != rows.shape[0] or (y is not None and len(y) != rows.shape[0]):
            raise ValueError("X, y and rows disagree on the number of rows "
                             f"({X.shape[0]}, {rows.shape[0]}).")
        self.n_seen += rows.shape[0]
        keys = row_hash(rows, self.seed, _SAMPLE_SALT)
        keep = np.arange(rows.shape[0])
        if keep.size > self.k:
            keep = np.argpartition(keys, self.k - 1)[: self.k]
        if self._keys is not None and self._keys.size == self.k:
            keep = keep[keys[keep] <= self._keys.max()]
        y_kept = None if y is None else np.asarray(y)[keep]
        self._absorb(keys[keep], X[keep], y_kept, rows[keep])
        return self

    def merge(self, other):
        """Fold in the sample of another part of the rows.

        Parameters
        ----------
        other : BottomKSample
            A sample of rows disjoint from ours, with the same ``k`` and ``seed``; not
            changed.

        Returns
        -------
        self : BottomKSample
            The sample of both parts together.
        """
        if not isinstance(other, BottomKSample):
            raise TypeError(
                f"can only merge another BottomKSample, not {type(other).__name__}.")
        if (other.k, other.seed) != (self.k, self.seed):
            raise ValueError(
                f"cannot merge a sample with k={other.k}, seed={other.seed} into one with "
                f"k={self.k}, seed={self.seed}; both must use the same k and seed."
            )
        self.n_seen += other.n_seen
        if other._keys is not None:
            self._absorb(other._keys, other._X, other._y, other._rows)
        return self

    def _absorb(self, keys, X, y, rows):
        if self._keys is None:
            self._keys, self._X, self._rows = keys, X.copy(), rows.copy()
            self._y = None if y is None else y.copy()
        else:
            if (y is None) != (self._y is None):
                raise ValueError("some chunks came with y and some without; "
                                 "pass y always or never.")
            if X.shape[1:] != self._X.shape[1:]:
                raise ValueError(f"rows of shape {X.shape[1:]} cannot join a sample of rows of "
                                 f"shape {self._X.shape[1:]}.")
            self._keys = np.concatenate([self._keys, keys])
            self._X = np.concatenate([self._X, X])
            self._rows = np.concatenate([self._rows, rows])
            if y is not None:
                self._y = np.concatenate([self._y, y])
        if self._keys.size > self.k:
            keep = np.argpartition(self._keys, self.k - 1)[: self.k]
            self._keys, self._X, self._rows = self._keys[keep], self._X[keep], self._rows[keep]
            if self._y is not None:
                self._y = self._y[keep]
        if np.unique(self._rows).size != self._rows.size:
            raise ValueError("a row index was offered twice; chunks and merged samples must "
                             "hold disjoint rows.")

    def result(self):
        """The sample, sorted by row.

        Returns
        -------
        X : ndarray of shape (min(k, n_seen), ...)
            The sampled rows.
        y : ndarray of shape (min(k, n_seen),) or None
            Their target; None when no chunk came with one.
        rows : ndarray of int, shape (min(k, n_seen),)
            Their global row indices, increasing.
        """
        if self._keys is None:
            raise ValueError("BottomKSample has seen no rows yet; call update() first.")
        order = np.argsort(self._rows, kind="stable")
        y = None if self._y is None else self._y[order]
        return self._X[order], y, self._rows[order]


def _slice(piece, start, stop):
    X, y, rows = piece
    return X[start:stop], None if y is None else y[start:stop], rows[start:stop]


def _concatenate(pieces):
    if len(pieces) == 1:
        return pieces[0]
    X = np.concatenate([piece[0] for piece in pieces])
    y = None if pieces[0][1] is None else np.concatenate([piece[1] for piece in pieces])
    return X, y, np.concatenate([piece[2] for piece in pieces])


def rechunk(pieces, chunk_rows):
    """Regroup a stream of ``(X, y, rows)`` pieces into chunks of exactly ``chunk_rows`` rows.

    Only the last chunk may be shorter. A piece that already covers a whole chunk is passed
    on as a view; rows are copied only where a chunk joins several pieces, so at most about
    one chunk is buffered.

    Parameters
    ----------
    pieces : iterable of tuple (X, y, rows)
        Arrays with a common first dimension; ``y`` may be None throughout.
    chunk_rows : int
        Rows per chunk, positive.

    Yields
    ------
    X, y, rows : tuple of ndarray
        A chunk: slices (or concatenations) of the pieces' arrays; ``y`` None when the
        pieces have none.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit._streaming import rechunk
    >>> pieces = [(np.zeros((3, 1)), None, np.arange(3)),
    ...           (np.ones((4, 1)), None, np.arange(3, 7))]
    >>> [rows.tolist() for _, _, rows in rechunk(pieces, 5)]
    [[0, 1, 2, 3, 4], [5, 6]]
    """
    buffer, buffered = [], 0
    for piece in pieces:
        n_rows, start = len(piece[2]), 0
        while start < n_rows:
            if not buffer and n_rows - start >= chunk_rows:
                yield _slice(piece, start, start + chunk_rows)
                start += chunk_rows
                continue
            take = min(chunk_rows - buffered, n_rows - start)
            buffer.append(_slice(piece, start, start + take))
            buffered += take
            start += take
            if buffered == chunk_rows:
                yield _concatenate(buffer)
                buffer, buffered = [], 0
    if buffer:
        yield _concatenate(buffer)


def numeric_target(owner, y, n_targets=1):
    """A chunk's target as float64 of shape ``(m, n_targets)``; non-numeric or misshapen targets are refused."""
    y = np.asarray(y)
    if y.dtype == object or not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise ValueError(f"{owner}: the target must be numeric; got values of dtype {y.dtype} "
                         f"(e.g. {y.ravel()[:1].tolist()}).")
    if y.size != y.shape[0] * n_targets:
        raise ValueError(f"{owner}: expected {n_targets} target column(s); got shape {y.shape}.")
    return y.astype(np.float64, copy=False).reshape(y.shape[0], n_targets)
