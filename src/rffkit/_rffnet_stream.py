"""RFFNetRegressor fitted from a streamed source, on one process or on every rank of a job.

A source (:class:`~rffkit.io.TableSource`, :class:`~rffkit.io.ArraySource`, or a
``numpy.memmap`` with its target) is read twice, each rank reading its share:

1. **Moments and a sample.** The column means and variances of ``X`` and of ``y``
   (:class:`~rffkit._streaming.RunningMoments`) standardise the inputs and the target, as
   the in-memory fit does with all its rows. Rows are held out for validation by a hash of
   their global row index (:func:`~rffkit._streaming.validation_mask`), and a uniform
   sample of the training rows and one of the validation rows are kept by the smallest
   keys of another hash (:class:`~rffkit._streaming.BottomKSample`). The ranks' moments and samples are
   gathered and merged in rank order, so the sample holds the same rows whatever the number
   of ranks.
2. **Relevances on the sample, moves judged on every row.** Every rank runs the
   in-memory 'varpro' fit of :meth:`~rffkit._rffnet_base.BaseRFFNet._solve_varpro` on the
   sample, split by the same hash into training and validation rows, with ``D_search``
   random features: the relevance search and the screening of the refinement moves run in
   memory; the heads that confirm the moves (:class:`~rffkit._streamed_heads.StreamedRidgeHeads`) are fitted on
   every training row and judged on every validation row, one pass over the data each
   (all ranks take part; rank 0's layer is broadcast at each step and at the end). A
   paired comparison of two heads streams the validation rows once more and all-reduces
   three sums (:class:`~rffkit._streamed_heads.PairedLossGain`), whatever the number of rows.
   The layer is then widened to ``D_head`` features and, when ``align_frequencies``,
   all of them re-aligned with the target at each of the alignment's scales, screened on
   the sample at ``D_head`` (:func:`~rffkit._head_layer.head_layer_candidates`): the
   plain widening and the sample's best aligned layer go to the last pass.
3. **The head on every row.** Every rank streams its rows through the layer, extended to
   ``D_head >= D_search`` features, and accumulates the ridge statistics
   (:class:`~rffkit._ridge_statistics.RidgeStatistics`) of its training and of its validation
   rows separately; they are summed over the ranks. The validation error of the ridge head
   at every penalty follows in closed form from the validation statistics
   (:func:`~rffkit._ridge_path.heldout_path`), so ``alpha='auto'`` is chosen there (GCV
   without a validation split) and the head is solved from the training statistics. With
   two candidate layers (when the memory budget holds their four ``D x D`` statistics)
   both heads are accumulated in the same pass and the one with the lower validation
   error on every validation row is kept. Its head is then solved at the chosen penalty
   from the training and validation statistics together (every row), as the in-memory fit
   refits its head on all rows once the moves are chosen.

Sizes (:class:`StreamSettings`): the sample holds ``search_rows`` training rows and
``validation_rows`` validation rows. ``D_search``, ``D_head`` and their nested random
draws are the rules of :mod:`rffkit._stream_widths`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ._head_layer import head_layer_candidates
from ._progress import FitProgress
from ._rffnet_docs import LINEAR_ONLY_NOTE
from ._streamed_heads import (
    StreamedRidgeHeads, _head_from_statistics, _refit_from_statistics, _Standardiser, layer_width,
)
from ._scoring import streamed_r2
from ._streaming import BottomKSample, RunningMoments, numeric_target, validation_mask
from ._stream_widths import agreed_sizes, extended_layer, head_draw, truncated_layer
from ._sufficient import agree, parse_memory, statistics_bytes
from ._source_checks import check_columns_seen_in_fit, prediction_chunks, record_source_columns
from ._validation import draw_seeds, resolve_device, torch_generator, warn_if_few_rows
from .distributed import all_gather_object, broadcast_object, world
from .exceptions import DivergenceError
from .io import ArraySource, TableSource
from .kernels import KERNELS
from .layers import RFFNetModule

__all__ = [
    "StreamSettings", "STREAM_SETTINGS", "is_stream", "fits_streamed", "fit_stream", "predict_stream", "score_stream",
    "prediction_source",
    "StreamedFitSetup", "fit_setup", "training_rows",
    "standardiser", "finished_model", "record_final_loss",
]


@dataclass(frozen=True)
class StreamSettings:
    """Sizes of RFFNet's streamed fit.

    Attributes
    ----------
    search_rows : int
        Training rows of the in-memory sample on which the relevances are searched and the
        refinement moves screened. 20,000 rows take ``D_search`` = 1,401 features and about
        1.5 GB in the search.
    validation_rows : int
        Validation rows of the sample, which score every iterate of the search and screen
        the refinement moves (their features are only evaluated, never factorised, so
        they cost little memory); a screen on a few hundred rows picks candidates by luck.
    feature_itemsize : int
        Bytes per feature value of the streamed blocks (float32).
    """

    search_rows: int = 20_000
    validation_rows: int = 20_000
    feature_itemsize: int = 4


STREAM_SETTINGS = StreamSettings()


def is_stream(X):
    """Whether ``predict``/``score`` read ``X`` chunk by chunk (a source or a memory map)."""
    return isinstance(X, (TableSource, ArraySource, np.memmap))


def fits_streamed(estimator, X):
    """Whether ``fit`` streams ``X``: a source or a memory map, whatever the solver.

    The 'varpro' solver runs :func:`fit_stream`; 'adam' and hidden layers run
    :func:`rffkit._adam_stream.fit_adam_stream`.
    """
    return is_stream(X)


def _source(estimator, X, y, *, fitting, method="fit"):
    """The source behind ``X`` (a memory map becomes an :class:`ArraySource`)."""
    owner = type(estimator).__name__
    if isinstance(X, (TableSource, ArraySource)):
        if y is not None:
            raise ValueError(f"{owner}.{method}: {type(X).__name__} carries its own target; pass y=None.")
        source = X
    else:
        if fitting and y is None:
            raise ValueError(f"{owner}.fit: a numpy.memmap X needs y (an array or another memmap).")
        source = ArraySource(X, y)
    if fitting and source.target is None:
        raise ValueError(f"{owner}.fit: the source has no target; open it with "
                         "open_table(..., target='column') or pass ArraySource(X, y).")
    return source


@dataclass
class _FirstPass:
    """What pass 1 learned, the same on every rank."""

    x_moments: RunningMoments
    y_moments: RunningMoments
    sample: tuple  # (X, y, rows) of the sampled rows, sorted by row
    n_rows: int
    n_validation: int


def merged_bottom_k(per_rank, sample_rows, seed):
    """The ranks' hashed samples (one list of :class:`BottomKSample` per rank) merged, one per size."""
    merged = [BottomKSample(k, seed) for k in sample_rows]
    for samples in per_rank:
        for into, sample in zip(merged, samples):
            if sample.n_seen:
                into.merge(sample)
    return merged


