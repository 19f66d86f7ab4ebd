"""RFFRidge against naive references: sklearn Ridge, brute-force LOO and explicit-hat GCV.

Tolerances: float64 paths agree with the references to rtol 1e-6 (they differ only by
rounding in an eigendecomposition vs. a direct solve); float32 to rtol 1e-3.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.linear_model import Ridge
from sklearn.preprocessing import SplineTransformer
from sklearn.utils._param_validation import InvalidParameterError

from rffkit import RandomBinningFeatures, RandomFourierFeatures, RFFClassifier, RFFRidge
from rffkit._ridge_path import gcv_path, loo_path, ridge_spectrum, row_groups

ALPHAS = [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]


def make_problem(n=60, p=3, seed=0, n_targets=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2
    if n_targets is None:
        return X, f + 0.1 * rng.normal(size=n)
    return X, np.column_stack([f * (k + 1) + 0.1 * rng.normal(size=n) for k in range(n_targets)])


def naive_loo(Z, y, alpha, fit_intercept=True):
    """Mean squared leave-one-out error by n refits of sklearn's Ridge."""
    n = Z.shape[0]
    errors = []
    for i in range(n):
        keep = np.arange(n) != i
        model = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky").fit(Z[keep], y[keep])
        errors.append((y[i] - model.predict(Z[i : i + 1])[0]) ** 2)
    return float(np.mean(errors))


def naive_gcv(Z, y, alpha, fit_intercept=True):
    """GCV from the explicit n x n hat matrix of [1, Z] with penalty diag(0, alpha I)."""
    n = Z.shape[0]
    design = np.column_stack([np.ones(n), Z]) if fit_intercept else Z
    penalty = alpha * np.eye(design.shape[1])
    if fit_intercept:
        penalty[0, 0] = 0.0
    hat = design @ np.linalg.solve(design.T @ design + penalty, design.T)
    residual = y - hat @ y
    return float(np.mean(residual**2) / (1 - np.trace(hat) / n) ** 2)


