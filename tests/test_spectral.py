"""Numerical spectral densities, pitch densities, orthogonal blocks, QMC and leverage."""

import numpy as np
import pytest

from rffkit._spectral import (
    numerical_pitch_density,
    numerical_spectral_density,
    orthogonal_directions,
    qmc_uniforms,
    ridge_leverage_scores,
    ridge_leverage_scores_chunked,
)


def laplacian(d):
    return np.exp(-np.abs(d))


@pytest.mark.parametrize(
    "profile, density",
    [
        (laplacian, lambda w: 1 / (np.pi * (1 + w**2))),
        (lambda d: np.exp(-0.5 * d**2), lambda w: np.exp(-0.5 * w**2) / np.sqrt(2 * np.pi)),
        (lambda d: 1 / (1 + d**2), lambda w: 0.5 * np.exp(-np.abs(w))),
        (lambda d: np.maximum(0, 1 - np.abs(d)), lambda w: np.sinc(w / (2 * np.pi)) ** 2 / (2 * np.pi)),
    ],
    ids=["laplacian", "gaussian", "cauchy", "triangle"],
)
def test_numerical_density_matches_closed_form(profile, density):
    spectrum = numerical_spectral_density(profile)
    omega = np.array([0.0, 0.3, 1.0, 2.5, 6.0])
    # Densities agree to 3e-3 of the peak (linear interpolation between grid
    # frequencies); the table holds the whole mass but a small 1/omega^2 tail.
    np.testing.assert_allclose(spectrum.pdf(omega), density(omega), atol=3e-3 * density(0.0))
    assert spectrum.tail_mass < 2e-3


@pytest.mark.parametrize("profile", [laplacian, lambda d: np.maximum(0, 1 - np.abs(d))])
def test_sampled_frequencies_reproduce_profile(profile):
    spectrum = numerical_spectral_density(profile)
    draws = spectrum.sample(np.random.default_rng(0), 400_000)
    delta = np.array([0.05, 0.3, 0.7, 1.5, 3.0])
    # Monte Carlo standard error <= 0.0016 at 400k draws; 5 sigma.
    np.testing.assert_allclose(np.cos(np.outer(delta, draws)).mean(axis=1), profile(delta), atol=8e-3)
    assert abs(np.mean(draws > 0) - 0.5) < 5e-3  # symmetric


@pytest.mark.parametrize(
    "profile, message",
    [
        (lambda d: (np.abs(d) <= 1) * 1.0, "not positive definite"),
        (lambda d: 1 - d**2, "exceeds k\\(0\\)"),
        (lambda d: 1 - np.abs(d) / 1e7, "does not decay"),
        (np.cos, "does not decay"),
        (lambda d: 2 * np.exp(-d**2), "k\\(0\\) = 2.0"),
        (lambda d: np.exp(-(d - 0.1) ** 2) / np.exp(-0.01), "not even"),
        (lambda d: np.exp(-d), "non-finite"),  # overflows at large negative d
        (lambda d: 1 / (1 + np.abs(d)), "decays too slowly"),
    ],
    ids=["box", "one-minus-square", "linear", "cos", "unnormalised", "shifted", "odd", "slow"],
)
def test_invalid_profiles_are_refused(profile, message):
    with pytest.raises(ValueError, match=message):
        numerical_spectral_density(profile)


def test_pitch_density_of_laplacian_is_gamma2():
    pitch = numerical_pitch_density(laplacian)
    u = np.array([0.1, 0.5, 0.9])
    from scipy.stats import gamma

    np.testing.assert_allclose(pitch.magnitude_ppf(u), gamma(2).ppf(u), rtol=2e-3)
    with pytest.raises(ValueError, match="not convex"):
        numerical_pitch_density(lambda d: np.exp(-0.5 * d**2))


def test_orthogonal_directions_blocks_are_orthonormal():
    W = orthogonal_directions(np.random.default_rng(0), 5, 12)
    assert W.shape == (5, 12)
    for block in (W[:, :5], W[:, 5:10]):
        np.testing.assert_allclose(block.T @ block, np.eye(5), atol=1e-12)


def test_qmc_uniforms_are_seeded_and_in_open_cube():
    a, b = qmc_uniforms(3, 64, 4), qmc_uniforms(3, 64, 4)
    np.testing.assert_array_equal(a, b)
    halton = qmc_uniforms(3, 50, 4)
    assert halton.shape == (50, 4) and np.all((halton > 0) & (halton < 1))
    # Sobol' marginals are stratified: each of 64 cells of a coordinate holds one point.
    np.testing.assert_array_equal(np.sort(np.floor(a[:, 0] * 64)), np.arange(64))


def test_ridge_leverage_scores_match_direct_formula():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(30, 50))
    alpha = 0.1
    direct = np.einsum("ij,ij->j", Z, np.linalg.solve(Z @ Z.T / 50 + 30 * alpha * np.eye(30), Z))
    np.testing.assert_allclose(ridge_leverage_scores(Z, alpha), direct, rtol=1e-10)
    chunked = ridge_leverage_scores_chunked(lambda a, b: Z[:, a:b], 30, 50, alpha, chunk=7)
    np.testing.assert_allclose(chunked, direct, rtol=1e-10)
