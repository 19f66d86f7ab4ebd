"""RandomFourierFeatures: every kernel, every sampling scheme, both variants (the contract: test_contract.py)."""

import numpy as np
import pytest
import torch

from rffkit import RandomFourierFeatures
from rffkit.approximation import approximation_error, approximation_error_curve
from rffkit.kernels import KERNELS, kernel_matrix


def laplacian_1d(d):
    """Module-level (picklable) one-dimensional Laplacian profile."""
    return np.exp(-np.abs(d))


def _mean_nrmse(X, K, n_seeds=6, **params):
    errors = []
    for seed in range(n_seeds):
        Z = RandomFourierFeatures(random_state=seed, **params).fit_transform(X)
        errors.append(approximation_error(K, Z @ Z.T).nrmse)
    return float(np.mean(errors))


@pytest.fixture(scope="module")
def unit_square():
    return np.random.default_rng(0).uniform(size=(80, 2))


@pytest.mark.parametrize("kernel", sorted(KERNELS) + [laplacian_1d])
def test_error_falls_like_inverse_sqrt_components(kernel, unit_square):
    # Log-log slope of the mean NRMSE over D = 64..4096 (4 seeds): -1/2 within 0.15.
    K = kernel_matrix(kernel, unit_square, length_scale=0.5)
    D = 64 * 2 ** np.arange(7)
    curve = approximation_error_curve(
        RandomFourierFeatures(kernel=kernel, length_scale=0.5), unit_square, K, D, range(4)
    )
    slope = np.polyfit(np.log(D), np.log(curve["nrmse"].mean(axis=0)), 1)[0]
    assert -0.65 <= slope <= -0.35, slope


