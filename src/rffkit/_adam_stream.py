"""RFFNet's 'adam' solver (Algorithm 1 of Otto & Izbicki, 2022) on mini-batches streamed from a source.

The regressor and the classifier, with or without hidden layers (RFFNet+), fitted from a
source (:class:`~rffkit.io.TableSource`, :class:`~rffkit.io.ArraySource`, or a
``numpy.memmap`` with its target), on one process or on every rank of a job:

1. **First pass**: the column moments standardise the inputs as the in-memory fit does with
   all its rows (the regressor's target too), counting the rows that the hash of the row
   index holds out for validation (:func:`~rffkit._streaming.validation_mask`); the
   classifier finds its class set in the same pass. The passes are those of the other
   streamed fits (:func:`rffkit._rffnet_stream._first_pass`,
   :func:`rffkit._classifier_stream.label_pass`).
2. **Epochs**: each rank reads its share chunk by chunk, drops the validation rows and
   keeps the training rows in a *shuffle buffer* of ``shuffle_rows`` rows
   (:class:`AdamStreamSettings`); when it is full, the buffer is permuted by the seeded
   generator, cut into batches, and the rows left over (fewer than a batch) stay for the
   next fill. A full permutation of a file larger than memory is out of reach, so a batch
   mixes rows from about ``shuffle_rows`` consecutive rows of the file, and the chunks keep
   their file order: shuffle a file sorted by anything related to the target once before
   fitting. When the buffer holds every training row (``shuffle_rows`` above the training
   rows of a rank), an epoch is a full permutation, as in memory: on one process the
   batches are then those of the in-memory fit on the same rows in row order.
3. **Steps**: ``batch_size`` is the global batch; rank ``r`` of ``R`` contributes
   ``batch_size // R`` rows (one more for the first ``batch_size % R`` ranks). After each
   backward pass the ranks all-reduce their gradients weighted by their batch rows, with
   the rows and the loss (``_reduce_over_ranks``), so every rank steps with the gradient of
   the mean loss over the union batch: the step of one process on that union, and every
   rank holds the same parameters. A rank whose share is used up contributes zero rows
   until every rank's is; the epoch ends when the all-reduced rows are 0.
4. **Monitoring**: after each epoch one pass sums the loss of the validation rows (of the
   training rows without validation) over the ranks; early stopping and the restoring of the
   best state are those of the in-memory loop (:func:`rffkit._adam.alternating_adam`),
   which all ranks run in lockstep. A last pass scores the fitted model (R^2 or accuracy).

"Same model as one process": the union batches differ with the number of ranks (rank
``r`` reads its own rows), so two processes do not retrace one process's path with
mini-batches. With one batch per epoch (``batch_size`` at least the training rows) every
step is the full-batch gradient, the same on any number of ranks up to float rounding, and
so is the model. Each step sends ``4 (P + 2)`` bytes (``P`` the stepped parameters, float64
``8 (P + 2)``): the head's and then the relevances', whatever the number of rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import is_classifier

from . import _rffnet_stream as _stream
from ._adam import _local, alternating_adam, fixed_relevance_penalty
from ._progress import FitProgress
from ._search import default_n_components
from ._streamed_heads import _Standardiser
from ._streaming import RunningMoments, numeric_target, validation_mask
from ._validation import draw_seeds, resolve_device, torch_generator
from .distributed import all_gather_object, all_reduce_sum, broadcast_object, world
from .exceptions import DivergenceError
from .layers import RFFNetModule

__all__ = ["AdamStreamSettings", "ADAM_STREAM_SETTINGS", "runs_adam", "fit_adam_stream",
           "validation_score", "local_batch_size"]


@dataclass(frozen=True)
class AdamStreamSettings:
    """Sizes of the streamed 'adam' solver.

    Attributes
    ----------
    shuffle_rows : int
        Training rows a rank shuffles together (see the module docstring): 262,144 rows of
        100 float32 inputs take 100 MB.
    """

    shuffle_rows: int = 262_144


ADAM_STREAM_SETTINGS = AdamStreamSettings()


def runs_adam(estimator):
    """Whether an RFFNet estimator's fit runs 'adam' (asked for, or 'auto' with hidden layers)."""
    hidden = np.atleast_1d(np.asarray(estimator.hidden_layer_sizes, dtype=object)).size
    return estimator.solver == "adam" or (estimator.solver == "auto" and bool(hidden))


