"""The centred ridge systems of :mod:`rffkit._ridge`: tensors in, tensors out.

:func:`solve_centred` solves ``(Zc^T Zc [/ n] + alpha I) coef = Zc^T yc [/ n]`` for
centred features ``Zc`` (n x D): by ``syrk``, ``potrf`` and ``potrs`` on LAPACK for a
large CPU problem, else on torch, by Cholesky with a least-squares fallback. With fewer
rows than features (:func:`dual_pays`) it solves the dual instead: with
``K = Zc Zc^T`` (n x n), ``coef = Zc^T c`` where ``(K [/ n] + alpha I) c = yc [/ n]``
(the push-through identity ``(Zc^T Zc + a I)^-1 Zc^T = Zc^T (Zc Zc^T + a I)^-1``), at
``n^2 D + n^3 / 3`` flops instead of ``n D^2 + D^3 / 3``: the same coefficients to rounding.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._dense import cholesky_solve_upper, gram_matrix, matmul, on_cpu, syrk_pays, system_upper

__all__ = ["dual_pays", "gcv_dual", "solve_centred"]


def _lapack_solve_centred(Zc, yc, alpha, per_sample, dtype=np.float64):
    """The coefficients of :func:`solve_centred` in ``dtype`` by ``syrk``, ``potrf`` and ``potrs``
    on the upper triangle, with one ``D x D`` array for the system and its factor (float32:
    ``syrk``'s own); None when the system is not numerically positive definite."""
    n, D = Zc.shape
    scale = 1.0 / n if per_sample else 1.0
    system = system_upper(Zc, scale, alpha, dtype=dtype)
    rhs = matmul(Zc.T, yc.reshape(n, -1)).numpy().astype(dtype) * dtype(scale)
    coef = cholesky_solve_upper(system, rhs)
    return None if coef is None else torch.from_numpy(coef).reshape((D, *yc.shape[1:]))


def dual_pays(Z):
    """Whether the ridge systems of ``Z`` (n x D) are solved in the dual: fewer rows than features."""
    return Z.shape[0] < Z.shape[1]


def _cholesky_or_lstsq(system, rhs, again_in_float64):
    """``system^-1 rhs`` by Cholesky, or by least squares (SVD on the CPU) where ``system`` is not
    numerically positive definite; None in that case when ``again_in_float64`` and ``system`` is
    float32 (the caller solves it again in float64)."""
    column = rhs.unsqueeze(-1) if rhs.ndim == 1 else rhs
    factor, info = torch.linalg.cholesky_ex(system)
    if int(info) == 0:
        return torch.cholesky_solve(column, factor).reshape(rhs.shape)
    if again_in_float64 and system.dtype == torch.float32:
        return None
    # on the CPU by SVD (gelsd): torch's default there, MKL's gelsy, returned solutions off by
    # up to 0.07 on a rank-deficient system when run on two threads, differing call to call
    driver = "gelsd" if system.device.type == "cpu" else None
    return torch.linalg.lstsq(system, column, driver=driver).solution.reshape(rhs.shape)


def _solve_dual(Zc, yc, alpha, per_sample, solve_dtype):
    """:func:`solve_centred` through the ``n x n`` system ``(Zc Zc^T [/ n] + alpha I) c = yc [/ n]``,
    ``coef = Zc^T c`` (see the module): the kernel matrix formed in float64 (``n^2 D``, cheap where
    ``n < D``; from float32 products its small eigenvalues, which the smallest penalties expose,
    were 10-1000 times less accurate than the primal system's), the solve in ``solve_dtype`` (None:
    that of ``Zc``; float32 that is not numerically positive definite: again in float64), ``Zc^T c``
    in the solve's dtype."""
    n = Zc.shape[0]
    dtype = Zc.dtype if solve_dtype is None else solve_dtype
    scale = 1.0 / n if per_sample else 1.0
    kernel = gram_matrix(Zc.T.double()).to(dtype) * scale
    kernel.diagonal().add_(alpha)
    dual = _cholesky_or_lstsq(kernel, yc.to(dtype) * scale, solve_dtype == torch.float32)
    if dual is None:
        return _solve_dual(Zc, yc, alpha, per_sample, torch.float64)
    return (Zc.T.to(dtype) @ dual.reshape(n, -1)).reshape((Zc.shape[1], *yc.shape[1:])).to(Zc.dtype)


def solve_centred(Zc, yc, alpha, per_sample, solve_dtype):
    """``coef`` of ``(Zc^T Zc [/ n] + alpha I) coef = Zc^T yc [/ n]``.

    The products run in the dtype of ``Zc``, the ``D x D`` solve (with fewer rows than
    features, the ``n x n`` one of :func:`_solve_dual`) in ``solve_dtype``
    (None: the same): on LAPACK for a large CPU problem solved in float64, or in float32
    from float32 features, without a gradient, else on torch, by Cholesky with a
    least-squares fallback. A float32 system that is not numerically positive definite
    is solved again in float64.
    """
    if dual_pays(Zc):
        return _solve_dual(Zc, yc, alpha, per_sample, solve_dtype)
    lapack = (syrk_pays(Zc) and on_cpu(Zc, yc)
              and not (torch.is_grad_enabled() and (Zc.requires_grad or yc.requires_grad)))
    if lapack and solve_dtype == torch.float32 == Zc.dtype:
        coef = _lapack_solve_centred(Zc, yc, alpha, per_sample, np.float32)
        # asked for float32 and not numerically positive definite there: again in float64
        return coef if coef is not None else solve_centred(Zc, yc, alpha, per_sample, torch.float64)
    if lapack and solve_dtype == torch.float64:
        coef = _lapack_solve_centred(Zc, yc, alpha, per_sample)
        if coef is not None:
            return coef.to(Zc.dtype)
    gram, rhs = gram_matrix(Zc), Zc.T @ yc
    if solve_dtype is not None:
        gram, rhs = gram.to(solve_dtype), rhs.to(solve_dtype)
    if per_sample:
        gram, rhs = gram / Zc.shape[0], rhs / Zc.shape[0]
    gram.diagonal().add_(alpha)
    coef = _cholesky_or_lstsq(gram, rhs, solve_dtype == torch.float32)
    if coef is None:  # float32 and not numerically positive definite: again in float64
        return solve_centred(Zc, yc, alpha, per_sample, torch.float64)
    return coef.to(Zc.dtype)


@torch.no_grad()
def gcv_dual(Z, y, alpha):
    """``(score, coef, intercept)`` of :func:`rffkit._ridge.gcv_score` through the ``m x m`` system.

    With ``G = Zc Zc^T / m + alpha I`` and ``A = G^-1 Yc`` the residuals are ``-alpha A``
    (``I - H = alpha G^-1`` for the hat matrix ``H``), ``coef = Zc^T A / m`` and
    ``df = tr(H) = m - alpha tr(G^-1)``: ``m^2 D + m^3`` flops instead of the primal's
    ``m D^2 + D^3``, for ``m < D``. Formed and solved in float64, without a gradient;
    ``score`` is ``inf`` when ``G`` could not be factorised.
    """
    m, s = Z.shape
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    Zc = (Z - z_mean).double()
    system = gram_matrix(Zc.T) / m
    system.diagonal().add_(alpha)
    factor, info = torch.linalg.cholesky_ex(system)
    score = math.inf
    if int(info) != 0:
        coef = solve_centred(Z - z_mean, y - y_mean, alpha, True, torch.float64)
    else:
        inverse = torch.cholesky_inverse(factor)
        dual = inverse @ (y - y_mean).reshape(m, -1).double()
        shrink = alpha * float(inverse.diagonal().sum()) / m  # 1 - df / m, without the cancellation
        if shrink > 0:  # alpha = 0: G is singular, and a factor found is rounding
            score = alpha * alpha * float((dual * dual).mean()) / shrink**2
        coef = (Zc.T @ dual / m).to(Z.dtype).reshape(s, *y.shape[1:])
    score = torch.tensor(score if math.isfinite(score) else math.inf, dtype=Z.dtype, device=Z.device)
    return score, coef, y_mean - z_mean @ coef