@pytest.mark.parametrize("n_components", [20, 90])  # primal (D < n) and dual (D > n) forms
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_fixed_alpha_equals_sklearn_ridge(n_components, fit_intercept):
    X, y = make_problem()
    features = RandomFourierFeatures(n_components=n_components, random_state=1)
    model = RFFRidge(features=features, alphas=0.3, alpha_selection=None, fit_intercept=fit_intercept).fit(X, y)
    Z = features.fit_transform(X)
    reference = Ridge(alpha=0.3, fit_intercept=fit_intercept, solver="cholesky").fit(Z, y)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(model.intercept_, reference.intercept_, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(model.predict(X), reference.predict(Z), rtol=1e-6, atol=1e-10)
    assert model.alpha_ == 0.3 and model.cv_values_ is None


@pytest.mark.parametrize("n_components", [15, 80])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_loo_and_gcv_equal_brute_force(n_components, fit_intercept):
    X, y = make_problem(n=40)
    features = RandomFourierFeatures(n_components=n_components, random_state=2)
    Z = features.fit_transform(X)
    common = dict(features=features, alphas=ALPHAS, fit_intercept=fit_intercept)
    loo = RFFRidge(alpha_selection="loo", **common).fit(X, y)
    gcv = RFFRidge(alpha_selection="gcv", **common).fit(X, y)
    brute_loo = [naive_loo(Z, y, a, fit_intercept) for a in ALPHAS]
    brute_gcv = [naive_gcv(Z, y, a, fit_intercept) for a in ALPHAS]
    np.testing.assert_allclose(loo.cv_values_, brute_loo, rtol=1e-6)
    np.testing.assert_allclose(gcv.cv_values_, brute_gcv, rtol=1e-6)
    # The eigen-path chooses the alpha a naive loop chooses.
    assert loo.alpha_ == ALPHAS[int(np.argmin(brute_loo))]
    assert gcv.alpha_ == ALPHAS[int(np.argmin(brute_gcv))]
    assert loo.best_score_ == pytest.approx(min(brute_loo), rel=1e-6)
    # ... and then solves exactly at that alpha.
    reference = Ridge(alpha=loo.alpha_, fit_intercept=fit_intercept, solver="cholesky").fit(Z, y)
    np.testing.assert_allclose(loo.coef_, reference.coef_, rtol=1e-6, atol=1e-10)


def repeated_rows_problem(seed=0):
    """30 distinct rows, 18 of them repeated 1 to 3 times with their own noisy targets (66 rows)."""
    X, y = make_problem(n=30, seed=seed)
    rng = np.random.default_rng(seed + 1)
    copies = np.concatenate([np.arange(30), rng.choice(30, 18, replace=False).repeat(rng.integers(1, 4, 18))])
    f = np.sin(2 * X[copies, 0]) + X[copies, 1] ** 2 / 2
    return X[copies], f + 0.1 * rng.normal(size=len(copies)), copies


def naive_leave_group_out(Z, y, groups, alpha, fit_intercept=True):
    """Mean squared error over the rows when each group of equal rows is left out whole, by refits."""
    errors = np.zeros(len(y))
    for g in np.unique(groups):
        out = groups == g
        model = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky").fit(Z[~out], y[~out])
        errors[out] = (y[out] - model.predict(Z[out])) ** 2
    return float(errors.mean())


def naive_group_gcv(Z, y, groups, alpha):
    """The GCV form of leaving groups out, from the explicit hat matrix of the weighted problem on the groups
    (rows sqrt(c) [1, z], targets sqrt(c) mean y): (W + RSS_groups / (1 - tr H / G)^2) / n."""
    labels, first, counts = np.unique(groups, return_index=True, return_counts=True)
    means = np.array([y[groups == g].mean() for g in labels])
    within = sum(((y[groups == g] - m) ** 2).sum() for g, m in zip(labels, means))
    design = np.sqrt(counts)[:, None] * np.column_stack([np.ones(len(labels)), Z[first]])
    penalty = alpha * np.eye(design.shape[1])
    penalty[0, 0] = 0.0
    hat = design @ np.linalg.solve(design.T @ design + penalty, design.T)
    target = np.sqrt(counts) * means
    residual = target - hat @ target
    return float((within + (residual @ residual) / (1 - np.trace(hat) / len(labels)) ** 2) / len(y))


@pytest.mark.parametrize("n_components", [15, 80])  # primal and dual forms
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_repeated_rows_are_left_out_together(n_components, fit_intercept):
    """A left-out row's twin would be interpolated: LOO leaves each group of equal rows out whole (equal to
    refits without the group), GCV takes the same form, and the fit itself is unchanged."""
    X, y, groups = repeated_rows_problem()
    features = RandomFourierFeatures(n_components=n_components, random_state=2)
    Z = features.fit_transform(X)
    common = dict(features=features, alphas=ALPHAS, fit_intercept=fit_intercept)
    loo = RFFRidge(alpha_selection="loo", **common).fit(X, y)
    brute = [naive_leave_group_out(Z, y, groups, a, fit_intercept) for a in ALPHAS]
    np.testing.assert_allclose(loo.cv_values_, brute, rtol=1e-6)
    reference = Ridge(alpha=loo.alpha_, fit_intercept=fit_intercept, solver="cholesky").fit(Z, y)
    np.testing.assert_allclose(loo.coef_, reference.coef_, rtol=1e-6, atol=1e-10)
    if fit_intercept:
        gcv = RFFRidge(alpha_selection="gcv", **common).fit(X, y)
        np.testing.assert_allclose(gcv.cv_values_, [naive_group_gcv(Z, y, groups, a) for a in ALPHAS], rtol=1e-6)


def test_the_default_scores_penalties_by_exact_leave_one_out():
    """Rare cells of a one-hot column and a short length scale give some rows high leverage, which GCV's
    mean leverage does not see: GCV chooses a penalty ten times smaller than exact leave-one-out, which
    predicts new rows better. The default is exact leave-one-out, streamed (a second pass) as in memory."""
    from rffkit.io import ArraySource

    rng = np.random.default_rng(0)
    shares = [0.3, 0.3, 0.2, 0.1, 0.04, 0.03, 0.02, 0.01]

    def draw(n):
        cells = rng.choice(8, size=n, p=shares)
        X = np.column_stack([np.eye(8)[cells], rng.normal(size=(n, 2))])
        return X, np.sin(X[:, 8]) + 0.5 * cells / 8

    X, f = draw(400)
    y = f + 0.3 * rng.normal(size=400)
    X_new, f_new = draw(4000)
    common = dict(features=RandomFourierFeatures(n_components=200, length_scale=0.3), random_state=0)
    default = RFFRidge(**common).fit(X, y)
    loo = RFFRidge(alpha_selection="loo", **common).fit(X, y)
    gcv = RFFRidge(alpha_selection="gcv", **common).fit(X, y)
    assert default.alpha_ == loo.alpha_ and np.array_equal(default.cv_values_, loo.cv_values_)
    assert gcv.alpha_ < loo.alpha_ and loo.score(X_new, f_new) > gcv.score(X_new, f_new) + 0.1  # 0.40 against 0.23
    streamed = RFFRidge(**common).fit(ArraySource(X, y))
    assert streamed.alpha_ == loo.alpha_


def test_repeated_rows_are_scored_alike_in_float32_with_negative_zeros_and_at_the_smallest_alphas():
    """200 rows of 20 distinct ones, scored down to alpha 1e-6 (the default grid): float32 chooses float64's
    alpha (its noise eigenvalues had given a group's rows hat values c h of 1.3-3.7, and alpha 1e-6, test R^2
    -1162), -0.0 and 0.0 make one group, and the GCV form equals its direct value from the fitted values
    (its RSS - W had cancelled to 0 at small alphas, the score to its floor W / n)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 2))[rng.integers(0, 20, 200)]
    y = np.sin(2 * X[:, 0]) + X[:, 1] + rng.normal(size=200)
    chosen = {}
    for dtype in (np.float64, np.float32):
        for selection in ("loo", "gcv"):
            model = RFFRidge(alpha_selection=selection, random_state=0).fit(X.astype(dtype), y.astype(dtype))
            chosen[dtype, selection] = model.alpha_
    assert chosen[np.float32, "loo"] == chosen[np.float64, "loo"] >= 0.1
    assert chosen[np.float32, "gcv"] == chosen[np.float64, "gcv"] >= 0.1
    signed = np.round(X * 0.6)  # about a third of the entries are -0.0
    assert np.signbit(signed[signed == 0]).any()
    groups = row_groups(signed, y)
    assert len(groups.counts) == len(np.unique(signed + 0.0, axis=0))
    features = RandomFourierFeatures(n_components=60, random_state=0)
    Z = features.fit_transform(signed)
    alphas = np.logspace(-6, 0, 7)
    gcv = gcv_path(ridge_spectrum(Z, y[:, None], fit_intercept=True, dtype=torch.float64, device="cpu"), alphas,
                   groups).numpy().ravel()
    naive = [naive_group_gcv(Z, y, signed @ [1e3, 1.0] + 0.0, a) for a in alphas]
    np.testing.assert_allclose(gcv[2:], naive[2:], rtol=1e-6)
    # at alphas 1e-6 and 1e-5, 1 - df / G is about 1e-6: its square divides the rounding of ||yc||^2 - W
    np.testing.assert_allclose(gcv[:2], naive[:2], rtol=1e-2)


def test_all_rows_equal_are_scored_as_distinct_rows():
    """Leaving out a group that is every row leaves nothing to fit: all rows equal are scored as before."""
    X, y = np.ones((30, 2)), np.random.default_rng(0).normal(size=30)
    assert row_groups(X, y) is None
    model = RFFRidge(random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.cv_values_))


def test_a_bootstrap_sample_does_not_choose_the_smallest_alpha():
    """On a bootstrap sample of diabetes (442 rows, 282 distinct) both scores had chosen alpha 1e-6, the
    fit interpolating the distinct rows: R^2 -4.5 on the rows not drawn. Left out with their copies, they
    choose a penalty that predicts the unseen rows about as well as a fit on distinct rows."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    boot = np.random.default_rng(0).integers(0, len(y), len(y))
    unseen = np.setdiff1d(np.arange(len(y)), boot)
    for selection in ("gcv", "loo"):
        model = RFFRidge(alpha_selection=selection, random_state=0).fit(X[boot], y[boot])
        assert model.alpha_ >= 0.1 and model.score(X[unseen], y[unseen]) > 0.35, (selection, model.alpha_)


def test_multi_output_matches_per_target_fits():
    X, Y = make_problem(n=50, n_targets=3)
    features = RandomFourierFeatures(n_components=25, random_state=3)
    joint = RFFRidge(features=features, alphas=ALPHAS, alpha_per_target=True).fit(X, Y)
    assert joint.coef_.shape == (3, 25) and joint.intercept_.shape == (3,) and joint.alpha_.shape == (3,)
    assert joint.cv_values_.shape == (len(ALPHAS), 3)
    for k in range(3):
        single = RFFRidge(features=features, alphas=ALPHAS).fit(X, Y[:, k])
        np.testing.assert_allclose(joint.cv_values_[:, k], single.cv_values_, rtol=1e-8)
        assert joint.alpha_[k] == single.alpha_
        np.testing.assert_allclose(joint.coef_[k], single.coef_, rtol=1e-8, atol=1e-12)
    shared = RFFRidge(features=features, alphas=ALPHAS).fit(X, Y)
    assert shared.alpha_ == ALPHAS[int(np.argmin(shared.cv_values_.sum(axis=1)))]
    assert shared.predict(X).shape == (50, 3)


@pytest.mark.parametrize("n_knots", [4, 30])  # D < n and D > n
@pytest.mark.parametrize("selection", ["gcv", "loo"])
def test_sparse_feature_output_equals_dense(n_knots, selection):
    X, y = make_problem(n=45, p=2)
    dense = RFFRidge(features=SplineTransformer(n_knots=n_knots), alphas=ALPHAS, alpha_selection=selection).fit(X, y)
    sparse = RFFRidge(
        features=SplineTransformer(n_knots=n_knots, sparse_output=True), alphas=ALPHAS, alpha_selection=selection
    ).fit(X, y)
    assert sp.issparse(sparse.features_.transform(X))
    np.testing.assert_allclose(sparse.cv_values_, dense.cv_values_, rtol=1e-6)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(sparse.predict(X), dense.predict(X), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("n_components", [3, 40])  # a few hundred columns: primal, then dual
def test_random_binning_features_equal_ridge_on_the_densified_features(n_components):
    X, y = make_problem(n=60, p=2)
    features = RandomBinningFeatures(n_components=n_components, length_scale=2.0, random_state=0)
    Z = features.fit_transform(X)
    assert sp.issparse(Z)
    model = RFFRidge(features=features, alphas=ALPHAS, alpha_selection="loo").fit(X, y)
    brute = [naive_loo(Z.toarray(), y, a) for a in ALPHAS]
    np.testing.assert_allclose(model.cv_values_, brute, rtol=1e-6)
    reference = Ridge(alpha=model.alpha_, solver="cholesky").fit(Z.toarray(), y)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(model.predict(X), reference.predict(Z.toarray()), rtol=1e-6, atol=1e-10)


def test_float32_stays_float32_and_agrees_with_float64():
    X, y = make_problem()
    features = RandomFourierFeatures(n_components=20, random_state=4)
    model32 = RFFRidge(features=features, alphas=ALPHAS).fit(X.astype(np.float32), y.astype(np.float32))
    model64 = RFFRidge(features=features, alphas=ALPHAS).fit(X, y)
    assert model32.coef_.dtype == np.float32
    assert model32.predict(X.astype(np.float32)).dtype == np.float32
    assert model64.predict(X).dtype == np.float64
    np.testing.assert_allclose(model32.cv_values_, model64.cv_values_, rtol=1e-3)
    np.testing.assert_allclose(model32.predict(X.astype(np.float32)), model64.predict(X), rtol=1e-3, atol=1e-3)


def test_spectrum_scores_on_device(device):
    X, y = make_problem(n=30)
    Z = RandomFourierFeatures(n_components=12, random_state=5).fit_transform(X)
    spectrum = ridge_spectrum(Z, y[:, None], fit_intercept=True, dtype=torch.float64, device=torch.device(device))
    gcv = gcv_path(spectrum, ALPHAS)[:, 0].cpu().numpy()
    loo = loo_path(spectrum, ALPHAS, Z, y[:, None])[:, 0].cpu().numpy()
    np.testing.assert_allclose(gcv, [naive_gcv(Z, y, a) for a in ALPHAS], rtol=1e-6)
    np.testing.assert_allclose(loo, [naive_loo(Z, y, a) for a in ALPHAS], rtol=1e-6)


@pytest.mark.parametrize("selection", ["gcv", "loo"])
def test_estimator_on_device_matches_reference(device, selection):
    X, y = make_problem(n=40)
    features = RandomFourierFeatures(n_components=15, random_state=6)
    model = RFFRidge(features=features, alphas=ALPHAS, alpha_selection=selection, device=device).fit(X, y)
    Z = features.fit_transform(X)
    naive = naive_loo if selection == "loo" else naive_gcv
    np.testing.assert_allclose(model.cv_values_, [naive(Z, y, a) for a in ALPHAS], rtol=1e-6)
    reference = Ridge(alpha=model.alpha_, solver="cholesky").fit(Z, y)
    np.testing.assert_allclose(model.predict(X), reference.predict(Z), rtol=1e-6, atol=1e-10)
    assert isinstance(model.coef_, np.ndarray)  # fitted state is NumPy, picklable on a CPU-only machine


def test_random_state_overrides_the_feature_maps():
    """The estimator's random_state, when set, replaces the one of a given feature map."""
    X, y = make_problem()
    features = RandomFourierFeatures(n_components=10, random_state=0)
    assert RFFRidge(features=features, random_state=3).fit(X, y).features_.random_state == 3
    assert features.random_state == 0
    assert RFFRidge(features=features).fit(X, y).features_.random_state == 0


def test_errors_are_actionable():
    X, y = make_problem()
    with pytest.raises(InvalidParameterError, match="alpha_selection"):
        RFFRidge(alpha_selection="kfold").fit(X, y)
    with pytest.raises(ValueError, match="alpha must be finite and > 0"):
        RFFRidge(alphas=[1.0, -1.0]).fit(X, y)
    with pytest.raises(ValueError, match="exactly one alpha"):
        RFFRidge(alphas=[1.0, 2.0], alpha_selection=None).fit(X, y)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"RFFRidge: X holds a missing value \(NaN\) in column 0 at row 0"):
        RFFRidge().fit(bad, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        RFFRidge().fit(X, y[:-1])
    model = RFFRidge(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but RFFRidge is expecting 3"):
        model.predict(X[:, :2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(50, 8), (3000, 400)])
def test_gram_matrix_matches_the_plain_product(dtype, shape):
    from rffkit._dense import gram_matrix

    Z = torch.as_tensor(np.random.default_rng(1).normal(size=shape), dtype=dtype)
    gram, upper = gram_matrix(Z), gram_matrix(Z, upper_only=True)
    reference = (Z.double().T @ Z.double()).to(dtype)
    assert gram.dtype == dtype and torch.equal(gram, gram.T)
    torch.testing.assert_close(gram, reference, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-3)
    assert torch.equal(torch.triu(upper), torch.triu(gram))
    Z.requires_grad_(True)  # a product that needs a gradient stays differentiable
    gram_matrix(Z).trace().backward()
    torch.testing.assert_close(Z.grad, 2 * Z.detach())


def test_gram_matrix_gradient_is_exact(monkeypatch):
    import rffkit._dense as dense

    monkeypatch.setattr(dense, "SYRK_MIN_WORK", 0.0)  # the syrk path at a size gradcheck can afford
    Z = torch.as_tensor(np.random.default_rng(2).normal(size=(30, 6)), dtype=torch.float64).requires_grad_(True)
    weights = torch.as_tensor(np.random.default_rng(3).normal(size=(6, 6)), dtype=torch.float64)  # not symmetric
    assert torch.autograd.gradcheck(lambda Z: (dense.gram_matrix(Z) * weights).sum(), (Z,))


@pytest.mark.parametrize("start", [1e-8, 1e-3, 1.0])
def test_walk_ridge_alpha_finds_the_path_minimum(start):
    from rffkit._ridge import fit_ridge_head, select_ridge_alpha, walk_ridge_alpha

    rng = np.random.default_rng(4)
    Z = torch.as_tensor(rng.normal(size=(400, 60)))
    beta = torch.as_tensor(rng.normal(size=60)) / 8.0
    y = Z @ beta + 0.5 * torch.as_tensor(rng.normal(size=400))
    Z_val = torch.as_tensor(rng.normal(size=(200, 60)))
    y_val = Z_val @ beta + 0.5 * torch.as_tensor(rng.normal(size=200))
    alphas = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))
    path = select_ridge_alpha(Z, y, Z_val, y_val, alphas)
    walked = walk_ridge_alpha(Z, y, Z_val, y_val, alphas, start)
    assert walked.alpha == path.alpha and 1e-3 < walked.alpha < 1.0  # an interior minimum, reached from either side
    assert walked.score == pytest.approx(path.score, rel=1e-9)
    torch.testing.assert_close(walked.coef, path.coef)
    assert fit_ridge_head(Z, y, Z_val, y_val, "auto", alphas, start=start).alpha == path.alpha
    # a caller's temporary centred in place: the same head, and Z left centred
    temporary = Z.clone()
    in_place = walk_ridge_alpha(temporary, y, Z_val, y_val, alphas, start, overwrite_z=True)
    assert in_place.alpha == walked.alpha and in_place.score == walked.score
    torch.testing.assert_close(in_place.coef, walked.coef, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(temporary, Z - Z.mean(dim=0))


def _primal_ridge(Z, y, alpha):
    """Coefficients and intercept of mean((Z b + c - y)^2) + alpha ||b||^2 by the D x D normal equations (float64)."""
    Z, y = Z.double(), y.double()
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    Zc = Z - z_mean
    system = Zc.T @ Zc / Z.shape[0] + alpha * torch.eye(Z.shape[1], dtype=torch.float64)
    coef = torch.linalg.solve(system, Zc.T @ (y - y_mean) / Z.shape[0])
    return coef, y_mean - z_mean @ coef


@pytest.mark.parametrize("targets", [None, 3])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_heads_with_fewer_rows_than_features_equal_the_primal_solution(targets, dtype):
    """With n < D the heads solve the n x n dual system: solve_ridge, select_ridge_alpha (on a validation
    split and by GCV) and walk_ridge_alpha give the D x D normal equations' head, to 1e-6 in float64 and
    2e-3 (relative to the largest coefficient) in float32; 40 rows and 150 features, and 100 x 1,000
    (syrk's size)."""
    from rffkit._ridge import select_ridge_alpha, solve_ridge, walk_ridge_alpha
    from rffkit._ridge_solve import dual_pays

    alphas = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))
    tolerance = 1e-6 if dtype == torch.float64 else 2e-3
    for n, D in ((40, 150), (100, 1000)):
        rng = np.random.default_rng(n)
        shape = (n,) if targets is None else (n, targets)
        Z, Z_val = (torch.as_tensor(rng.normal(size=(rows, D)), dtype=dtype) for rows in (n, 60))
        beta = torch.as_tensor(rng.normal(size=(D,) + shape[1:]), dtype=dtype) / np.sqrt(D)
        y = Z @ beta + 2.0 * torch.as_tensor(rng.normal(size=shape), dtype=dtype)
        y_val = Z_val @ beta + 2.0 * torch.as_tensor(rng.normal(size=(60,) + shape[1:]), dtype=dtype)
        assert dual_pays(Z)

        def close(coef, intercept, alpha):
            reference, reference_intercept = _primal_ridge(Z, y, alpha)
            scale = float(reference.abs().max())
            assert coef.shape == reference.shape and coef.dtype == dtype
            assert float((coef.double() - reference).abs().max()) <= tolerance * scale
            assert float((intercept.double() - reference_intercept).abs().max()) <= tolerance * max(scale, 1.0)

        for alpha in (1e-4, 1e-2, 1.0):
            solution = solve_ridge(Z.clone(), y, alpha)
            close(solution.coef, solution.intercept, alpha)
        chosen = select_ridge_alpha(Z, y, Z_val, y_val, alphas)
        close(chosen.coef, chosen.intercept, chosen.alpha)
        scores = [float(((Z_val.double() @ c + i - y_val.double()) ** 2).mean())
                  for c, i in (_primal_ridge(Z, y, alpha) for alpha in alphas)]
        assert chosen.alpha == alphas[int(np.argmin(scores))]
        walked = walk_ridge_alpha(Z.clone(), y, Z_val, y_val, alphas, 1e-2)
        assert walked.alpha == chosen.alpha and walked.score == pytest.approx(chosen.score, rel=10 * tolerance)
        close(walked.coef, walked.intercept, walked.alpha)
        by_gcv = select_ridge_alpha(Z, y, None, None, alphas)
        close(by_gcv.coef, by_gcv.intercept, by_gcv.alpha)