def _first_pass(source, owner, *, sample_rows, validation_fraction, seed):
    """Moments of X and y, the sample (``sample_rows`` = (training, validation) rows) and the row counts."""
    rank, world_size = world()
    x_moments, y_moments = RunningMoments(), RunningMoments()
    samples = [BottomKSample(k, seed) for k in sample_rows]  # training rows, validation rows
    n_rows = n_validation = 0
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        y = numeric_target(owner, chunk.y)
        x_moments.update(chunk.X)
        y_moments.update(y)
        held = validation_mask(chunk.rows, validation_fraction, seed)
        for sample, side in zip(samples, (~held, held)):
            if side.any():
                sample.update(chunk.X[side], y[side, 0], chunk.rows[side])
        n_rows += chunk.rows.shape[0]
        n_validation += int(np.count_nonzero(held))
    merged = _FirstPass(RunningMoments(), RunningMoments(), None, 0, 0)
    parts = all_gather_object((x_moments, y_moments, samples, n_rows, n_validation))
    merged_samples = merged_bottom_k([part[2] for part in parts], sample_rows, seed)
    for part in parts:
        merged.x_moments.merge(part[0])
        merged.y_moments.merge(part[1])
        merged.n_rows += part[3]
        merged.n_validation += part[4]
    warn_if_few_rows(owner, merged.n_rows)  # as the fit on arrays does
    pieces = [sample.result() for sample in merged_samples if sample.n_seen]
    if pieces:
        X, y, rows = (np.concatenate([piece[k] for piece in pieces]) for k in range(3))
        order = np.argsort(rows, kind="stable")
        merged.sample = X[order], y[order], rows[order]
    return merged


