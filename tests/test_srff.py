"""SRFFRegressor and its numerics against naive references.

Tolerances: the simplex projection matches an SLSQP solution of the same quadratic
programme to 1e-6 (SLSQP's own accuracy) and satisfies its KKT conditions to 1e-10;
the ridge step matches sklearn's Ridge to rtol 1e-8 and the analytic gradient matches
torch autograd to rtol 1e-9 (float64, both exact up to rounding); float32 paths to 1e-4.
"""

import pickle

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.spatial.distance import cdist
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Ridge
from sklearn.utils._param_validation import InvalidParameterError

from rffkit._srff_solver import (
    _ridge_step as _srff_ridge,
    alpha_grid,
    fista_gamma,
    fit_srff,
    gamma_loss,
    gamma_loss_and_gradient,
    project_onto_simplex,
    srff_features,
    srff_regularisation_path,
)
from rffkit.datasets import make_gregorova_se1
from rffkit.srff import SRFFRegressor, median_neighbour_distance

# A small configuration so the fits stay fast; the defaults (D = 300 and a
# 50-value grid) only make each fit slower.
FAST = dict(n_components=20, alphas=4, max_iter=20, random_state=0)


def small_problem(n=80, d=4, D=30, seed=0, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=n)
    E = rng.normal(size=(d, D)) / 2.0
    b = rng.uniform(0, 2 * np.pi, D)
    as_t = lambda a: torch.tensor(a, dtype=dtype)  # noqa: E731
    return as_t(X), as_t(y), as_t(E), as_t(b)


# --- simplex projection ------------------------------------------------------------


