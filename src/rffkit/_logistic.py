"""Logistic regression on fixed features: tensors in, tensors out.

The package's logistic numerics: :func:`logistic_objective` (binary or multinomial,
L2-penalised), :func:`minimise_logistic` (full-batch L-BFGS from a given point,
optionally in preconditioned coordinates), :func:`fit_logistic` (from zero, the solver
of :class:`~rffkit.RFFClassifier`) and :class:`LogisticHead`, a fitted head. RFFNet's
logistic head, whose penalty is chosen along a preconditioned path, is
:func:`rffkit._logistic_path.logistic_head_path`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._dense import matmul
from ._guards import blas_threads, rebalance_threads

__all__ = [
    "logistic_objective",
    "minimise_logistic",
    "objective_and_gradient",
    "fit_logistic",
    "LogisticHead",
]


def logistic_objective(weights, bias, Z, target, alpha):
    """``mean_i loss_i + alpha / 2 ||W||_F^2`` (bias unpenalised).

    One logit column (``weights`` of shape (D, 1)) is the binary model with the
    logistic loss ``log(1 + exp(-y_i f_i))``; ``K >= 2`` columns are the multinomial
    model with the softmax cross-entropy.

    Parameters
    ----------
    weights : Tensor of shape (D, 1) or (D, K)
        The weights ``W``.
    bias : Tensor of shape (1,) or (K,)
        The intercepts.
    Z : Tensor of shape (n, D)
        The features.
    target : Tensor of shape (n,)
        0/1 floats for the binary model, class indices (long) for the multinomial one.
    alpha : float
        The L2 penalty.

    Returns
    -------
    Tensor
        The objective, a scalar.

    Examples
    --------
    >>> import torch
    >>> Z = torch.zeros(4, 3, dtype=torch.float64)
    >>> value = logistic_objective(torch.zeros(3, 1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
    ...                            Z, torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64), 1.0)
    >>> round(float(value), 4)  # log 2 at W = 0
    0.6931
    """
    logits = Z @ weights + bias
    return _mean_loss(logits, target) + 0.5 * alpha * (weights * weights).sum()


def _mean_loss(logits, target):
    if logits.shape[1] == 1:
        return torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 0], target)
    return torch.nn.functional.cross_entropy(logits, target)


def _sample_losses(logits, target):
    if logits.shape[1] == 1:
        return torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 0], target, reduction="none")
    return torch.nn.functional.cross_entropy(logits, target, reduction="none")


def minimise_logistic(Z, target, alpha, *, weights, bias, fit_intercept=True, max_iter=500, tol=1e-6,
                      preconditioner=None, history_size=20, return_converged=False):
    """Minimise :func:`logistic_objective` by full-batch L-BFGS from ``(weights, bias)``.

    SciPy's L-BFGS-B drives the iterations on a float64 vector; the objective and its
    gradient are computed by torch in the dtype and on the device of ``Z``.

    Parameters
    ----------
    Z : Tensor of shape (n, D)
    target : Tensor of shape (n,)
        As in :func:`logistic_objective`.
    alpha : float
        The penalty of :func:`logistic_objective`.
    weights : Tensor of shape (D, K)
        The starting weights (not changed).
    bias : Tensor of shape (K,)
        The starting intercepts (not changed).
    fit_intercept : bool, default=True
    max_iter : int, default=500
        Most L-BFGS iterations.
    tol : float, default=1e-6
        Stop when the largest absolute gradient entry (in the solved coordinates)
        falls below ``tol``.
    preconditioner : tuple of Tensor or None, default=None
        ``(V, d)`` with orthonormal columns ``V`` (D, r) and scales ``d`` (r,): solve
        for ``gamma`` with ``weights = V diag(d) gamma`` (see :mod:`rffkit._logistic_path`);
        the weights are then confined to the span of ``V``. ``V`` None stands for the
        identity (``r = D``).
    history_size : int, default=20
        L-BFGS memory.
    return_converged : bool, default=False
        Return whether the solve converged as well.

    Returns
    -------
    weights : Tensor of shape (D, K)
    bias : Tensor of shape (K,)
    n_iter : int
        L-BFGS iterations run (at least 1).
    gradient_norm : float
        The largest absolute gradient entry at the returned point, in the solved
        coordinates.
    converged : bool
        Only with ``return_converged``: the gradient met ``tol``, or L-BFGS stopped before
        its limits (``max_iter`` iterations, ``2 max_iter`` evaluations) because no step
        lowers the objective as computed in the dtype of ``Z`` any more: the minimum to
        that precision, which float32 may reach above ``tol``.
    """
    from scipy.optimize import minimize

    dtype, device = Z.dtype, Z.device
    V = d = None
    if preconditioner is None:
        start = weights.detach().to(dtype)
        to_weights = lambda gamma: gamma  # noqa: E731
    elif preconditioner[0] is None:
        d = preconditioner[1].to(dtype)
        start = weights.detach().to(dtype) / d[:, None]
        to_weights = lambda gamma: d[:, None] * gamma  # noqa: E731
    else:
        V, d = preconditioner
        start = matmul(V.T, weights.detach().to(V.dtype)) / d[:, None]
        to_weights = lambda gamma: matmul(V, d[:, None] * gamma.to(V.dtype)).to(dtype)  # noqa: E731
    shape = start.shape
    size = start.numel()
    initial = torch.cat([start.reshape(-1).double(), bias.detach().reshape(-1).double()]).cpu().numpy()
    fixed_bias = bias.detach().to(dtype)
    last = {}

    def objective(vector):
        rebalance_threads()
        values = torch.as_tensor(vector, device=device)
        gamma = values[:size].reshape(shape).to(start.dtype)
        intercept = values[size:].to(dtype) if fit_intercept else fixed_bias
        value, weight_gradient, bias_gradient = objective_and_gradient(to_weights(gamma), intercept, Z, target, alpha)
        if V is not None:  # the chain rule through weights = V diag(d) gamma
            weight_gradient = d[:, None] * matmul(V.T, weight_gradient.to(V.dtype))
        elif d is not None:
            weight_gradient = d[:, None] * weight_gradient
        if not fit_intercept:
            bias_gradient = torch.zeros_like(bias_gradient)
        gradient = torch.cat([weight_gradient.reshape(-1).double(), bias_gradient.double()]).cpu().numpy()
        last["gradient"] = float(np.abs(gradient).max())
        return value, gradient

    # SciPy's L-BFGS-B works on vectors of D x K numbers, where BLAS threads gain nothing; on
    # more than one thread they and torch's OpenMP threads, called in turn every evaluation,
    # wait on each other (a 600 x 540, 3-class fit on 2 threads: 137 s, 20 s with this limit).
    # Estimators already run with the BLAS on one thread (_guards.limited_threads); this
    # limit is for callers of the public rffkit.logistic.fit_logistic.
    with blas_threads().limit(limits=1, user_api="blas"):
        result = minimize(objective, initial, jac=True, method="L-BFGS-B",
                          options={"maxiter": max_iter, "maxfun": 2 * max_iter, "gtol": tol, "ftol": 0.0,
                                   "maxcor": history_size})
    solution = torch.as_tensor(result.x, device=device)
    gamma = solution[:size].reshape(shape).to(start.dtype)
    intercept = solution[size:].to(dtype) if fit_intercept else fixed_bias
    objective(result.x)  # the gradient at the returned point
    solved = to_weights(gamma), intercept, max(int(result.nit), 1), last["gradient"]
    if not return_converged:
        return solved
    # SciPy's status 1: the iterations or evaluations ran out; else, short of tol, no step lowered the objective
    # (ftol=0): the line search failed (2) or the objective did not decrease (0)
    stalled = int(result.status) != 1 and np.isfinite(last["gradient"])
    return (*solved, bool(last["gradient"] <= tol or stalled))


@torch.no_grad()
def objective_and_gradient(weights, bias, Z, target, alpha):
    """:func:`logistic_objective` and its gradients in closed form: ``(value, d/dW, d/db)``.

    With logits ``F = Z W + b`` and probabilities ``P`` (sigmoid of the one logit, or
    softmax), the gradient of the mean loss is ``Z^T (P - Y) / n`` in ``W`` and the
    column sums of ``(P - Y) / n`` in ``b`` (``Y`` the 0/1 target or the one-hot labels),
    plus ``alpha W`` from the penalty: one pass of ``Z`` forward and one back.
    """
    n = Z.shape[0]
    logits = matmul(Z, weights).add_(bias)
    if weights.shape[1] == 1:
        f = logits[:, 0]
        loss = torch.nn.functional.softplus(f) - target * f
        residual = (torch.sigmoid(f) - target)[:, None]
    else:
        log_normaliser = torch.logsumexp(logits, dim=1)
        loss = log_normaliser - logits.gather(1, target[:, None])[:, 0]
        residual = torch.exp(logits - log_normaliser[:, None])
        residual[torch.arange(n, device=Z.device), target] -= 1.0
    residual /= n
    value = float(loss.mean()) + 0.5 * alpha * float((weights * weights).sum())
    return value, matmul(Z.T, residual).add_(weights, alpha=alpha), residual.sum(dim=0)


def _as_target(labels, n_classes, dtype, device):
    if n_classes == 2:
        return torch.as_tensor(labels, device=device).to(dtype)
    return torch.as_tensor(labels, device=device).long()


def fit_logistic(Z, labels, n_classes, *, alpha, fit_intercept, max_iter, tol, dtype, device,
                 return_converged=False):
    """Minimise :func:`logistic_objective` by full-batch L-BFGS from zero.

    Parameters
    ----------
    Z : ndarray of shape (n, D)
        The random features.
    labels : ndarray of shape (n,)
        Integer class indices in ``[0, n_classes)``.
    n_classes : int
        2 gives the binary model (one logit), more the multinomial one.
    alpha, fit_intercept, max_iter, tol : float, bool, int, float
        As in :class:`~rffkit.RFFClassifier`.
    dtype, device : torch.dtype, torch.device
        Where and in which precision to compute.
    return_converged : bool, default=False
        Return whether L-BFGS converged as well (see :func:`minimise_logistic`).

    Returns
    -------
    weights : Tensor of shape (D, K)
        ``K = 1`` for two classes.
    bias : Tensor of shape (K,)
        Zeros when ``fit_intercept=False``.
    n_iter : int
        L-BFGS iterations run.
    gradient_norm : float
        The largest absolute gradient entry at the returned point.
    converged : bool
        Only with ``return_converged``: the gradient met ``tol``, or no step lowers the
        objective in ``dtype`` any more (:func:`minimise_logistic`).

    Examples
    --------
    >>> import numpy as np, torch
    >>> Z = np.array([[1.0], [2.0], [-1.0], [-2.0]])
    >>> weights, bias, n_iter, gradient = fit_logistic(
    ...     Z, np.array([1, 1, 0, 0]), 2, alpha=0.1, fit_intercept=True, max_iter=100,
    ...     tol=1e-8, dtype=torch.float64, device="cpu")
    >>> weights.shape, bool(weights[0, 0] > 0), gradient < 1e-8
    (torch.Size([1, 1]), True, True)
    """
    Zt = torch.as_tensor(np.ascontiguousarray(Z), dtype=dtype, device=device)
    n_out = 1 if n_classes == 2 else n_classes
    target = _as_target(labels, n_classes, dtype, device)
    weights = torch.zeros(Zt.shape[1], n_out, dtype=dtype, device=device)
    bias = torch.zeros(n_out, dtype=dtype, device=device)
    return minimise_logistic(Zt, target, alpha, weights=weights, bias=bias, fit_intercept=fit_intercept,
                             max_iter=max_iter, tol=tol, return_converged=return_converged)


@dataclass(frozen=True)
class LogisticHead:
    """A fitted logistic head on features ``Z``: logits ``Z coef + intercept``.

    ``coef`` has one column for two classes (the logit of the second) and one per
    class otherwise; ``score`` is the mean validation log-loss (or, without a
    validation split, the training objective); ``converged`` tells whether L-BFGS
    met its tolerance before ``max_iter`` at the chosen penalty.
    """

    alpha: float
    coef: torch.Tensor
    intercept: torch.Tensor
    score: float
    converged: bool
    n_iter: int

    def logits(self, Z):
        """One logit per class, shape (n, n_classes): ``[0, f]`` for two classes."""
        f = Z.to(self.coef.dtype) @ self.coef + self.intercept
        return torch.cat([torch.zeros_like(f), f], dim=1) if f.shape[1] == 1 else f

    def sample_losses(self, Z, labels):
        """Per-sample log-loss on ``(Z, labels)``: shape (n,)."""
        f = Z.to(self.coef.dtype) @ self.coef + self.intercept
        return _sample_losses(f, _as_target(labels, 2 if f.shape[1] == 1 else f.shape[1], f.dtype, f.device))
