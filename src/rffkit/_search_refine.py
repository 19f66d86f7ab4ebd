"""RFFNet's 'varpro' layer before the model's last steps: the relevance search, then the refinement moves.

:func:`search_and_refine` runs the search of :mod:`rffkit._search` at one penalty and the
moves of :mod:`rffkit._refine` on its layer, judged by the estimator's output heads
(ridge or logistic, :mod:`rffkit._heads`). :func:`search_and_refine_retried` runs it
again at larger penalties on a training split of a few thousand rows and keeps the
lower validation loss: there a search at ten times the penalty can keep a weak pair of
interacting inputs visible that the refinement then resolves, where at the default
penalty it sinks among the irrelevant inputs; before the moves the two searched layers
score alike on validation, so the choice waits for them. In that range, when
``settings.polish_iterations`` asks for it (not by default), :func:`polish` then continues
the kept layer's search with all of its features. Above that range, with
``relevance_penalty='auto'``, :func:`sparsify` continues it with an l1 penalty that sets the
relevances of inputs the model does without to 0.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import torch

from ._adam import fixed_relevance_penalty
from ._heads import KernelGramMemo, RidgeHeads, paired_gain
from ._refine import _Numbers, refine_layer
from ._search import (
    SearchResult, default_n_components, polish_relevances, remembered, search_relevances, stage_evaluations,
)
from .kernels import KERNELS
from .layers import ARDRandomFourierFeatures

__all__ = ["Refined", "sparsity_penalty", "search_and_refine", "search_and_refine_retried", "polish", "sparsify"]

logger = logging.getLogger("rffkit.refine")


class Refined(NamedTuple):
    """One run of the relevance search and the refinement moves."""

    found: SearchResult
    layer: ARDRandomFourierFeatures
    head: object
    #: The heads that judged the moves (near the searched layer's penalty).
    judge: object
    #: The same heads over the whole penalty grid.
    full_path: object
    #: Ridge heads on the least-squares target.
    surrogate: RidgeHeads

    @property
    def validation_loss(self):
        """The kept model's mean per-sample validation loss, as its judge measures it."""
        return float(self.judge.validation_losses(self.head, self.layer).mean())


def _search_progress(progress):
    def report(search, m, s, gcv, score):
        progress.stage(f"search {search}, {m} rows, {s} features")
        progress.step(f"search {search}, stage m={m} s={s}: GCV {gcv:.5f}, validation MSE {score:.5f} "
                      f"({progress.elapsed:.1f} s)", gcv=f"{gcv:.4g}", validation=f"{score:.4g}")

    return report


def _rows_stood_for(p):
    """The training rows the fit stands for: ``p.n_train_rows`` for a streamed fit's sample, else ``X_train``'s."""
    return p.n_train_rows or p.X_train.shape[0]


def sparsity_penalty(estimator, p, y_train):
    """The l1 penalty on the relevances of :func:`sparsify`: 0 unless ``relevance_penalty='auto'``.

    'auto': on more than ``settings.sparse_rows`` training rows the fit stands for
    (``p.n_train_rows``: a streamed fit's sample stands for more), ``settings.sparse_penalty``
    times the mean variance of the columns of the least-squares target ``y_train`` (1 for the
    regressor's standardised target, ``p (1 - p)`` for a class indicator), so that it weighs
    the same against a GCV score in either units; on fewer, 0.
    """
    settings = estimator._settings
    if not isinstance(estimator.relevance_penalty, str) or _rows_stood_for(p) <= settings.sparse_rows:
        return 0.0
    return settings.sparse_penalty * float(y_train.double().var(dim=0, unbiased=False).mean())


def search_and_refine(estimator, p, layer, y_train, y_val, alpha, auto_alpha, progress, memo=None):
    """The relevance search of ``layer`` at ``alpha``, then the refinement moves: a :class:`Refined`.

    ``p`` is the fit's :class:`~rffkit._rffnet_base._Problem`, ``y_train`` and ``y_val``
    the least-squares targets the search fits; ``layer`` is the starting layer, which the
    search leaves holding its relevances. ``memo`` (a dict shared by the runs of one fit) lets
    a run whose search ends where an earlier run's did, with the generator in the same state,
    take that run's moves instead of repeating them (:func:`rffkit._search.remembered`).
    """
    settings = estimator._settings
    # the searched layer's Gram matrix, for the linear-term move's ridge head
    grams = KernelGramMemo() if estimator.linear_term else None
    found = search_relevances(
        layer, p.X_train, y_train, p.X_val, y_val, alpha=alpha, auto_alpha=auto_alpha,
        max_iter=estimator.max_iter, n_iter_no_change=estimator.n_iter_no_change, tol=estimator.tol,
        generator=p.generator, relevance_penalty=fixed_relevance_penalty(estimator.relevance_penalty),
        settings=settings, progress=_search_progress(progress), grams=grams, memo=memo,
    )
    searched = (found.alpha, found.head.alpha, found.relevances)
    return remembered(memo, searched, p.generator, lambda: _refined(estimator, p, layer, found, grams, y_train, y_val,
                                                                      auto_alpha, progress))


