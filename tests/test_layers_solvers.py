"""The ARD layer against the exact ARD kernel, and the solver numerics against naive references."""

import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge

from dataclasses import replace

from rffkit._refine import _rescaled_layers, refine_layer, relevance_groups, target_spectrum
from rffkit._ridge import fit_ridge_head as _fit_ridge_head
from rffkit._ridge import gcv_score, select_ridge_alpha, solve_ridge
from rffkit._search import (
    default_n_components, marginal_r2, polish_relevances, screening_n_components, search_schedule,
)
from rffkit._settings import DEFAULT_SETTINGS

GRID = DEFAULT_SETTINGS.alpha_grid


def ridge_solve(Z, y, alpha):
    solution = solve_ridge(Z, y, alpha)
    return solution.coef, solution.intercept


def fit_ridge_head(Z, y, Z_val, y_val, alpha):
    return _fit_ridge_head(Z, y, Z_val, y_val, alpha, GRID)


def _schedule(n_train, n_components, flop_budget=None):
    return search_schedule(n_train, n_components, replace(DEFAULT_SETTINGS, search_flop_budget=flop_budget))
from rffkit.kernels import KERNELS
from rffkit.kernels import kernel_matrix
from rffkit.layers import ARDRandomFourierFeatures


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "cauchy"])
def test_layer_estimates_the_ard_kernel(kernel, variant):
    """Prop. 2: z(lambda o x)^T z(lambda o y) is unbiased for k(lambda o (x - y))."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    lam = np.array([1.5, 0.5, 0.0, -1.0])  # sign-free, a zero switches a feature off
    layer = ARDRandomFourierFeatures.from_kernel(4, 20000, kernel, relevance=lam, random_state=1, variant=variant)
    with torch.no_grad():
        Z = layer(torch.as_tensor(X)).numpy()
    exact = kernel_matrix(kernel, X * np.abs(lam))
    # Monte-Carlo error of a bounded estimate: sd <= sqrt(2 / D) ~ 0.01 per entry
    assert np.max(np.abs(Z @ Z.T - exact)) < 0.06
    assert np.sqrt(np.mean((Z @ Z.T - exact) ** 2)) < 0.015


def test_gradient_reaches_the_relevances_and_nested_columns():
    layer = ARDRandomFourierFeatures.from_kernel(3, 50, random_state=0)
    x = torch.randn(8, 3, dtype=torch.float64)
    layer(x).sum().backward()
    assert layer.relevances.grad is not None and torch.all(layer.relevances.grad != 0)
    assert torch.allclose(layer(x, 10) * np.sqrt(10 / 2), layer(x)[:, :10] * np.sqrt(50 / 2))
    assert not layer.frequencies.requires_grad and len(list(layer.parameters())) == 1


def test_cos_sin_layer_columns_and_nesting():
    layer = ARDRandomFourierFeatures.from_kernel(3, 7, random_state=0, variant="cos_sin")
    assert layer.n_components == 7 and layer.frequencies.shape == (3, 4)
    x = torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        z, projection = layer(x), (x * layer.relevances) @ layer.frequencies
    expected = torch.cat([torch.cos(projection), torch.sin(projection)], dim=1)[:, :7] * np.sqrt(2 / 7)
    torch.testing.assert_close(z, expected)
    # k columns use the first ceil(k / 2) frequencies, in both phases
    torch.testing.assert_close(layer(x, 4), torch.cat([z[:, :2], z[:, 4:6]], dim=1) * np.sqrt(7 / 4))
    with pytest.raises(ValueError, match="variant"):
        ARDRandomFourierFeatures(layer.frequencies, layer.offsets, layer.relevances.detach(), variant="sin")
    with pytest.raises(ValueError, match="n_components"):
        ARDRandomFourierFeatures(layer.frequencies, layer.offsets, layer.relevances.detach(), "cos_sin", 9)


def test_ridge_solve_matches_scikit_learn():
    rng = np.random.default_rng(0)
    Z, y = rng.normal(size=(200, 30)), rng.normal(size=(200, 1))
    alpha = 0.3
    beta, c = ridge_solve(torch.as_tensor(Z), torch.as_tensor(y), alpha)
    # ours: mean squared error + alpha ||beta||^2  <=>  Ridge(alpha * n) on the sum
    reference = Ridge(alpha=alpha * 200).fit(Z, y[:, 0])
    np.testing.assert_allclose(beta.numpy()[:, 0], reference.coef_, rtol=1e-8)
    np.testing.assert_allclose(c.numpy(), [reference.intercept_], rtol=1e-8)


def test_gcv_score_matches_the_hat_matrix_and_autograd():
    rng = np.random.default_rng(1)
    Z, y = rng.normal(size=(60, 12)), rng.normal(size=(60, 1))
    alpha, n = 0.05, 60
    Zc, yc = Z - Z.mean(0), y - y.mean(0)
    hat = Zc @ np.linalg.solve(Zc.T @ Zc / n + alpha * np.eye(12), Zc.T / n)
    residual = yc - hat @ yc
    expected = np.mean(residual**2) / (1 - np.trace(hat) / n) ** 2
    Zt = torch.as_tensor(Z, dtype=torch.float64).requires_grad_(True)
    score, _, _ = gcv_score(Zt, torch.as_tensor(y), alpha)
    np.testing.assert_allclose(float(score.detach()), expected, rtol=1e-10)
    small = torch.as_tensor(Z[:20, :5]).requires_grad_(True)
    target = torch.as_tensor(y[:20])
    assert torch.autograd.gradcheck(lambda A: gcv_score(A, target, alpha)[0], (small,))


@pytest.mark.parametrize("targets", [None, 3])
def test_gcv_score_with_fewer_rows_than_features_is_the_hat_matrix_score_of_the_dual(targets):
    # without a gradient, m < D: the m x m system (a D x D inverse per screening fit had made 12-row fits take 15 s)
    rng = np.random.default_rng(2)
    Z, y = rng.normal(size=(15, 120)), rng.normal(size=(15,) if targets is None else (15, targets))
    n = 15
    for alpha in (1e-4, 0.05, 3.0):
        Zc, yc = Z - Z.mean(0), (y - y.mean(0)).reshape(n, -1)
        hat = Zc @ np.linalg.solve(Zc.T @ Zc / n + alpha * np.eye(120), Zc.T / n)
        expected = np.mean((yc - hat @ yc) ** 2) / (1 - np.trace(hat) / n) ** 2
        coef_expected = np.linalg.solve(Zc.T @ Zc / n + alpha * np.eye(120), Zc.T @ yc / n)
        with torch.no_grad():
            score, coef, intercept = gcv_score(torch.as_tensor(Z), torch.as_tensor(y), alpha)
        np.testing.assert_allclose(float(score), expected, rtol=1e-8)
        np.testing.assert_allclose(coef.numpy().reshape(120, -1), coef_expected, rtol=1e-7, atol=1e-10)
        fitted = (Z @ coef.numpy() + intercept.numpy()).reshape(n, -1)
        np.testing.assert_allclose(fitted, hat @ yc + y.mean(0), rtol=1e-7, atol=1e-10)
    # without a penalty the rows' system is singular (its factor, when one is found, is rounding): no finite score,
    # as the primal's (helper-53: the dual returned 0 / 0)
    for dtype in (torch.float32, torch.float64):
        with torch.no_grad():
            score, _, _ = gcv_score(torch.as_tensor(Z, dtype=dtype), torch.as_tensor(y, dtype=dtype), 0.0)
        assert score.dtype == dtype and float(score) == np.inf


def _backpropagated_gcv(Z, y, alpha):
    """GCV by autograd through the Cholesky factor: the reference of the closed-form gradient."""
    m, s = Z.shape
    Zc, yc = Z - Z.mean(dim=0), y - y.mean(dim=0)
    factor = torch.linalg.cholesky(Zc.T @ Zc / m + alpha * torch.eye(s, dtype=Z.dtype))
    coef = torch.cholesky_solve((Zc.T @ yc / m).reshape(s, -1), factor).reshape(s, *y.shape[1:])
    residual = Zc @ coef - yc
    inverse_factor = torch.linalg.solve_triangular(factor, torch.eye(s, dtype=Z.dtype), upper=False)
    df = s - alpha * (inverse_factor * inverse_factor).sum()
    return (residual * residual).mean() / (1 - df / m) ** 2


@pytest.mark.parametrize("m, s, targets", [(50, 12, None), (200, 150, 2), (3000, 70, None), (3000, 70, 3)])
@pytest.mark.parametrize("alpha", [1e-3, 0.1])
def test_the_closed_form_gcv_gradient_equals_backpropagation(m, s, targets, alpha):
    """Small systems on torch, large ones (m s^2 >= 1e7) on LAPACK: the same score and gradient."""
    generator = torch.Generator().manual_seed(m + s)
    Z = torch.randn(m, s, dtype=torch.float64, generator=generator).requires_grad_(True)
    shape = (m,) if targets is None else (m, targets)
    y = torch.randn(*shape, dtype=torch.float64, generator=generator)
    score, coef, intercept = gcv_score(Z, y, alpha)
    assert not coef.requires_grad and not intercept.requires_grad and coef.shape == (s, *shape[1:])
    (gradient,) = torch.autograd.grad(score, Z)
    expected = _backpropagated_gcv(Z, y, alpha)
    (expected_gradient,) = torch.autograd.grad(expected, Z)
    torch.testing.assert_close(score.detach(), expected.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(gradient, expected_gradient, rtol=1e-10, atol=1e-12 * float(expected_gradient.abs().max()))


def test_gcv_of_a_singular_system_is_infinite_with_least_squares_coefficients():
    Z = torch.randn(3000, 40, dtype=torch.float64)
    Z = torch.cat([Z, Z], dim=1).requires_grad_(True)  # rank 40 of 80, and alpha = 0
    score, coef, _ = gcv_score(Z, torch.randn(3000, dtype=torch.float64), 0.0)
    assert math.isinf(float(score.detach())) and torch.isfinite(coef).all()


def test_select_ridge_alpha_matches_one_solve_per_alpha():
    """The eigendecomposition path against a fresh ridge solve and a hand-made score per alpha."""
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(120, 25))
    y = Z[:, :3].sum(axis=1, keepdims=True) + 0.5 * rng.normal(size=(120, 1))
    Zv = rng.normal(size=(40, 25))
    yv = Zv[:, :3].sum(axis=1, keepdims=True) + 0.5 * rng.normal(size=(40, 1))
    alphas = (1e-4, 1e-2, 1.0, 10.0)
    as_t = torch.as_tensor
    by_validation, by_gcv = [], []
    for alpha in alphas:
        beta, c = ridge_solve(as_t(Z), as_t(y), alpha)
        by_validation.append(np.mean((Zv @ beta.numpy() + c.numpy() - yv) ** 2))
        by_gcv.append(float(gcv_score(as_t(Z), as_t(y), alpha)[0]))
    for validation, scores in (((as_t(Zv), as_t(yv)), by_validation), ((None, None), by_gcv)):
        head = select_ridge_alpha(as_t(Z), as_t(y), *validation, alphas)
        alpha, beta, c, score = head.alpha, head.coef, head.intercept, head.score
        assert alpha == alphas[int(np.argmin(scores))]
        np.testing.assert_allclose(score, min(scores), rtol=1e-9)
        reference_beta, reference_c = ridge_solve(as_t(Z), as_t(y), alpha)
        np.testing.assert_allclose(beta.numpy(), reference_beta.numpy(), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(c.numpy(), reference_c.numpy(), rtol=1e-8, atol=1e-12)
    # a 1-D target comes back 1-D; an all-noise target picks the largest penalty
    head = select_ridge_alpha(as_t(Z), as_t(rng.normal(size=120)), as_t(Zv), as_t(rng.normal(size=40)), GRID)
    alpha, beta, c = head.alpha, head.coef, head.intercept
    assert beta.shape == (25,) and c.shape == () and alpha >= 0.1


def test_default_features_and_schedule():
    assert default_n_components(50_000) == int(np.floor(np.sqrt(50_000) * np.log(50_000)))
    assert default_n_components(10**7) == 4000 and default_n_components(3) == 10
    stages = _schedule(45_000, 2272)
    assert stages[0] == (2000, default_n_components(2000)) and stages[-1] == (45_000, 2272)
    assert all(a[0] < b[0] for a, b in zip(stages, stages[1:]))


def budget_evaluations(m, s, budget=3e11):
    return budget / (4.0 * m * s * s)


@pytest.mark.parametrize("n_train", [1_000, 2_700, 5_000, 9_000, 10_000, 11_000, 12_000, 45_000, 200_000])
def test_budgeted_schedule_affords_every_fine_stage(n_train):
    budget, n_components = 3e11, default_n_components(n_train)
    stages = _schedule(n_train, n_components, flop_budget=budget)
    unbudgeted = _schedule(n_train, n_components)
    assert stages[0] == unbudgeted[0]
    for m, s in stages[1:]:
        assert s == min(n_components, default_n_components(m)) and budget_evaluations(m, s, budget) >= 10
    assert all(a[0] < b[0] for a, b in zip(stages, stages[1:]))
    # stages that fit the budget are kept as they are; shrunk ones grow by 1.5x at least
    assert all(b in unbudgeted or b[0] >= 1.5 * a[0] for a, b in zip(stages, stages[1:]))
    assert [st for st in unbudgeted[1:] if budget_evaluations(*st, budget) >= 10] == [
        st for st in stages[1:] if st in unbudgeted
    ]


def test_budgeted_schedule_shrinks_an_unaffordable_last_stage():
    # 10k rows: the full-size stage cannot afford 10 evaluations at 3e11 flops; it
    # used to be skipped, leaving the search on 2,000 rows
    stages = _schedule(10_000, default_n_components(10_000), flop_budget=3e11)
    assert len(stages) == 2 and 9_000 < stages[1][0] < 10_000
    assert budget_evaluations(*stages[1]) < 11
    # 45k rows: 32k and 45k shrink to under 1.5 x 8k, so both are dropped
    assert _schedule(45_000, 2272, flop_budget=3e11) == [(2000, default_n_components(2000)), (8000, default_n_components(8000))]


def test_relevance_groups_runs_then_weakest_sets():
    # SE1-like: x7-x9 strong, x1 and x3 weaker and apart, irrelevant features below 10%
    lam = np.array([0.23, 0.07, -0.45, 0.1, 0.07, 0.04, 0.89, 1.08, 1.01, 0.0])
    assert relevance_groups(lam) == [[7, 8, 6], [2], [0], [2, 0], [6, 2, 0], [8, 6, 2, 0]]
    assert relevance_groups(lam, max_groups=2) == [[7, 8, 6], [2]]
    # one run of equal values: the weakest sets repeat no run
    assert relevance_groups(np.array([1.0, 1.0, 0.01])) == [[0, 1]]
    assert relevance_groups(np.zeros(3)) == [] and relevance_groups(np.array([2.0])) == [[0]]


def test_rescaled_layers_also_on_the_pruned_relevances():
    """Irrelevant features above the group floor (0.15, 0.12): the groups are also formed without them."""
    layer = ARDRandomFourierFeatures.from_kernel(5, 20, relevance=[1.0, 0.25, 0.3, 0.15, 0.12], random_state=0,
                                                 dtype=torch.float64)
    lam_of = lambda layer, settings=DEFAULT_SETTINGS: [  # noqa: E731
        c.relevances.detach().numpy() for c in _rescaled_layers(layer, settings)]
    plain = lam_of(layer, replace(DEFAULT_SETTINGS, rescale_prune_fraction=None))
    both = lam_of(layer)
    # unpruned: groups [0], [2, 1], [3, 4], [1, 3, 4], [2, 1, 3, 4], each at 2.5 and 5 times its largest
    assert len(plain) == 10 and all(np.all(c[3:] > 0) for c in plain)
    np.testing.assert_allclose(both[: len(plain)], plain)
    # pruned at 0.2 of the largest: [1, .25, .3, 0, 0], whose groups [0] and [2, 1] were rescaled above
    assert len(both) == len(plain)
    # [1, .5, .3, .15, .12]: groups [0], [1], [2], [3, 4], [2, 3, 4], [1, 2, 3, 4] (12 candidates);
    # pruned [1, .5, .3, 0, 0] adds its weakest two, [1, 2], without the irrelevant pair
    other = lam_of(layer.replace(relevances=torch.tensor([1.0, 0.5, 0.3, 0.15, 0.12], dtype=torch.float64)))
    assert len(other) == 14
    np.testing.assert_allclose(other[12:], [[1.0, 1.25, 1.25, 0, 0], [1.0, 2.5, 2.5, 0, 0]])
    # nothing to prune: no second set of candidates
    clean = layer.replace(relevances=torch.tensor([1.0, 0.25, 0.3, 0.0, 0.0], dtype=torch.float64))
    assert len(list(_rescaled_layers(clean, DEFAULT_SETTINGS))) == 4


def _plateau_problem(frequency, n=4000, n_val=1000):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n + n_val, 4))
    y = np.sin(frequency * (X[:, 0] + X[:, 1])) + 0.1 * rng.normal(size=n + n_val)
    layer = ARDRandomFourierFeatures.from_kernel(
        4, 300, relevance=[0.2, 0.2, 0.0, 0.0], random_state=0, dtype=torch.float64
    )
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return layer, as_t(X[:n]), as_t(y[:n, None]), as_t(X[n:]), as_t(y[n:, None])


@pytest.mark.parametrize("validation", [True, False])
def test_refine_layer_rescales_a_group_off_a_too_smooth_plateau(validation):
    """sin(3 (x0 + x1)) is noise to a kernel at relevance 0.2: the group must sharpen."""
    layer, X, y, X_val, y_val = _plateau_problem(3.0)
    if not validation:
        X_val = y_val = None
    frequencies = layer.frequencies.clone()
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, None if X_val is None else layer(X_val), y_val, "auto")
    layer, new = refine_layer(
        layer, X, y, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto",
        generator=torch.Generator().manual_seed(0),
    )
    lam = layer.relevances.detach().numpy()
    assert lam[0] == lam[1] and lam[0] in (0.5, 1.0)  # 2.5 or 5 times the group's 0.2
    assert np.all(lam[2:] == 0.0)
    assert torch.equal(layer.frequencies, frequencies)  # no sampler: the draw stays
    assert new.score < 0.8 * head.score
    with torch.no_grad():  # the returned head is the ridge fit at the kept relevances
        reference = fit_ridge_head(layer(X), y, None if X_val is None else layer(X_val), y_val, "auto")
    np.testing.assert_allclose(new.coef.numpy(), reference.coef.numpy())


def test_refine_layer_keeps_a_layer_that_is_right():
    """A slowly varying target: sharper relevances or aligned draws validate no better."""
    layer, X, y, X_val, y_val = _plateau_problem(0.3)
    before = [t.detach().clone() for t in (layer.relevances, layer.frequencies, layer.offsets)]
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    kept, new = refine_layer(
        layer, X, y, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto",
        generator=torch.Generator().manual_seed(0), sample_frequencies=KERNELS["gaussian"].sample_frequencies,
    )
    assert new is head and kept is layer
    assert all(torch.equal(a, b) for a, b in zip(before, (layer.relevances, layer.frequencies, layer.offsets)))


def _pruning_problem(signal, n=3000, n_val=1000, p=20):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(n + n_val, p))
    y = signal(X) + 0.1 * rng.normal(size=n + n_val)
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return as_t(X[:n]), as_t(y[:n, None]), as_t(X[n:]), as_t(y[n:, None])


@pytest.mark.parametrize("validation", [True, False])
def test_refine_layer_prunes_relevances_left_on_noise(validation):
    """18 irrelevant features at a fifth of the relevant ones' relevance: zeroing them is confirmed."""
    X, y, X_val, y_val = _pruning_problem(lambda X: np.sin(X[:, 0] + X[:, 1]))
    if not validation:
        X_val = y_val = None
    relevances = [1.0, 1.0] + [0.2] * 18
    layer = ARDRandomFourierFeatures.from_kernel(20, 300, relevance=relevances, random_state=0, dtype=torch.float64)
    frequencies = layer.frequencies.clone()
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, None if X_val is None else layer(X_val), y_val, "auto")
    layer, new = refine_layer(
        layer, X, y, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto", rescale_groups=False,
        generator=torch.Generator().manual_seed(0), prune=True, settings=replace(DEFAULT_SETTINGS, prune_fractions=(0.1, 0.3)),
    )
    lam = layer.relevances.detach().numpy()
    np.testing.assert_array_equal(lam, [1.0, 1.0] + [0.0] * 18)
    assert torch.equal(layer.frequencies, frequencies)
    assert new.score < 0.9 * head.score
    with torch.no_grad():  # the returned head is the ridge fit at the kept relevances
        reference = fit_ridge_head(layer(X), y, None if X_val is None else layer(X_val), y_val, "auto")
    np.testing.assert_allclose(new.coef.numpy(), reference.coef.numpy())


