"""Ridge heads of an RFFNet layer fitted on every row of a streamed source.

:class:`StreamedRidgeHeads` has the interface of :class:`rffkit._heads.RidgeHeads`, so the
refinement moves of :func:`rffkit._refine.refine_layer` and the linear-only comparison of
:func:`rffkit._heads.reduce_to_linear` are confirmed on every row of the data instead of an
in-memory sample (:mod:`rffkit._rffnet_stream`). A head is one pass over the source: the
training and validation rows' :class:`~rffkit._sufficient.RidgeStatistics`, summed over the
ranks, give the validation error of every penalty in closed form
(:func:`_head_from_statistics`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._heads import RidgeHeads, linear_inputs, on_layer
from ._ridge import RidgeHead
from ._ridge_path import gcv_path, heldout_path, path_coefficients
from ._streaming import numeric_target, validation_mask
from ._sufficient import RidgeStatistics, accumulate
from ._validation import as_tensor
from .distributed import all_gather_object, broadcast_object, world

__all__ = ["StreamedRidgeHeads", "layer_width"]


def layer_width(layer):
    """Output columns of ``layer`` (``n_components``, plus the linear columns where it has them)."""
    return int(getattr(layer, "width", layer.n_components))


class _Standardiser:
    """``(X - mean) / scale`` as float32 tensors on ``device``, and the standardised target."""

    def __init__(self, x_mean, x_scale, y_mean, y_scale, device):
        self.x_mean, self.x_scale, self.y_mean, self.y_scale = x_mean, x_scale, y_mean, y_scale
        self.device = device

    def inputs(self, X):
        return as_tensor((np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale, dtype=torch.float32,
                         device=self.device)

    def target(self, y):
        return (y - self.y_mean) / self.y_scale


class StreamedRidgeHeads:
    """Ridge heads of a layer on every row of a source: the interface of :class:`rffkit._heads.RidgeHeads`.

    :meth:`fit` streams the source through the layer once (every rank its share, the
    statistics all-reduced) and chooses the penalty by the closed-form held-out path of
    the validation rows (GCV without them); :meth:`validation_losses` streams the
    validation rows once more for their squared errors, in row order, gathered from every
    rank. The refinement moves of :func:`rffkit._refine.refine_layer` are then confirmed on
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
        def inputs(X_block):
            return self.standardise.inputs(X_block)[:, kept]

        head = self._head(self._statistics(inputs, int(kept.shape[0])), layer.frequencies.dtype)
        return on_layer(layer, head, kept, scale)

    def around(self, alpha):
        """The same fitter (the held-out path scores every penalty from one pass)."""
        return self

    @torch.no_grad()
    def validation_losses(self, head, layer):
        """Squared errors of ``head`` on every validation row, in row order (float64; None without)."""
        if not self.validated:
            return None
        head, layer = broadcast_object((head, layer))
        rank, world_size = world()
        rows, losses = [], []
        for chunk in self.source.iter_chunks(rank=rank, world_size=world_size):
            held = validation_mask(chunk.rows, self.fraction, self.seed)
            if not held.any():
                continue
            y = torch.as_tensor(self._target(chunk.y[held]), dtype=layer.frequencies.dtype,
                                device=self.standardise.device)
            Z = layer(self.standardise.inputs(chunk.X[held]))
            rows.append(chunk.rows[held])
            losses.append(head.sample_losses(Z, y).double().cpu().numpy())
        parts = [(np.concatenate(r), np.concatenate(v)) for r, v in all_gather_object((rows, losses)) if r]
        every_row, every_loss = np.concatenate([r for r, _ in parts]), np.concatenate([v for _, v in parts])
        return torch.as_tensor(every_loss[np.argsort(every_row, kind="stable")], device=self.standardise.device)

    install = staticmethod(RidgeHeads.install)


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
    finite = [k for k in range(len(alphas)) if math.isfinite(scores[k])]
    best = min(finite, key=lambda k: (scores[k], -alphas[k])) if finite else int(np.argmax(alphas))
    coef = path_coefficients(spectrum, penalties[best])[:, 0]
    intercept = float(spectrum.target_mean[0] - spectrum.feature_mean @ coef.cpu().numpy())
    if heldout is not None and spread > 0:
        r2 = 1.0 - scores[best] * heldout.count / spread
    return alphas[best], coef, intercept, scores[best], r2