def _refined(estimator, p, layer, found, grams, y_train, y_val, auto_alpha, progress):
    """The refinement moves of :func:`search_and_refine` on ``layer``, searched as ``found`` says."""
    settings = estimator._settings
    surrogate = RidgeHeads(p.X_train, y_train, p.X_val, y_val, alpha="auto" if auto_alpha else found.alpha,
                           alphas=settings.alpha_grid, grams=grams)
    # the output heads judge the moves when a validation split can score them
    judge = p.heads or (estimator._output_heads(p, auto_alpha, found.head.alpha) if p.X_val is not None else None)
    judge = judge or surrogate
    if grams is not None and judge is not surrogate:
        grams.clear()
    searched, head = layer, found.head if judge is surrogate else judge.fit(layer)
    # a costly (logistic) path confirms the moves at the penalty chosen for the searched
    # layer, and chooses it again, near there, once for the layer they keep
    full_path = judge
    judge = _confirming(judge, head.alpha)
    moves = (estimator.linear_term, estimator.rescale_groups, estimator.align_frequencies, estimator.prune_relevances)
    if any(moves):
        aligner = KERNELS[estimator.kernel].sample_frequencies if estimator.align_frequencies else None
        layer, head = refine_layer(
            searched, p.X_train, y_train, p.X_val, y_val, head, heads=judge,
            search_alpha=found.alpha, generator=p.generator, linear_term=estimator.linear_term,
            rescale_groups=estimator.rescale_groups, sample_frequencies=aligner,
            prune=estimator.prune_relevances, settings=settings,
            progress=lambda move: progress.stage(f"refinement: {move}"), linear_heads=full_path,
        )
        if full_path.costly and layer is not searched:
            head = full_path.around(head.alpha).fit(layer)
    if grams is not None:
        grams.clear()
    return Refined(found, layer, head, judge, full_path, surrogate)


def _confirming(heads, alpha):
    """``heads`` near ``alpha`` for confirming a changed layer: a costly (logistic) path at ``alpha`` alone."""
    return heads.around(alpha, factor=1.0) if heads.costly else heads.around(alpha)


def search_and_refine_retried(estimator, p, y_train, y_val, alpha, auto_alpha, progress):
    """:func:`search_and_refine` of ``p.layer`` at ``alpha`` and, where it applies, again at larger penalties.

    With ``alpha='auto'``, a validation split, no streamed heads, more than
    ``settings.first_stage_rows`` training rows and at most ``settings.refined_retry_rows``
    rows the fit stands for (``p.n_train_rows``: a streamed fit's sample stands for more),
    the run is repeated at ``alpha`` times each of ``settings.refined_retry_factors``,
    from the same start and the same generator draws, and the lowest validation loss
    wins (the first run on ties). The generator is left as after the kept run, so a
    kept first run is the fit without retries, to the bit. Without retries the kept run
    goes through :func:`sparsify`.
    """
    settings = estimator._settings
    retry = (auto_alpha and p.X_val is not None and p.heads is None
             and p.X_train.shape[0] > settings.first_stage_rows
             and _rows_stood_for(p) <= settings.refined_retry_rows)
    start = p.layer.replace(relevances=p.layer.relevances.detach().clone()) if retry else None
    draws, memo = p.generator.get_state(), {}
    kept = search_and_refine(estimator, p, p.layer, y_train, y_val, alpha, auto_alpha, progress, memo)
    if not retry:
        return sparsify(estimator, p, kept, y_train, progress)
    kept_loss, after = kept.validation_loss, p.generator.get_state()
    for factor in settings.refined_retry_factors:
        p.generator.set_state(draws)  # the same screening rows and candidate frequencies
        layer = start.replace(relevances=start.relevances.detach().clone())
        other = search_and_refine(estimator, p, layer, y_train, y_val, factor * alpha, auto_alpha, progress, memo)
        loss = other.validation_loss
        if loss < kept_loss:
            kept, kept_loss, after = other, loss, p.generator.get_state()
    p.generator.set_state(after)
    if settings.polish_iterations > 0:
        kept = polish(estimator, p, kept, y_train, progress)
    return kept


