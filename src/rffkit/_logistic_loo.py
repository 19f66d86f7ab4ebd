"""Approximate leave-one-out log-loss of an L2-penalised logistic fit: tensors in, tensors out.

Leaving row ``i`` out of the objective ``F(beta) = sum_j loss_j(X_j beta) + n penalty ||W||^2``
moves its minimum by about one Newton step from the fit on all rows,
``beta_{-i} = beta + (H - X_i^T W_i X_i)^{-1} X_i^T g_i``, with ``H`` the Hessian of ``F``,
``g_i`` and ``W_i`` the gradient and Hessian of row ``i``'s loss in its logits and ``X_i``
the map from the parameters to those logits. By the Woodbury identity the logits of the
row predicted without it are then

    eta_i + A_i (I - W_i A_i)^{-1} g_i,   A_i = X_i H^{-1} X_i^T,

one ``K x K`` system per row for ``K`` logits: the approximate leave-one-out (ALO) of
Rad & Maleki (2020), whose error vanishes as the rows grow, also when the parameters grow
with them; Beirami et al. (2017) give the same step for M-estimators. Its cost is the
Hessian, its inverse (``(K q)^3`` for ``q`` parameters per logit) and
``n K^2 q^2`` multiply-adds, against a refit per row for the exact leave-one-out, or per
fold for cross-validation: with many classes and coordinates the folds' L-BFGS solves
cost less (:func:`loo_is_cheaper`).
"""

from __future__ import annotations

import torch

from ._logistic_newton import _hessian, solve_costs

__all__ = ["approximate_loo_losses", "loo_is_cheaper"]

#: Rows of the multinomial leverages computed at once (their intermediate holds K^2 q numbers per row).
_BLOCK_BYTES = 2**26


def loo_is_cheaper(n, r, n_out, n_folds):
    """Whether the approximate leave-one-out of a penalty (a solve on all ``n`` rows and
    :func:`approximate_loo_losses`) costs fewer floating-point operations than ``n_folds``
    solves on the folds' training rows, for ``r`` coordinates and ``n_out`` logits (the cost
    model of :func:`rffkit._logistic_newton.solve_costs`)."""
    q = r + 1
    if n_out == 1:
        approximation = 2.0 * n * q**2 + q**3 / 3
    else:  # the full Hessian, the leverages and the inverse
        approximation = 2.0 * n * n_out**2 * q**2 + (n_out * q) ** 3
    # along the path each fold's solve starts where its last one ended: few iterations
    warm = dict(expected_newton=4, expected_lbfgs=20)
    folds = n_folds * min(solve_costs(n * (n_folds - 1) / n_folds, r, n_out, **warm))
    return approximation + min(solve_costs(n, r, n_out, **warm)) <= folds


def _factor(H):
    """The lower Cholesky factor of ``H``, its diagonal jittered until the factorisation succeeds (None if
    it never does)."""
    scale = float(H.diagonal().abs().max().clamp_min(1e-300))
    eye = torch.eye(H.shape[0], dtype=H.dtype, device=H.device)
    jitter = 0.0
    for attempt in range(16):
        factor, info = torch.linalg.cholesky_ex(H + jitter * eye)
        if int(info) == 0:
            return factor
        jitter = scale * 10.0 ** (attempt - 14)
    return None


@torch.no_grad()
def approximate_loo_losses(G, target, weights, bias, penalty):
    """Log-loss of every row predicted by the fit on the other rows, approximated by one Newton step.

    Parameters
    ----------
    G : Tensor of shape (n, r)
        The features.
    target : Tensor of shape (n,)
        0/1 floats (one logit column) or class indices (long).
    weights : Tensor of shape (r, K)
    bias : Tensor of shape (K,)
        The minimum of ``mean_i loss_i + penalty ||weights||_F^2``
        (:func:`rffkit._logistic_newton.newton_logistic`'s objective) on all rows.
    penalty : float

    Returns
    -------
    Tensor of shape (n,)
        The per-row log-loss at the approximate leave-one-out logits (module docstring);
        infinite where the Hessian cannot be factored.

    Examples
    --------
    >>> import torch
    >>> from rffkit._logistic_newton import newton_logistic
    >>> G = torch.tensor([[1.0], [2.0], [-1.0], [-2.0], [0.5], [-0.5]], dtype=torch.float64)
    >>> y = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    >>> W, b, _, _ = newton_logistic(G, y, 0.05, weights=torch.zeros(1, 1, dtype=torch.float64),
    ...                              bias=torch.zeros(1, dtype=torch.float64), tol=1e-12)
    >>> losses = approximate_loo_losses(G, y, W, b, 0.05)
    >>> losses.shape, bool((losses > 0).all())
    (torch.Size([6]), True)
    """
    n, n_out = G.shape[0], weights.shape[1]
    A = torch.cat([G, torch.ones(n, 1, dtype=G.dtype, device=G.device)], dim=1)
    q = A.shape[1]
    logits = A @ torch.cat([weights.to(G.dtype), bias.to(G.dtype)[None, :]])
    if n_out == 1:
        p = torch.sigmoid(logits[:, 0])
        factor = _factor(_hessian(A, p[:, None], penalty, 1) * n)
        if factor is None:
            return torch.full((n,), torch.inf, dtype=G.dtype, device=G.device)
        solved = torch.linalg.solve_triangular(factor, A.T, upper=False)
        leverage = (solved * solved).sum(dim=0)
        curvature = p * (1.0 - p)
        shifted = logits[:, 0] + leverage * (p - target) / (1.0 - curvature * leverage)
        return torch.nn.functional.binary_cross_entropy_with_logits(shifted, target, reduction="none")
    probabilities = torch.softmax(logits, dim=1)
    H = _hessian(A, probabilities, penalty, n_out) * n
    # the softmax ignores a common shift of the intercepts: fix the last class's at its value
    keep = torch.arange(n_out * q - 1, device=G.device)
    factor = _factor(H[keep][:, keep])
    if factor is None:
        return torch.full((n,), torch.inf, dtype=G.dtype, device=G.device)
    inverse = torch.zeros_like(H)
    inverse[:-1, :-1] = torch.cholesky_inverse(factor)
    blocks = inverse.reshape(n_out, q, n_out, q)
    # A_i[k, l] = a_i^T inverse[k-block, l-block] a_i, a block of rows at a time
    leverage = torch.empty(n, n_out, n_out, dtype=G.dtype, device=G.device)
    step = max(1, _BLOCK_BYTES // (8 * n_out * n_out * q))
    for start in range(0, n, step):
        rows = A[start:start + step]
        leverage[start:start + step] = torch.einsum("iklr,ir->ikl", torch.einsum("iq,kqlr->iklr", rows, blocks), rows)
    gradient = probabilities.clone()
    gradient[torch.arange(n, device=G.device), target] -= 1.0
    curvature = torch.diag_embed(probabilities) - probabilities[:, :, None] * probabilities[:, None, :]
    eye = torch.eye(n_out, dtype=G.dtype, device=G.device)
    step = torch.linalg.solve(eye - curvature @ leverage, gradient[:, :, None])
    shifted = logits + (leverage @ step)[:, :, 0]
    return torch.nn.functional.cross_entropy(shifted, target, reduction="none")