def slsqp_projection(v, radius):
    """Naive reference: solve min ||g - v||^2 s.t. g >= 0, sum g = radius with SLSQP."""
    result = minimize(
        lambda g: np.sum((g - v) ** 2),
        np.full_like(v, radius / v.size),
        jac=lambda g: 2 * (g - v),
        bounds=[(0, None)] * v.size,
        constraints=[{"type": "eq", "fun": lambda g: g.sum() - radius, "jac": lambda g: np.ones_like(g)}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return result.x


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("radius", [1.0, 7.5])
def test_simplex_projection_matches_qp_and_kkt(seed, radius):
    rng = np.random.default_rng(seed)
    v = rng.normal(scale=3.0, size=7)
    g = project_onto_simplex(torch.tensor(v), radius).numpy()
    np.testing.assert_allclose(g, slsqp_projection(v, radius), atol=1e-6)
    # KKT: g = max(v - theta, 0) for one theta, g >= 0, sum(g) = radius.
    assert np.all(g >= 0)
    assert abs(g.sum() - radius) < 1e-10
    support = g > 0
    theta = np.mean(v[support] - g[support])
    np.testing.assert_allclose(v[support] - g[support], theta, atol=1e-10)
    assert np.all(v[~support] <= theta + 1e-10)


def test_simplex_projection_fixed_points_and_ties():
    inside = torch.tensor([0.5, 0.0, 2.5], dtype=torch.float64)
    assert torch.equal(project_onto_simplex(inside, 3.0), inside)
    tied = project_onto_simplex(torch.ones(4, dtype=torch.float64) * 5.0, 2.0)
    np.testing.assert_allclose(tied.numpy(), 0.5, atol=1e-15)
    with pytest.raises(ValueError, match="radius"):
        project_onto_simplex(inside, 0.0)


# --- ridge step and gradient -------------------------------------------------------


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_step_matches_sklearn(fit_intercept):
    X, y, E, b = small_problem()
    gamma = torch.tensor([2.0, 1.0, 0.5, 0.5], dtype=torch.float64)
    Z = srff_features(X, gamma, E, b)
    np.testing.assert_allclose(Z.numpy(), np.sqrt(2) * np.cos(X.numpy() * gamma.numpy() @ E.numpy() + b.numpy()))
    coef, intercept = _srff_ridge(Z, y, 0.7, fit_intercept=fit_intercept)
    reference = Ridge(alpha=0.7, fit_intercept=fit_intercept, solver="cholesky").fit(Z.numpy(), y.numpy())
    np.testing.assert_allclose(coef.numpy(), reference.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(float(intercept), reference.intercept_, rtol=1e-8, atol=1e-10)


def test_features_with_sparse_gamma_skip_zero_inputs_exactly():
    X, _, E, b = small_problem(d=5)
    gamma = torch.tensor([0.0, 4.0, 0.0, 0.0, 1.0], dtype=torch.float64)  # 2 of 5 active
    reference = np.sqrt(2) * np.cos(X.numpy() * gamma.numpy() @ E.numpy() + b.numpy())
    np.testing.assert_allclose(srff_features(X, gamma, E, b).numpy(), reference, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_gradient_matches_autograd(fit_intercept):
    X, y, E, b = small_problem()
    gamma = torch.tensor([1.5, 1.0, 0.2, 1.3], dtype=torch.float64)
    coef, _ = _srff_ridge(srff_features(X, gamma, E, b), y, 0.3, fit_intercept=fit_intercept)
    value, gradient = gamma_loss_and_gradient(X, y, coef, gamma, E, b, fit_intercept=fit_intercept)
    leaf = gamma.clone().requires_grad_(True)
    prediction = srff_features(X, leaf, E, b) @ coef
    residual = y - prediction
    if fit_intercept:
        residual = residual - residual.mean()
    reference = residual @ residual
    (reference_gradient,) = torch.autograd.grad(reference, leaf)
    np.testing.assert_allclose(float(value), float(reference.detach()), rtol=1e-12)
    np.testing.assert_allclose(gradient.numpy(), reference_gradient.numpy(), rtol=1e-9, atol=1e-9)


# --- FISTA and the alternating descent ---------------------------------------------


def test_fista_is_monotone_and_stays_on_simplex():
    X, y, E, b = small_problem(n=120, d=5, seed=3)
    gamma = torch.ones(5, dtype=torch.float64)
    coef, _ = _srff_ridge(srff_features(X, gamma, E, b), y, 0.1)
    new_gamma, step, history = fista_gamma(
        X, y, coef, gamma, E, b, radius=5.0, step=100.0, max_iter=60, tol=0.0
    )
    assert len(history) > 5
    assert np.all(np.diff(history) <= 1e-12 * history[0])
    assert history[-1] < 0.98 * history[0]
    assert step < 100.0  # backtracking shrank the deliberately huge first step
    assert torch.all(new_gamma >= 0) and abs(float(new_gamma.sum()) - 5.0) < 1e-10
    np.testing.assert_allclose(
        history[-1], float(gamma_loss(X, y, coef, new_gamma, E, b)), rtol=1e-12
    )


def naive_fista(X, y, coef, gamma, E, b, *, radius, step, max_iter, tol):
    """FISTA with backtracking and restarts, every loss and gradient from scratch."""
    current, extrapolated, momentum = gamma, gamma, 1.0
    current_value = float(gamma_loss(X, y, coef, current, E, b))
    history = [current_value]
    for _ in range(max_iter):
        base_value, gradient = gamma_loss_and_gradient(X, y, coef, extrapolated, E, b)
        while True:
            candidate = project_onto_simplex(extrapolated - step * gradient, radius)
            difference = candidate - extrapolated
            value = float(gamma_loss(X, y, coef, candidate, E, b))
            bound = float(base_value) + float(gradient @ difference) + float(difference @ difference) / (2 * step)
            if value <= bound + 1e-12 * abs(float(base_value)):
                break
            step *= 0.5
        if value > current_value:
            if momentum == 1.0:
                break
            extrapolated, momentum = current, 1.0
            continue
        next_momentum = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * momentum**2))
        extrapolated = candidate + (momentum - 1.0) / next_momentum * (candidate - current)
        decrease = current_value - value
        current, current_value, momentum = candidate, value, next_momentum
        history.append(value)
        if decrease <= tol * abs(value):
            break
    return current, history


def test_fista_with_carried_phases_follows_the_naive_iteration():
    # fista_gamma forms the extrapolated point's phases from two known ones (they are
    # affine in gamma); the naive loop recomputes every phase from X.
    # A small radius drives 4 of the 6 scales to zero, so the phases of the later
    # iterates come from the sparse branch (the inputs with gamma > 0 only).
    X, y, E, b = small_problem(n=120, d=6, seed=0)
    coef, _ = _srff_ridge(srff_features(X, torch.ones(6, dtype=torch.float64), E, b), y, 0.1)
    gamma = torch.full((6,), 0.5 / 6, dtype=torch.float64)
    # tol stops both before the decreases reach rounding level, where the two can differ
    options = dict(radius=0.5, step=1.0, max_iter=40, tol=1e-9)
    new_gamma, _, history = fista_gamma(X, y, coef, gamma, E, b, **options)
    reference_gamma, reference_history = naive_fista(X, y, coef, gamma, E, b, **options)
    assert len(history) == len(reference_history) > 10
    np.testing.assert_allclose(history, reference_history, rtol=1e-10)
    np.testing.assert_allclose(new_gamma.numpy(), reference_gamma.numpy(), rtol=1e-8, atol=1e-12)
    assert int((new_gamma == 0).sum()) == 4 and int((reference_gamma == 0).sum()) == 4


def test_alternating_objective_decreases_and_converges():
    X, y, E, b = small_problem(n=150, d=5, seed=4)
    solution = fit_srff(X, y, E, b, 0.5, tol=1e-8, max_iter=40, max_inner_iter=10)
    objective = np.asarray(solution.objective)
    assert np.all(np.diff(objective) <= 1e-12 * objective[0])
    assert objective[-1] < objective[0]
    # The returned (a, c) is the ridge solution for the returned gamma.
    coef, intercept = _srff_ridge(srff_features(X, solution.gamma, E, b), y, 0.5)
    np.testing.assert_allclose(solution.coef.numpy(), coef.numpy(), rtol=1e-12)
    # The relevant inputs (0 and 1) get the largest scales.
    assert set(torch.argsort(solution.gamma, descending=True)[:2].tolist()) == {0, 1}


def test_alpha_grid_and_path_early_stop():
    X, y, E, b = small_problem(n=100, d=4, seed=5)
    grid = alpha_grid(X, 50)
    top = 2 * 100 * np.linalg.norm(X.numpy(), 2) ** 2
    np.testing.assert_allclose([grid[0], grid[-1]], [top, top * 10**-9.8], rtol=1e-12)
    np.testing.assert_allclose(np.diff(np.log10(grid)), -0.2, atol=1e-12)
    X_val, y_val, _, _ = small_problem(n=60, d=4, seed=6)
    best, errors, solutions = srff_regularisation_path(
        X, y, X_val, y_val, E, b, grid, patience=3, max_iter=10
    )
    assert len(errors) == len(solutions) <= 50
    assert errors[best] == min(errors)


def test_path_with_a_draw_per_value_fits_each_on_its_own_draw():
    X, y, E, b = small_problem(n=100, d=4, seed=7)
    X_val, y_val, _, _ = small_problem(n=60, d=4, seed=8)
    grid = alpha_grid(X, 6)
    rng = np.random.default_rng(9)
    draws = {0: (E, b)}

    def draw(index):
        assert index == len(draws)  # asked for in order, once each
        draws[index] = (torch.tensor(rng.normal(size=E.shape) / 2.0), torch.tensor(rng.uniform(0, 6.28, b.shape)))
        return draws[index]

    best, errors, solutions = srff_regularisation_path(X, y, X_val, y_val, E, b, grid, draw=draw, max_iter=10)
    assert len(draws) == len(errors) == 6
    for index, (alpha, error) in enumerate(zip(grid, errors)):
        # naive reference: refit that value on its draw and score it
        reference = fit_srff(X, y, *draws[index], alpha, max_iter=10)
        prediction = srff_features(X_val, reference.gamma, *draws[index]) @ reference.coef + reference.intercept
        assert error == pytest.approx(float(torch.mean((y_val - prediction) ** 2)), rel=1e-12)
    # only the best value keeps its draw
    assert solutions[best].frequencies is draws[best][0] and solutions[best].offsets is draws[best][1]
    assert all(s.frequencies is None for i, s in enumerate(solutions) if i != best)


def test_estimator_keeps_the_draw_of_the_chosen_alpha():
    X, y = make_gregorova_se1(200, random_state=8)
    params = {**FAST, "refit": False, "alphas": np.geomspace(1e4, 1.0, 6), "n_iter_no_change": None}
    one = SRFFRegressor(**params).fit(X, y)
    each = SRFFRegressor(**params, draw_per_alpha=True).fit(X, y)
    # the first grid value is fitted on the same first draw either way
    assert each.validation_errors_[0] == pytest.approx(one.validation_errors_[0], rel=1e-12)
    assert not np.allclose(each.validation_errors_[1:], one.validation_errors_[1:])
    # the fitted model is the chosen value's, on its draw: prediction by hand matches
    standardised = (X - X.mean(axis=0)) / X.std(axis=0)
    phases = (standardised * each.gamma_) @ each.random_weights_ + each.random_offset_
    by_hand = np.sqrt(2.0) * np.cos(phases) @ each.coef_ + each.intercept_
    np.testing.assert_allclose(each.predict(X), by_hand, rtol=1e-10, atol=1e-10)
    validation = each.validation_errors_
    assert each.alpha_ == each.alphas_[np.argmin(validation)]


def test_median_neighbour_distance_matches_brute_force(rng):
    X = rng.normal(size=(200, 3))
    D = cdist(X, X)
    np.fill_diagonal(D, np.inf)
    naive = np.median(np.sort(D, axis=1)[:, :20])
    assert median_neighbour_distance(X) == pytest.approx(naive, rel=1e-12)
    # With fewer queries the neighbours are still searched among all points.
    subsampled = median_neighbour_distance(X, max_queries=100, rng=np.random.default_rng(1))
    assert subsampled == pytest.approx(naive, rel=0.1)
    assert median_neighbour_distance(np.zeros((5, 2))) == 1.0


# --- the estimator -------------------------------------------------------------------


def test_finds_relevant_features_of_se1_and_beats_the_mean():
    # Paper Fig. 1: at n = 1k SRFF picks x7, x8, x9 (columns 6, 7, 8) first; x1, x3
    # need larger samples. A coarse grid around the chosen values keeps this fast.
    X, y, support = make_gregorova_se1(2500, random_state=0, return_support=True)
    X_train, y_train, X_test, y_test = X[:1500], y[:1500], X[1500:], y[1500:]
    model = SRFFRegressor(n_components=150, alphas=np.geomspace(1e4, 1e2, 5), random_state=0)
    model.fit(X_train, y_train)
    importances = model.feature_importances_
    assert set(np.argsort(-importances)[:3]) == {6, 7, 8}
    irrelevant = np.setdiff1d(np.arange(18), support)
    assert importances[[6, 7, 8]].min() > 2 * importances[irrelevant].max()
    rmse = np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))
    mean_rmse = np.sqrt(np.mean((y_test - y_train.mean()) ** 2))
    assert rmse < 0.98 * mean_rmse
    assert abs(model.gamma_.sum() - 18) < 1e-8 and importances.max() == 1.0
    assert model.alpha_ in model.alphas_


