"""The classifiers fitted from a streamed source, on one process or on every rank of a job.

:class:`~rffkit.RFFNetClassifier` (its default 'varpro' solver) and
:class:`~rffkit.RFFClassifier` read a source (:class:`~rffkit.io.TableSource`,
:class:`~rffkit.io.ArraySource`, or a ``numpy.memmap`` with its labels), every rank its share:

1. **Labels, moments and a sample** (:func:`label_pass`, one pass). The class set is the
   union of the labels seen by every rank (text, booleans or whole numbers; a target with
   fractional values is refused), with the rows per class; the column moments standardise
   the inputs (RFFNet) or give the default length scale (RFFClassifier); rows are held out
   for validation by a hash of their index (:func:`~rffkit._streaming.validation_mask`),
   and a uniform sample of the training rows and one of the validation rows are kept
   (:class:`~rffkit._streaming.BottomKSample`), the same whatever the number of ranks.
2. **RFFNetClassifier: relevances on the sample.** The in-memory 'varpro' fit runs on the
   sample as the regressor's streamed fit runs it (:mod:`rffkit._rffnet_stream`): the
   relevance search on the least-squares surrogate of the labels (kernel ridge
   classification) and the refinement moves, judged by the logistic heads of the sample's
   validation rows. The layer kept is extended to ``D_head`` features of the same draw.
3. **The logistic head on every row** (:mod:`rffkit._logistic_stream`): L-BFGS on the
   fixed features, one pass per evaluation of the objective and its gradient (summed over
   the ranks by one all-reduce), preconditioned by the sample's feature covariance. The
   penalty of RFFNet's ``alpha='auto'`` is found by a walk along the half-decade grid from
   the penalty the sample chose, scored by the validation rows' log-loss, computed in the
   same passes; RFFClassifier fits its one ``alpha`` on every row.
4. **One more pass** scores the fitted RFFNet on the validation rows (accuracy).

``predict``, ``predict_proba``, ``decision_function`` and ``score`` read a source chunk by
chunk (:func:`per_chunk`, :func:`accuracy_stream`), every row whatever the rank.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

from . import _rffnet_stream as _stream
from ._heads import LogisticHeads
from ._logistic import LogisticHead
from ._logistic_stream import SampleCurvature, StreamedLogistic, streamed_penalty_walk
from ._progress import FitProgress
from ._stream_widths import agreed_sizes, extended_layer, head_draw, truncated_layer
from ._streamed_heads import layer_width
from ._streaming import BottomKSample, RunningMoments, validation_mask
from ._sufficient import fitted_on_first_chunk
from ._labels import classifier_labels
from ._scoring import StreamedScore
from ._source_checks import prediction_chunks, record_source_columns
from ._validation import as_tensor, fit_warning, one_class_error, resolve_device, torch_generator, warn_if_few_rows
from .distributed import all_gather_object, world
from .layers import RFFNetModule

__all__ = ["class_labels", "encode_labels", "label_pass", "fit_rffnet_classifier_stream",
           "fit_rff_classifier_stream", "per_chunk", "accuracy_stream", "StreamedAccuracy"]

#: Training rows of RFFClassifier's sample, which only preconditions L-BFGS.
PRECONDITIONER_ROWS = 10_000


def class_labels(owner, y, rows=None):
    """A chunk's labels as a 1-D array (:func:`~rffkit._labels.classifier_labels`: a missing label is an error
    naming its row of ``rows``); a target with fractional (or infinite) values is refused."""
    y = np.asarray(classifier_labels(owner, y, rows))
    if y.ndim != 1:
        raise ValueError(f"{owner}: a classifier takes one label column; got target values of shape {y.shape}.")
    if y.dtype.kind == "f":
        fractional = ~np.isfinite(y) | (y != np.round(y))
        if fractional.any():
            raise ValueError(
                f"{owner}: the target holds continuous values (e.g. {y[fractional][0]!r}), not class labels; "
                "a classifier needs text, booleans or whole numbers: fit a regressor, or bin the target.")
    elif y.dtype.kind not in "biuUSO":
        raise ValueError(f"{owner}: the target has dtype {y.dtype}; a classifier needs class labels "
                         "(text, booleans or whole numbers).")
    return y


def encode_labels(owner, classes, y):
    """Class indices of the labels ``y`` in the sorted ``classes``; an unseen label is an error."""
    y = class_labels(owner, y)
    index = np.clip(np.searchsorted(classes, y), 0, classes.shape[0] - 1)
    unknown = classes[index] != y
    if np.any(unknown):
        raise ValueError(f"{owner}: label {y[unknown][0]!r} is not one of the classes seen in the first pass "
                         f"({classes.tolist()[:10]}); the source changed while it was read.")
    return index.astype(np.int64)


@dataclass
class LabelPass:
    """What :func:`label_pass` learned, the same on every rank."""

    x_moments: RunningMoments
    classes: np.ndarray
    counts: np.ndarray  # rows per class, all rows
    n_rows: int
    n_validation: int
    sample: tuple | None  # (X, labels, rows) of the sampled training and validation rows, sorted by row


def label_pass(source, owner, *, sample_rows, validation_fraction, seed):
    """One pass: the moments of ``X``, the class set and counts, the row counts and the sample.

    ``sample_rows`` = (training rows, validation rows) of the sample. Too few rows, or rows
    of a class, give the fit's :class:`~rffkit.exceptions.SmallSampleWarning`, as in memory.
    """
    rank, world_size = world()
    x_moments = RunningMoments()
    samples = [BottomKSample(k, seed) for k in sample_rows]
    values, counts = [], []
    n_rows = n_validation = 0
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        y = class_labels(owner, chunk.y, chunk.rows)
        x_moments.update(chunk.X)
        unique, number = np.unique(y, return_counts=True)
        values.append(unique)
        counts.append(number)
        held = validation_mask(chunk.rows, validation_fraction, seed)
        for sample, side in zip(samples, (~held, held)):
            if side.any():
                sample.update(chunk.X[side], y[side], chunk.rows[side])
        n_rows += chunk.rows.shape[0]
        n_validation += int(np.count_nonzero(held))
    parts = all_gather_object((x_moments, values, counts, samples, n_rows, n_validation))
    merged = LabelPass(RunningMoments(), None, None, 0, 0, None)
    merged_samples = _stream.merged_bottom_k([part[3] for part in parts], sample_rows, seed)
    for part in parts:
        merged.x_moments.merge(part[0])
        merged.n_rows += part[4]
        merged.n_validation += part[5]
    every_value = [v for part in parts for v in part[1]]
    if not every_value:
        raise ValueError(f"{owner}: the source has no rows.")
    merged.classes, inverse = np.unique(np.concatenate(every_value), return_inverse=True)
    every_count = np.concatenate([c for part in parts for c in part[2]])
    merged.counts = np.bincount(inverse.ravel(), weights=every_count, minlength=merged.classes.shape[0]).astype(int)
    if merged.classes.shape[0] < 2:
        raise one_class_error(owner, merged.classes[0])
    warn_if_few_rows(owner, merged.n_rows, merged.classes, merged.counts)
    pieces = [sample.result() for sample in merged_samples if sample.n_seen]
    if pieces:
        X, y, rows = (np.concatenate([piece[k] for piece in pieces]) for k in range(3))
        order = np.argsort(rows, kind="stable")
        merged.sample = X[order], y[order], rows[order]
    return merged


def fit_rffnet_classifier_stream(estimator, X, y):
    """Fit an RFFNetClassifier ('varpro') on a source; see the module docstring. Returns it."""
    from ._adam_stream import validation_score
    from ._rffnet_stream import set_fitted

    owner = type(estimator).__name__
    settings = estimator._settings
    estimator._resolve_solver(estimator._hidden_sizes())  # warns about set parameters of 'adam' only
    source, device, budget, (split_seed, layer_seed, torch_seed), fraction = _stream.fit_setup(estimator, X, y)
    sizes = _stream.STREAM_SETTINGS
    with FitProgress(owner, estimator.verbose) as progress:
        progress.stage("pass 1: labels, moments and sample")
        first = label_pass(source, owner, sample_rows=(sizes.search_rows, sizes.validation_rows),
                           validation_fraction=fraction, seed=split_seed)
        validated, n_train = _stream.training_rows(first, owner)
        fraction = fraction if validated else 0.0
        X_sample, y_sample, rows = first.sample
        labels = encode_labels(owner, first.classes, y_sample)
        held = validation_mask(rows, fraction, split_seed)
        d_search, d_head = agreed_sizes(estimator, n_train, source.n_features, int((~held).sum()), budget,
                                        itemsize=_stream.STREAM_SETTINGS.feature_itemsize)
        standardise = _stream.standardiser(first, device)
        full = _stream.warped(estimator, head_draw(estimator, source.n_features, d_head, layer_seed, device),
                              standardise, X_sample[~held])
        n_classes = first.classes.shape[0]

        def search():
            problem = _stream._sample_problem(
                estimator, SimpleNamespace(sample=(X_sample, labels.astype(np.float64), rows)), standardise,
                truncated_layer(full, d_search), validation_fraction=fraction, split_seed=split_seed,
                generator=torch_generator(torch_seed), validated=validated, heads=None, n_train=n_train)
            problem = dataclasses.replace(problem, n_outputs=n_classes, target_state=first.classes)
            model, history, alpha = estimator._solve_varpro(problem, progress)
            return model.rff.to("cpu"), history, alpha

        found, history, sample_alpha = _stream._on_every_rank(search)
        layer = extended_layer(found.to(device), full)

        progress.stage(f"logistic head of {layer_width(layer)} features on every row")
        with torch.no_grad():
            Z_sample = layer(standardise.inputs(X_sample[~held]))
        curvature = SampleCurvature(Z_sample, n_classes)
        del Z_sample
        first.sample = None

        @torch.no_grad()
        def features(X_block):
            return layer(standardise.inputs(X_block))

        problem = StreamedLogistic(source, features, lambda values: encode_labels(owner, first.classes, values),
                                   n_classes=n_classes, fraction=fraction, seed=split_seed,
                                   n_features=layer_width(layer), device=device)
        auto = isinstance(estimator.alpha, str)
        alpha, W, b, info = streamed_penalty_walk(
            problem, curvature, settings.logistic_alpha_grid if auto else (float(estimator.alpha),),
            sample_alpha if auto else float(estimator.alpha), to_penalty=lambda a: 2.0 * a,
            class_counts=first.counts, validated=validated, max_iter=settings.logistic_max_iter,
            tol=settings.logistic_tol)
        loss = info["validation_loss"] if validated else info["objective"]
        head = LogisticHead(alpha, W, b, loss, info["converged"], info["n_iter"])
        model = RFFNetModule(layer, (), n_classes, torch_generator(torch_seed))
        LogisticHeads.install(model, head)
        _stream.finished_model(model, owner)
        # the search's own stop on max_iter was reported by the search on the sample
        estimator._warn_if_not_converged(dataclasses.replace(history, stopped_on_max_iter=False), "varpro", head,
                                         chosen=auto and validated)
        _stream.record_final_loss(history, loss, validated)  # its log-loss on every validation row
        set_fitted(estimator, source, standardise, first.classes, model, history, alpha, solver="varpro")
        estimator.best_validation_score_ = (
            validation_score(estimator, source, fraction, split_seed) if validated else None)
        estimator.n_rows_seen_ = first.n_rows
        estimator._stream_passes = 1 + problem.n_passes + validated
        progress.summary(
            f"fitted in {progress.elapsed:.1f} s on {first.n_rows} streamed rows: alpha {alpha:g}, {d_search} search "
            f"and {estimator.n_components_} head features, {info['n_fits']} head fits in {problem.n_passes} passes, "
            "validation accuracy " + ("none" if not validated else f"{estimator.best_validation_score_:.4f}"))
    return estimator


def fit_rff_classifier_stream(estimator, X, y):
    """Fit an RFFClassifier on a source: its feature map, then L-BFGS on every row. Returns it."""
    from sklearn.exceptions import ConvergenceWarning

    from ._default_map import default_features_from_moments
    from ._source_checks import source_names
    from .ridge import _dense, _feature_map

    owner = type(estimator).__name__
    source = _stream._source(estimator, X, y, fitting=True)
    device = resolve_device(estimator.device, owner=owner)
    first = label_pass(source, owner, sample_rows=(PRECONDITIONER_ROWS, 1), validation_fraction=0.0, seed=0)
    if first.n_rows < 2:
        raise ValueError(f"{owner}: the source has {first.n_rows} row(s); at least 2 are needed.")
    features = fitted_on_first_chunk(_feature_map(estimator, lambda: default_features_from_moments(
        estimator, source.n_features, first.x_moments, source_names(source))), source)

    def transform(X_block):
        return as_tensor(_dense(features.transform(X_block)), dtype=torch.float64, device=device)

    X_sample = first.sample[0]
    n_classes = first.classes.shape[0]
    Z_sample = transform(X_sample)
    curvature = SampleCurvature(Z_sample, n_classes)
    problem = StreamedLogistic(source, transform, lambda values: encode_labels(owner, first.classes, values),
                               n_classes=n_classes, fraction=0.0, seed=0, n_features=Z_sample.shape[1],
                               device=device)
    W, b = problem.start(first.counts)
    W, b, info = problem.minimise(float(estimator.alpha), curvature, W, b, max_iter=estimator.max_iter,
                                  tol=estimator.tol, fit_intercept=estimator.fit_intercept)
    if not info["converged"]:
        fit_warning(f"{owner}: L-BFGS stopped after {info['n_iter']} iterations with gradient "
                    f"{info['gradient']:.2e} > tol={estimator.tol:g}; increase max_iter or tol.", ConvergenceWarning)
    estimator.classes_ = first.classes
    estimator.features_ = features
    estimator.coef_ = np.ascontiguousarray(W.cpu().numpy().T)
    estimator.intercept_ = b.cpu().numpy()
    estimator.n_iter_ = info["n_iter"]
    record_source_columns(estimator, source)
    estimator.n_rows_seen_ = first.n_rows
    estimator._stream_passes = 1 + problem.n_passes
    return estimator


def per_chunk(estimator, X, method):
    """``method(chunk.X)`` over every chunk of the source behind ``X`` (all rows, whatever the rank), stacked."""
    source = _stream.prediction_source(estimator, X)
    parts = [method(np.asarray(chunk.X)) for chunk in prediction_chunks(source)]
    return np.concatenate(parts) if parts else np.zeros(0)


def accuracy_stream(estimator, X, y=None):
    """The fraction of a source's rows whose label the fitted classifier predicts right, chunk by chunk."""
    owner = type(estimator).__name__
    source = _stream.prediction_source(estimator, X, y, "score")
    if source.target is None:
        raise ValueError(f"{owner}.score: the source has no target to score against.")
    right = total = 0
    for chunk in prediction_chunks(source):
        labels = class_labels(owner, chunk.y)
        _check_same_kind(owner, estimator.classes_, labels)
        predicted = estimator._predict_labels(np.asarray(chunk.X))
        right += int(np.count_nonzero(predicted == labels))
        total += chunk.rows.shape[0]
    return right / total if total else float("nan")


def _is_text(values):
    values = np.asarray(values)
    return values.dtype.kind in "US" or (values.dtype.kind == "O" and values.size > 0
                                         and isinstance(values.ravel()[0], str))


def _check_same_kind(owner, classes, labels):
    """A ``ValueError`` when the labels are text and the classes numbers, or the other way (no label could
    equal a class: the accuracy would be 0 without a sign; scikit-learn refuses such a mix too)."""
    if labels.size and _is_text(labels) != _is_text(classes):
        kinds = ("text", "numbers") if _is_text(labels) else ("numbers", "text")
        shown = [value.item() if isinstance(value, np.generic) else value for value in [labels[0], *classes[:5]]]
        raise ValueError(f"{owner}.score: the source's labels are {kinds[0]} (e.g. {shown[0]!r}) and the model's "
                         f"classes {kinds[1]} ({', '.join(repr(c) for c in shown[1:])}): store the target as it "
                         "was stored for the fit.")


class StreamedAccuracy(StreamedScore):
    """The ``score`` of rffkit's classifiers: scikit-learn's accuracy on arrays, :func:`accuracy_stream` on a source."""

    _score_source = accuracy_stream