@pytest.mark.parametrize("D", [12, 70])  # primal and dual spectra
def test_the_leave_one_out_head_takes_the_penalty_of_least_brute_force_loo_error(D):
    """loo_ridge_head on 50 rows (the last 5 repeating the first 5): its penalty is the grid's least
    brute-force leave-one-out error of sklearn's Ridge refitted without the left-out row and, with the
    inputs given, without its twin; its coefficients those of the fit on all rows (1e-6 relative)."""
    from rffkit._ridge import loo_ridge_head

    rng = np.random.default_rng(D)
    X = rng.normal(size=(50, 3))
    X[45:] = X[:5]
    W, b = rng.normal(size=(3, D)), rng.uniform(0, 2 * np.pi, size=D)
    Z = np.cos(X @ W + b)
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=50)
    alphas = (1e-6, 1e-4, 1e-2, 1e-1, 1.0)
    twins = {i: [j for j in range(50) if np.array_equal(X[i], X[j])] for i in range(50)}

    def brute_force(penalty, together):
        errors = []
        for i in range(50):
            keep = np.setdiff1d(np.arange(50), twins[i] if together else [i])
            model = Ridge(alpha=penalty, solver="cholesky").fit(Z[keep], y[keep])
            errors.append((y[i] - model.predict(Z[i : i + 1])[0]) ** 2)
        return float(np.mean(errors))

    for together in (False, True):
        head = loo_ridge_head(torch.as_tensor(Z), torch.as_tensor(y), alphas, torch.as_tensor(X) if together else None)
        scores = [brute_force(50 * a, together) for a in alphas]
        assert head.alpha == alphas[int(np.argmin(scores))]
        assert head.score == pytest.approx(min(scores), rel=1e-6)
        reference = Ridge(alpha=50 * head.alpha, solver="cholesky").fit(Z, y)
        np.testing.assert_allclose(head.coef.numpy(), reference.coef_, rtol=1e-6, atol=1e-8)
        assert float(head.intercept) == pytest.approx(reference.intercept_, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("seed", [3, 7])
def test_leave_one_out_in_the_dual_is_exact_at_the_smallest_penalties(seed):
    """12 rows, 1,000 features, penalties 1e-8, 1e-4, 1: loo_ridge_head's score of every penalty is the
    brute-force leave-one-out error (the n x n dual of each refit, float64) to 1e-4, so its choice is too.
    The centred kernel's null direction came out at 1e-15, not 0, and at 1e-8 made hat values pass 1
    (helper-51 found a score of 4e-7 where the error was 0.61 on such a draw)."""
    from rffkit._ridge import loo_ridge_head

    rng = np.random.default_rng(seed)
    n, D = 12, 1000
    X = rng.normal(size=(n, 3))
    Z = np.sqrt(2.0) * np.cos(X @ rng.normal(size=(3, D)) + rng.uniform(0, 2 * np.pi, D))
    y = np.sin(X[:, 0]) + 0.5 * rng.normal(size=n)

    def brute_force(alpha):
        errors = []
        for i in range(n):
            keep = np.arange(n) != i
            Zc, yc = Z[keep] - Z[keep].mean(axis=0), y[keep] - y[keep].mean()
            dual = np.linalg.solve(Zc @ Zc.T + alpha * n * np.eye(n - 1), yc)
            errors.append((y[i] - y[keep].mean() - (Z[i] - Z[keep].mean(axis=0)) @ Zc.T @ dual) ** 2)
        return float(np.mean(errors))

    alphas = (1e-8, 1e-4, 1.0)
    scores = [brute_force(alpha) for alpha in alphas]
    for alpha, score in zip(alphas, scores):
        assert loo_ridge_head(torch.as_tensor(Z), torch.as_tensor(y), (alpha,)).score == pytest.approx(score, rel=1e-4)
    head = loo_ridge_head(torch.as_tensor(Z), torch.as_tensor(y), alphas)
    assert head.alpha == alphas[int(np.argmin(scores))] and head.score == pytest.approx(min(scores), rel=1e-4)


def test_the_dual_of_float32_features_is_as_accurate_as_the_primal():
    """float32 features scaled as the package's (sqrt(2 / D) cos), 100 rows (the last 10 repeating the
    first), 1,000 features, penalty 1e-6: the dual solve's in-sample predictions are within 2e-6 of the
    float64 ridge's. Its kernel formed from float32 products was off by 7.5e-4 (the primal 6.7e-7)."""
    from rffkit._ridge import solve_ridge

    rng = np.random.default_rng(1)
    n, D = 100, 1000
    X = rng.normal(size=(n, 3))
    X[-10:] = X[:10]
    Z = torch.as_tensor(np.sqrt(2.0 / D) * np.cos(X @ (2 * rng.normal(size=(3, D))) + rng.uniform(0, 6.3, D)),
                        dtype=torch.float32)
    y = torch.as_tensor(np.sin(X[:, 0]) + 0.3 * rng.normal(size=n), dtype=torch.float32)
    reference = Ridge(alpha=1e-6 * n, solver="svd").fit(Z.double().numpy(), y.double().numpy())
    solution = solve_ridge(Z.clone(), y, 1e-6)
    predictions = (Z @ solution.coef + solution.intercept).double().numpy()
    assert np.abs(predictions - reference.predict(Z.double().numpy())).max() <= 2e-6


@pytest.mark.parametrize("targets", [1, 2])
def test_walk_by_blocks_equals_the_walk_on_whole_feature_matrices(targets):
    """The block form forms the features of at most 40 rows at once (block_bytes) and gives
    the whole-matrix walk's head: the same penalty, score and coefficients (float64, 1e-10)."""
    from rffkit._ridge import walk_ridge_alpha, walk_ridge_alpha_by_blocks

    rng = np.random.default_rng(6)
    X, X_val = (torch.as_tensor(rng.normal(size=(rows, 3))) for rows in (300, 130))
    W, b = torch.as_tensor(rng.normal(size=(3, 25))), torch.as_tensor(rng.uniform(0, 6.3, size=25))

    def features(inputs):
        return torch.cos(inputs @ W + b)

    weights = torch.as_tensor(rng.normal(size=(25, targets)))
    y = features(X) @ weights + 0.3 * torch.as_tensor(rng.normal(size=(300, targets)))
    y_val = features(X_val) @ weights + 0.3 * torch.as_tensor(rng.normal(size=(130, targets)))
    alphas = tuple(10.0 ** (-k / 2.0) for k in range(12, -1, -1))
    whole = walk_ridge_alpha(features(X), y, features(X_val), y_val, alphas, 1e-4)
    blocks = walk_ridge_alpha_by_blocks(features, X, y, X_val, y_val, alphas, 1e-4, block_bytes=40 * 25 * 8)
    assert blocks.alpha == whole.alpha and blocks.score == pytest.approx(whole.score, rel=1e-10)
    torch.testing.assert_close(blocks.coef, whole.coef, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(blocks.intercept, whole.intercept, rtol=1e-10, atol=1e-12)


def test_a_walk_handed_the_gram_of_its_first_columns_gives_the_same_head():
    """walk_ridge_alpha with GramShare.known (the Gram matrix of Z's first 60 columns from an
    earlier walk) forms only the 8 new columns' products and finds the head of a fresh walk."""
    from rffkit._dense import system_upper
    from rffkit._ridge import GramShare, walk_ridge_alpha

    rng = np.random.default_rng(8)
    Z = torch.as_tensor(rng.normal(size=(3000, 68)))  # n D^2 >= SYRK_MIN_WORK: the LAPACK path
    beta = torch.as_tensor(rng.normal(size=68)) / 8.0
    y = Z @ beta + 0.5 * torch.as_tensor(rng.normal(size=3000))
    Z_val = torch.as_tensor(rng.normal(size=(500, 68)))
    y_val = Z_val @ beta + 0.5 * torch.as_tensor(rng.normal(size=500))
    alphas = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))
    first = GramShare()
    walk_ridge_alpha(Z[:, :60].clone(), y, Z_val[:, :60], y_val, alphas, 1e-3, share=first)
    assert first.formed.shape == (60, 60)
    fresh = walk_ridge_alpha(Z, y, Z_val, y_val, alphas, 1e-3)
    share = GramShare(known=first.formed)
    handed = walk_ridge_alpha(Z, y, Z_val, y_val, alphas, 1e-3, share=share)
    assert handed.alpha == fresh.alpha and handed.score == pytest.approx(fresh.score, rel=1e-12)
    torch.testing.assert_close(handed.coef, fresh.coef, rtol=1e-10, atol=1e-12)
    reference = system_upper(Z - Z.mean(dim=0), 1.0 / 3000)
    np.testing.assert_allclose(np.triu(share.formed), np.triu(reference), rtol=1e-12, atol=1e-14)


