"""Newton's method for the L2-penalised logistic objective on few coordinates: tensors in, tensors out.

:func:`newton_logistic` minimises the objective of :func:`rffkit._logistic.logistic_objective`
(binary or multinomial) with the exact Hessian (on the CPU its Gram blocks by ``syrk``,
factored by LAPACK, :mod:`rffkit._dense`), a Cholesky solve and a backtracking
(Armijo) line search (Nocedal & Wright, 2006, ch. 3). Its iterations cost
``O(n P^2 + P^3)`` for ``P`` parameters, against ``O(n P)`` for an L-BFGS
evaluation, but they are few and their count barely grows as the penalty vanishes on
nearly separable data, where L-BFGS needs hundreds: it is the solver of choice when
``P`` is small (:func:`newton_is_cheaper`), as for RFFNet's logistic head on a few
hundred rows in principal coordinates.

The multinomial model's softmax is unchanged by adding one number to every class's
intercept: that direction of the Hessian is flat, and a jitter on the intercepts'
diagonal keeps the Newton system positive definite without moving the solution; each
step's intercepts are then centred, so that the rounding along that direction (large in
float32) does not move the intercepts' mean.
"""

from __future__ import annotations

import numpy as np
import torch

from ._dense import cholesky_solve_upper, on_cpu, syrk_upper

__all__ = ["newton_logistic", "newton_is_cheaper", "solve_costs"]


def solve_costs(n, r, n_out, *, expected_newton=8, expected_lbfgs=60, overhead_flops=1e7):
    """``(newton, lbfgs)``: the floating-point operations of one solve on ``n`` rows, ``r`` coordinates
    and ``n_out`` logits by each method.

    A cost model: about ``expected_newton`` Newton iterations, each forming the Hessian
    (``n r^2`` per pair of logits) and factoring it (``P^3 / 3``), against
    ``expected_lbfgs`` L-BFGS evaluations, each two passes of the features plus a fixed
    overhead (SciPy's driver and the transfers, about a millisecond).
    """
    P = (r + 1) * n_out
    newton = expected_newton * (n * (r + 1) ** 2 * n_out * (n_out + 1) / 2 + P**3 / 3)
    lbfgs = expected_lbfgs * (4 * n * (r + 1) * n_out + overhead_flops)
    return newton, lbfgs


def newton_is_cheaper(n, r, n_out, **costs):
    """Whether Newton's method should beat L-BFGS on ``n`` rows, ``r`` coordinates and ``n_out``
    logits (:func:`solve_costs`)."""
    newton, lbfgs = solve_costs(n, r, n_out, **costs)
    return newton < lbfgs


def _terms(A, target, params, penalty, n_out):
    """Objective, gradient and probability matrix at ``params`` ((r + 1) x n_out, intercepts last)."""
    n = A.shape[0]
    logits = A @ params
    weights = params[:-1]
    if n_out == 1:
        f = logits[:, 0]
        value = (torch.nn.functional.softplus(f) - target * f).mean()
        residual = (torch.sigmoid(f) - target)[:, None]
        probabilities = torch.sigmoid(f)[:, None]
    else:
        log_normaliser = torch.logsumexp(logits, dim=1)
        value = (log_normaliser - logits.gather(1, target[:, None])[:, 0]).mean()
        probabilities = torch.exp(logits - log_normaliser[:, None])
        residual = probabilities.clone()
        residual[torch.arange(n, device=A.device), target] -= 1.0
    value = float(value) + penalty * float((weights * weights).sum())
    gradient = A.T @ residual / n
    gradient[:-1] += 2.0 * penalty * weights
    return value, gradient, probabilities


def _hessian(A, probabilities, penalty, n_out):
    """The Hessian in the parameters flattened class by class (``[params[:, 0], params[:, 1], ...]``)."""
    n, q = A.shape
    if n_out == 1:
        p = probabilities[:, 0]
        H = A.T @ (A * (p * (1.0 - p))[:, None]) / n
    else:  # blocks A^T (diag(p_k) delta_kl - diag(p_k p_l)) A / n
        M = (A[:, None, :] * probabilities[:, :, None]).reshape(n, n_out * q)
        H = -(M.T @ M) / n
        for k in range(n_out):
            block = slice(k * q, (k + 1) * q)
            H[block, block] += A.T @ M[:, block] / n
    H.diagonal().add_(_penalty_diagonal(penalty, n_out, q, A))
    return H


def _penalty_diagonal(penalty, n_out, q, A):
    diagonal = torch.full((n_out, q), 2.0 * penalty, dtype=A.dtype, device=A.device)
    diagonal[:, -1] = 0.0
    return diagonal.reshape(-1)


def _hessian_upper(A, probabilities, penalty, n_out):
    """:func:`_hessian`'s upper triangle (diagonal included; below it unspecified) as a
    Fortran-ordered array, by ``syrk`` (:mod:`rffkit._dense`): half the multiply-adds of
    :func:`_hessian`'s products, at OpenBLAS's rate. Every block is a Gram matrix: the
    binary one of ``A`` scaled by ``sqrt(p (1 - p))`` per row, the multinomial one
    ``-M^T M`` plus, on the diagonal blocks, those of ``A`` scaled by ``sqrt(p_k)``."""
    n, q = A.shape
    if n_out == 1:
        p = probabilities[:, 0]
        H = syrk_upper(A * (p * (1.0 - p)).sqrt()[:, None])
        H *= 1.0 / n
    else:
        H = syrk_upper((A[:, None, :] * probabilities[:, :, None]).reshape(n, n_out * q))
        H *= -1.0 / n
        for k in range(n_out):
            block = slice(k * q, (k + 1) * q)
            H[block, block] += syrk_upper(A * probabilities[:, k].sqrt()[:, None]) / n
    H.flat[:: H.shape[0] + 1] += _penalty_diagonal(penalty, n_out, q, A).numpy()
    return H