def test_refine_layer_does_not_prune_a_weak_relevant_feature():
    """x1 matters at a quarter of x0's relevance: zeroing it validates worse, so it stays."""
    X, y, X_val, y_val = _pruning_problem(lambda X: np.sin(X[:, 0]) + 0.5 * np.sin(0.3 * X[:, 1]), p=2)
    layer = ARDRandomFourierFeatures.from_kernel(2, 300, relevance=[1.0, 0.25], random_state=0, dtype=torch.float64)
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    kept, new = refine_layer(
        layer, X, y, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto", rescale_groups=False,
        generator=torch.Generator().manual_seed(0), prune=True,
    )
    assert new is head and kept is layer
    np.testing.assert_array_equal(layer.relevances.detach().numpy(), [1.0, 0.25])


def test_target_spectrum_matches_the_naive_sums():
    rng = np.random.default_rng(5)
    X, y, W = rng.normal(size=(300, 3)), rng.normal(size=(300, 2)), rng.normal(size=(3, 7))
    C, S = target_spectrum(torch.as_tensor(X), torch.as_tensor(y), torch.as_tensor(W), block_bytes=300 * 8 * 3)
    yc = y - y.mean(axis=0)
    for j in range(7):
        transform = (yc * np.exp(1j * X @ W[:, j])[:, None]).sum(axis=0) / 300
        np.testing.assert_allclose(C[j].numpy(), transform.real, atol=1e-12)
        np.testing.assert_allclose(S[j].numpy(), transform.imag, atol=1e-12)