def test_dtype_is_kept(dtype):
    # float32 computes in float32 end to end (its FISTA path may differ from float64's,
    # so only the dtype and the simplex constraint are compared).
    X, y = make_gregorova_se1(120, random_state=4)
    model = SRFFRegressor(**FAST).fit(X.astype(dtype), y)
    prediction = model.predict(X.astype(dtype))
    assert prediction.dtype == dtype and np.all(np.isfinite(prediction))
    assert abs(model.gamma_.sum() - 18) < (1e-3 if dtype == np.float32 else 1e-9)


def test_single_alpha_and_no_refit():
    X, y = make_gregorova_se1(200, random_state=5)
    single = SRFFRegressor(**{**FAST, "alphas": [3.0]}).fit(X, y)
    assert single.alpha_ == 3.0 and single.validation_errors_.size == 0
    kept = SRFFRegressor(**{**FAST, "refit": False}).fit(X, y)
    refitted = SRFFRegressor(**FAST).fit(X, y)
    assert kept.alpha_ == refitted.alpha_
    assert not np.array_equal(kept.coef_, refitted.coef_)
    fixed = SRFFRegressor(**{**FAST, "length_scale": 2.5}).fit(X, y)
    assert fixed.length_scale_ == 2.5


def test_errors_a_user_can_act_on():
    X, y = make_gregorova_se1(60, random_state=6)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"X holds a missing value \(NaN\) in column 0 at row 0 .*SimpleImputer"):
        SRFFRegressor(**FAST).fit(bad, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        SRFFRegressor(**FAST).fit(X, y[:-1])
    with pytest.raises(InvalidParameterError, match="n_components"):
        SRFFRegressor(n_components=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="validation_fraction"):
        SRFFRegressor(validation_fraction=1.5).fit(X, y)
    with pytest.raises(ValueError, match="alphas"):
        SRFFRegressor(alphas=[1.0, -2.0]).fit(X, y)
    with pytest.raises(ValueError, match="too few"):
        SRFFRegressor(**FAST).fit(X[:2], y[:2])
    with pytest.raises(ValueError, match="device"):
        SRFFRegressor(**{**FAST, "device": "tpu"}).fit(X, y)
    model = SRFFRegressor(**FAST).fit(X, y)
    with pytest.raises(ValueError, match="18 features"):
        model.predict(X[:, :5])
    unfitted = clone(model)
    with pytest.raises(NotFittedError, match="not fitted"):
        unfitted.predict(X)


@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates a CPU-only machine")
def test_model_fitted_on_cuda_predicts_after_unpickling_on_cpu():
    """An SRFF fitted with device='cuda' and unpickled without a GPU predicts on the CPU.

    Fitting on CUDA is simulated: the model is fitted on the CPU and then carries the
    parameter and the fitted device of a CUDA fit, as an unpickled one would.
    """
    X, y = make_gregorova_se1(120, random_state=3)
    model = SRFFRegressor(**FAST).fit(X, y)
    expected = model.predict(X)
    model.set_params(device="cuda")
    model._device = torch.device("cuda")
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), expected)