def local_batch_size(batch_size, rank, world_size):
    """Rows of the global batch that rank ``rank`` contributes (at least 1)."""
    return max(1, batch_size // world_size + (rank < batch_size % world_size))


class _Target:
    """A chunk's target as the loss sees it: standardised values (regression) or class indices."""

    def __init__(self, estimator, state, device):
        self.estimator, self.state, self.device = estimator, state, device
        self.owner = type(estimator).__name__

    def values(self, y):
        if is_classifier(self.estimator):
            from ._classifier_stream import encode_labels

            return encode_labels(self.owner, self.state, y)
        mean, scale = self.state
        return (numeric_target(self.owner, y)[:, 0] - mean) / scale

    def tensor(self, y):
        return self.estimator._target_tensor(self.values(y), self.device)


def _reduce_over_ranks(parameters, n_rows, loss):
    """The row-weighted mean of the ranks' gradients, written into ``parameters``: ``(total rows, loss)``."""
    pieces = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).double() * n_rows
              for p in parameters]
    tail = torch.tensor([0.0 if loss is None else float(loss.detach()) * n_rows, float(n_rows)],
                        dtype=torch.float64, device=parameters[0].device)
    buffer = all_reduce_sum(torch.cat(pieces + [tail]))
    total = int(round(float(buffer[-1])))
    if not total:
        return 0, math.nan
    start = 0
    for p in parameters:
        p.grad = (buffer[start:start + p.numel()] / total).to(p.dtype).reshape(p.shape)
        start += p.numel()
    return total, float(buffer[-2]) / total


def _epoch_batches(source, standardise, target, *, batch_rows, buffer_rows, generator, fraction, seed):
    """One epoch of this rank's training batches (see the module docstring), then empty batches forever."""
    rank, world_size = world()
    X_parts, y_parts, count = [], [], 0

    def cut(final):
        X, y = torch.cat(X_parts), torch.cat(y_parts)
        order = torch.randperm(X.shape[0], generator=generator).to(X.device)
        n_full = X.shape[0] if final else X.shape[0] - X.shape[0] % batch_rows
        return [(X[idx], y[idx]) for idx in order[:n_full].split(batch_rows)], X[order[n_full:]], y[order[n_full:]]

    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        keep = ~validation_mask(chunk.rows, fraction, seed)
        if not keep.any():
            continue
        X_parts.append(standardise.inputs(chunk.X[keep]))
        y_parts.append(target.tensor(chunk.y[keep]))
        count += int(keep.sum())
        if count >= buffer_rows:
            batches, X_rest, y_rest = cut(final=False)
            yield from batches
            X_parts, y_parts, count = [X_rest], [y_rest], X_rest.shape[0]
    if count:
        yield from cut(final=True)[0]
    empty = (standardise.inputs(np.zeros((0, source.n_features))), target.estimator._target_tensor(
        np.zeros(0, dtype=np.int64 if is_classifier(target.estimator) else np.float64), target.device))
    while True:
        yield empty


@torch.no_grad()
def _streamed_loss(model, loss_fn, source, standardise, target, *, fraction, seed, held_out, block_rows):
    """The mean loss over the validation rows (``held_out``) or the training rows of every rank."""
    rank, world_size = world()
    sums = torch.zeros(2, dtype=torch.float64)
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        mask = validation_mask(chunk.rows, fraction, seed)
        mask = mask if held_out else ~mask
        if not mask.any():
            continue
        X, y = standardise.inputs(chunk.X[mask]), target.tensor(chunk.y[mask])
        for start in range(0, X.shape[0], block_rows):
            out = model(X[start:start + block_rows])
            sums[0] += float(loss_fn(out, y[start:start + block_rows])) * out.shape[0]
            sums[1] += out.shape[0]
    all_reduce_sum(sums)
    return float(sums[0] / sums[1]) if sums[1] else math.nan


def validation_score(estimator, source, fraction, seed):
    """R^2 (regressor) or accuracy (classifier) of the fitted ``estimator`` on every rank's validation rows."""
    rank, world_size = world()
    owner = type(estimator).__name__
    classify = is_classifier(estimator)
    truth, sse, right, total = RunningMoments(), 0.0, 0, 0
    for chunk in source.iter_chunks(rank=rank, world_size=world_size):
        held = validation_mask(chunk.rows, fraction, seed)
        if not held.any():
            continue
        X = np.asarray(chunk.X[held], dtype=np.float64)
        if classify:
            from ._classifier_stream import class_labels

            right += int(np.count_nonzero(estimator._predict_labels(X) == class_labels(owner, chunk.y[held])))
            total += X.shape[0]
        else:
            y = numeric_target(owner, chunk.y[held])[:, 0]
            error = estimator._predict_rows(X) - y
            sse += float(error @ error)
            truth.update(y)
    parts = all_gather_object((truth, sse, right, total))
    if classify:
        total = sum(part[3] for part in parts)
        return sum(part[2] for part in parts) / total if total else None
    merged = RunningMoments()
    for part in parts:
        merged.merge(part[0])
    if merged.count == 0:
        return None
    spread = float(np.sum(merged.m2))
    sse = sum(part[1] for part in parts)
    return 1.0 - sse / spread if spread > 0 else (1.0 if sse == 0 else 0.0)