def _ridge_function_problem(n=4000, n_val=1000, p=6, seed=1):
    """log((x0 + x1 + x2)^2): varies along one direction, as SE2 does."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_val, p))
    y = np.log(X[:, :3].sum(axis=1) ** 2) + 0.1 * rng.normal(size=n + n_val)
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return as_t(X[:n]), as_t(y[:n, None]), as_t(X[n:]), as_t(y[n:, None])


# 'cos' is slow (5 s); the move itself is the same for both variants
@pytest.mark.parametrize("variant", [pytest.param("cos", marks=pytest.mark.slow), "cos_sin"])
def test_refine_layer_aligns_frequencies_with_a_ridge_function(variant):
    """The draw is replaced by the best-aligned part of a larger one; fresh data agrees."""
    X, y, X_val, y_val = _ridge_function_problem()
    relevances = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    layer = ARDRandomFourierFeatures.from_kernel(
        6, 300, relevance=relevances, random_state=0, dtype=torch.float64, variant=variant
    )
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    old = ARDRandomFourierFeatures.from_kernel(
        6, 300, relevance=relevances, random_state=0, dtype=torch.float64, variant=variant
    )
    layer, new = refine_layer(
        layer, X, y, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto", rescale_groups=False,
        generator=torch.Generator().manual_seed(0), sample_frequencies=KERNELS["gaussian"].sample_frequencies,
    )
    assert not torch.equal(layer.frequencies, old.frequencies)
    assert layer.frequencies.shape == old.frequencies.shape and layer.n_components == 300
    lam = layer.relevances.detach().numpy()
    scale = lam[0] / relevances[0]
    assert scale in (1.0, 1.5, 2.0, 3.0) and np.allclose(lam, scale * np.array(relevances))
    # kept frequencies lean towards the direction (1, 1, 1) of the target's variation
    W = layer.frequencies[:3].numpy()
    cosine = np.abs(W.sum(axis=0)) / np.sqrt(3) / np.linalg.norm(W, axis=0)
    W_old = old.frequencies[:3].numpy()
    assert np.median(cosine) > 1.5 * np.median(np.abs(W_old.sum(axis=0)) / np.sqrt(3) / np.linalg.norm(W_old, axis=0))
    X_test, y_test, _, _ = _ridge_function_problem(n=3000, n_val=0, seed=2)  # fresh data
    with torch.no_grad():
        mse_new = float(((layer(X_test) @ new.coef + new.intercept - y_test) ** 2).mean())
        mse_old = float(((old(X_test) @ head.coef + head.intercept - y_test) ** 2).mean())
    assert new.score < head.score and mse_new < 0.8 * mse_old


def test_refine_layer_does_not_align_without_a_validation_split():
    """The selection has seen the training target: no training-set score may judge it."""
    X, y, _, _ = _ridge_function_problem()
    layer = ARDRandomFourierFeatures.from_kernel(6, 300, relevance=[1.0] * 3 + [0.0] * 3, random_state=0, dtype=torch.float64)
    frequencies = layer.frequencies.clone()
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, None, None, "auto")
    layer, _ = refine_layer(
        layer, X, y, None, None, head, search_alpha=1e-4, head_alpha="auto", rescale_groups=False,
        generator=torch.Generator().manual_seed(0), sample_frequencies=KERNELS["gaussian"].sample_frequencies,
    )
    assert torch.equal(layer.frequencies, frequencies)


def test_marginal_r2_matches_one_polynomial_fit_per_feature():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5))
    X[:, 4] = 2.0  # constant column: explains nothing
    y = X[:, 0] ** 2 - X[:, 1] + 0.3 * rng.normal(size=400)
    r2 = marginal_r2(torch.as_tensor(X), torch.as_tensor(y[:, None])).numpy()
    for j in range(4):
        design = np.column_stack([np.ones(400), X[:, j], X[:, j] ** 2, X[:, j] ** 3])
        residual = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
        np.testing.assert_allclose(r2[j], 1.0 - residual @ residual / np.sum((y - y.mean()) ** 2), atol=1e-10)
    assert r2[4] == 0.0 and r2[0] > 0.5 and r2[2] < 0.05


@pytest.mark.parametrize("variant, n_components", [("cos", 7), ("cos_sin", 8), ("cos_sin", 7)])
def test_layer_without_autograd_matches_the_differentiable_path(variant, n_components):
    """The in-place (no-grad) features equal the autograd ones bit for bit, contiguous."""
    layer = ARDRandomFourierFeatures.from_kernel(3, n_components, relevance=[0.5, 1.0, 0.0], random_state=2, variant=variant)
    x = torch.as_tensor(np.random.default_rng(0).normal(size=(11, 3)))
    with torch.no_grad():
        fast = layer(x)
        nested = layer(x, 5)
    slow = layer(x)
    assert slow.requires_grad and fast.is_contiguous() and fast.shape == (11, n_components)
    assert torch.equal(fast, slow.detach())
    assert torch.equal(nested, layer(x, 5).detach())


# -- the linear columns, the Gram matrix, the screening ----------------------------------


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
@pytest.mark.parametrize("n_components", [None, 7])
def test_linear_columns_follow_the_random_features(variant, n_components):
    layer = ARDRandomFourierFeatures.from_kernel(4, 12, random_state=0, variant=variant, linear=True)
    with torch.no_grad():
        layer.relevances.copy_(torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64))
    X = torch.as_tensor(np.random.default_rng(0).normal(size=(30, 4)))
    plain = layer.replace(linear=False)
    k = 12 if n_components is None else n_components
    assert layer.width == 16 and plain.width == 12 and layer.replace().has_linear
    with torch.no_grad():
        features = layer(X, n_components)
        torch.testing.assert_close(features[:, :k], plain(X, n_components), rtol=0, atol=0)
        torch.testing.assert_close(features[:, k:], X * layer.relevances, rtol=0, atol=0)
    differentiable = layer(X, n_components)  # the autograd path gives the same values
    torch.testing.assert_close(differentiable.detach(), features, rtol=0, atol=1e-15)
    differentiable[:, k + 1].sum().backward()  # the linear columns pass gradient to their relevance
    assert layer.relevances.grad[1] == pytest.approx(float(X[:, 1].sum()))


def test_network_width_counts_the_linear_columns():
    from rffkit.layers import RFFNetModule

    layer = ARDRandomFourierFeatures.from_kernel(3, 10, random_state=0, linear=True)
    net = RFFNetModule(layer, (), 2, torch.Generator().manual_seed(0))
    assert net.first_linear.weight.shape == (2, 13)
    assert net(torch.zeros(4, 3, dtype=torch.float64)).shape == (4, 2)


def _trend_problem(n=1500, n_val=500, seed=6):
    """A linear trend plus a bump, on a layer too rough along the trend to fit it: the linear term's gain is broad."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_val, 3))
    X[:, 0] = rng.uniform(-3.0, 3.0, size=n + n_val)
    y = 2.0 * X[:, 0] + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=n + n_val)
    y = (y - y[:n].mean()) / y[:n].std()
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    layer = ARDRandomFourierFeatures.from_kernel(3, 50, relevance=[6.0, 0.7, 0.1], random_state=0,
                                                 variant="cos_sin")
    return layer, as_t(X[:n]), as_t(y[:n, None]), as_t(X[n:]), as_t(y[n:, None])