def test_the_searched_layers_gram_serves_its_linear_term_once():
    """KernelGramMemo hands the searched layer's Gram matrix to the head of the same layer with its
    linear columns (the same head as without it), once; a layer with other relevances gets none."""
    from rffkit._heads import KernelGramMemo, RidgeHeads
    from rffkit._ridge import GramShare, fit_ridge_head
    from rffkit.layers import ARDRandomFourierFeatures

    rng = np.random.default_rng(9)
    X, X_val = (torch.as_tensor(rng.normal(size=(rows, 4))) for rows in (3000, 600))
    y, y_val = (torch.sin(2.0 * x[:, 0]) + x[:, 1] + 0.2 * torch.as_tensor(rng.normal(size=x.shape[0]))
                for x in (X, X_val))
    layer = ARDRandomFourierFeatures.from_kernel(4, 80, random_state=0, dtype=torch.float64)
    alphas = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))
    memo, share = KernelGramMemo(), GramShare()
    fit_ridge_head(layer(X), y, layer(X_val), y_val, "auto", alphas, start=1e-3, share=share)
    memo.keep(layer, share)
    linear = layer.replace(linear=True)
    assert memo.share(layer.replace(relevances=2.0 * layer.relevances.detach(), linear=True)).known is None
    with_memo = RidgeHeads(X, y, X_val, y_val, alpha="auto", alphas=alphas, start=1e-3, grams=memo).fit(linear)
    without = RidgeHeads(X, y, X_val, y_val, alpha="auto", alphas=alphas, start=1e-3).fit(linear)
    assert with_memo.alpha == without.alpha and with_memo.score == pytest.approx(without.score, rel=1e-10)
    torch.testing.assert_close(with_memo.coef, without.coef, rtol=1e-8, atol=1e-10)
    assert memo.share(linear).known is None  # handed out once


