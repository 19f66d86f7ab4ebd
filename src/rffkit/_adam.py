"""Algorithm 1 of Otto & Izbicki (2022): alternating Adam on the head and the relevances.

Minimises RFFNet's objective

    (1/n) sum_i loss(y_i, head(z(lambda o x_i))) + alpha ||W||^2

over mini-batches: on every batch one Adam step on the head's parameters and then one
on the relevances ``lambda``, with early stopping on a validation split and the best
state restored. It works for any loss and any head (the classifier, RFFNet+'s MLP).

:func:`alternating_adam` is the loop; it takes the epoch's batches and the monitored loss
as callables, so the same loop runs on tensors in memory (:func:`fit_alternating_adam`)
and on batches streamed from a source by every rank of a job
(:mod:`rffkit._adam_stream`), whose gradients a ``reduce`` hook sums over the ranks.
"""

from __future__ import annotations

import math

import torch

from ._history import FitHistory, snapshot
from ._settings import DEFAULT_SETTINGS
from .exceptions import DivergenceError

__all__ = ["fit_alternating_adam", "alternating_adam"]


def two_adam_blocks(head_parameters, relevances, learning_rate):
    """Algorithm 1's optimisers: one Adam on the head, one on the relevances."""
    return [torch.optim.Adam(head_parameters, lr=learning_rate), torch.optim.Adam([relevances], lr=learning_rate)]


def _batches(n, batch_size, generator, device):
    order = torch.randperm(n, generator=generator).to(device)
    return order.split(batch_size)


@torch.no_grad()
def _mean_loss(model, loss_fn, X, y, batch_size):
    total = 0.0
    for start in range(0, X.shape[0], batch_size):
        out = model(X[start : start + batch_size])
        total += float(loss_fn(out, y[start : start + batch_size])) * out.shape[0]
    return total / X.shape[0]


def _local(parameters, n_rows, loss):
    """The single-process ``reduce`` of :func:`alternating_adam`: the batch's own rows and loss."""
    return n_rows, (math.nan if loss is None else float(loss.detach()))


def fixed_relevance_penalty(value):
    """The estimator's ``relevance_penalty`` where it is a fixed l1 penalty (Adam's, and the 'varpro'
    search's): a number as it is, 'auto' none ('varpro' applies it after the search: :mod:`rffkit._search_refine`)."""
    return 0.0 if isinstance(value, str) else float(value)


def fit_alternating_adam(
    model, loss_fn, X, y, X_val, y_val, *, alpha, learning_rate, batch_size, max_iter, n_iter_no_change, tol,
    generator, penalised, relevances, relevance_penalty=0.0, make_optimisers=two_adam_blocks,
    convergence_patience=10, settings=DEFAULT_SETTINGS, progress=None,
):
    """Alternating Adam steps on the head and on the relevances, with early stopping, on tensors.

    Parameters
    ----------
    model : torch.nn.Module
        Maps inputs to outputs; trained in place and left at its best state.
    loss_fn : callable
        ``loss_fn(outputs, targets)``, a mean over the batch.
    X, y : Tensor
        Training data.
    X_val, y_val : Tensor or None
        The loss monitored each epoch (the training loss when None).
    alpha : float
        Weight of ``||W||^2`` over the tensors in ``penalised``.
    learning_rate, batch_size, max_iter : float, int, int
        Step size, mini-batch size and most epochs.
    n_iter_no_change : int or None
        Stop after this many epochs without a relative improvement of ``tol`` in the
        monitored loss (None: run ``max_iter`` epochs).
    tol : float
    generator : torch.Generator
        Shuffles the batches: a fresh permutation of the rows every epoch.
    penalised : list of Tensor
    relevances : torch.nn.Parameter
        ``lambda``.
    relevance_penalty : float, default=0.0
        Adds ``penalty ||lambda||_1``, applied after every step by its proximal map,
        soft-thresholding at ``learning_rate * penalty``, so relevances reach exactly
        zero (Otto & Izbicki, 2022).
    make_optimisers : callable, default=two_adam_blocks
        ``make_optimisers(head_parameters, relevances, learning_rate)`` returns the
        optimisers stepped in turn on every batch.
    convergence_patience : int, default=10
        Without ``n_iter_no_change``, the epochs without progress that count as
        converged: a run that ends on ``max_iter`` with progress in its last
        ``n_iter_no_change`` (or ``convergence_patience``) epochs sets
        ``history.stopped_on_max_iter``.
    settings : RFFNetSettings
    progress : callable or None
        Called as ``progress(epoch, train_loss, validation_loss)`` after every epoch.

    Returns
    -------
    FitHistory

    Raises
    ------
    DivergenceError
        When the loss stays non-finite after the step was halved
        ``settings.max_divergence_restarts`` times (each time from the best state).
    """
    monitor_X, monitor_y = (X_val, y_val) if X_val is not None else (X, y)

    def epoch_batches():
        for idx in _batches(X.shape[0], batch_size, generator, X.device):
            yield X[idx], y[idx]

    return alternating_adam(
        model, loss_fn, epoch_batches, lambda: _mean_loss(model, loss_fn, monitor_X, monitor_y,
                                                          settings.predict_chunk_rows),
        alpha=alpha, learning_rate=learning_rate, max_iter=max_iter, n_iter_no_change=n_iter_no_change, tol=tol,
        penalised=penalised, relevances=relevances, relevance_penalty=relevance_penalty,
        make_optimisers=make_optimisers, convergence_patience=convergence_patience, settings=settings,
        progress=progress,
    )