def test_refine_layer_adds_the_linear_term_for_a_trend():
    layer, X, y, X_val, y_val = _trend_problem()
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    kept, new = refine_layer(layer, X, y, X_val, y_val, head, search_alpha=1e-4, generator=torch.Generator(),
                             linear_term=True, rescale_groups=False)
    # kept: the validation error falls (0.040 -> 0.026, by 5.5 standard errors)
    assert kept.has_linear and not layer.has_linear
    assert new.score < 0.8 * head.score
    same, unchanged = refine_layer(layer, X, y, X_val, y_val, head, search_alpha=1e-4, generator=torch.Generator(),
                                   linear_term=False, rescale_groups=False)
    assert same is layer and unchanged is head


@pytest.mark.slow  # the polish is off by default (RFFNetSettings.polish_iterations=0)
def test_polish_lowers_the_gcv_of_all_features_and_keeps_the_draw():
    """The last stage fits the relevances with every feature, on all rows: their GCV falls, the draw stays."""
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(1500, 4)))
    y = torch.sin(1.5 * (X[:, :1] + X[:, 1:2])) + 0.1 * torch.as_tensor(rng.normal(size=(1500, 1)))
    layer = ARDRandomFourierFeatures.from_kernel(
        4, 400, relevance=[0.3, 0.3, 0.3, 0.3], random_state=0, dtype=torch.float64, linear=True,
    )
    draw = [layer.frequencies.clone(), layer.offsets.clone()]

    def gcv():
        with torch.no_grad():
            return float(gcv_score(layer(X), y, 1e-4)[0])

    before = gcv()
    history = polish_relevances(layer, X, y, alpha=1e-4, max_iter=6)
    lam = layer.relevances.detach().abs().numpy()
    assert 1 <= history.n_iter <= 6 and gcv() == pytest.approx(min(history.train_loss))
    assert gcv() < 0.5 * before  # the features of x0 + x1 sharpen, those of x2, x3 fade
    assert lam[:2].min() > 2 * lam[2:].max()
    assert torch.equal(layer.frequencies, draw[0]) and torch.equal(layer.offsets, draw[1])