def _sample_problem(estimator, first, standardise, layer, *, validation_fraction, split_seed, generator,
                    validated, heads, n_train):
    """The in-memory :class:`~rffkit._rffnet_base._Problem` of the sample (rows split by the hash).

    ``n_train``: the training rows of the whole source, which the sample stands for.
    """
    from ._rffnet_base import _Problem

    X, y, rows = first.sample
    held = _held(rows, validated, validation_fraction, split_seed)
    if held.sum() < 2 or (~held).sum() < 2:  # as in memory: too few rows to hold any out
        validated, held = False, np.zeros(rows.shape, bool)
    target = standardise.target(y.reshape(-1, 1))[:, 0]
    X_val = y_val = None
    if validated:
        X_val = standardise.inputs(X[held])
        y_val = estimator._target_tensor(target[held], standardise.device)
    return _Problem(
        "varpro", (), standardise.device, standardise.x_mean, standardise.x_scale, target,
        (standardise.y_mean, standardise.y_scale), 1, None, standardise.inputs(X[~held]),
        estimator._target_tensor(target[~held], standardise.device), X_val, y_val, layer, generator,
        heads, n_train,
    )


def _held(rows, validated, fraction, seed):
    """Which of the sample's ``rows`` (global indices) the hash holds out for validation."""
    return validation_mask(rows, fraction, seed) if validated else np.zeros(rows.shape, bool)


def warped(estimator, layer, standardise, X_sample):
    """``layer`` with the in-memory fit's input maps (:meth:`~rffkit._rffnet_base.BaseRFFNet._warp_layer`).

    The quantiles come from ``X_sample``, the sample's training rows (raw); the other
    columns are clamped to the range of every row, as the in-memory fit clamps them to
    that of its training rows.
    """
    bounds = None if standardise.x_range is None else tuple(standardise.standardised(np.vstack(standardise.x_range)))
    return estimator._warp_layer(layer, standardise.standardised(X_sample), bounds=bounds)


def _on_every_rank(compute):
    """``compute()`` on every rank, then rank 0's result on all of them; any rank's exception raised on all.

    The ranks compute in lockstep (the streamed heads of the refinement are collective
    calls); broadcasting rank 0's result keeps a rounding difference between ranks, should
    there be one, from leaving them with different layers.
    """
    try:
        result, error = compute(), None
    except Exception as exc:  # noqa: BLE001 -- handed to every rank, then raised
        result, error = None, exc
    agree(error)
    return broadcast_object(result)


class StreamedFitSetup(NamedTuple):
    """What a streamed 'varpro' fit settles before its first pass, the same on every rank."""

    source: object  # TableSource or ArraySource
    device: torch.device
    budget: int  # bytes: the smallest memory budget over the ranks
    seeds: tuple  # (split_seed, layer_seed, torch_seed)
    fraction: float  # the validation fraction asked for (0 without early stopping)


def fit_setup(estimator, X, y):
    """The source, device, memory budget, seeds and validation fraction of a streamed fit (collective)."""
    source = _source(estimator, X, y, fitting=True)
    device = resolve_device(estimator.device, owner=type(estimator).__name__)
    budget = min(all_gather_object(parse_memory(estimator.memory_budget)))  # the same on every rank
    seeds = broadcast_object(draw_seeds(estimator.random_state, 3))
    fraction = estimator.validation_fraction if estimator.early_stopping else 0.0
    return StreamedFitSetup(source, device, budget, tuple(seeds), fraction)