def test_default_map_is_the_rahimi_recht_formula(dtype):
    X = np.random.default_rng(1).normal(size=(7, 3)).astype(dtype)
    Z = RandomFourierFeatures(n_components=16, length_scale=[1, 2, 3], random_state=5).fit_transform(X)
    rng = np.random.default_rng(5)
    W = rng.standard_normal((3, 16)) / np.array([[1], [2], [3]])
    b = rng.uniform(0, 2 * np.pi, 16)
    expected = np.sqrt(2 / 16) * np.cos(X.astype(np.float64) @ W + b)
    assert Z.dtype == dtype
    np.testing.assert_allclose(Z, expected, rtol=0, atol=1e-5 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
def test_tensor_form_equals_the_array_form(variant, dtype, device):
    """The streamed fits compute the map on their device (``_transform_tensor``): the same
    features as ``transform``, in the input's dtype and place (leverage weights included)."""
    X = np.random.default_rng(3).normal(size=(50, 4)).astype(dtype)
    model = RandomFourierFeatures(n_components=24, length_scale=1.5, variant=variant, sampling="leverage",
                                  random_state=0).fit(X)
    Z = model._transform_tensor(torch.as_tensor(X, device=device))
    assert Z.device.type == device and Z.dtype == torch.as_tensor(X).dtype
    np.testing.assert_allclose(Z.cpu().numpy(), model.transform(X), rtol=0,
                               atol=1e-6 if dtype == np.float32 else 1e-14)
    with pytest.raises(ValueError, match="not finite"):
        model._transform_tensor(torch.as_tensor(np.full((2, 4), np.finfo(dtype).max), device=device))


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
@pytest.mark.parametrize("sampling", ["iid", "orthogonal", "qmc", "leverage"])
def test_every_scheme_is_accurate(sampling, variant, dtype):
    X = np.random.default_rng(2).normal(size=(60, 3))
    K = kernel_matrix("matern52", X, length_scale=2.0)
    params = dict(kernel="matern52", n_components=1024, length_scale=2.0, sampling=sampling, variant=variant)
    model = RandomFourierFeatures(random_state=0, **params)
    Z = model.fit_transform(X.astype(dtype))
    assert Z.shape == (60, 1024) and Z.dtype == dtype
    # 1024 features: NRMSE ~ 0.05 for iid; everything within 0.12.
    assert approximation_error(K, Z.astype(np.float64) @ Z.T.astype(np.float64)).nrmse < 0.12
    names = model.get_feature_names_out()
    assert names[0] == "randomfourierfeatures0" and names.size == 1024


def test_orthogonal_beats_iid_on_gaussian_in_16_dimensions():
    X = np.random.default_rng(3).normal(size=(100, 16))
    K = kernel_matrix("gaussian", X, length_scale=4.0)
    common = dict(kernel="gaussian", n_components=64, length_scale=4.0, n_seeds=10)
    for variant, factor in [("cos_sin", 0.75), ("cos", 0.9)]:
        iid = _mean_nrmse(X, K, sampling="iid", variant=variant, **common)
        orthogonal = _mean_nrmse(X, K, sampling="orthogonal", variant=variant, **common)
        # Yu et al. (2016): less variance from orthogonal directions (measured ratios:
        # 0.55 for cos_sin, 0.81 for cos, whose random phases add variance ORF cannot remove).
        assert orthogonal < factor * iid, (variant, orthogonal, iid)


def test_qmc_beats_iid_in_low_dimension():
    X = np.random.default_rng(4).uniform(size=(100, 2))
    K = kernel_matrix("gaussian", X, length_scale=0.3)
    common = dict(kernel="gaussian", n_components=256, length_scale=0.3, variant="cos_sin")
    assert _mean_nrmse(X, K, sampling="qmc", **common) < 0.7 * _mean_nrmse(X, K, **common)


def test_numerical_laplacian_density_matches_closed_form_cauchy():
    X = np.random.default_rng(5).uniform(size=(100, 2))
    K = kernel_matrix("laplacian", X, length_scale=0.5)
    common = dict(n_components=512, length_scale=0.5, n_seeds=6)
    closed = _mean_nrmse(X, K, kernel="laplacian", **common)
    numerical = _mean_nrmse(X, K, kernel=laplacian_1d, **common)
    assert numerical < 1.5 * closed and closed < 1.5 * numerical, (numerical, closed)


def test_leverage_sampling_is_unbiased():
    X = np.random.default_rng(6).uniform(size=(50, 1))
    K = kernel_matrix("laplacian", X)
    mean = np.zeros_like(K)
    for seed in range(40):
        model = RandomFourierFeatures(kernel="laplacian", n_components=64, sampling="leverage", random_state=seed)
        Z = model.fit_transform(X)
        mean += Z @ Z.T / 40
    assert not np.allclose(model.importance_weights_, 1.0)
    # Single draws have NRMSE ~ 0.15; the average of 40 must be within 0.06.
    assert approximation_error(K, mean).nrmse < 0.06


def test_errors_are_actionable():
    X = np.random.default_rng(7).normal(size=(10, 2))
    with pytest.raises(ValueError, match="n_components must be even"):
        RandomFourierFeatures(variant="cos_sin", n_components=5).fit(X)
    with pytest.raises(ValueError, match="not isotropic in 2 dimensions"):
        RandomFourierFeatures(kernel="laplacian", sampling="orthogonal").fit(X)
    with pytest.raises(ValueError, match="not positive definite"):
        RandomFourierFeatures(kernel=lambda d: (np.abs(d) < 1) * 1.0).fit(X)
    with pytest.raises(ValueError, match="exceeds k\\(0\\)"):
        RandomFourierFeatures(kernel=lambda d: 1 - d**2).fit(X)
    with pytest.raises(ValueError, match="sampling"):
        RandomFourierFeatures(sampling="sobol").fit(X)
    # Orthogonal sampling of any kernel is allowed in one dimension (it is i.i.d. there).
    RandomFourierFeatures(kernel="laplacian", sampling="orthogonal").fit(X[:, :1])