def test_polish_stops_at_its_evaluation_budget_even_inside_a_line_search(monkeypatch):
    """SciPy checks maxfun only between iterations; the stage itself refuses the evaluation past the budget."""
    import rffkit._search as search

    calls, score = [], search.gcv_score

    def counted(Z, y, alpha):
        calls.append(alpha)
        return score(Z, y, alpha)

    monkeypatch.setattr(search, "gcv_score", counted)
    rng = np.random.default_rng(2)
    X = torch.as_tensor(rng.normal(size=(600, 3)))
    y = torch.sin(2.0 * X[:, :1]) + 0.1 * torch.as_tensor(rng.normal(size=(600, 1)))
    layer = ARDRandomFourierFeatures.from_kernel(3, 100, relevance=[0.2, 0.2, 0.2], random_state=0)
    start = layer.relevances.detach().clone()
    polish_relevances(layer, X, y, alpha=1e-4, max_iter=50, max_evaluations=3)
    assert len(calls) == 3
    assert not torch.equal(layer.relevances, start)  # the best iterate before the budget ran out
    calls.clear()
    polish_relevances(layer, X, y, alpha=1e-4, max_iter=50, max_evaluations=100, tol=0.5, n_iter_no_change=1)
    assert 1 <= len(calls) < 100  # a stall of one iteration under half the score ends the stage