def training_rows(first, owner):
    """``(validated, n_train)`` as the in-memory fit decides them (at least 2 rows on each side).

    ``first`` is what the first pass learned (its ``n_rows`` and ``n_validation``); too
    few training rows raise ``ValueError``.
    """
    n_val = first.n_validation
    validated = n_val >= 2 and first.n_rows - n_val >= 2
    n_train = first.n_rows - (n_val if validated else 0)
    if n_train < 2:
        raise ValueError(f"{owner}: the source has {first.n_rows} row(s); at least 2 are needed.")
    return validated, n_train


def standardiser(first, device, y_moments=None):
    """The :class:`_Standardiser` of the first pass's moments (the target's, when given, else none)."""
    if y_moments is None:
        return _Standardiser.from_moments(first.x_moments, 0.0, 1.0, device)
    y_mean, y_std = float(y_moments.mean[0]), float(y_moments.std[0])
    return _Standardiser.from_moments(first.x_moments, y_mean, y_std if y_std > 0 else 1.0, device)


def finished_model(model, owner):
    """``model`` in evaluation mode; ``DivergenceError`` when a parameter is not finite."""
    model.eval()
    if not all(torch.isfinite(parameter).all() for parameter in model.parameters()):
        raise DivergenceError(f"{owner}: the streamed fit produced non-finite parameters; raise alpha.")
    return model


def record_final_loss(history, loss, validated):
    """The fitted model's loss on every validation row replaces the sample's last entry of ``history``."""
    if validated:
        history.validation_loss[-1:] = [loss]
    history.best_validation_loss = loss


def fit_stream(estimator, X, y):
    """Fit ``estimator`` (an RFFNetRegressor) on a source; see the module docstring. Returns it."""
    owner = type(estimator).__name__
    if estimator._resolve_solver(estimator._hidden_sizes()) != "varpro":
        raise ValueError(
            f"{owner}: a streamed fit runs the 'varpro' solver (relevances on a sample, the head on every "
            "row); solver='adam' and hidden layers need the rows in memory: pass arrays.")
    source, device, budget, (split_seed, layer_seed, torch_seed), fraction = fit_setup(estimator, X, y)
    sample_rows = (STREAM_SETTINGS.search_rows, STREAM_SETTINGS.validation_rows)
    with FitProgress(owner, estimator.verbose) as progress:
        progress.stage("pass 1: moments and sample")
        first = _first_pass(source, owner, sample_rows=sample_rows, validation_fraction=fraction, seed=split_seed)
        validated, n_train = training_rows(first, owner)
        sample_n_train = first.sample[2].shape[0]
        if validated:
            sample_n_train -= int(np.count_nonzero(validation_mask(first.sample[2], fraction, split_seed)))
        d_search, d_head = agreed_sizes(estimator, n_train, source.n_features, sample_n_train, budget,
                                        itemsize=STREAM_SETTINGS.feature_itemsize)

        standardise = standardiser(first, device, first.y_moments)
        full = head_draw(estimator, source.n_features, d_head, layer_seed, device)
        X_sample, _, sampled = first.sample
        warped(estimator, full, standardise, X_sample[~_held(sampled, validated, fraction, split_seed)])

        alphas = estimator._settings.alpha_grid if isinstance(estimator.alpha, str) else (float(estimator.alpha),)
        heads = StreamedRidgeHeads(source, standardise, validated=validated, fraction=fraction, seed=split_seed,
                                   alphas=alphas, owner=owner)

        def search():
            generator = torch_generator(torch_seed)
            problem = _sample_problem(estimator, first, standardise, truncated_layer(full, d_search),
                                      validation_fraction=fraction, split_seed=split_seed, generator=generator,
                                      validated=validated, heads=heads, n_train=n_train)
            model, history, alpha = estimator._solve_varpro(problem, progress)
            layers = [extended_layer(model.rff, full)]
            if estimator.align_frequencies and problem.X_val is not None and layers[0].n_components > d_search:
                progress.stage(f"head layer: {layers[0].n_components} aligned frequencies screened on the sample")
                layers, _ = head_layer_candidates(
                    layers[0], problem.X_train, problem.y_train, problem.X_val, problem.y_val, alpha=alpha,
                    generator=generator, settings=estimator._settings,
                    sample_frequencies=KERNELS[estimator.kernel].sample_frequencies)
                layers = layers[:n_candidates]
            return [layer.to("cpu") for layer in layers], history

        # two candidate heads in the last pass when the budget holds their four statistics
        n_candidates = 2 if statistics_bytes(d_head, n_statistics=4, itemsize=STREAM_SETTINGS.feature_itemsize) \
            <= budget else 1
        layers, history = _on_every_rank(search)
        first.sample = None  # the sample is no longer needed

        progress.stage(f"last pass: ridge statistics of {len(layers)} x {layer_width(layers[0])} features")
        statistics = heads.statistics_of([layer.to(device) for layer in layers])
        fits = [_head_from_statistics(train, heldout, alphas) for train, heldout in statistics]
        best = int(np.argmin([fit[3] for fit in fits]))  # the lower validation error; ties: the plain widening
        layer, (alpha, coef, intercept, loss, r2) = layers[best].to(device), fits[best]
        train, heldout = statistics[best]
        statistics = fits = None  # the other candidate's statistics
        n_rows = train.count + (0 if heldout is None else heldout.count)
        if heldout is not None and estimator._settings.refit_head:
            coef, intercept = _refit_from_statistics(train, heldout, alpha)

        model = RFFNetModule(layer, (), 1, torch_generator(torch_seed))
        with torch.no_grad():
            model.first_linear.weight.copy_(coef.reshape(1, -1))
            model.first_linear.bias.fill_(intercept)
        finished_model(model, owner)
        record_final_loss(history, loss, validated)
        set_fitted(estimator, source, standardise, (standardise.y_mean, standardise.y_scale), model, history, alpha,
                   solver="varpro")
        estimator.best_validation_score_ = r2
        estimator.n_rows_seen_ = n_rows
        progress.summary(
            f"fitted in {progress.elapsed:.1f} s on {estimator.n_rows_seen_} streamed rows: alpha {alpha:g}, "
            f"{d_search} search and {estimator.n_components_} head features, validation R^2 "
            + ("none" if r2 is None else f"{r2:.4f}")
            + (LINEAR_ONLY_NOTE if estimator.linear_only_ else ""))
    return estimator