def _newton_step(A, probabilities, penalty, n_out, gradient, intercept_rows):
    """``-H^{-1} gradient`` by Cholesky, the diagonal jittered until the factorisation succeeds;
    on CPU float tensors by SciPy's LAPACK on :func:`_hessian_upper`, elsewhere by torch."""
    cpu = on_cpu(A, probabilities, gradient)
    H = _hessian_upper(A, probabilities, penalty, n_out) if cpu else _hessian(A, probabilities, penalty, n_out)
    scale = float(np.abs(np.diagonal(H)).max()) if cpu else float(H.diagonal().abs().max())
    scale = max(scale, 1e-300)
    jitter = np.zeros(H.shape[0])
    jitter[intercept_rows.cpu().numpy()] = max(1e-10, 16 * torch.finfo(A.dtype).eps) * scale
    for attempt in range(12):
        if cpu:
            system = H.copy(order="F")
            system.flat[:: system.shape[0] + 1] += jitter
            solution = cholesky_solve_upper(system, gradient.numpy())
            if solution is not None:
                return -torch.from_numpy(solution)
        else:
            factor, info = torch.linalg.cholesky_ex(H + torch.diag(torch.as_tensor(jitter, dtype=H.dtype,
                                                                                   device=H.device)))
            if int(info) == 0:
                return -torch.cholesky_solve(gradient[:, None], factor)[:, 0]
        jitter += scale * 10.0 ** (attempt - 10)
    return -gradient / scale  # a gradient step; the line search takes it from there


@torch.no_grad()
def newton_logistic(G, target, penalty, *, weights, bias, scales=None, max_iter=100, tol=1e-6):
    """Minimise ``mean_i loss_i + penalty ||W||_F^2`` over ``(W, b)`` by damped Newton steps from ``(weights, bias)``.

    The objective is :func:`rffkit._logistic.logistic_objective` at ``alpha = 2 penalty``
    (one logit column: binary; more: multinomial), on float tensors on any device.

    Parameters
    ----------
    G : Tensor of shape (n, r)
        The features.
    target : Tensor of shape (n,)
        0/1 floats (one logit column) or class indices (long).
    penalty : float
    weights : Tensor of shape (r, K)
    bias : Tensor of shape (K,)
        The starting point (not changed).
    scales : Tensor of shape (r,) or None
        The convergence test reads the gradient in the coordinates ``W / scales``
        (those of a preconditioned L-BFGS, so that both solvers stop at the same
        accuracy); None: in ``W``.
    max_iter : int, default=100
    tol : float, default=1e-6
        Stop when the largest absolute gradient entry falls below ``tol``.

    Returns
    -------
    weights : Tensor of shape (r, K)
    bias : Tensor of shape (K,)
    n_iter : int
        Newton iterations run (at least 1).
    gradient_norm : float
        The largest absolute gradient entry at the returned point.

    Examples
    --------
    >>> import torch
    >>> G = torch.tensor([[1.0], [2.0], [-1.0], [-2.0], [0.5]], dtype=torch.float64)
    >>> y = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    >>> W, b, n_iter, gradient = newton_logistic(G, y, 0.01, weights=torch.zeros(1, 1, dtype=torch.float64),
    ...                                          bias=torch.zeros(1, dtype=torch.float64), tol=1e-10)
    >>> bool(W[0, 0] > 0), gradient < 1e-10, n_iter < 20
    (True, True, True)
    """
    n_out = weights.shape[1]
    A = torch.cat([G, torch.ones(G.shape[0], 1, dtype=G.dtype, device=G.device)], dim=1)
    params = torch.cat([weights.to(G.dtype), bias.to(G.dtype)[None, :]])
    q = A.shape[1]
    reading = torch.ones(q, 1, dtype=G.dtype, device=G.device)
    if scales is not None:
        reading[:-1, 0] = scales.to(G.dtype)
    intercept_rows = torch.arange(n_out, device=G.device) * q + q - 1
    value, gradient, probabilities = _terms(A, target, params, penalty, n_out)
    n_iter, norm = 0, float((gradient * reading).abs().max())
    while norm > tol and n_iter < max_iter:
        n_iter += 1
        flat_gradient = gradient.T.reshape(-1)
        step = _newton_step(A, probabilities, penalty, n_out, flat_gradient, intercept_rows)
        step = step.reshape(n_out, q).T
        if n_out > 1:  # the softmax ignores a common shift of the intercepts: keep their mean where it is
            step[-1] -= step[-1].mean()
        slope = float(flat_gradient @ step.T.reshape(-1))
        if slope >= 0:  # not a descent direction (rounding near the optimum): the gradient's
            step, slope = -gradient, -float((gradient * gradient).sum())
        t = 1.0
        for _ in range(40):
            trial = params + t * step
            trial_value, trial_gradient, trial_probabilities = _terms(A, target, trial, penalty, n_out)
            if trial_value <= value + 1e-4 * t * slope:
                break
            t *= 0.5
        else:  # no decrease within rounding: the point is as good as it gets
            break
        params, value, gradient, probabilities = trial, trial_value, trial_gradient, trial_probabilities
        norm = float((gradient * reading).abs().max())
    return params[:-1], params[-1], max(n_iter, 1), norm