def test_prescreening_keeps_the_escape_off_a_plateau():
    """With one candidate per move kept after the first look on fewer rows, the rescaled group still wins."""
    layer, X, y, X_val, y_val = _plateau_problem(3.0)
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    settings = replace(DEFAULT_SETTINGS, prescreen_keep=1, screen_rows=3000, score_rows=1000)
    kept, new = refine_layer(layer, X, y, X_val, y_val, head, search_alpha=1e-4, generator=torch.Generator(),
                             settings=settings)
    lam = kept.relevances.detach().numpy()
    assert lam[0] == lam[1] and lam[0] in (0.5, 1.0) and new.score < 0.8 * head.score


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_screening_fits_factorise_in_the_features_precision(dtype, monkeypatch):
    """The screening fits solve their system in the layer's dtype (float32 by default); confirming heads in float64."""
    import rffkit._refine as refine

    layer, X, y, X_val, y_val = _plateau_problem(3.0, n=1500, n_val=500)
    layer, X, y, X_val, y_val = (t.to(dtype) for t in (layer, X, y, X_val, y_val))
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    seen = []

    def recording(Z, *args, solve_dtype=torch.float64, **kwargs):
        seen.append((Z.dtype, solve_dtype))
        return _fit_ridge_head(Z, *args, solve_dtype=solve_dtype, **kwargs)

    monkeypatch.setattr(refine, "fit_ridge_head", recording)
    refine_layer(layer, X, y, X_val, y_val, head, search_alpha=1e-4, generator=torch.Generator(),
                 settings=replace(DEFAULT_SETTINGS, prescreen_keep=None))
    assert seen and set(seen) == {(dtype, dtype)}