def _in_memory(X, y):
    return (X, y)


def _streamed(X, y):
    from rffkit.io import ArraySource

    return (ArraySource(X, y),)


@pytest.mark.parametrize("rows", [_in_memory, _streamed], ids=["in_memory", "streamed"])
@pytest.mark.parametrize("make", [lambda: RFFRidge(random_state=0), lambda: RFFClassifier(random_state=0)],
                         ids=["ridge", "classifier"])
def test_one_outlier_that_sets_the_default_length_scale_is_named(make, rows):
    """One value of 1e4 among 200 standard-normal rows sets the default map's pooled length scale (1.41 -> 500)
    and the model predicts the mean (helper-43: R^2 0.91 -> 0.00): the fit names the column, in memory and
    streamed (from the column moments of its one pass). Standardised inputs, and one-hot columns beside them
    (max / median column variance 30-42 on bench_real's ames and tv16 pipelines), fit without a word."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2
    target = y if isinstance(make(), RFFRidge) else (y > np.median(y)).astype(int)
    outlier = X.copy()
    outlier[0, 2] = 1e4
    with pytest.warns(UserWarning, match="times the median column's; column 2 adds the most to it"):
        make().fit(*rows(outlier, target))
    shifted = X.copy()
    shifted[:, 1] += 2000.0  # unit variance, far from zero: the pooled variance is about 8e5 (helper-44)
    with pytest.warns(UserWarning, match="column 1 adds the most to it"):
        make().fit(*rows(shifted, target))
    levels = np.eye(400)[rng.integers(0, 400, 200)]  # rare one-hot levels beside standardised numbers
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*length scale for all columns")
        make().fit(*rows(np.column_stack([X, levels, np.zeros(200)]), target))


def test_a_holdout_fit_of_a_dataframe_names_the_column_of_the_scale_warning():
    """alpha_selection='holdout' streams the validated arrays; the warning names the DataFrame's column, as the
    fit in memory does (helper-48: it had said 'column 1')."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "income", "c"])
    X["income"] += 2000.0
    with pytest.warns(UserWarning, match="column 'income' adds the most to it"):
        RFFRidge(alpha_selection="holdout", random_state=0).fit(X, rng.normal(size=200))