def alternating_adam(
    model, loss_fn, epoch_batches, monitor, *, alpha, learning_rate, max_iter, n_iter_no_change, tol, penalised,
    relevances, relevance_penalty=0.0, make_optimisers=two_adam_blocks, convergence_patience=10,
    settings=DEFAULT_SETTINGS, progress=None, reduce=_local,
):
    """The loop of :func:`fit_alternating_adam` over batches from any origin.

    Parameters
    ----------
    model, loss_fn
        As in :func:`fit_alternating_adam`.
    epoch_batches : callable
        ``epoch_batches()`` iterates over one epoch's ``(X_batch, y_batch)``. A batch
        may have no rows (a rank whose share is used up while others still have rows);
        the epoch ends when the iterator does, or when ``reduce`` reports no rows.
    monitor : callable
        ``monitor()``: the loss monitored after every epoch (a float).
    alpha, learning_rate, max_iter, n_iter_no_change, tol, penalised, relevances, \
relevance_penalty, make_optimisers, convergence_patience, settings, progress
        As in :func:`fit_alternating_adam`.
    reduce : callable, default: this batch alone
        ``reduce(parameters, n_rows, loss)`` after every backward pass, before the step
        on ``parameters``: returns ``(total_rows, batch_loss)`` and may replace the
        gradients, as :mod:`rffkit._adam_stream` does with their row-weighted mean over
        the ranks (``loss`` is None on a batch without rows, whose gradients are None).

    Returns
    -------
    FitHistory
    """
    head_parameters = [p for p in model.parameters() if p is not relevances]

    def objective(xb, yb):
        loss = loss_fn(model(xb), yb)
        return loss + alpha * sum((w * w).sum() for w in penalised)

    def step(optimiser, xb, yb):
        """One step of ``optimiser`` on the batch: ``(total rows, loss)``; (0, nan) when no rank had rows."""
        optimiser.zero_grad(set_to_none=True)
        parameters = [p for group in optimiser.param_groups for p in group["params"]]
        loss = None
        if xb.shape[0]:
            loss = objective(xb, yb)
            loss.backward()
        total, value = reduce(parameters, xb.shape[0], loss)
        if total:
            optimiser.step()
        return total, value

    lr = learning_rate
    optimisers = make_optimisers(head_parameters, relevances, lr)
    history = FitHistory(state=snapshot(model))
    best, stall, restarts = math.inf, 0, 0
    epoch = 0
    while epoch < max_iter:
        model.train()
        running, seen, finite = 0.0, 0, True
        for xb, yb in epoch_batches():
            for optimiser in optimisers:
                total, loss = step(optimiser, xb, yb)
                if not total:
                    break
            if not total:
                break
            if relevance_penalty > 0:
                with torch.no_grad():
                    shrunk = relevances.abs() - lr * relevance_penalty
                    relevances.copy_(torch.sign(relevances) * shrunk.clamp_min(0.0))
            if not math.isfinite(loss):
                finite = False
                break
            running += loss * total
            seen += total
        model.eval()
        score = monitor() if finite else math.nan
        if not math.isfinite(score):
            restarts += 1
            if restarts > settings.max_divergence_restarts:
                raise DivergenceError(
                    f"training diverged (non-finite loss) even after lowering the learning rate to {lr:.3g}; "
                    "lower learning_rate or raise alpha."
                )
            model.load_state_dict(history.state)
            lr /= 2.0
            optimisers = make_optimisers(head_parameters, relevances, lr)
            continue
        epoch += 1
        history.record(running / max(seen, 1), score)
        if progress is not None:
            progress(epoch, history.train_loss[-1], score)
        if score < best - tol * max(abs(best), 1e-12) if math.isfinite(best) else True:
            best, stall = score, 0
            history.state = snapshot(model)
            history.best_validation_loss = score
        else:
            stall += 1
            if n_iter_no_change is not None and stall >= n_iter_no_change:
                break
    history.n_iter = epoch
    history.stopped_on_max_iter = epoch >= max_iter and stall < (n_iter_no_change or convergence_patience)
    model.load_state_dict(history.state)
    return history