# True, not the default, only in the full run (make test-all)
@pytest.mark.parametrize("subsample_features", [pytest.param(True, marks=pytest.mark.slow), False])
def test_screening_fits_use_the_subsample_feature_count(subsample_features, monkeypatch):
    """A screening fit on m rows uses the layer's first screening_n_components(m) features, not all D."""
    import rffkit._refine as refine

    layer, X, y, X_val, y_val = _plateau_problem(3.0)
    # subsampled: D above both rows' screening widths; all D: any D will do, a small one is quicker
    D = 1500 if subsample_features else 400
    layer = ARDRandomFourierFeatures.from_kernel(4, D, relevance=[0.2, 0.2, 0.0, 0.0], random_state=0,
                                                 dtype=torch.float64)
    with torch.no_grad():
        head = fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto")
    widths = []

    def recording(Z, *args, **kwargs):
        widths.append((Z.shape[0], Z.shape[1]))
        return _fit_ridge_head(Z, *args, **kwargs)

    monkeypatch.setattr(refine, "fit_ridge_head", recording)
    settings = replace(DEFAULT_SETTINGS, screen_rows=3000, score_rows=1000, prescreen_keep=1,
                       varpro_min_features=300, screen_subsample_features=subsample_features)
    refine_layer(layer, X, y, X_val, y_val, head, search_alpha=1e-4, generator=torch.Generator(), settings=settings)
    assert {rows for rows, _ in widths} == {1000, 3000}  # the first look, then the screening rows
    for rows, width in widths:
        assert width == (min(D, screening_n_components(rows, settings)) if subsample_features else D)
    if subsample_features:
        assert {width for _, width in widths} == {300, default_n_components(3000)}


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
def test_input_range_clamps_the_trigonometric_columns_only(variant):
    """Beyond the range the random features are those at the boundary; the linear columns
    lambda o x keep the input as given; inside the range nothing changes."""
    from rffkit.layers import ARDRandomFourierFeatures

    layer = ARDRandomFourierFeatures.from_kernel(3, 10, random_state=0, dtype=torch.float64, variant=variant,
                                                 relevance=[1.0, 0.5, 2.0])
    layer = layer.replace(linear=True)
    x = torch.tensor([[0.2, -0.3, 0.1], [5.0, -9.0, 0.4], [-7.0, 0.0, 3.0]], dtype=torch.float64)
    plain = layer(x)
    assert layer.input_range is None
    layer.set_input_range([-1.0, -2.0, -1.5], [1.0, 2.0, 1.5])
    clamped = torch.clamp(x, torch.tensor([-1.0, -2.0, -1.5]), torch.tensor([1.0, 2.0, 1.5]))
    with torch.no_grad():
        features = layer(x)
        torch.testing.assert_close(features[:, :10], layer.replace(linear=True)(clamped)[:, :10])
    torch.testing.assert_close(layer(x)[:, :10], features[:, :10])  # the autograd path agrees
    torch.testing.assert_close(features[:, 10:], x * layer.relevances.detach())
    torch.testing.assert_close(features[0], plain[0])  # a row inside the range
    assert not torch.allclose(features[1:, :10], plain[1:, :10])
    assert layer.set_input_range(None, None).input_range is None


