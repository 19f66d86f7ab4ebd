"""Ridge regression on fixed features: tensors in, tensors out.

Every closed-form ridge fit of the package goes through :func:`solve_ridge`: the
normal equations of the centred problem

    (Zc^T Zc / n + alpha I) beta = Zc^T yc / n,    c = mean(y) - mean(Z) beta

(or the same without the ``1/n``), solved by a Cholesky factorisation with a
least-squares fallback when rounding leaves the matrix not positive definite. On
top of it, :func:`gcv_score` gives the differentiable generalised cross-validation
score that RFFNet's relevance search minimises, and :func:`fit_ridge_head` the head
of a random-feature model with its penalty chosen along a path
(:func:`select_ridge_alpha`, one eigendecomposition for every penalty, from
:mod:`rffkit._ridge_path`).

With fewer rows than features (``n < D``) the systems are solved in the dual
(:mod:`rffkit._ridge_solve`): :func:`solve_ridge`, the eigendecomposition of
:func:`select_ridge_alpha` and the walk of :func:`walk_ridge_alpha` work on the
``n x n`` kernel matrix ``Zc Zc^T`` and give the primal form's head to rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ._dense import (
    bordered_system_upper,
    cholesky_solve_upper,
    gram_matrix,
    matmul,
    spd_inverse_upper,
    symmetric_eigh,
    syrk_pays,
    system_upper,
)
from ._ridge_path import RidgeSpectrum, gcv_path, loo_path, path_coefficients, ridge_spectrum, row_groups
from ._ridge_solve import dual_pays, gcv_dual, solve_centred

__all__ = [
    "GramShare", "RidgeSolution", "RidgeHead", "gram_matrix", "solve_ridge", "gcv_score", "select_ridge_alpha",
    "walk_ridge_alpha", "fit_ridge_head", "loo_ridge_head", "best_penalty",
]


@dataclass
class GramShare:
    """A centred Gram matrix handed from one :func:`walk_ridge_alpha` to a later one.

    ``known``, read by the walk: a Fortran-ordered float64 ``k x k`` array whose upper
    triangle holds ``Zc[:, :k]^T Zc[:, :k] / n`` of the walk's own centred features
    (the same rows and first ``k`` columns; the caller vouches for it), so that only
    the products with the other columns are formed; ``formed``, written by the walk:
    the ``D x D`` array of that kind it formed (both on the CPU, where ``syrk`` pays, and in the
    primal form; elsewhere, and in a walk that solves the dual, neither is used).
    """

    known: np.ndarray | None = None
    formed: np.ndarray | None = None


@dataclass(frozen=True)
class RidgeSolution:
    """Coefficients ``coef`` (D,) or (D, T) and ``intercept``."""

    coef: torch.Tensor
    intercept: torch.Tensor


@dataclass(frozen=True)
class RidgeHead:
    """A fitted ridge head ``Z coef + intercept``, its penalty and its score.

    ``score`` is the validation mean squared error, or the GCV score when the head was
    fitted without a validation split.
    """

    alpha: float
    coef: torch.Tensor
    intercept: torch.Tensor
    score: float

    def predict(self, Z):
        """``Z coef + intercept``."""
        return Z @ self.coef + self.intercept

    def sample_losses(self, Z, y):
        """Per-sample squared error on ``(Z, y)``, summed over outputs: shape (n,)."""
        return ((self.predict(Z) - y) ** 2).sum(dim=1)


def solve_ridge(Z, y, alpha, *, per_sample=True, solve_dtype=torch.float64, fit_intercept=True, overwrite_z=False):
    """Minimise ``mean((Z beta + c - y)^2) + alpha ||beta||^2`` over ``beta`` and ``c``.

    Parameters
    ----------
    Z : Tensor of shape (n, D)
    y : Tensor of shape (n,) or (n, T)
    alpha : float
        The penalty (non-negative).
    per_sample : bool, default=True
        True: the loss is the mean over samples (Gram matrix divided by ``n``);
        False: the sum, ``||Z beta + c - y||^2 + alpha ||beta||^2``.
    solve_dtype : torch.dtype or None, default=torch.float64
        The ``n D^2`` products run in the dtype of ``Z``; the ``D x D`` system is
        solved in this dtype (None: that of ``Z``).
    fit_intercept : bool, default=True
        Centre ``Z`` and ``y`` (unpenalised intercept); otherwise ``c = 0``.
    overwrite_z : bool, default=False
        Centre ``Z`` in place (a caller's temporary, not needing a gradient) instead of
        in a copy.

    Returns
    -------
    RidgeSolution
        ``coef`` and ``intercept`` in the dtype of ``Z``.
    """
    if not fit_intercept:
        coef = solve_centred(Z, y, alpha, per_sample, solve_dtype)
        return RidgeSolution(coef, torch.zeros(coef.shape[1:], dtype=Z.dtype, device=Z.device))
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    coef = solve_centred(Z.sub_(z_mean) if overwrite_z else Z - z_mean, y - y_mean, alpha, per_sample, solve_dtype)
    return RidgeSolution(coef, y_mean - z_mean @ coef)


def _spd_inverse(Zc, alpha):
    """``(Zc^T Zc / m + alpha I)^-1`` in float64, or None when it is not numerically positive definite."""
    m = Zc.shape[0]
    if syrk_pays(Zc):
        inverse = spd_inverse_upper(system_upper(Zc, 1.0 / m, alpha))
        return None if inverse is None else torch.from_numpy(inverse)
    system = gram_matrix(Zc).double() / m
    system.diagonal().add_(alpha)
    factor, info = torch.linalg.cholesky_ex(system)
    return None if int(info) != 0 else torch.cholesky_inverse(factor)


class _GCV(torch.autograd.Function):
    """:func:`gcv_score` with its gradient in ``Z`` in closed form (derivation in its docstring)."""

    @staticmethod
    def forward(ctx, Z, y, alpha):
        m, s = Z.shape
        z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
        Zc, yc = Z - z_mean, y - y_mean
        targets = yc.reshape(m, -1)
        inverse = _spd_inverse(Zc, alpha)
        if inverse is None:  # the least-squares fallback's coefficients, and no finite score
            coef = solve_centred(Zc, yc, alpha, True, torch.float64)
            ctx.finite = False
            return torch.full((), math.inf, dtype=Z.dtype, device=Z.device), coef, y_mean - z_mean @ coef
        B = inverse @ (matmul(Zc.T, targets).double() / m)
        coef = B.to(Z.dtype)
        residual = matmul(Zc, coef) - targets
        mse = (residual * residual).mean()
        df = s - alpha * float(inverse.diagonal().sum())
        score = mse / (1.0 - df / m) ** 2
        ctx.finite, ctx.alpha, ctx.mse, ctx.shrink = True, alpha, float(mse), 1.0 - df / m
        ctx.save_for_backward(Zc, residual, inverse, B)
        coef = coef.reshape(s, *y.shape[1:])
        intercept = y_mean - z_mean @ coef
        ctx.mark_non_differentiable(coef, intercept)
        return score.to(Z.dtype), coef, intercept

    @staticmethod
    def backward(ctx, grad_score, grad_coef, grad_intercept):
        if not ctx.finite:
            return None, None, None
        Zc, residual, inverse, B = ctx.saved_tensors
        m, k = residual.shape
        alpha, q = ctx.alpha, ctx.shrink
        V = inverse @ B
        fit_weight = 2.0 / (m * k * q * q)  # d mse / d Zc, divided by (1 - df / m)^2
        df_weight = 4.0 * alpha * ctx.mse / (m * m * q**3)  # through df
        inner = matmul(inverse, inverse).mul_(df_weight).add_(V @ B.T, alpha=fit_weight * alpha)
        outer = fit_weight * (B + alpha * V)
        grad = matmul(Zc, inner.to(Zc.dtype)) + residual @ outer.T.to(Zc.dtype)
        grad -= grad.mean(dim=0)  # through the centring
        return grad * grad_score.to(grad.dtype), None, None


def gcv_score(Z, y, alpha):
    """Generalised cross-validation score of the ridge fit on ``Z`` (differentiable in ``Z``).

    ``GCV = mean(r^2) / (1 - df / m)^2`` with ``df = tr(Z (Z^T Z + m alpha I)^-1 Z^T)``
    (Golub, Heath & Wahba, 1979) and ``r`` the ridge residuals: the training error
    inflated by the effective number of parameters, a rotation-invariant estimate of
    the leave-one-out error. Unlike the training objective it does not reward
    relevances that let the features fit noise when ``m`` is not much larger than
    ``D``. With ``S = (Zc^T Zc / m + alpha I)^-1``, ``df = D - alpha tr(S)``.

    The gradient in the centred ``Zc`` is written out rather than back-propagated
    through the factorisation: with ``B = S Zc^T Y / m`` the coefficients, ``R`` the
    residuals (``m x k``), ``V = S B`` and ``q = 1 - df / m``, the envelope theorem
    gives ``d(||R||^2 / m) = (2 / m) <R (B + alpha V)^T + alpha Zc V B^T, dZc>``, and
    ``d tr(S) = -(2 / m) <Zc S^2, dZc>``, so

        dGCV/dZc = 2 / (m k q^2) (R (B + alpha V)^T + alpha Zc V B^T) + 4 alpha mse / (m^2 q^3) Zc S^2,

    one ``m x D x D`` product and a ``D x D`` inverse, where back-propagation through
    the Cholesky factor took several ``D^3`` triangular solves and products; the
    gradient in ``Z`` is that in ``Zc`` less its column means.

    Without a gradient and with fewer rows than features the score is that of the
    ``m x m`` system (:func:`rffkit._ridge_solve.gcv_dual`).

    Returns ``(score, coef, intercept)`` (``coef`` and ``intercept`` without a
    gradient); ``score`` is ``inf`` when the system could not be factorised.
    """
    if dual_pays(Z) and not (torch.is_grad_enabled() and Z.requires_grad):
        return gcv_dual(Z, y, alpha)
    return _GCV.apply(Z, y, alpha)


def best_penalty(scores, alphas):
    """The index of the least finite score (ties to the larger penalty); of the largest penalty when none is finite."""
    finite = [k for k in range(len(alphas)) if math.isfinite(scores[k])]
    return min(finite, key=lambda k: (scores[k], -alphas[k])) if finite else int(np.argmax(alphas))


@torch.no_grad()
def select_ridge_alpha(Z, y, Z_val, y_val, alphas):
    """The ridge head whose penalty, among ``alphas``, scores best.

    Fits ``mean((Z beta + c - y)^2) + alpha ||beta||^2`` for every alpha from one
    eigendecomposition of the centred Gram matrix (the path of
    :mod:`rffkit._ridge_path`, which works on the sum of squares, hence the penalties
    ``n alpha``). The score is the mean squared error on ``(Z_val, y_val)`` or,
    without a validation split (``Z_val`` None), the GCV score. Ties go to the
    largest alpha; when every score is non-finite the largest alpha is used.

    Returns
    -------
    RidgeHead
        ``coef`` of shape (D, T) for ``y`` of shape (n, T), (D,) for ``y`` of shape (n,).
    """
    n = Z.shape[0]
    squeeze = y.ndim == 1
    y = y.reshape(n, -1)
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    Zc, yc = Z - z_mean, y - y_mean
    dual = dual_pays(Zc)
    Zt = Zc.T.double() if dual else None
    # the n D^2 products run in the dtype of Z, the D x D eigendecomposition in float64; the dual's
    # n x n kernel is formed in float64 (n^2 D, cheap where n < D: see rffkit._ridge_solve)
    eigenvalues, V = symmetric_eigh(gram_matrix(Zt) if dual else gram_matrix(Zc).double())
    eigenvalues = eigenvalues.clamp_min(0.0)
    # dual: V holds U_hat, and q = sqrt(s) U_hat^T yc (see rffkit._ridge_path)
    projections = V.T @ (yc.double() if dual else (Zc.T @ yc).double())
    spectrum = RidgeSpectrum(
        form="dual" if dual else "primal",
        eigenvalues=eigenvalues,
        eigenvectors=V,
        projections=eigenvalues.sqrt()[:, None] * projections if dual else projections,
        y_norm2=(yc.double() ** 2).sum(dim=0),
        n_samples=n,
        intercept=False,  # centred here; like gcv_score, df does not count the intercept
        feature_mean=z_mean.cpu().numpy(),
        target_mean=y_mean.cpu().numpy(),
        dual_projections=projections if dual else None,
    )

    def coefficients(penalty):
        if not dual:
            return path_coefficients(spectrum, penalty)
        return Zt @ (V @ (projections / (eigenvalues[:, None] + penalty)))

    penalties = [n * alpha for alpha in alphas]
    if Z_val is None:
        scores = gcv_path(spectrum, penalties).mean(dim=1).tolist()
    else:
        Zv = (Z_val - z_mean).double()
        target = (y_val.reshape(Z_val.shape[0], -1) - y_mean).double()
        scores = [float(((Zv @ coefficients(a) - target) ** 2).mean()) for a in penalties]
    best = best_penalty(scores, alphas)
    coef = coefficients(penalties[best]).to(Z.dtype)
    intercept = y_mean - z_mean @ coef
    if squeeze:
        coef, intercept = coef[:, 0], intercept[0]
    return RidgeHead(alphas[best], coef, intercept, scores[best])


@torch.no_grad()
def walk_ridge_alpha(Z, y, Z_val, y_val, alphas, start, *, overwrite_z=False, share=None):
    """The ridge head best on ``(Z_val, y_val)`` among ``alphas``, found by a walk from ``start``.

    From the grid value nearest ``start`` (on a log scale) the walk moves to a
    neighbouring penalty while that lowers the validation squared error (ties to the
    larger penalty), one Cholesky solve per penalty visited, with the centred Gram
    matrix formed once: where the penalty is known to within a few grid steps (a
    layer close to one whose head chose it) this costs a few ``D^3 / 3`` solves
    instead of the eigendecomposition of :func:`select_ridge_alpha`, which gives
    the same head when the validation error is unimodal along the grid. When no
    penalty visited gives a finite score, :func:`select_ridge_alpha` decides. With
    ``overwrite_z`` (``Z`` a caller's temporary) ``Z`` is centred in place, not in a copy.
    ``share`` (a :class:`GramShare`) hands in the Gram matrix of ``Z``'s first columns and
    takes out the one formed.
    """
    n = Z.shape[0]
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    Zc = Z.sub_(z_mean) if overwrite_z else Z - z_mean
    if dual_pays(Zc):  # the n x n system of the dual, in float64, coef = Zc^T c (see rffkit._ridge_solve)
        Zt = Zc.T.double()
        gram = gram_matrix(Zt) / n
        rhs = (y - y_mean).reshape(n, -1).double() / n
        to_coef = lambda c: (Zt @ c.reshape(n, -1)).reshape(Zt.shape[0], *y.shape[1:])  # noqa: E731
    else:
        if syrk_pays(Zc):  # the upper triangle only
            known = None if share is None else share.known
            if known is not None and known.shape[0] < Zc.shape[1]:
                gram = torch.from_numpy(bordered_system_upper(Zc, known, 1.0 / n))
            else:
                gram = torch.from_numpy(system_upper(Zc, 1.0 / n))
            if share is not None:
                share.formed = gram.numpy()
        else:
            gram = gram_matrix(Zc).double() / n
        rhs = matmul(Zc.T, (y - y_mean).reshape(n, -1)).reshape(Zc.shape[1], *y.shape[1:]).double() / n
        to_coef = None
    del Zc

    def validation_mse(coef, intercept):
        residual = Z_val @ coef + intercept - y_val
        return float((residual * residual).mean())

    head = _walk(gram, rhs, z_mean, y_mean, alphas, start, validation_mse, to_coef)
    if head is None and overwrite_z:
        Z.add_(z_mean)  # the features again (to rounding) for the eigendecomposition
    return head if head is not None else select_ridge_alpha(Z, y, Z_val, y_val, alphas)


@torch.no_grad()
def walk_ridge_alpha_by_blocks(features, X, y, X_val, y_val, alphas, start, *, block_bytes=2**26):
    """:func:`walk_ridge_alpha` of the features ``features(X)``, formed a block of rows at a time.

    Neither feature matrix is held whole: one pass sums the features' means, a second
    their centred Gram matrix (each block's product in the features' dtype, the sums in
    float64) and cross-products, and each penalty visited scores its head on the
    validation rows block by block. Memory is the ``D x D`` systems and one block of at
    most ``block_bytes`` of features, where :func:`walk_ridge_alpha` holds ``n x D``
    features of both splits and a centred copy. The same head up to the order of the
    float sums; when no penalty visited scores finitely, :func:`select_ridge_alpha`
    decides on the whole matrices.
    """
    first = features(X[:1])
    rows = max(1, block_bytes // (first.shape[1] * first.element_size()))
    n = X.shape[0]
    z_mean = sum(features(block).double().sum(dim=0) for block in X.split(rows)).div(n).to(first.dtype)
    y_mean = y.mean(dim=0)
    gram = torch.zeros(first.shape[1], first.shape[1], dtype=torch.float64, device=first.device)
    rhs = torch.zeros(first.shape[1], *y.shape[1:], dtype=torch.float64, device=first.device)
    for block, targets in zip(X.split(rows), y.split(rows)):
        centred = features(block) - z_mean
        gram += gram_matrix(centred).double()
        rhs += (centred.T @ (targets - y_mean)).double()
    gram /= n
    rhs /= n

    def validation_mse(coef, intercept):
        total = 0.0
        for block, targets in zip(X_val.split(rows), y_val.split(rows)):
            residual = features(block) @ coef + intercept - targets
            total += float((residual.double() ** 2).sum())
        return total / (y_val.shape[0] * (y_val.shape[1] if y_val.ndim > 1 else 1))

    head = _walk(gram, rhs, z_mean, y_mean, alphas, start, validation_mse)
    return head if head is not None else select_ridge_alpha(features(X), y, features(X_val), y_val, alphas)


def _walk(gram, rhs, z_mean, y_mean, alphas, start, validation_mse, to_coef=None):
    """The walk of :func:`walk_ridge_alpha` on the centred ``gram`` and ``rhs`` (float64, divided
    by n); ``validation_mse(coef, intercept)`` scores a head. None when no penalty visited
    scores finitely. ``gram`` is symmetric or, on the CPU, a Fortran-ordered tensor whose
    upper triangle holds it. ``to_coef`` maps a solution to the coefficients (the dual's
    ``Zc^T c``; None: the solution is the coefficients)."""
    grid = sorted(float(a) for a in alphas)
    k = int(np.argmin([abs(math.log(a / start)) if a > 0 and start > 0 else abs(a - start) for a in grid]))
    fits = {}
    # one system (and factor) for every penalty visited: a fresh D x D pair per step left
    # the allocator's heap growing by one D x D block a step (blocks under glibc's 32 MiB
    # mmap limit, D up to about 2,000 in float64, are not handed back when freed)
    if gram.device.type == "cpu":
        # LAPACK on the upper triangle, which a Fortran-ordered view of a C-ordered symmetric
        # matrix also holds
        array = gram.numpy()
        upper = array if array.flags.f_contiguous else array.T
        system, right = np.empty(upper.shape, order="F"), rhs.numpy()

        def solve(alpha):
            np.copyto(system, upper)
            system.flat[:: upper.shape[0] + 1] += alpha
            coef = cholesky_solve_upper(system, right)
            return None if coef is None else torch.from_numpy(coef)
    else:
        column = rhs.unsqueeze(-1) if rhs.ndim == 1 else rhs
        system, factor = torch.empty_like(gram), torch.empty_like(gram)
        info = torch.empty((), dtype=torch.int32, device=gram.device)

        def solve(alpha):
            system.copy_(gram)
            system.diagonal().add_(alpha)
            torch.linalg.cholesky_ex(system, out=(factor, info))
            return None if int(info) != 0 else torch.cholesky_solve(column, factor).reshape(rhs.shape)

    def score(j):
        if j not in fits:
            coef = solve(grid[j])
            if coef is None:
                fits[j] = (math.inf, None, None)
            else:
                coef = (coef if to_coef is None else to_coef(coef)).to(z_mean.dtype)
                intercept = y_mean - z_mean @ coef
                mse = validation_mse(coef, intercept)
                fits[j] = (mse if math.isfinite(mse) else math.inf, coef, intercept)
        return fits[j][0]

    best, moved = k, True
    while moved:
        moved = False
        for j in (best + 1, best - 1):
            if 0 <= j < len(grid) and (score(j) < score(best) or (score(j) == score(best) and j > best)):
                best, moved = j, True
                break
    value, coef, intercept = fits[best]
    return RidgeHead(grid[best], coef, intercept, value) if math.isfinite(value) else None


@torch.no_grad()
def fit_ridge_head(Z, y, Z_val, y_val, alpha, alphas, start=None, *, overwrite_z=False, share=None,
                   solve_dtype=torch.float64):
    """The ridge head on ``Z`` and its score.

    ``alpha='auto'`` chooses the penalty among ``alphas`` with
    :func:`select_ridge_alpha` or, given a ``start`` penalty and a validation split,
    with :func:`walk_ridge_alpha`; a number is used as given. The score is the mean
    squared error on ``(Z_val, y_val)``, or the GCV score without a validation split.
    With ``overwrite_z`` a penalty given as a number, or found by a walk, may leave ``Z``
    centred (see :func:`solve_ridge`, :func:`walk_ridge_alpha`). ``share`` goes to the walk
    (:func:`walk_ridge_alpha`), the only path that reads or fills it; ``solve_dtype`` to
    :func:`solve_ridge` when the penalty is a number and a validation split scores it.

    Returns
    -------
    RidgeHead
    """
    if isinstance(alpha, str):
        if start is not None and Z_val is not None:
            return walk_ridge_alpha(Z, y, Z_val, y_val, alphas, start, overwrite_z=overwrite_z, share=share)
        return select_ridge_alpha(Z, y, Z_val, y_val, alphas)
    if Z_val is None:
        score, coef, intercept = gcv_score(Z, y, alpha)
        return RidgeHead(alpha, coef, intercept, float(score))
    solution = solve_ridge(Z, y, alpha, overwrite_z=overwrite_z, solve_dtype=solve_dtype)
    residual = Z_val @ solution.coef + solution.intercept - y_val
    return RidgeHead(alpha, solution.coef, solution.intercept, float((residual * residual).mean()))


@torch.no_grad()
def loo_ridge_head(Z, y, alphas, X=None):
    """The ridge head on ``(Z, y)`` whose penalty, among ``alphas``, has the least exact leave-one-out error.

    One spectrum of the centred features (:func:`rffkit._ridge_path.ridge_spectrum`, the
    dual form when ``Z`` has more columns than rows) scores every penalty by exact
    leave-one-out (Allen, 1974), in float64 on the CPU; rows of ``X`` (the inputs of ``Z``,
    None: every row distinct) that are equal are left out together
    (:func:`rffkit._ridge_path.row_groups`), so that a repeated row's twin does not
    predict it. Ties go to the larger penalty. The head's ``score`` is its leave-one-out
    mean squared error; ``coef`` and ``intercept`` come back in the dtype and on the
    device of ``Z``, ``coef`` of shape (D,) for ``y`` of shape (n,).
    """
    n = Z.shape[0]
    features = Z.detach().double().cpu().numpy()
    targets = y.detach().double().cpu().numpy().reshape(n, -1)
    cpu = torch.device("cpu")
    spectrum = ridge_spectrum(features, targets, fit_intercept=True, dtype=torch.float64, device=cpu)
    groups = None if X is None else row_groups(X.detach().double().cpu().numpy(), targets)
    # the path works on the sum of squares: penalties n alpha (see select_ridge_alpha)
    scores = loo_path(spectrum, [n * a for a in alphas], features, targets, groups).mean(dim=1).tolist()
    best = best_penalty(scores, alphas)
    coef = path_coefficients(spectrum, n * alphas[best], features).numpy()
    intercept = spectrum.target_mean - spectrum.feature_mean @ coef
    as_z = lambda array: torch.as_tensor(array, dtype=Z.dtype, device=Z.device)  # noqa: E731
    coef, intercept = as_z(coef), as_z(intercept)
    if y.ndim == 1:
        coef, intercept = coef[:, 0], intercept[0]
    return RidgeHead(alphas[best], coef, intercept, scores[best])