def _first_pass(estimator, source, fraction, seed):
    """``(x_moments, target_state, n_rows, n_validation)`` of the source."""
    owner = type(estimator).__name__
    if is_classifier(estimator):
        from ._classifier_stream import label_pass

        first = label_pass(source, owner, sample_rows=(1, 1), validation_fraction=fraction, seed=seed)
        return first.x_moments, first.classes, first.n_rows, first.n_validation
    first = _stream._first_pass(source, owner, sample_rows=(1, 1), validation_fraction=fraction, seed=seed)
    y_std = float(first.y_moments.std[0])
    return first.x_moments, (float(first.y_moments.mean[0]), y_std if y_std > 0 else 1.0), first.n_rows, \
        first.n_validation


def fit_adam_stream(estimator, X, y):
    """Fit ``estimator`` (an RFFNet regressor or classifier, solver 'adam') on a source. Returns it."""
    owner = type(estimator).__name__
    hidden = estimator._hidden_sizes()
    estimator._resolve_solver(hidden)
    source = _stream._source(estimator, X, y, fitting=True)
    device = resolve_device(estimator.device, owner=owner)
    split_seed, layer_seed, torch_seed = broadcast_object(draw_seeds(estimator.random_state, 3))
    fraction = estimator.validation_fraction if estimator.early_stopping else 0.0
    settings = estimator._settings
    rank, world_size = world()
    with FitProgress(owner, estimator.verbose, total=estimator.max_iter, unit="epoch") as progress:
        progress.stage("pass 1: moments")
        x_moments, target_state, n_rows, n_validation = _first_pass(estimator, source, fraction, split_seed)
        validated = n_validation >= 2 and n_rows - n_validation >= 2
        fraction = fraction if validated else 0.0
        n_train = n_rows - (n_validation if validated else 0)
        if n_train < 2:
            raise ValueError(f"{owner}: the source has {n_rows} row(s); at least 2 are needed.")
        y_mean, y_scale = (0.0, 1.0) if is_classifier(estimator) else target_state
        standardise = _Standardiser.from_moments(x_moments, y_mean, y_scale, device)
        target = _Target(estimator, target_state, device)
        n_outputs = target_state.shape[0] if is_classifier(estimator) else 1

        n_components = estimator.n_components or default_n_components(n_train, settings)
        generator = torch_generator(torch_seed)
        layer = estimator._draw_layer(source.n_features, n_components, layer_seed, device)
        model = RFFNetModule(layer, hidden, n_outputs, generator)  # the same draws on every rank
        if rank:  # each rank shuffles its own rows with its own stream
            generator = torch_generator(int(np.random.SeedSequence([torch_seed, rank]).generate_state(1)[0]))
        alpha = settings.default_alpha if isinstance(estimator.alpha, str) else float(estimator.alpha)
        loss_fn = estimator._loss_fn()
        batch_rows = local_batch_size(estimator.batch_size, rank, world_size)
        buffer_rows = max(ADAM_STREAM_SETTINGS.shuffle_rows, batch_rows)
        passes = [1]
        progress.stage("Adam epochs")

        def batches():
            passes[0] += 1
            return _epoch_batches(source, standardise, target, batch_rows=batch_rows, buffer_rows=buffer_rows,
                                  generator=generator, fraction=fraction, seed=split_seed)

        def monitor():
            passes[0] += 1
            return _streamed_loss(model, loss_fn, source, standardise, target, fraction=fraction, seed=split_seed,
                                  held_out=validated, block_rows=settings.predict_chunk_rows)

        def report(epoch, train, score):
            progress.step(f"epoch {epoch}: train loss {train:.5f}, validation loss {score:.5f}",
                          train=f"{train:.4g}", validation=f"{score:.4g}")

        history = alternating_adam(
            model, loss_fn, batches, monitor, alpha=alpha, learning_rate=estimator.learning_rate,
            max_iter=estimator.max_iter, n_iter_no_change=estimator.n_iter_no_change if estimator.early_stopping
            else None, tol=estimator.tol, penalised=[model.first_linear.weight], relevances=layer.relevances,
            relevance_penalty=fixed_relevance_penalty(estimator.relevance_penalty),
            convergence_patience=estimator.n_iter_no_change,
            settings=settings, progress=report, reduce=_reduce_over_ranks if world_size > 1 else _local,
        )
        estimator._warn_if_not_converged(history, "adam")
        model.eval()
        if not all(torch.isfinite(parameter).all() for parameter in model.parameters()):
            raise DivergenceError(f"{owner}: training produced non-finite parameters; "
                                  "lower learning_rate or raise alpha.")
        _stream.set_fitted(estimator, source, standardise, target_state, model, history, alpha, solver="adam")
        estimator.best_validation_score_ = validation_score(estimator, source, fraction, split_seed) \
            if validated else None
        estimator.n_rows_seen_ = n_rows
        estimator._stream_passes = passes[0] + validated
        progress.summary(
            f"fitted in {progress.elapsed:.1f} s on {n_rows} streamed rows: {history.n_iter} epochs, alpha {alpha:g}, "
            f"{estimator.n_components_} random features, validation score "
            + ("none" if estimator.best_validation_score_ is None else f"{estimator.best_validation_score_:.4f}"))
    return estimator
