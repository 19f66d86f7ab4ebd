"""Ridge heads of an RFFNet layer fitted on every row of a streamed source.

:class:`StreamedRidgeHeads` has the interface of :class:`rffkit._heads.RidgeHeads`, so the
refinement moves of :func:`rffkit._refine.refine_layer` and the linear-only comparison of
:func:`rffkit._heads.reduce_to_linear` are confirmed on every row of the data instead of an
in-memory sample (:mod:`rffkit._rffnet_stream`). A head is one pass over the source: the
training and validation rows' :class:`~rffkit._ridge_statistics.RidgeStatistics`, summed over the
ranks, give the validation error of every penalty in closed form
(:func:`_head_from_statistics`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._heads import RidgeHeads, linear_inputs, on_layer
from ._ridge import RidgeHead, best_penalty
from ._ridge_path import gcv_path, heldout_path, path_coefficients
from ._ridge_statistics import RidgeStatistics, all_reduce_statistics
from ._streaming import numeric_target, validation_mask
from ._sufficient import accumulate, add_rows
from ._validation import as_tensor, standard_scale
from .distributed import all_reduce_sum, broadcast_object, world

__all__ = ["StreamedRidgeHeads", "HeldOutLosses", "PairedLossGain", "layer_width"]


def layer_width(layer):
    """Output columns of ``layer`` (``n_components``, plus the linear columns where it has them)."""
    return int(getattr(layer, "width", layer.n_components))


class _Standardiser:
    """``(X - mean) / scale`` as float32 tensors on ``device``, and the standardised target.

    ``x_range``, ``(minimum, maximum)`` of the inputs over every row, is passed on to the
    fitted model (see :meth:`~rffkit.layers.ARDRandomFourierFeatures.set_input_range`), and
    ``constant`` marks the constant columns, whose relevance the fitted model sets to 0.
    """

    def __init__(self, x_mean, x_scale, y_mean, y_scale, device, x_range=None, constant=None):
        self.x_mean, self.x_scale, self.y_mean, self.y_scale = x_mean, x_scale, y_mean, y_scale
        self.device, self.x_range, self.constant = device, x_range, constant

    @classmethod
    def from_moments(cls, x_moments, y_mean, y_scale, device):
        """The standardiser of the inputs' streamed moments (:class:`rffkit._streaming.RunningMoments`):
        their means, standard deviations (1 for a constant column) and range."""
        scale, constant = standard_scale(x_moments.mean, x_moments.std, np.float64)
        return cls(x_moments.mean, scale, y_mean, y_scale, device, (x_moments.minimum, x_moments.maximum), constant)

    def standardised(self, X):
        """``(X - mean) / scale`` in float64 NumPy."""
        return (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale

    def inputs(self, X):
        return as_tensor(self.standardised(X), dtype=torch.float32, device=self.device)

    def target(self, y):
        return (y - self.y_mean) / self.y_scale


class StreamedRidgeHeads:
    """Ridge heads of a layer on every row of a source: the interface of :class:`rffkit._heads.RidgeHeads`.

    :meth:`fit` streams the source through the layer once (every rank its share, the
    statistics all-reduced) and chooses the penalty by the closed-form held-out path of
    the validation rows (GCV without them); :meth:`validation_losses` gives the head's
    losses on the validation rows as a :class:`HeldOutLosses`, whose paired differences
    stream the validation rows once and all-reduce three sums. The refinement moves of :func:`rffkit._refine.refine_layer` are then confirmed on
    every row instead of the sample. Each call is collective: every rank must make it with
    the same layer (rank 0's is broadcast).
    """

    #: A head costs a pass over the data: the refinement confirms candidates directly.
    costly = False

    def __init__(self, source, standardise, *, validated, fraction, seed, alphas, owner):
        self.source, self.standardise, self.validated = source, standardise, validated
        self.fraction, self.seed, self.alphas, self.owner = fraction, seed, tuple(alphas), owner

    def _target(self, values):
        return self.standardise.target(numeric_target(self.owner, values))

    def _transform(self, layer):
        @torch.no_grad()
        def features(X_block):
            return layer(self.standardise.inputs(X_block))

        return features

    def statistics(self, layer):
        """``(train, heldout)`` ridge statistics of ``layer``'s features (``heldout`` None without validation)."""
        return self._statistics(self._transform(layer), layer_width(layer))

    def statistics_of(self, layers):
        """``[(train, heldout), ...]``: the statistics of several layers from one pass over the source."""
        if len(layers) == 1:
            return [self.statistics(layers[0])]
        device, fraction = self.standardise.device, self.fraction if self.validated else 0.0
        pairs = [(RidgeStatistics(layer_width(layer), 1, device=device),
                  RidgeStatistics(layer_width(layer), 1, device=device) if self.validated else None)
                 for layer in layers]
        transforms = [self._transform(layer) for layer in layers]
        rank, world_size = world()
        for chunk in self.source.iter_chunks(rank=rank, world_size=world_size):
            y = self._target(chunk.y)
            for transform, (train, heldout) in zip(transforms, pairs):
                add_rows(transform, chunk.X, y, chunk.rows, train, heldout, validation_fraction=fraction, seed=self.seed)
        for pair in pairs:
            all_reduce_statistics(*pair)
        return pairs

    def _statistics(self, transform, width):
        device = self.standardise.device
        train = RidgeStatistics(width, 1, device=device)
        heldout = RidgeStatistics(width, 1, device=device) if self.validated else None
        accumulate(self.source, transform, train, heldout, target=self._target,
                   validation_fraction=self.fraction if self.validated else 0.0, seed=self.seed)
        return train, heldout

    def _head(self, statistics, dtype):
        alpha, coef, intercept, score, _ = _head_from_statistics(*statistics, self.alphas)
        return RidgeHead(alpha, coef.reshape(-1, 1).to(dtype),
                         torch.tensor([intercept], dtype=dtype, device=coef.device), float(score))

    @torch.no_grad()
    def fit(self, layer):
        """The ridge head of ``layer`` on every training row (a :class:`~rffkit._ridge.RidgeHead`)."""
        layer = broadcast_object(layer)
        return self._head(self.statistics(layer), layer.frequencies.dtype)

    @torch.no_grad()
    def fit_linear(self, layer):
        """The ridge head of the standardised inputs alone, on every training row, on ``layer``'s linear columns.

        The streamed counterpart of :meth:`rffkit._heads.RidgeHeads.fit_linear`.
        """
        layer = broadcast_object(layer)
        kept, scale = linear_inputs(layer)

        @torch.no_grad()
        def inputs(X_block):  # in float64, as in memory (RidgeHeads.fit_linear): float32 products let a small
            return self.standardise.inputs(X_block)[:, kept].double()  # penalty's weights drift (indicators)

        head = self._head(self._statistics(inputs, int(kept.shape[0])), layer.frequencies.dtype)
        return on_layer(layer, head, kept, scale)

    def around(self, alpha):
        """The same fitter (the held-out path scores every penalty from one pass)."""
        return self

    def validation_losses(self, head, layer):
        """The losses of ``head`` on every validation row, as :class:`HeldOutLosses` (None without validation).

        Nothing is streamed here: the refinement only ever compares two heads' losses row
        by row (``kept - new``), and the paired comparison of :class:`PairedLossGain` streams
        the validation rows once for both heads and all-reduces three sums, whatever the
        number of rows.
        """
        if not self.validated:
            return None
        head, layer = broadcast_object((head, layer))
        return HeldOutLosses(self, head, layer)

    @torch.no_grad()
    def paired_sums(self, minuend, subtrahend):
        """``(count, sum d, sum d^2)`` over every validation row of ``d = loss(minuend) - loss(subtrahend)``.

        ``minuend`` and ``subtrahend`` are ``(head, layer)`` pairs. Each rank streams its
        validation rows through both layers once and sums in float64; the three sums are
        all-reduced (24 bytes, independent of the number of rows).
        """
        rank, world_size = world()
        sums = torch.zeros(3, dtype=torch.float64)
        for chunk in self.source.iter_chunks(rank=rank, world_size=world_size):
            held = validation_mask(chunk.rows, self.fraction, self.seed)
            if not held.any():
                continue
            X = self.standardise.inputs(chunk.X[held])
            target = self._target(chunk.y[held])
            losses = []
            for head, layer in (minuend, subtrahend):
                y = torch.as_tensor(target, dtype=layer.frequencies.dtype, device=self.standardise.device)
                losses.append(head.sample_losses(layer(X), y).double().cpu())
            d = losses[0] - losses[1]
            sums += torch.stack([torch.tensor(float(d.shape[0]), dtype=torch.float64), d.sum(), (d * d).sum()])
        all_reduce_sum(sums)
        return tuple(float(value) for value in sums)

    install = staticmethod(RidgeHeads.install)


class HeldOutLosses:
    """The per-row validation losses of a head on a layer, left unevaluated.

    What :meth:`StreamedRidgeHeads.validation_losses` returns. The refinement moves
    (:func:`rffkit._refine._confirm`) and :func:`rffkit._heads.reduce_to_linear` use such
    losses only through the paired difference of two of them, ``kept - new``, its mean,
    standard deviation and length; subtracting two of these gives that difference as a
    :class:`PairedLossGain`, computed by one streamed pass over the validation rows. No
    rank holds or sends the rows' losses.
    """

    def __init__(self, heads, head, layer):
        self.heads, self.pair = heads, (head, layer)

    def __sub__(self, other):
        if not isinstance(other, HeldOutLosses) or other.heads is not self.heads:
            raise TypeError("HeldOutLosses: only the losses of another head on the same validation rows can be "
                            f"subtracted, not {type(other).__name__}.")
        return PairedLossGain(self, other)


class PairedLossGain:
    """``d = loss(a) - loss(b)`` on every validation row, known by its count, mean and standard deviation.

    Offers what the paired comparisons of the refinement use of a tensor of differences:
    :meth:`double`, :meth:`mean`, :meth:`std` (with Bessel's correction, as
    ``torch.Tensor.std``) and ``shape``. The sums ``sum d`` and ``sum d^2`` come from
    :meth:`StreamedRidgeHeads.paired_sums` on first use; the variance
    ``(sum d^2 - (sum d)^2 / n) / (n - 1)`` loses precision only when the spread of ``d``
    is below about 1e-8 of its mean, where the decision does not hang on it.
    """

    def __init__(self, minuend, subtrahend):
        self._operands, self._sums = (minuend, subtrahend), None

    def _moments(self):
        if self._sums is None:
            a, b = self._operands
            self._sums = a.heads.paired_sums(a.pair, b.pair)
        return self._sums

    def double(self):
        """Itself (the sums are float64 already)."""
        return self

    @property
    def shape(self):
        """``(n,)``: the number of validation rows."""
        return (int(self._moments()[0]),)

    def mean(self):
        """Mean of ``d`` (float; nan without rows)."""
        count, total, _ = self._moments()
        return total / count if count else math.nan

    def std(self):
        """Standard deviation of ``d`` with Bessel's correction (float; nan under two rows)."""
        count, total, squares = self._moments()
        if count < 2:
            return math.nan
        return math.sqrt(max(squares - total * total / count, 0.0) / (count - 1))


def _head_from_statistics(train, heldout, alphas):
    """``(alpha, coef, intercept, validation MSE or GCV, validation R^2 or None)`` of the best alpha.

    ``alphas`` are per-row penalties (those of :func:`rffkit._ridge.select_ridge_alpha`);
    the path works on sums, hence ``n_train * alpha``. Ties go to the largest alpha.
    """
    spectrum = train.spectrum()
    penalties = [train.count * alpha for alpha in alphas]
    r2 = None
    if heldout is not None:
        gram, cross, y_norm2 = heldout.centred_at(spectrum.feature_mean, spectrum.target_mean)
        scores = heldout_path(spectrum, penalties, gram, cross, y_norm2, heldout.count)[:, 0].tolist()
        del gram
        spread = float(heldout.centred()[2][0])
    else:
        scores = gcv_path(spectrum, penalties).mean(dim=1).tolist()
    best = best_penalty(scores, alphas)
    coef = path_coefficients(spectrum, penalties[best])[:, 0]
    intercept = float(spectrum.target_mean[0] - spectrum.feature_mean @ coef.cpu().numpy())
    if heldout is not None and spread > 0:
        r2 = 1.0 - scores[best] * heldout.count / spread
    return alphas[best], coef, intercept, scores[best], r2


def _refit_from_statistics(train, heldout, alpha):
    """``(coef, intercept)`` of the ridge head at per-row penalty ``alpha`` on the training and held-out rows together.

    The held-out rows chose ``alpha``; the head then learns from every row, as
    :class:`~rffkit.RFFRidge`'s streamed fit does. ``train`` receives ``heldout``'s rows.
    """
    merged = train.merge(heldout)
    coef, intercept = merged.solve(merged.count * alpha)
    return coef[:, 0], float(intercept[0])
