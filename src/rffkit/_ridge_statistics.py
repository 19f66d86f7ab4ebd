"""Ridge regression's sufficient statistics: accumulated block by block, merged, summed over ranks.

Ridge regression on features ``Z`` (n x D) with targets ``y`` (n x T) and an unpenalised
intercept needs the data only through

    n,   sum z,   sum z z^T,   sum z y^T,   sum y,   sum y^2 (per target),

so a fit streams the rows once and never holds more than a chunk of ``Z``.
:class:`RidgeStatistics` accumulates them in float64 (the products of one block in the
block's dtype: float32 features give float32 products, summed in float64 over blocks),
merges statistics of disjoint rows (:meth:`RidgeStatistics.merge`) and sums them over the
ranks of a distributed job (:func:`all_reduce_statistics`). :meth:`RidgeStatistics.spectrum`
turns them into the primal :class:`~rffkit._ridge_path.RidgeSpectrum` that the GCV path,
the held-out path and the coefficients of :mod:`rffkit._ridge_path` work on. The passes
over a source that fill them are in :mod:`rffkit._sufficient`.

Cancellation. The centred Gram matrix ``Zc^T Zc = sum z z^T - n m m^T`` loses about
``log10(|m|^2 / var)`` digits when computed from raw sums. The sums are therefore taken
of ``z - c`` and ``y - t`` for a shift ``(c, t)`` set to the means of the first block:
then ``S1 = sum (z - c) = n (m - c)`` is of order ``n sd / sqrt(block rows)`` and the
correction ``S1 S1^T / n`` is a small fraction of ``S2 = sum (z - c)(z - c)^T``, whatever
the offset of the features. Statistics with different shifts are re-expressed at a common
shift before they are added (:meth:`RidgeStatistics.reshift`, exact algebra).
"""

from __future__ import annotations

import numpy as np
import torch

from ._dense import gram_matrix, symmetric_eigh
from ._ridge_path import RidgeSpectrum, path_coefficients
from .distributed import all_reduce_sum, world

__all__ = ["RidgeStatistics", "all_reduce_statistics"]


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
    >>> from rffkit._ridge_statistics import RidgeStatistics
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

    def target_moments(self):
        """The mean and standard deviation (ddof 0) of each target over the rows seen: float64 arrays."""
        self._require_rows()
        n, sy = self.count, self.target_sum
        variance = torch.clamp(self.target_squares - sy * sy / n, min=0.0) / n
        return (self.target_shift + sy / n).cpu().numpy(), variance.sqrt().cpu().numpy()

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
        eigenvalues, eigenvectors = symmetric_eigh(gram)
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

    def solve(self, penalty):
        """``(coef, intercept)`` of the ridge fit at one penalty on the sum of squares (float64).

        ``coef`` (D, T) solves ``(Zc^T Zc + penalty I) coef = Zc^T yc`` by one Cholesky
        factorisation, ``D^3 / 3`` where :meth:`spectrum` takes an eigendecomposition:
        what a fit needs once the penalty is chosen. ``penalty`` is a number or one per
        target (shape (T,)); the intercept is ``target_mean - feature_mean @ coef``
        (zero without one). When a factorisation fails (a penalty too small for the
        rounding of a rank-deficient Gram matrix) the coefficients come from the
        eigendecomposition, whose path clamps the negative rounding of the spectrum.
        """
        self._require_rows(2 if self.fit_intercept else 1)
        gram, cross, _, feature_mean, target_mean = self.centred()
        penalties = np.broadcast_to(np.asarray(penalty, dtype=np.float64), (self.n_targets,)).copy()
        coef = torch.empty_like(cross)
        for value in np.unique(penalties):
            columns = torch.as_tensor(np.flatnonzero(penalties == value), device=self.device)
            system = gram.clone()
            system.diagonal().add_(float(value))
            factor, info = torch.linalg.cholesky_ex(system)
            del system
            if int(info) != 0:
                return self._solve_by_spectrum(penalties)
            coef[:, columns] = torch.cholesky_solve(cross[:, columns], factor)
        return coef, target_mean - feature_mean @ coef

    def _solve_by_spectrum(self, penalties):
        spectrum = self.spectrum()
        coef = path_coefficients(spectrum, penalties)  # one penalty per target
        mean = torch.as_tensor(spectrum.feature_mean, dtype=coef.dtype, device=coef.device)
        return coef, torch.as_tensor(spectrum.target_mean, dtype=coef.dtype, device=coef.device) - mean @ coef

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
