"""The layer of a streamed RFFNet's head: the searched layer widened to the head's features.

A streamed fit (:mod:`rffkit._rffnet_stream`) searches its relevances on a sample with
``D_search`` features and fits its head on every row with ``D_head >= D_search``. The
plain widening, :func:`~rffkit._stream_widths.extended_layer`, appends the next
frequencies of the same random draw. With many rows the head's error is that of its
function class (the variance of a ridge fit of ``D_head`` weights on 10^5-10^6 rows is
small), so which ``D_head`` frequencies it holds, and at what scale, matters more than
for the search: the frequency-alignment move of :mod:`rffkit._refine` (Cristianini et
al., 2002; Sinha & Duchi, 2016), run again for all ``D_head`` frequencies, picks from a
larger draw those that covary most with the target, at the relevances times each of
``settings.align_scales`` (rougher kernels need the aligned frequencies to pay off: more
relevance without alignment raises the error).

:func:`head_layer_candidates` screens the plain widening and the aligned ones by ridge
fits with ``D_head`` features on the sample's training rows (the penalty walked from the
search head's, the features formed a block of rows at a time so that the sample's
``n x D_head`` matrices are never held), scored on its validation rows. The sample's ranking is not reliable for
every row: its heads have more variance than one on 10^6 rows, which favours smoother
kernels, and a single sample's best can be far off (SE1 at 10^6 in
``benchmarks/results/scale.md``). So the sample only proposes: the plain widening and the
sample's best aligned layer both go to the last pass, which fits the two heads on every row
at once and keeps the one with the lower error on every validation row
(:mod:`rffkit._rffnet_stream`); the plain widening wins ties.
"""

from __future__ import annotations

import math

import torch

from ._refine import _aligned_layers
from ._ridge import walk_ridge_alpha_by_blocks

__all__ = ["head_layer_candidates"]


@torch.no_grad()
def head_layer_candidates(layer, X, y, X_val, y_val, *, alpha, generator, sample_frequencies, settings):
    """``(layers, scores)``: ``layer`` (the plain widening) and the sample's best aligned widening.

    Parameters
    ----------
    layer : ARDRandomFourierFeatures
        The searched layer widened to the head's features (its frequencies and relevances
        are the candidates' starting point).
    X, y, X_val, y_val : Tensor
        The sample's standardised training and validation rows and targets, shape (n, 1).
    alpha : float
        The search head's penalty: each candidate's ridge penalty is walked from it along
        ``settings.alpha_grid`` (:func:`~rffkit._ridge.walk_ridge_alpha_by_blocks`, a few
        Cholesky solves instead of an eigendecomposition of ``D_head x D_head``).
    generator : torch.Generator
        Seeds the larger draws of the alignment.
    sample_frequencies : callable
        The kernel's spectral sampler, ``sample_frequencies(rng, n_features, n)``.
    settings : RFFNetSettings
        ``align_scales``, ``align_pool``, ``align_flop_budget``, ``alpha_grid`` and ``margin``.

    Returns
    -------
    layers : list of ARDRandomFourierFeatures
        ``[layer, aligned]``: the aligned layer (at one of ``settings.align_scales``) of
        lowest validation error on the sample.
    scores : list of (str, float)
        Each candidate's name and validation mean squared error (the plain widening first).
    """
    candidates = [("plain", layer)]
    candidates += [(f"aligned x{scale:g}", aligned) for scale, aligned in
                   zip(settings.align_scales, _aligned_layers(layer, X, y, sample_frequencies, generator, settings))]
    scores = []
    for name, candidate in candidates:
        head = walk_ridge_alpha_by_blocks(candidate, X, y, X_val, y_val, settings.alpha_grid, alpha)
        scores.append((name, head.score if math.isfinite(head.score) else math.inf))
    if len(candidates) == 1:
        return [layer], scores
    best = min(range(1, len(candidates)), key=lambda k: scores[k][1])
    return [layer, candidates[best][1]], scores
