"""Numerics of Sparse Random Fourier Features (SRFF, Gregorová et al., 2018).

Pure tensor functions, independent of scikit-learn, each testable on its own:

* :func:`project_onto_simplex`   Euclidean projection onto ``{g >= 0, sum(g) = r}``;
* :func:`srff_features`          ``Z = sqrt(2) cos(X diag(gamma) E + b)``;
* the closed-form step for ``a`` given ``gamma``, by :func:`rffkit._ridge.solve_ridge`;
* :func:`gamma_loss_and_gradient` the loss ``||y - Z a||^2`` as a function of ``gamma``
  and its analytic gradient (equation 11 of the paper);
* :func:`fista_gamma`            projected gradient on ``gamma`` accelerated by FISTA
  with backtracking, kept monotone by restarting the momentum;
* :func:`fit_srff`               Algorithm 1: alternate the two steps until the
  objective ``J(a, gamma) = ||y - Z a||^2 + alpha ||a||^2`` converges.

With ``fit_intercept`` the columns of ``Z`` and ``y`` are centred inside the loss, so
the intercept is not penalised; the residual then has zero mean and the gradient keeps
the uncentred form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ._ridge import solve_ridge

__all__ = [
    "project_onto_simplex",
    "srff_features",
    "gamma_loss",
    "gamma_loss_and_gradient",
    "fista_gamma",
    "fit_srff",
    "SRFFSolution",
    "predict_srff",
    "alpha_grid",
    "srff_regularisation_path",
]

_SQRT2 = math.sqrt(2.0)


def project_onto_simplex(v, radius=1.0):
    """Euclidean projection of ``v`` onto ``{g : g >= 0, sum(g) = radius}``.

    The sort-based algorithm (Held et al., 1974; Duchi et al., 2008), ``O(d log d)``:
    sort ``u = sort(v, descending)``, find ``rho = max{j : u_j - (sum_{i<=j} u_i - r) / j > 0}``,
    set ``theta = (sum_{i<=rho} u_i - r) / rho`` and return ``max(v - theta, 0)``.
    """
    if radius <= 0:
        raise ValueError(f"project_onto_simplex: radius must be positive, got {radius!r}.")
    # the projection ignores a constant added to every entry; taking the largest away keeps
    # r from being lost to rounding when |v| >> r (then u_1 - (u_1 - r) was 0, not r)
    v = v - v.max()
    u, _ = torch.sort(v, descending=True)
    cumulative = torch.cumsum(u, dim=0) - radius
    index = torch.arange(1, v.shape[0] + 1, dtype=v.dtype, device=v.device)
    positive = u - cumulative / index > 0
    rho = int(torch.nonzero(positive).max()) + 1  # the first entry is always positive: u_1 = 0
    theta = cumulative[rho - 1] / rho
    return torch.clamp(v - theta, min=0.0)


def srff_features(X, gamma, frequencies, offsets):
    """``Z = sqrt(2) cos(X diag(gamma) E + b)``, of shape (n_samples, n_components).

    ``frequencies`` is ``E`` of shape (n_features, n_components), the spectral draws
    ``epsilon`` already divided by the kernel width; ``offsets`` is ``b``.
    """
    return _SQRT2 * torch.cos(_phases(X, gamma, frequencies, offsets))


def _phases(X, gamma, frequencies, offsets):
    """``X diag(gamma) E + b``; only the inputs with ``gamma > 0`` enter the product."""
    active = torch.nonzero(gamma).squeeze(1)
    if active.numel() < 0.5 * gamma.numel():  # the simplex makes gamma sparse: skip zeros
        scaled = gamma[active].unsqueeze(1) * frequencies[active]
        return torch.addmm(offsets, X[:, active], scaled)
    return torch.addmm(offsets, X, gamma.unsqueeze(1) * frequencies)


def _ridge_step(Z, y, alpha, fit_intercept=True):
    """The closed-form step for ``a``: ``||y - Z a - c||^2 + alpha ||a||^2`` in the dtype of ``Z``."""
    solution = solve_ridge(Z, y, alpha, per_sample=False, solve_dtype=None, fit_intercept=fit_intercept)
    return solution.coef, solution.intercept


def _residual(y, coef, phases, fit_intercept, need_sin=False):
    """``r = y_c - Z_c a`` from the phases ``X diag(gamma) E + b`` (and their sines)."""
    prediction = _SQRT2 * (torch.cos(phases) @ coef)
    residual = y - prediction
    if fit_intercept:
        residual = residual - residual.mean()
    sines = torch.sin(phases) if need_sin else None
    return residual, sines


def _loss(y, coef, phases, fit_intercept):
    residual, _ = _residual(y, coef, phases, fit_intercept)
    return residual @ residual


def _loss_and_gradient(X, y, coef, phases, frequencies, fit_intercept):
    residual, sines = _residual(y, coef, phases, fit_intercept, need_sin=True)
    weighted = sines.mul_(residual.unsqueeze(1) * coef.unsqueeze(0))
    gradient = (2.0 * _SQRT2) * torch.sum((X.T @ weighted) * frequencies, dim=1)
    return residual @ residual, gradient


def gamma_loss(X, y, coef, gamma, frequencies, offsets, *, fit_intercept=True):
    """``f(gamma) = ||y_c - Z_c(gamma) a||^2`` (centred when ``fit_intercept``)."""
    return _loss(y, coef, _phases(X, gamma, frequencies, offsets), fit_intercept)


def gamma_loss_and_gradient(X, y, coef, gamma, frequencies, offsets, *, fit_intercept=True):
    """``f(gamma)`` and its gradient, equation (11) of the paper.

    ``df/dgamma_s = 2 sqrt(2) sum_i x_is sum_j r_i a_j sin(u_ij + b_j) E_sj`` with
    ``r = y_c - Z_c a``: with ``W_ij = r_i a_j sin(u_ij + b_j)`` it is the row sums of
    ``(X^T W) * E``, one ``(d, n) x (n, D)`` product and no ``(n, d)`` temporary.
    """
    phases = _phases(X, gamma, frequencies, offsets)
    return _loss_and_gradient(X, y, coef, phases, frequencies, fit_intercept)


def fista_gamma(
    X, y, coef, gamma, frequencies, offsets, *, radius, step, max_iter, tol, fit_intercept=True, shrink=0.5
):
    """Minimise ``f(gamma)`` over the simplex of size ``radius`` with FISTA.

    Projected gradient steps ``g+ = P(y - t grad f(y))`` from the extrapolated point
    ``y`` (Beck & Teboulle, 2009), the step ``t`` found by backtracking: shrink ``t`` by
    ``shrink`` until ``f(g+) <= f(y) + <grad f(y), g+ - y> + ||g+ - y||^2 / (2 t)``.
    When an accepted point does not decrease ``f`` the momentum restarts from the last
    iterate (O'Donoghue & Candès, 2015), so the returned objective history is
    non-increasing. Stops when the relative decrease falls under ``tol``.

    Returns ``(gamma, step, history)`` with ``history`` the objective at each iterate.
    """
    gamma, step, history, _ = _fista_gamma(
        X, y, coef, gamma, _phases(X, gamma, frequencies, offsets), frequencies, offsets,
        radius=radius, step=step, max_iter=max_iter, tol=tol, fit_intercept=fit_intercept, shrink=shrink,
    )  # fmt: skip
    return gamma, step, history


def _fista_gamma(
    X, y, coef, gamma, phases, frequencies, offsets, *, radius, step, max_iter, tol, fit_intercept, shrink
):
    """:func:`fista_gamma` from the phases ``U(gamma) = X diag(gamma) E + b`` at ``gamma``.

    ``U`` is affine in ``gamma``, so the extrapolated point ``y = g + beta (g - g_prev)``
    has phases ``U(g) + beta (U(g) - U(g_prev))`` without a product with ``X``: each
    iteration costs one ``(n, d) x (d, D)`` product per trial point and one for the
    gradient instead of one more for ``U(y)``. Also returns ``U`` at the returned gamma.
    """
    current, current_phases = gamma, phases
    current_value = float(_loss(y, coef, current_phases, fit_intercept))
    history = [current_value]
    extrapolated, extrapolated_phases, momentum = current, current_phases, 1.0
    for _ in range(max_iter):
        base_value, gradient = _loss_and_gradient(X, y, coef, extrapolated_phases, frequencies, fit_intercept)
        base_value = float(base_value)
        while True:
            candidate = project_onto_simplex(extrapolated - step * gradient, radius)
            candidate_phases = _phases(X, candidate, frequencies, offsets)
            difference = candidate - extrapolated
            candidate_value = float(_loss(y, coef, candidate_phases, fit_intercept))
            bound = base_value + float(gradient @ difference) + float(difference @ difference) / (2.0 * step)
            if candidate_value <= bound + 1e-12 * abs(base_value) or step < 1e-20:
                break
            step *= shrink
        if candidate_value > current_value:
            if momentum == 1.0:  # a plain gradient step failed to descend: converged
                break
            extrapolated, extrapolated_phases, momentum = current, current_phases, 1.0  # restart
            continue
        decrease = current_value - candidate_value
        next_momentum = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum))
        beta = (momentum - 1.0) / next_momentum
        extrapolated = candidate + beta * (candidate - current)
        extrapolated_phases = candidate_phases + beta * (candidate_phases - current_phases) if beta else candidate_phases
        current, current_phases, current_value, momentum = candidate, candidate_phases, candidate_value, next_momentum
        history.append(current_value)
        if decrease <= tol * max(abs(current_value), 1e-300):
            break
    return current, step, history, current_phases


@dataclass
class SRFFSolution:
    """The output of :func:`fit_srff`."""

    gamma: torch.Tensor
    coef: torch.Tensor
    intercept: torch.Tensor
    n_iter: int
    objective: list = field(default_factory=list)
    # the draw (E, b) the solution was fitted with, kept by the path for its best value
    frequencies: torch.Tensor | None = None
    offsets: torch.Tensor | None = None


def fit_srff(
    X,
    y,
    frequencies,
    offsets,
    alpha,
    *,
    radius=None,
    tol=1e-4,
    max_iter=100,
    max_inner_iter=20,
    initial_step=None,
    initial_gamma=None,
    fit_intercept=True,
):
    """Algorithm 1 of Gregorová et al. (2018): alternating descent on ``J(a, gamma)``.

    ``gamma`` starts evenly on the simplex ``{gamma >= 0, sum(gamma) = radius}``
    (``radius = n_features`` by default, so ``gamma = 1``). Each outer iteration solves
    for ``a`` in closed form (:func:`rffkit._ridge.solve_ridge` on the sum of squares) and then takes up to
    ``max_inner_iter`` FISTA steps on ``gamma`` (:func:`fista_gamma`). Stops when the
    relative decrease of ``J`` is under ``tol`` or after ``max_iter`` outer iterations.
    """
    n_samples, n_features = X.shape
    if radius is None:
        radius = float(n_features)
    if initial_gamma is None:
        gamma = torch.full((n_features,), radius / n_features, dtype=X.dtype, device=X.device)
    else:
        gamma = project_onto_simplex(initial_gamma.to(dtype=X.dtype, device=X.device), radius)
    # The loss is a sum over n samples: a step of order 1 / n keeps the first trial sane.
    step = float(initial_step) if initial_step is not None else 10.0 / n_samples
    objective = []
    coef = intercept = None
    n_iter = 0
    phases = _phases(X, gamma, frequencies, offsets)  # carried along with gamma
    for n_iter in range(1, max_iter + 1):
        coef, intercept = _ridge_step(_SQRT2 * torch.cos(phases), y, alpha, fit_intercept)
        penalty = alpha * float(coef @ coef)
        gamma, step, history, phases = _fista_gamma(
            X, y, coef, gamma, phases, frequencies, offsets,
            radius=radius, step=step * 4.0, max_iter=max_inner_iter, tol=tol * 0.1,
            fit_intercept=fit_intercept, shrink=0.5,
        )  # fmt: skip
        if not objective:
            objective.append(history[0] + penalty)
        objective.append(history[-1] + penalty)
        previous = objective[-2]
        if previous - objective[-1] <= tol * max(abs(previous), 1e-300):
            break
    # Final closed-form step so that (a, c) is optimal for the returned gamma.
    coef, intercept = _ridge_step(_SQRT2 * torch.cos(phases), y, alpha, fit_intercept)
    return SRFFSolution(gamma=gamma, coef=coef, intercept=intercept, n_iter=n_iter, objective=objective)


def predict_srff(X, solution, frequencies, offsets):
    """``f(X) = Z(X) a + c`` for a fitted :class:`SRFFSolution`."""
    return srff_features(X, solution.gamma, frequencies, offsets) @ solution.coef + solution.intercept


def alpha_grid(X, n_alphas=50, *, decades=9.8):
    """The data-dependent regularisation grid of the authors' code, largest first.

    ``alpha_k = 2 n ||X||_2^2 10^(-k decades / (n_alphas - 1))``, ``k = 0..n_alphas-1``:
    the authors multiply ``||X^T X||_2`` by ``10^(-9.8), 10^(-9.6), ..., 10^0`` and use
    it as ``n lambda`` for features without the ``sqrt(2)``; ``2 n lambda`` is the same
    penalty for the ``sqrt(2) cos`` features and the un-normalised loss used here.
    """
    n_samples = X.shape[0]
    top = float(torch.linalg.eigvalsh(X.T @ X)[-1])  # ||X||_2^2 from the d x d Gram matrix
    exponents = torch.linspace(0.0, -decades, n_alphas, dtype=torch.float64) if n_alphas > 1 else torch.zeros(1)
    return [2.0 * n_samples * top * 10.0 ** float(e) for e in exponents]


def srff_regularisation_path(
    X, y, X_val, y_val, frequencies, offsets, alphas, *, warm_start=False, patience=None, draw=None, **fit_params
):
    """Fit :func:`fit_srff` for each ``alpha`` in ``alphas`` and score it on validation data.

    ``alphas`` are visited in the given order. ``warm_start`` starts ``gamma`` from the
    previous solution instead of the uniform point (the paper restarts from the uniform
    point). ``draw``: None fits every value on the one draw ``(frequencies, offsets)``;
    a callable ``draw(k) -> (frequencies, offsets)`` gives the ``k``-th value (``k >= 1``)
    a fresh draw, as the authors' experiments do (Algorithm 1 draws ``epsilon`` and
    ``b`` each time it runs), so the validation error chooses among draws as well as
    penalties. ``patience``: stop once the validation error has not improved for that
    many consecutive values, counting only once the best error is 1% under the first
    one (at the top of the grid every coefficient is shrunk to zero and the error is
    flat or creeps up before the model starts to learn) and only values more than
    0.1% worse than the best (None visits the whole grid).

    Returns ``(best_index, errors, solutions)`` with ``errors`` the validation mean
    squared errors of the visited values; ``solutions[best_index]`` carries its draw in
    ``frequencies`` and ``offsets`` (the others drop theirs, so memory stays that of
    two draws).
    """
    errors, solutions = [], []
    best, since_best, gamma = None, 0, None
    for index, alpha in enumerate(alphas):
        if draw is not None and index > 0:
            frequencies, offsets = draw(index)
        solution = fit_srff(X, y, frequencies, offsets, alpha, initial_gamma=gamma, **fit_params)
        if warm_start:
            gamma = solution.gamma
        residual = y_val - predict_srff(X_val, solution, frequencies, offsets)
        error = float(residual @ residual) / residual.shape[0]
        errors.append(error)
        solutions.append(solution)
        if best is None or error < errors[best]:
            if best is not None:
                solutions[best].frequencies = solutions[best].offsets = None
            solution.frequencies, solution.offsets = frequencies, offsets
            best, since_best = len(errors) - 1, 0
        elif errors[best] < 0.99 * errors[0] and error > errors[best] * (1.0 + 1e-3):
            since_best += 1
            if patience is not None and since_best >= patience:
                break
    return best, errors, solutions