def polish(estimator, p, kept, y_train, progress):
    """``kept`` with its layer's relevances polished by :func:`rffkit._search.polish_relevances`, or as it is.

    The last stage runs at the kept search's penalty on the least-squares target of all
    training rows, within ``settings.polish_flop_budget`` (none when that affords fewer
    than ``settings.min_stage_evaluations`` evaluations); the head is chosen again near the
    kept head's penalty. The polished model replaces the kept one unless its per-sample
    validation loss is higher by more than ``settings.polish_z`` standard errors of the
    paired differences: the polish's GCV score is taken on all training rows, the
    validation split holds a tenth of them.
    """
    settings = estimator._settings
    evaluations = stage_evaluations(p.X_train.shape[0], kept.layer.n_components, settings.polish_flop_budget)
    if evaluations < settings.min_stage_evaluations:
        return kept
    layer = kept.layer.replace(relevances=kept.layer.relevances.detach().clone())
    progress.stage(f"polish, {layer.n_components} features")
    polish_relevances(layer, p.X_train, y_train, alpha=kept.found.alpha, max_iter=settings.polish_iterations,
                      max_evaluations=evaluations, tol=settings.polish_tol, n_iter_no_change=settings.polish_patience,
                      relevance_penalty=fixed_relevance_penalty(estimator.relevance_penalty))
    return _unless_worse(kept, layer, kept.full_path.around(kept.head.alpha), settings.polish_z,
                         f"polish at search penalty {kept.found.alpha:g}")


def sparsify(estimator, p, kept, y_train, progress):
    """``kept`` with the relevances of the inputs it does without set to 0, or as it is.

    The search leaves an input that does not matter near its start, as a GCV score flat in
    a relevance does not move it. With a :func:`sparsity_penalty`, one more search stage
    from the kept layer's relevances, after the refinement moves have resolved what they
    can (a penalty in the search itself zeroes weak relevant inputs before the group
    rescaling sees them), adds that penalty times ``sum(lambda)`` to the GCV score
    (L-BFGS-B on ``lambda >= 0``), on ``settings.screen_rows`` rows with the first
    ``floor(sqrt(m) log m)`` features, at the kept search's penalty, for at most
    ``settings.sparse_evaluations`` GCV evaluations (and within the estimator's
    ``max_iter``, ``tol`` and ``n_iter_no_change``). It runs where
    :func:`search_and_refine_retried` does not retry the search: with the default settings
    ``sparse_rows`` and ``refined_retry_rows`` are equal, and a fit in the retry range gets
    no sparse stage whatever ``sparse_rows`` says. The head is chosen again near the
    kept head's penalty (a logistic head keeps it, as in the moves' confirmations), and
    the sparser model replaces the kept one unless its per-sample validation loss is
    higher by more than ``settings.sparse_z`` standard errors of the paired differences.
    """
    settings = estimator._settings
    penalty = sparsity_penalty(estimator, p, y_train)
    if penalty == 0 or p.X_val is None:
        return kept
    n_rows = p.X_train.shape[0]
    m = min(n_rows, settings.screen_rows)
    s = min(kept.layer.n_components, default_n_components(m, settings))
    draws = p.generator.get_state()
    rows = torch.randperm(n_rows, generator=p.generator)[:m].to(p.X_train.device)
    layer = kept.layer.replace(relevances=kept.layer.relevances.detach().clone())
    progress.stage(f"sparse relevances, {s} features on {m} rows")
    polish_relevances(layer, p.X_train[rows], y_train[rows], alpha=kept.found.alpha, max_iter=estimator.max_iter,
                      max_evaluations=settings.sparse_evaluations, tol=estimator.tol,
                      n_iter_no_change=estimator.n_iter_no_change, relevance_penalty=penalty, n_components=s)
    sparse = _unless_worse(kept, layer, _confirming(kept.full_path, kept.head.alpha), settings.sparse_z,
                           f"sparse relevances at l1 penalty {penalty:g}")
    if sparse is kept:  # rejected: later draws (a streamed fit's head candidates) as without the stage
        p.generator.set_state(draws)
    return sparse


def _unless_worse(kept, layer, heads, z, what):
    """``kept`` with ``layer`` and its head from ``heads``, unless that model's per-sample validation
    loss is higher by more than ``z`` standard errors of the paired differences: then ``kept``."""
    head = heads.fit(layer)
    gain, threshold, _ = paired_gain(kept.judge.validation_losses(kept.head, kept.layer),
                                     heads.validation_losses(head, layer), z)
    accepted = math.isfinite(gain) and -gain <= threshold  # a loss, not a gain, must stay under the threshold
    logger.debug("%s: validation loss change %.4g (threshold %.4g): %s; head penalty %g -> %g, relevances %s -> %s",
                 what, -gain, threshold, "kept" if accepted else "rejected", kept.head.alpha, head.alpha,
                 _Numbers(kept.layer.relevances), _Numbers(layer.relevances))
    return kept._replace(layer=layer, head=head, judge=heads) if accepted else kept