def test_refine_layer_skips_the_moves_where_the_linear_model_wins():
    """A linear target and a kernel too wiggly for it: after the linear-term move the linear-only model
    validates better by over a standard error, so the moves that reshape the kernel are not tried (ISLR's
    Default, 7,500 rows: 34.6 -> 15.1 CPU s, the same linear-only model). A plateau, where no model yet
    explains the target, still rescales."""
    import rffkit._refine as refine

    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 4))
    y = X[:, 0] + 0.5 * rng.normal(size=2000)
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    layer = ARDRandomFourierFeatures.from_kernel(4, 500, relevance=[1.0, 1.0, 1.0, 1.0], random_state=0,
                                                 dtype=torch.float64)
    X_train, y_train, X_val, y_val = as_t(X[:1000]), as_t(y[:1000, None]), as_t(X[1000:]), as_t(y[1000:, None])
    with torch.no_grad():
        head = fit_ridge_head(layer(X_train), y_train, layer(X_val), y_val, "auto")
    tried = []
    original = refine._rescaled_layers
    refine._rescaled_layers = lambda *args: tried.append(args) or original(*args)
    try:
        kept, _ = refine_layer(layer, X_train, y_train, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto",
                               generator=torch.Generator().manual_seed(0), linear_term=True)
        assert not tried and torch.equal(kept.relevances, layer.relevances)
        plateau, X_train, y_train, X_val, y_val = _plateau_problem(3.0)
        with torch.no_grad():
            head = fit_ridge_head(plateau(X_train), y_train, plateau(X_val), y_val, "auto")
        kept, _ = refine_layer(plateau, X_train, y_train, X_val, y_val, head, search_alpha=1e-4, head_alpha="auto",
                               generator=torch.Generator().manual_seed(0), linear_term=True)
        assert tried and kept.relevances[0] > 0.2  # rescaled off the plateau, as without the linear term
    finally:
        refine._rescaled_layers = original


def test_the_linear_model_the_moves_are_skipped_for_chooses_its_own_penalty(monkeypatch):
    """The classifier's moves are judged near the kernel head's penalty (one penalty, for the costly logistic
    path); the linear-only model they may be skipped for is fitted on the whole grid, its penalty chosen as the
    kernel-or-linear choice chooses it (helper-47: at the kernel head's 1e-4 it was nearly unpenalised, 0.449
    validation log-loss against 0.375, and the skip's log overstated the kernel's lead 2.5-fold)."""
    import rffkit._refine as refine
    from rffkit import RFFNetClassifier

    grids = []
    original = refine.linear_only
    monkeypatch.setattr(refine, "linear_only",
                        lambda heads, layer: grids.append(heads.alphas) or original(heads, layer))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=1500) > 0).astype(int)
    RFFNetClassifier(random_state=0, max_iter=10, rescale_groups=False, align_frequencies=False).fit(X, y)
    assert grids and all(len(alphas) > 1 for alphas in grids)
