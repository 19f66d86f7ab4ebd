"""Moves on RFFNet's layer that the gradient search cannot make.

After the relevance search (:mod:`rffkit._search`), :func:`refine_layer` tries, in
turn:

* **a linear term** -- the layer's ``lambda o x`` columns appended (an ARD linear
  kernel beside the ARD kernel), for trends a stationary kernel cannot extrapolate.
  It is kept if it lowers the validation error at all: its gain and its harm on a
  heavy-tailed table lie in a few extreme rows, whose paired differences make any
  standard-error margin wide. Kept unless worse by two standard errors, it
  extrapolated to the test outliers of Ames (split 0: test R^2 0.84, 0.90 without);
  kept only when better by two, it was dropped on flights, where arrival delay is
  linear in a heavy-tailed departure delay (split 0: 0.79, 0.84 with it);
* **group rescaling** -- a gradient search from small relevances can stop on a
  plateau where the kernel is too smooth to resolve a fast-varying component, which
  it then treats as noise; no local move sees past it, and moving one feature alone
  does not help when features act together. So each set of
  :func:`relevance_groups` is set to a multiple of its largest relevance, and so is
  each set formed once the relevances under a fraction of the largest are set to
  zero (irrelevant features the search left above the group floor hide the weaker
  relevant ones from the groups, and their phase noise can cancel the gain);
* **aligned frequencies** -- the layer's iid spectral draws are mostly wasted on a
  function that varies along few directions; a larger pool is drawn from the same
  density and the frequencies whose ``(cos, sin)`` pair covaries most with the target
  (:func:`target_spectrum`) are kept: the random-feature form of kernel-alignment
  learning (Cristianini et al., 2002; Sinha & Duchi, 2016);
* **pruning** -- the relevances under a fraction of the largest are set to zero,
  which removes the phase noise the small relevances of irrelevant features add.

Rescaling, alignment and pruning are screened on a subsample (``screen_rows`` rows;
a move with more than ``prescreen_keep`` candidates first looks at all of them on
``score_rows`` rows and screens only that many of the best on all) by a ridge fit at
the search's penalty on all ``D`` features of the layer (with
``settings.screen_subsample_features``, on its first ``floor(sqrt(m) log m)`` for ``m``
rows, Li et al., 2018: :func:`rffkit._search.screening_n_components`; cheaper, as a
screening fit costs ``m D^2 + D^3 / 3``, but biased to smoother candidates), its
``D x D`` system factorised in the features' precision (float32 unless the fit runs in
float64: a screening score only ranks the candidates). The best
rescaled or aligned layer is confirmed once, a pruned one only if it screens better
than the layer; every confirmation refits the head on
all training rows (a ridge head walks its penalty from the search head's) and, with
a validation split, must lower the validation squared error by more than two
standard errors of the paired per-sample differences (a small split must not pick a
model by luck); without one, the GCV score by a relative margin. The head is
that of :mod:`rffkit._heads`: ridge (squared error) by default, or the classifier's
logistic head (log-loss), while the screening always fits ridge on ``y``. Candidate
layers are new objects: nothing is changed in place.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

from ._dense import cos, matmul, sin
from ._heads import RidgeHeads, linear_inputs, linear_only, paired_gain, with_linear
from ._ridge import fit_ridge_head
from ._search import screening_n_components
from ._settings import DEFAULT_SETTINGS
from ._validation import SEED_BOUND

__all__ = ["relevance_groups", "target_spectrum", "refine_layer"]

#: Each move's screening scores and confirmations, at DEBUG (``logging.getLogger("rffkit.refine").setLevel``).
logger = logging.getLogger("rffkit.refine")


class _Numbers:
    """A vector (tensor or sequence) written ``[a b c]`` to a few digits, only if a record is emitted."""

    def __init__(self, values, digits=3):
        self.values, self.digits = values, digits

    def __str__(self):
        values = self.values.detach().cpu().tolist() if torch.is_tensor(self.values) else self.values
        return "[" + " ".join(f"{value:.{self.digits}g}" for value in values) + "]"


def relevance_groups(relevances, *, gap=1.5, floor=0.1, max_groups=6):
    """Sets of relevant features to rescale together, as lists of indices.

    The features whose ``|relevance|`` is at least ``floor`` times the largest count
    as relevant. Two kinds of set are returned, without repeats and at most
    ``max_groups`` of them: runs of similar magnitude (the sorted magnitudes cut
    wherever one is more than ``gap`` times the next), because features that act
    together end a gradient search with similar relevances; and the weakest ``k``
    relevant features for ``k >= 2``, because partners can also end apart, and the
    features the search left smoothest are the ones a too-smooth plateau holds back.
    """
    magnitude = np.abs(np.asarray(relevances, dtype=np.float64))
    top = magnitude.max(initial=0.0)
    if not top > 0:
        return []
    order = [int(i) for i in np.argsort(-magnitude, kind="stable") if magnitude[i] >= floor * top]
    runs, current = [], [order[0]]
    for previous, index in zip(order[:-1], order[1:]):
        if magnitude[previous] > gap * magnitude[index]:
            runs.append(current)
            current = []
        current.append(index)
    runs.append(current)
    weakest = [order[-k:] for k in range(2, len(order))]
    groups = []
    for group in runs + weakest:
        if sorted(group) not in [sorted(g) for g in groups]:
            groups.append(group)
    return groups[:max_groups]


@torch.no_grad()
def target_spectrum(X, y, frequencies, *, block_bytes=2**26):
    """Empirical Fourier transform of the centred target at each frequency.

    For every column ``w`` of ``frequencies`` returns ``(C, S)`` with
    ``C = sum_i (y_i - ybar) cos(w^T x_i) / n`` and ``S`` the same with ``sin``, so
    ``C^2 + S^2 = |sum_i (y_i - ybar) exp(i w^T x_i)|^2 / n^2`` is the squared
    covariance of the pair ``(cos, sin)`` with ``y``: the alignment of the
    random-feature kernel ``cos(w^T (x - x'))`` with the target (Cristianini et al.,
    2002). ``y`` has shape (n, k); ``C`` and ``S`` have shape (n_frequencies, k).
    The ``n x k`` projections are formed ``k`` columns at a time, at most ``block_bytes``
    each (two such blocks are held at once).
    """
    n = X.shape[0]
    yc = (y - y.mean(dim=0)) / n
    columns = max(1, block_bytes // (n * X.element_size()))
    cos_sums, sin_sums = [], []
    # the two blocks are views of one buffer: a fresh n x k pair per block cost its page faults
    buffer = torch.empty(2 * n * min(columns, frequencies.shape[1]), dtype=X.dtype, device=X.device)
    for block in frequencies.split(columns, dim=1):
        size = n * block.shape[1]
        projection = matmul(X, block, out=buffer[:size].view(n, block.shape[1]))
        sines = sin(projection, out=buffer[size : 2 * size].view(n, block.shape[1]))
        sin_sums.append(matmul(sines.T, yc))
        cos_sums.append(matmul(cos(projection, out=projection).T, yc))
    return torch.cat(cos_sums), torch.cat(sin_sums)


def _pruned(relevances, fraction):
    """``relevances`` with those under ``fraction`` of the largest magnitude set to zero."""
    magnitude = relevances.abs()
    return torch.where(magnitude < fraction * magnitude.max(), 0.0, relevances)


def _rescaled_layers(layer, settings):
    """Layers with one group of :func:`relevance_groups` set to a multiple of its largest relevance.

    With ``settings.rescale_prune_fraction`` the groups are also formed on the
    relevances with those under that fraction of the largest set to zero, and the
    candidates keep them at zero: a group that only stands out once the irrelevant
    features are gone, and that only helps without their phase noise, is tried too
    (a set already rescaled on the relevances as they are is not tried again).
    """
    start = layer.relevances.detach()
    starts = [start]
    fraction = settings.rescale_prune_fraction
    if fraction is not None:
        pruned = _pruned(start, fraction)
        if not torch.equal(pruned, start):
            starts.append(pruned)
    tried = []
    for relevances in starts:
        groups = relevance_groups(
            relevances.cpu().numpy(), gap=settings.group_gap, floor=settings.group_floor,
            max_groups=settings.max_groups,
        )
        for group in groups:
            if sorted(group) in tried:  # rescaled already, with the small relevances as they were
                continue
            tried.append(sorted(group))
            for factor in settings.rescale_factors:
                candidate = relevances.clone()
                candidate[group] = factor * relevances[group].abs().max()
                yield layer.replace(relevances=candidate)


def _aligned_layers(layer, X, y, sample_frequencies, generator, settings):
    """Layers whose frequencies are the best aligned of a larger draw, one per scale."""
    n_features, kept = layer.frequencies.shape
    affordable = int(settings.align_flop_budget / (2.0 * X.shape[0] * n_features * kept))
    size = max(4, min(settings.align_pool, affordable)) * kept
    rng = np.random.default_rng(int(torch.randint(SEED_BOUND, (1,), generator=generator)))
    dtype, device = layer.frequencies.dtype, layer.frequencies.device
    draw = torch.as_tensor(sample_frequencies(rng, n_features, size), dtype=dtype, device=device)
    if layer.variant == "cos":
        phases = torch.as_tensor(rng.uniform(0.0, 2.0 * np.pi, size), dtype=dtype, device=device)
    else:
        phases = torch.zeros(size, dtype=dtype, device=device)
    start, inputs = layer.relevances.detach(), layer.kernel_inputs(X)
    for scale in settings.align_scales:
        relevances = scale * start
        cos_sums, sin_sums = target_spectrum(inputs * relevances, y, draw)
        if layer.variant == "cos":  # cos(w x + b) = cos b cos(w x) - sin b sin(w x)
            score = ((phases.cos()[:, None] * cos_sums - phases.sin()[:, None] * sin_sums) ** 2).sum(dim=1)
        else:
            score = (cos_sums**2 + sin_sums**2).sum(dim=1)
        top = torch.topk(score, kept).indices
        yield layer.replace(frequencies=draw[:, top].contiguous(), offsets=phases[top].contiguous(),
                            relevances=relevances)


def _confirm(layer, heads, kept_head, kept_loss, settings, z=2.0):
    """The head of ``layer`` on all training rows and whether it beats the kept one: ``(head, accepted, loss)``.

    With a validation split (``kept_loss`` not None) the per-sample validation loss
    must fall by more than ``z`` standard errors of the paired differences from
    ``kept_loss``; without one, the head's score by ``settings.margin``. ``loss`` is
    the new per-sample validation loss.
    """
    head = heads.fit(layer)
    if kept_loss is None:
        return head, bool(head.score < kept_head.score * (1.0 - settings.margin)), None
    loss = heads.validation_losses(head, layer)
    mean, threshold, n_rows = paired_gain(kept_loss, loss, z)
    accepted = mean > threshold
    logger.debug("confirmation: validation loss gain %.4g (threshold %.4g, %d rows): %s; relevances %s",
                 mean, threshold, n_rows, "kept" if accepted else "rejected", _Numbers(layer.relevances))
    return head, accepted, loss


#: Validation rows under which the linear-only model's lead is not trusted to skip the moves.
_SKIP_MIN_ROWS = 50


def _linear_is_better(layer, heads, loss, z):
    """Whether the linear-only model on ``layer``'s inputs validates better than the model whose
    per-sample validation losses are ``loss`` by more than ``z`` standard errors, on at least
    :data:`_SKIP_MIN_ROWS` rows (False without a validation split, or with ``z`` None)."""
    if z is None or loss is None:
        return False
    if len(linear_inputs(with_linear(layer))[0]) == 0:  # every relevance is zero: no linear model to compare
        return False
    _, _, linear_loss = linear_only(heads, layer)
    gain, threshold, n_rows = paired_gain(loss, linear_loss, z)
    skip = gain > threshold and n_rows >= _SKIP_MIN_ROWS
    logger.debug("linear-only model: validation loss gain %.4g over the model (threshold %.4g, %d rows)%s",
                 gain, threshold, n_rows, ": the other moves are skipped" if skip else "")
    return skip


def _prune(layer, heads, head, loss, settings, screen=None, baseline=None):
    """The pruning move: ``(layer, head)`` of the best confirmed pruning, or the given ones.

    With ``screen`` a candidate is confirmed only if its screening score is below
    that of ``layer`` (``baseline``, when already known).
    """
    relevances = layer.relevances.detach()
    best, tried = (layer, head), []
    if screen is not None and baseline is None:
        baseline = screen(layer)
    for fraction in settings.prune_fractions:
        candidate = _pruned(relevances, fraction)
        if torch.equal(candidate, relevances) or any(torch.equal(candidate, seen) for seen in tried):
            continue
        tried.append(candidate)
        pruned = layer.replace(relevances=candidate)
        if screen is not None and not screen(pruned) < baseline:
            continue
        new_head, accepted, _ = _confirm(pruned, heads, head, loss, settings)
        if accepted and (best[0] is layer or new_head.score < best[1].score):
            best = (pruned, new_head)
    return best


@torch.no_grad()
def refine_layer(
    layer, X, y, X_val, y_val, head, *, search_alpha, generator, head_alpha="auto", heads=None, linear_term=False,
    rescale_groups=True, sample_frequencies=None, prune=False, settings=DEFAULT_SETTINGS, progress=None,
    linear_heads=None,
):
    """The refinement moves of the module docstring; returns the kept ``(layer, head)``.

    Parameters
    ----------
    layer : ARDRandomFourierFeatures
        The layer after the search; never changed.
    X, y, X_val, y_val : Tensor
        Training and validation data (``X_val`` may be None: then the alignment move,
        whose selection has seen the training target, is skipped).
    head : RidgeHead or LogisticHead
        The head of ``layer`` on all training rows (as ``heads`` fits it).
    search_alpha : float
        Penalty of the screening fits (ridge fits on ``y``).
    generator : torch.Generator
        Draws the screening rows and seeds the candidate frequencies.
    head_alpha : float or 'auto', default='auto'
        Penalty of the confirming ridge head (chosen from ``settings.alpha_grid`` for
        'auto') when ``heads`` is None.
    heads : RidgeHeads, LogisticHeads or None, default=None
        Fits the confirming heads and gives their per-sample validation losses
        (:mod:`rffkit._heads`); None: ridge heads on ``(X, y)`` at ``head_alpha``.
    linear_term : bool, default=False
        First try the layer with its ``lambda o x`` columns, kept if the confirming
        head lowers the validation error at all (:func:`_confirm` at ``z=0``).
    rescale_groups : bool, default=True
    sample_frequencies : callable or None, default=None
        ``sample_frequencies(rng, n_features, n)``, the kernel's spectral sampler; None
        skips the aligned frequencies.
    prune : bool, default=False
        Try the pruning move last.
    settings : RFFNetSettings
        Factors, scales, pool, screening rows, margin and pruning fractions.
    progress : callable or None
        ``progress(move)`` before each move, with the move's name.
    linear_heads : head fitter or None
        What fits the linear-only model the moves are skipped for (``settings.skip_moves_z``),
        its penalty chosen on its own grid; None: ``heads``, whose grid is the kernel head's
        neighbourhood.

    Returns
    -------
    layer : ARDRandomFourierFeatures
        ``layer`` itself or the confirmed candidate.
    head : RidgeHead or LogisticHead
        Its head.
    """
    if heads is None:
        heads = RidgeHeads(X, y, X_val, y_val, alpha=head_alpha, alphas=settings.alpha_grid)
    report = progress or (lambda move: None)
    n_train = X.shape[0]
    take = min(max(settings.screen_rows, settings.score_rows), n_train)
    rows = torch.randperm(n_train, generator=generator)[:take].to(X.device)
    X_screen, y_screen = X[rows[: settings.screen_rows]], y[rows[: settings.screen_rows]]
    align = sample_frequencies is not None and X_val is not None

    def screen(candidate, n_rows=None):
        X_rows, y_rows = X_screen[:n_rows], y_screen[:n_rows]
        k = None
        if settings.screen_subsample_features:
            k = min(candidate.n_components, screening_n_components(X_rows.shape[0], settings))
        Z, Z_val = candidate(X_rows, k), None if X_val is None else candidate(X_val, k)
        # the system is solved in the features' precision: a screening score only ranks candidates
        return fit_ridge_head(Z, y_rows, Z_val, y_val, search_alpha, settings.alpha_grid, overwrite_z=True,
                              solve_dtype=Z.dtype).score

    loss = heads.validation_losses(head, layer)
    if linear_term and not layer.has_linear:
        report("linear term")
        candidate = layer.replace(linear=True)
        new_head, accepted, new_loss = _confirm(candidate, heads, head, loss, settings, z=0.0)
        if accepted:
            layer, head, loss = candidate, new_head, new_loss
    if linear_term and _linear_is_better(layer, linear_heads or heads, loss, settings.skip_moves_z):
        return layer, head
    best, best_score = layer, screen(layer) if (rescale_groups or align) else math.inf
    layer_score = best_score if math.isfinite(best_score) else None  # the screening score of `layer`
    logger.debug("refinement of %s: screening score %.5g", _Numbers(layer.relevances), best_score)

    def consider(candidates):
        nonlocal best, best_score
        candidates = list(candidates)  # all drawn from the best layer before this move
        keep = settings.prescreen_keep
        if keep is not None and len(candidates) > keep and X_screen.shape[0] > 2 * settings.score_rows:
            # a first look on fewer rows; only the most promising are screened on all of them
            first = [screen(candidate, settings.score_rows) for candidate in candidates]
            chosen = sorted(np.argsort(first, kind="stable")[:keep])
            logger.debug("prescreen on %d rows: candidates %s of %d kept (scores %s)", settings.score_rows,
                         _Numbers(chosen), len(candidates), _Numbers(first, digits=4))
            candidates = [candidates[k] for k in chosen]
        for candidate in candidates:
            value = screen(candidate)
            if value < best_score * (1.0 - settings.margin):
                logger.debug("screening: %.5g beats %.5g; relevances %s", value, best_score,
                             _Numbers(candidate.relevances))
                best, best_score = candidate, value

    if rescale_groups:
        report("group rescaling")
        consider(_rescaled_layers(best, settings))
    if align:
        report("frequency alignment")
        scored = rows[: settings.score_rows]
        consider(_aligned_layers(best, X[scored], y[scored], sample_frequencies, generator, settings))
    if best is not layer:
        report("confirmation")
        new_head, accepted, new_loss = _confirm(best, heads, head, loss, settings)
        if accepted:
            layer, head, loss, layer_score = best, new_head, new_loss, best_score
    if prune:
        report("pruning")
        layer, head = _prune(layer, heads, head, loss, settings, screen, layer_score)
    return layer, head
