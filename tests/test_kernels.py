"""Exact kernels against naive references; spectral samplers against the kernels."""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from rffkit._profiles import triangle_wave
from rffkit.kernels import (
    KERNELS,
    get_kernel,
    kernel_matrix,
    profile_kernel,
    spline_kernel,
)


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    return rng.normal(size=(23, 3)), rng.normal(size=(17, 3))


def _loop_gram(function, X, Y):
    return np.array([[function(x - y) for y in Y] for x in X])


def test_named_kernels_match_naive_references(points):
    X, Y = points
    scale = np.array([0.5, 1.0, 2.0])
    Xs, Ys = X / scale, Y / scale
    nrm = lambda d: np.sqrt(np.sum(d * d))  # noqa: E731
    references = {
        "gaussian": rbf_kernel(Xs, Ys, gamma=0.5),
        "laplacian": laplacian_kernel(Xs, Ys, gamma=1.0),
        "cauchy": _loop_gram(lambda d: np.prod(1 / (1 + d**2)), Xs, Ys),
        "matern12": Matern(length_scale=scale, nu=0.5)(X, Y),
        "matern32": Matern(length_scale=scale, nu=1.5)(X, Y),
        "matern52": Matern(length_scale=scale, nu=2.5)(X, Y),
        "matern32_loop": _loop_gram(
            lambda d: (1 + np.sqrt(3) * nrm(d)) * np.exp(-np.sqrt(3) * nrm(d)), Xs, Ys
        ),
        "spline": _loop_gram(
            lambda d: np.prod(
                [
                    (1 + sum(np.cos(2 * np.pi * m * t) / m**2 for m in range(1, 11)))
                    / (1 + sum(1 / m**2 for m in range(1, 11)))
                    for t in d
                ]
            ),
            Xs,
            Ys,
        ),
    }
    for name, reference in references.items():
        K = kernel_matrix(name.replace("_loop", ""), X, Y, length_scale=scale)
        np.testing.assert_allclose(K, reference, rtol=1e-12, atol=1e-12, err_msg=name)


def test_induced_kernel_is_the_decision_stump_average():
    # E_t[sgn(x - t) sgn(y - t)], t ~ U[0, 1], approximated on a fine grid of t.
    x = np.random.default_rng(1).uniform(0, 1, size=(40, 2))
    t = (np.arange(20000) + 0.5) / 20000
    signs = np.sign(x[:, :, None] - t)  # (n, d, t)
    per_dim = np.einsum("idt,jdt->ijd", signs, signs) / t.size
    K = kernel_matrix("induced", x, length_scale=0.5)  # box [0, 1] has half-width 0.5
    np.testing.assert_allclose(K, np.prod(per_dim, axis=-1), atol=1e-3)


def test_triangle_wave_fourier_series():
    t = np.linspace(-9, 9, 301)
    n = 2 * np.arange(20000) + 1
    series = 8 / np.pi**2 * np.cos(np.outer(t, n) * np.pi / 2) @ (1.0 / n**2)
    np.testing.assert_allclose(triangle_wave(t), series, atol=1e-4)


def test_callable_kernel_is_a_product_kernel(points):
    X, Y = points
    K = kernel_matrix(lambda d: np.exp(-np.abs(d)), X, Y, length_scale=2.0)
    np.testing.assert_allclose(K, laplacian_kernel(X, Y, gamma=0.5), rtol=1e-12)


def test_scalar_only_callable_is_vectorised(points):
    import math

    X, Y = points
    K = kernel_matrix(lambda d: math.exp(-abs(d)), X[:5], Y[:4])
    np.testing.assert_allclose(K, laplacian_kernel(X[:5], Y[:4], gamma=1.0), rtol=1e-12)


def test_kernel_matrix_is_chunked_and_symmetric(points):
    X, _ = points
    full = kernel_matrix("matern52", X)
    chunked = kernel_matrix("matern52", X, chunk_size=4)
    np.testing.assert_array_equal(full, chunked)
    np.testing.assert_allclose(full, full.T, atol=1e-15)
    np.testing.assert_allclose(np.diag(full), 1.0)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_spectral_sampler_reproduces_kernel(name):
    # E[cos(omega^T delta)] = k(delta); Monte Carlo with 200k draws: 5 sigma ~ 0.011.
    rng = np.random.default_rng(3)
    kernel = KERNELS[name]
    W = kernel.sample_frequencies(rng, 3, 200_000)
    delta = rng.normal(scale=0.6, size=(6, 3))
    np.testing.assert_allclose(np.cos(delta @ W).mean(axis=1), kernel.profile(delta), atol=0.011)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_quasi_monte_carlo_map_reproduces_kernel(name):
    rng = np.random.default_rng(4)
    kernel = KERNELS[name]
    u = rng.uniform(size=(200_000, kernel.qmc_dimension(3)))
    W = kernel.frequencies_from_uniforms(u, 3)
    delta = rng.normal(scale=0.6, size=(6, 3))
    np.testing.assert_allclose(np.cos(delta @ W).mean(axis=1), kernel.profile(delta), atol=0.011)


