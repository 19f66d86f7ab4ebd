"""Quantile maps of heavy-tailed inputs for the kernel of an RFFNet layer.

A standardised input with excess kurtosis in the hundreds (a count of votes, a lot
area) has most of its rows within a hundredth of a standard deviation and a few far
out: a stationary kernel with one length scale per input cannot resolve the bulk
without treating the tail as noise, where a tree ensemble's quantile bins do not care.
:func:`quantile_warp` maps such an input to normal scores through its training
quantiles (the rank-based inverse normal transform; Beasley, Erickson & Allison, 2009,
review it), and every other input to itself, clamped to the training range. The map is
monotone and piecewise linear between the knots, so it is stored with the layer
(:meth:`rffkit.layers.ARDRandomFourierFeatures.set_input_warp`) and applied to new rows
at prediction (:func:`piecewise_linear`), and only the kernel's inputs pass through it: the linear columns of a layer
with ``linear`` keep the standardised input and its trend beyond the training range.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import ndtri

__all__ = ["heavy_tailed", "quantile_warp", "piecewise_linear"]


def heavy_tailed(X, *, min_kurtosis, min_distinct, max_tie=1.0):
    """Boolean mask of the columns of ``X`` with excess kurtosis above ``min_kurtosis`` and a spread of values.

    Columns with fewer than ``min_distinct`` distinct values (indicators, small counts,
    one-hot columns) are never heavy-tailed here: a quantile map would only relabel them.
    Nor are columns whose most frequent value holds more than ``max_tie`` of the rows (a
    pool area, zero in all but a few houses): their bulk is that one value, which a map
    cannot resolve further, while it would spread the few other rows over the upper
    normal scores.
    """
    X = np.asarray(X, dtype=np.float64)
    mask = np.zeros(X.shape[1], dtype=bool)
    if X.shape[0] < 4:
        return mask
    # the moment estimate m4 / m2^2 - 3 (scipy.stats.kurtosis(bias=True) without its
    # precision warning on a constant column, which counts as not heavy-tailed)
    centred = X - X.mean(axis=0)
    m2, m4 = (centred**2).mean(axis=0), (centred**4).mean(axis=0)
    with np.errstate(all="ignore"):
        excess = np.where(m2 > 0, m4 / (m2 * m2) - 3.0, 0.0)
    for j in np.flatnonzero(np.nan_to_num(excess, nan=0.0) > min_kurtosis):
        _, counts = np.unique(X[:, j], return_counts=True)
        mask[j] = counts.shape[0] >= min_distinct and counts.max() <= max_tie * X.shape[0]
    return mask


def quantile_warp(X, *, min_kurtosis, min_distinct, n_knots, max_tie=1.0, bounds=None):
    """``(knots, values)`` of the input maps for training inputs ``X``, or None when no column is heavy-tailed.

    A heavy-tailed column (:func:`heavy_tailed`) gets ``n_knots`` knots at evenly spaced
    quantile levels ``q`` of its training values, mapped to the normal scores
    ``Phi^-1(q)``, with ``q`` kept within ``[1 / (2 n), 1 - 1 / (2 n)]`` so that the
    extremes map to finite scores; tied knots (a value many rows share) are merged and
    take the mean of their scores. Every other column is the identity between its
    minimum and maximum. Rows of ``knots`` shorter than ``n_knots`` repeat their last
    knot (the map is flat there).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Standardised training inputs.
    min_kurtosis : float
        Excess kurtosis above which a column is mapped (3: twice a Laplace
        distribution's, a quarter of an exponential's square's).
    min_distinct : int
        Fewest distinct values of a mapped column.
    n_knots : int
        Knots of a mapped column (at most; fewer where values tie).
    max_tie : float, default=1.0
        Largest share of the rows the most frequent value of a mapped column may hold.
    bounds : (ndarray, ndarray), optional
        ``(minimum, maximum)`` of every column over all rows, when ``X`` is a sample of
        them (a streamed fit's): the range of the identity maps.

    Returns
    -------
    (ndarray, ndarray) of shape (n_features, n_knots), or None
    """
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    mapped = heavy_tailed(X, min_kurtosis=min_kurtosis, min_distinct=min_distinct, max_tie=max_tie)
    if not mapped.any():
        return None
    levels = np.linspace(0.0, 1.0, n_knots)
    scores = ndtri(np.clip(levels, 0.5 / n, 1.0 - 0.5 / n))
    knots, values = np.empty((p, n_knots)), np.empty((p, n_knots))
    for j in range(p):
        if mapped[j]:
            at = np.quantile(X[:, j], levels)
            unique, group = np.unique(at, return_inverse=True)
            mean_score = np.bincount(group, weights=scores) / np.bincount(group)
        else:
            unique = mean_score = (np.array([X[:, j].min(), X[:, j].max()]) if bounds is None else
                                   np.array([bounds[0][j], bounds[1][j]], dtype=np.float64))
        k = unique.shape[0]
        knots[j, :k], values[j, :k] = unique, mean_score
        knots[j, k:], values[j, k:] = unique[-1], mean_score[-1]
    return knots, values


def piecewise_linear(x, knots, values):
    """``x`` (n, p) through the maps of :meth:`~rffkit.layers.ARDRandomFourierFeatures.set_input_warp` (a tensor).

    The identity maps (``values == knots``) are clamps to the first and last knot; only
    the other columns are interpolated.
    """
    identity = (knots == values).all(dim=1)
    if bool(identity.any()):
        out = torch.clamp(x, knots[:, 0], knots[:, -1])
        mapped = torch.nonzero(~identity).flatten()
        if mapped.numel():
            out[:, mapped] = _interpolate(x[:, mapped], knots[mapped], values[mapped])
        return out
    return _interpolate(x, knots, values)


def _interpolate(x, knots, values):
    """``x`` (n, p) through the line segments joining ``(knots[j], values[j])``, flat beyond the ends."""
    last = knots.shape[1] - 1
    columns = x.T.contiguous()
    upper = torch.searchsorted(knots, columns, right=True).clamp_(1, last)
    lower = upper - 1
    x0, x1 = knots.gather(1, lower), knots.gather(1, upper)
    y0, y1 = values.gather(1, lower), values.gather(1, upper)
    step = x1 - x0
    t = torch.where(step > 0, (columns - x0) / torch.where(step > 0, step, 1.0), 0.0).clamp_(0.0, 1.0)
    return (y0 + t * (y1 - y0)).T