def set_fitted(estimator, source, standardise, target_state, model, history, alpha, *, solver):
    """Store a streamed fit through the in-memory fit's own :meth:`_set_fitted`, then what a source adds."""
    from ._rffnet_base import _Problem

    problem = _Problem(solver, (), standardise.device, standardise.x_mean, standardise.x_scale, None, target_state,
                       None, None, None, None, None, None, model.rff, None)
    problem.constant = standardise.constant
    estimator._set_fitted(None, problem, model, history, alpha, x_range=standardise.x_range)
    record_source_columns(estimator, source)


def prediction_source(estimator, X, y=None, method="predict"):
    """The source of ``X`` for ``predict`` or ``score`` (of any estimator fitted on a source), its columns
    checked against those seen in ``fit``."""
    source = _source(estimator, X, y, fitting=False, method=method)
    check_columns_seen_in_fit(estimator, source, method)
    return source


def predict_stream(estimator, X):
    """Predictions for every row of a source, read chunk by chunk (all rows, whatever the rank)."""
    source = prediction_source(estimator, X)
    parts = [estimator._predict_rows(np.asarray(chunk.X, dtype=np.float64)) for chunk in prediction_chunks(source)]
    return np.concatenate(parts) if parts else np.zeros(0)


def score_stream(estimator, X, y=None):
    """R^2 of the predictions on every row of a source with a target, read chunk by chunk."""
    owner = type(estimator).__name__
    source = prediction_source(estimator, X, y, "score")
    if source.target is None:
        raise ValueError(f"{owner}.score: the source has no target to score against.")
    return streamed_r2(owner, prediction_chunks(source),
                       lambda X: estimator._predict_rows(np.asarray(X, dtype=np.float64)))