def test_spline_kernel_parameters_and_errors():
    kernel = spline_kernel(order=2, n_terms=3)
    t = np.array([[0.3]])
    weights = np.array([1, 1 / 16, 1 / 81])
    expected = (1 + weights[0] * np.cos(0.6 * np.pi) + weights[1] * np.cos(1.2 * np.pi)
                + weights[2] * np.cos(1.8 * np.pi)) / (1 + weights.sum())
    np.testing.assert_allclose(kernel.profile(t), [expected], rtol=1e-12)
    with pytest.raises(ValueError, match="order"):
        spline_kernel(order=0)
    with pytest.raises(ValueError, match="order 1 or 2"):
        spline_kernel(order=3, n_terms=None)


@pytest.mark.parametrize("order", [1, 2])
def test_full_spline_series_closed_form_and_sampler(order):
    t = np.linspace(-1.3, 2.1, 41)[:, None]
    truncated = spline_kernel(order, n_terms=20000).profile(t)
    full = spline_kernel(order, n_terms=None)
    # Truncation error of the series: sum_{m > M} m^{-2r} ~ 1 / ((2r - 1) M^{2r - 1}).
    np.testing.assert_allclose(full.profile(t), truncated, atol=1e-4)
    W = full.sample_frequencies(np.random.default_rng(0), 1, 200_000)
    np.testing.assert_allclose(np.cos(t[::8] @ W).mean(axis=1), full.profile(t[::8]), atol=0.011)


def test_get_kernel_errors_and_passthrough():
    assert get_kernel(KERNELS["gaussian"]) is KERNELS["gaussian"]
    assert get_kernel(np.cos).name == "cos"
    with pytest.raises(ValueError, match="Unknown kernel 'nope'"):
        get_kernel("nope")
    with pytest.raises(ValueError, match="length_scale has 2 entries"):
        kernel_matrix("gaussian", np.zeros((2, 3)), length_scale=[1.0, 2.0])


def test_refused_profiles_raise_on_sampling():
    rng = np.random.default_rng(0)
    box = profile_kernel(lambda d: (np.abs(d) <= 1.0) * 1.0)
    with pytest.raises(ValueError, match="not positive definite"):
        box.sample_frequencies(rng, 1, 4)
    with pytest.raises(ValueError, match="exceeds k\\(0\\)"):
        profile_kernel(lambda d: 1 - d**2).sample_frequencies(rng, 1, 4)


def test_kernel_matrix_keeps_difference_blocks_under_budget():
    sizes = []

    def recording_profile(delta):
        sizes.append(delta.size)
        return np.exp(-np.sum(np.abs(delta), axis=-1))

    from rffkit.kernels import Kernel

    kernel = Kernel("recording", recording_profile, None)
    X = np.random.default_rng(0).uniform(size=(3000, 2))
    K = kernel_matrix(kernel, X[:2500], X)
    # 8e6 float64 differences (64 MB) at most per block instead of 2500 * 3000 * 2 = 1.5e7.
    assert max(sizes) <= 8_000_000 and len(sizes) == 2
    np.testing.assert_allclose(K[:3, :3], laplacian_kernel(X[:3], X[:3], gamma=1.0), rtol=1e-12)


def test_kernel_matrix_refuses_one_dimensional_points():
    """A 1-D array is ambiguous (n points of one feature, or one point of n): refused as scikit-learn's
    kernels refuse it; it had been read as one point (helper-41)."""
    with pytest.raises(ValueError, match=r"X must be 2-D.*X.reshape\(-1, 1\)"):
        kernel_matrix("gaussian", np.arange(4.0))
    with pytest.raises(ValueError, match="Y must be 2-D"):
        kernel_matrix("gaussian", np.zeros((2, 4)), np.arange(4.0))
    with pytest.raises(ValueError, match="X has 4 features and Y 3"):
        kernel_matrix("gaussian", np.zeros((2, 4)), np.zeros((2, 3)))
