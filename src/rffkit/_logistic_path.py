"""RFFNet's logistic head: the penalty chosen along a path by held-out log-loss.

:func:`logistic_head_path` fits the head for each penalty from the largest down,
warm-started, and keeps the one with the least held-out log-loss: on the validation
split, or of the training rows held out (approximate leave-one-out, or cross-validation).
Every fit is preconditioned by one eigendecomposition of the centred feature Gram matrix
(:func:`logistic_spectrum`).

Preconditioning: near the optimum the Hessian of the mean log-loss in the weights is
``Zc^T W Zc / n`` with ``W`` the probability curvatures (at most 1/4 for two classes),
so with ``Zc^T Zc = V diag(s) V^T`` the change of variables
``weights = V diag(1 / sqrt(c s / n + a)) gamma`` (``c`` the curvature at the class
frequencies, ``a`` the penalty's curvature) makes it close to the identity in
``gamma``, and L-BFGS needs tens of iterations where on ``weights`` it needs hundreds.
The directions with ``s = 0`` carry no data and their optimal weights are 0: they are
left out, so when ``n < D`` the solve runs in ``n - 1`` coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ._dense import gram_matrix, matmul, symmetric_eigh
from ._logistic import (
    LogisticHead,
    _as_target,
    _mean_loss,
    _sample_losses,
    logistic_objective,
    minimise_logistic,
)
from ._logistic_loo import approximate_loo_losses, loo_is_cheaper
from ._logistic_newton import newton_is_cheaper, newton_logistic

__all__ = ["LogisticSpectrum", "logistic_spectrum", "logistic_head_path"]


@dataclass(frozen=True)
class LogisticSpectrum:
    """``Zc^T Zc = V diag(s) V^T`` restricted to ``s > 0``, and the column means of ``Z``."""

    mean: torch.Tensor
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor


@torch.no_grad()
def logistic_spectrum(Z, *, relative_floor=1e-10):
    """Eigendecomposition of the centred Gram matrix of ``Z`` (in float64), null space dropped.

    The smaller of ``Zc^T Zc`` (D x D) and ``Zc Zc^T`` (n x n) is decomposed; in the
    dual form the eigenvectors of the primal are ``Zc^T U diag(1 / sqrt(s))``.
    Eigenvalues under ``relative_floor`` times the largest count as zero.

    Returns
    -------
    LogisticSpectrum
    """
    mean = Z.mean(dim=0)
    Zc = (Z - mean).double()
    n, D = Zc.shape
    if D <= n:
        s, V = symmetric_eigh(gram_matrix(Zc))
        keep = s > relative_floor * s.max().clamp_min(1e-300)
        s, V = s[keep], V[:, keep]
    else:
        s, U = symmetric_eigh(gram_matrix(Zc.T))
        keep = s > relative_floor * s.max().clamp_min(1e-300)
        s, U = s[keep], U[:, keep]
        V = matmul(Zc.T, U) / s.sqrt()
    return LogisticSpectrum(mean, s, V)


def _class_curvature(labels, n_classes):
    """Mean curvature of the log-loss at the class frequencies: ``mean_k pi_k (1 - pi_k)`` (``pi (1 - pi)`` for two)."""
    frequencies = np.bincount(np.asarray(labels), minlength=n_classes) / max(len(labels), 1)
    if n_classes == 2:
        return float(max(frequencies[1] * (1.0 - frequencies[1]), 1e-3))
    return float(max(np.mean(frequencies * (1.0 - frequencies)), 1e-3))


def _forms_g(n, D, R, n_out, evaluations=200):
    """Whether L-BFGS should evaluate the logits as ``G theta`` (``G = Zc V``, n x R) rather than
    ``Zc (V theta)``: a cost model in multiply-adds over ``evaluations`` objective and gradient
    evaluations of one penalty path (measured: about 95 per path on a 25,000-row binary table,
    340 on a 1,200-row 10-class one), ``n D R`` to form ``G`` against ``2 D R n_out`` for ``V``'s
    products and ``2 n (D - R) n_out`` for the wider ``Zc`` per evaluation."""
    form = float(n) * D * R + evaluations * 2.0 * n * R * n_out
    skip = evaluations * 2.0 * n_out * (float(n) * D + float(D) * R)
    return form <= skip


class _PrincipalProblem:
    """A logistic problem in the principal coordinates ``theta`` of a :class:`LogisticSpectrum`.

    The weights are ``V theta``, so the logits are ``Zc V theta = G theta``. :meth:`solve`
    fits the rows ``rows`` (None: all) at one penalty, warm-started from
    ``(theta, bias)``, restricted to the directions the penalty does not shrink to
    nothing (see :func:`logistic_head_path`), by Newton's method where its cost model
    says it is the cheaper (:mod:`rffkit._logistic_newton`: few rows and coordinates)
    on ``G``, by L-BFGS preconditioned in the same coordinates otherwise, which
    evaluates either ``G theta`` or ``Zc (V theta)``, whichever :func:`_forms_g` expects
    to cost less: ``G`` (``R`` columns for the ``R`` directions kept) costs ``n D R``
    multiply-adds to form and saves ``V``'s two products per evaluation, so it pays on
    few rows, many classes or ``R < D`` (``n < D``), and not on a binary head of many
    rows. Otherwise ``G`` is formed only if Newton's method needs it.
    """

    def __init__(self, Z, labels, n_classes, spectrum, *, max_iter, tol, relative_floor):
        self.dtype = torch.float64
        self.spectrum = spectrum
        self.Zc = (Z - spectrum.mean).to(self.dtype)
        self._G = None
        self.labels = torch.as_tensor(labels, device=Z.device)
        self.target = _as_target(self.labels, n_classes, self.dtype, Z.device)
        self.n_out = 1 if n_classes == 2 else n_classes
        self.forms_g = _forms_g(Z.shape[0], Z.shape[1], spectrum.eigenvalues.shape[0], self.n_out)
        self.n_classes, self.max_iter, self.tol, self.relative_floor = n_classes, max_iter, tol, relative_floor
        self.data_curvature = _class_curvature(self.labels.cpu().numpy(), n_classes) * spectrum.eigenvalues / Z.shape[0]

    @property
    def G(self):
        """The principal coordinates ``Zc V`` of every row (formed on first use)."""
        if self._G is None:
            self._G = matmul(self.Zc, self.spectrum.eigenvectors)
        return self._G

    def start(self):
        """``(theta, bias)`` at zero weights and the log class frequencies."""
        log_prior = torch.bincount(self.labels, minlength=self.n_classes).to(self.dtype).clamp_min(0.5).log()
        bias = (log_prior[1:] - log_prior[:1]) if self.n_out == 1 else log_prior - log_prior.mean()
        return torch.zeros(self.spectrum.eigenvalues.shape[0], self.n_out, dtype=self.dtype,
                           device=self.Zc.device), bias

    def coef(self, theta):
        """The weights ``V theta`` on the centred features."""
        return matmul(self.spectrum.eigenvectors, theta)

    def _active(self, alpha):
        """``(active, columns)``: the directions fitted at penalty ``alpha``, as indices and as a column selector."""
        # directions the penalty shrinks by more than 1 / relative_floor hold (almost) no weight
        active = torch.nonzero(self.data_curvature >= self.relative_floor * 2.0 * alpha).flatten()
        contiguous = active.numel() > 0 and int(active[-1] - active[0]) + 1 == active.numel()
        # the eigenvalues ascend, so the active directions are the last columns: a view, not a copy
        return active, slice(int(active[0]), int(active[-1]) + 1) if contiguous else active

    def solve(self, alpha, theta, bias, rows=None):
        """``(theta, bias, converged, n_iter)`` at penalty ``alpha`` (RFFNet's: ``alpha ||W||^2``) on the
        rows ``rows`` (None: all)."""
        active, columns = self._active(alpha)
        scales = 1.0 / (self.data_curvature[active] + 2.0 * alpha).sqrt()
        n_rows = self.Zc.shape[0] if rows is None else rows.shape[0]
        target = self.target if rows is None else self.target[rows]
        newton = newton_is_cheaper(n_rows, active.numel(), self.n_out)
        if newton or self.forms_g:
            G = (self.G if rows is None else self.G[rows])[:, columns]
        if newton:
            solved, bias, n_iter, gradient = newton_logistic(
                G, target, alpha, weights=theta[active], bias=bias, scales=scales, max_iter=self.max_iter,
                tol=self.tol,
            )
        elif self.forms_g:
            solved, bias, n_iter, gradient = minimise_logistic(
                G, target, 2.0 * alpha, weights=theta[active], bias=bias, max_iter=self.max_iter, tol=self.tol,
                preconditioner=(None, scales),
            )
        else:
            V = self.spectrum.eigenvectors[:, columns]
            Zc = self.Zc if rows is None else self.Zc[rows]
            weights, bias, n_iter, gradient = minimise_logistic(
                Zc, target, 2.0 * alpha, weights=matmul(V, theta[active]), bias=bias, max_iter=self.max_iter,
                tol=self.tol, preconditioner=(V, scales),
            )
            solved = matmul(V.T, weights)
        theta = torch.zeros_like(theta)
        theta[active] = solved
        return theta, bias, bool(n_iter < self.max_iter or gradient <= self.tol), n_iter

    def loo_losses(self, alpha, theta, bias):
        """Each row's log-loss predicted by the fit at ``alpha`` without it
        (:func:`rffkit._logistic_loo.approximate_loo_losses`, in the directions :meth:`solve` fitted)."""
        active, columns = self._active(alpha)
        return approximate_loo_losses(self.G[:, columns], self.target, theta[active], bias, alpha)

    def head(self, alpha, theta, bias, score, converged, n_iter, coef=None):
        """The :class:`LogisticHead` on the original features ``Z`` (``coef``: ``V theta``, if known)."""
        coef = self.coef(theta) if coef is None else coef
        return LogisticHead(float(alpha), coef, bias - self.spectrum.mean.to(self.dtype) @ coef, score, converged,
                            n_iter)


def logistic_head_path(Z, labels, n_classes, Z_val, labels_val, alphas, *, max_iter=300, tol=1e-5, patience=2,
                       spectrum=None, relative_floor=1e-6, leave_one_out=False, n_folds=5):
    """The logistic head whose penalty, among ``alphas``, has the least held-out log-loss.

    Minimises ``mean_i loss_i + alpha ||W||^2`` (RFFNet's objective: twice the
    ``alpha`` of :func:`logistic_objective`) for each ``alpha`` from the largest down,
    each fit warm-started where the last two solutions point (a secant step along the
    path; on nearly separable data the weights grow about linearly in ``log(1 / alpha)``,
    and the step saves a third of the Newton iterations) and preconditioned by one
    eigendecomposition of the centred Gram matrix (:func:`logistic_spectrum`, see the
    module docstring), and scores it on the validation split or, with ``leave_one_out``,
    on the training rows held out: a split of a few dozen rows picks the penalty by
    luck, mostly a too small one when it happens to be separable. Rows are held out by
    the approximate leave-one-out log-loss (:mod:`rffkit._logistic_loo`), about one
    Newton iteration per penalty, where that costs less than refitting ``n_folds``
    folds (:func:`rffkit._logistic_loo.loo_is_cheaper`: few coordinates and classes),
    and by stratified ``n_folds``-fold cross-validation otherwise (the spectrum of all
    rows preconditions every fold). The path stops once the held-out log-loss has
    exceeded its best for ``patience`` penalties in a row. Without a validation split
    or folds only the first penalty is fitted (pass the one wanted).

    Parameters
    ----------
    Z : Tensor of shape (n, D)
    labels : ndarray or Tensor of shape (n,)
        Class indices in ``[0, n_classes)``.
    n_classes : int
    Z_val : Tensor or None
    labels_val : ndarray, Tensor or None
    alphas : sequence of float
    max_iter, tol : int, float
        Of each L-BFGS solve (:func:`minimise_logistic`).
    patience : int, default=2
    spectrum : LogisticSpectrum or None
        Reused when given (it must be that of ``Z``).
    relative_floor : float, default=1e-6
        Eigen-directions whose data curvature is under this fraction of the
        penalty's are left out of the fit at that penalty (their weights are 0):
        the penalty shrinks them to nothing anyway, and the fit costs ``O(n r K)`` per
        evaluation in the ``r`` directions kept.
    leave_one_out : bool, default=False
        Choose the penalty on ``(Z, labels)`` held out (above) instead of on
        ``(Z_val, labels_val)``.
    n_folds : int, default=5
        The folds of the cross-validation that stands in for the approximate
        leave-one-out where that would cost more.

    Returns
    -------
    LogisticHead
        The intercept absorbs the centring: logits are ``Z coef + intercept``;
        ``score`` is the held-out log-loss (the training objective when nothing is
        held out).
    """
    spectrum = logistic_spectrum(Z) if spectrum is None else spectrum
    problem = _PrincipalProblem(Z, labels, n_classes, spectrum, max_iter=max_iter, tol=tol,
                                relative_floor=relative_floor)
    alphas = sorted(alphas, reverse=True)
    if leave_one_out and not loo_is_cheaper(Z.shape[0], spectrum.eigenvalues.shape[0], problem.n_out, n_folds):
        return _cross_validated_path(problem, alphas, n_folds, patience)
    theta, bias = problem.start()
    held_out = Z_val is not None or leave_one_out
    if Z_val is not None:
        Zc_val = (Z_val - spectrum.mean).to(problem.dtype)
        target_val = _as_target(torch.as_tensor(labels_val, device=Z.device), n_classes, problem.dtype, Z.device)
    best, stall, previous = None, 0, None
    for alpha in alphas:
        start = _predicted((theta, bias), previous)
        previous = (theta, bias)
        theta, bias, converged, n_iter = problem.solve(alpha, *start)
        coef = problem.coef(theta)
        with torch.no_grad():
            if leave_one_out:
                score = float(problem.loo_losses(alpha, theta, bias).mean())
            elif Z_val is None:  # ||V theta|| = ||theta||: the objective in the solved coordinates
                score = float(logistic_objective(coef, bias, problem.Zc, problem.target, 2.0 * alpha))
            else:
                score = float(_mean_loss(matmul(Zc_val, coef) + bias, target_val))
        head = problem.head(alpha, theta, bias, score, converged, n_iter, coef=coef)
        if not held_out:
            return head
        if best is None or score < best.score or not math.isfinite(best.score):
            best, stall = head, 0
        else:
            stall += 1
            if stall >= patience:
                break
    return best


def _predicted(state, previous):
    """The start of the next solve along the path: the last solution moved on by its last step (a secant
    step in log alpha, the grid being even in it), where two solutions are known."""
    if previous is None:
        return state
    return 2.0 * state[0] - previous[0], 2.0 * state[1] - previous[1]


def _cross_validated_path(problem, alphas, n_folds, patience):
    """The path of :func:`logistic_head_path` scored by stratified ``n_folds``-fold cross-validation."""
    labels = problem.labels.cpu().numpy()
    fold = np.empty(labels.shape[0], dtype=np.int64)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        fold[members] = np.arange(members.shape[0]) % n_folds
    device = problem.Zc.device
    splits = [(torch.as_tensor(np.flatnonzero(fold != k), device=device),
               torch.as_tensor(np.flatnonzero(fold == k), device=device)) for k in range(n_folds)]
    states = [problem.start() for _ in splits]
    previous = [None] * len(splits)
    best_alpha, best_score, stall = None, math.inf, 0
    for alpha in alphas:
        held_out = 0.0
        for k, (train, test) in enumerate(splits):
            theta, bias, _, _ = problem.solve(alpha, *_predicted(states[k], previous[k]), rows=train)
            previous[k], states[k] = states[k], (theta, bias)
            with torch.no_grad():
                logits = matmul(problem.Zc[test], problem.coef(theta)) + bias
                held_out += float(_sample_losses(logits, problem.target[test]).sum())
        score = held_out / labels.shape[0]
        if best_alpha is None or score < best_score:
            best_alpha, best_score, best_states, stall = alpha, score, list(states), 0
        else:
            stall += 1
            if stall >= patience:
                break
    # all rows at the chosen penalty, from the folds' mean solution
    theta = sum(state[0] for state in best_states) / n_folds
    bias = sum(state[1] for state in best_states) / n_folds
    theta, bias, converged, n_iter = problem.solve(best_alpha, theta, bias)
    return problem.head(best_alpha, theta, bias, best_score, converged, n_iter)