def test_units_of_x_and_y_do_not_matter_and_a_constant_column_takes_no_part():
    """SRFF standardises X and fits y in units of its spread: X scaled by 1e-12 (read as constant before)
    and y by 1e-6 or 1e6 (where gamma had not moved) give the same gamma, and the same predictions in y's
    units (rtol 1e-6). A constant column gets gamma 0 and no mass of the simplex: the others sum to 4."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=300)
    make = lambda: SRFFRegressor(n_components=50, alphas=np.geomspace(1e2, 1e-1, 4), random_state=0)  # noqa: E731
    reference = make().fit(X, y)
    assert set(np.argsort(-reference.gamma_)[:2]) == {0, 1}
    for x_unit, y_unit in ((1e-12, 1.0), (1.0, 1e-6), (1.0, 1e6), (1e3, 1e-3)):
        model = make().fit(X * x_unit, y * y_unit)
        np.testing.assert_allclose(model.gamma_, reference.gamma_, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(model.predict(X * x_unit), reference.predict(X) * y_unit, rtol=1e-6)
        np.testing.assert_allclose(model.validation_errors_, reference.validation_errors_ * y_unit**2, rtol=1e-6)
    with_constant = np.insert(X, 2, 7.5, axis=1)
    model = make().fit(with_constant, y)
    assert model.gamma_[2] == 0.0 and model.feature_importances_[2] == 0.0
    assert abs(model.gamma_.sum() - 4.0) < 1e-8 and np.argmax(model.gamma_) == 0
    assert model.score(with_constant, y) > 0.95
