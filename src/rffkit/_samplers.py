"""The spectral samplers of the kernels in :mod:`rffkit.kernels`: draws from ``p(omega)``.

By Bochner's theorem a shift-invariant kernel ``k(delta)`` with ``k(0) = 1`` is the
characteristic function of its spectral density ``p(omega)``; random features draw
their frequencies from it. Here are, for unit length scale, the samplers and quantile
functions of the registered kernels' densities in closed form (normal, Cauchy and
Laplace per dimension, the chi radius of the Gaussian), the exact discrete spectrum of
the induced and spline kernels (Yu, 2023), and the numerically computed spectral and pitch densities
of a one-dimensional profile given as a callable
(:func:`rffkit._spectral.numerical_spectral_density`). :mod:`rffkit._profiles` holds the
kernels' values ``k(delta)``; :class:`rffkit.kernels.Kernel` binds the two.

References
----------
S.-C. Yu (2023), *Efficient approximation of random basis functions for covariance
kernels*, master's thesis, Technical University of Munich.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from scipy import special, stats

from ._spectral import DiscreteSpectrum, numerical_pitch_density, numerical_spectral_density

__all__ = [
    "sample_normal",
    "sample_cauchy",
    "sample_laplace",
    "sample_laplacian_pitch",
    "normal_ppf",
    "cauchy_ppf",
    "laplace_ppf",
    "chi_radius_ppf",
    "induced_spectrum",
    "INDUCED_SPECTRUM",
    "sample_induced",
    "induced_ppf",
    "spline_spectrum",
    "NumericalSpectrum",
]


def sample_normal(rng, n_features, n_components):
    return rng.standard_normal((n_features, n_components))


def sample_cauchy(rng, n_features, n_components):
    return rng.standard_cauchy((n_features, n_components))


def sample_laplace(rng, n_features, n_components):
    return rng.laplace(0.0, 1.0, (n_features, n_components))


def sample_laplacian_pitch(rng, size):
    # delta k''(delta) = delta exp(-delta): Gamma(2, 1).
    return rng.gamma(2.0, 1.0, size)


def normal_ppf(u):
    return special.ndtri(u)


def cauchy_ppf(u):
    return np.tan(np.pi * (u - 0.5))


def laplace_ppf(u):
    return -np.sign(u - 0.5) * np.log1p(-2.0 * np.abs(u - 0.5))


def chi_radius_ppf(u, n_features):
    return np.sqrt(stats.chi2.ppf(u, n_features))


def induced_spectrum(n_table=4096):
    """The discrete spectrum of the induced kernel: mass ``8 / (pi n)^2`` at ``+-n pi / 2``, ``n`` odd."""
    harmonics = 2.0 * np.arange(n_table) + 1.0
    masses = 8.0 / (np.pi**2 * harmonics**2)
    return DiscreteSpectrum(
        harmonics * np.pi / 2.0, masses, tail_mass=1.0 - masses.sum(), tail_step=np.pi / 2.0
    )


INDUCED_SPECTRUM = induced_spectrum()


def sample_induced(rng, n_features, n_components):
    return INDUCED_SPECTRUM.sample(rng, (n_features, n_components))


def induced_ppf(u):
    return INDUCED_SPECTRUM.ppf(u)


def spline_spectrum(order, n_terms, *, infinite=False):
    """The discrete spectrum of the spline kernel and its normaliser ``Z``: ``(spectrum, Z)``.

    Mass ``m^{-2r} / Z`` on ``+-2 pi m`` for ``m = 0..n_terms`` (``m = 0`` carries
    ``1 / Z``), ``r = order``; with ``infinite`` the full series, ``Z = 1 + zeta(2r)``,
    tabulated to ``n_terms`` harmonics with the rest as a tail.
    """
    weights = np.concatenate([[1.0], np.arange(1, n_terms + 1, dtype=np.float64) ** (-2.0 * order)])
    total = 1.0 + special.zeta(2.0 * order) if infinite else weights.sum()
    spectrum = DiscreteSpectrum(
        2.0 * np.pi * np.arange(n_terms + 1),
        weights / total,
        tail_mass=1.0 - weights.sum() / total if infinite else 0.0,
        tail_step=np.pi if infinite else None,
    )
    return spectrum, total


class _ElementwiseProfile:
    """A 1-D profile applied to arrays; scalar-only callables (``math.exp``) are
    vectorised with ``numpy.vectorize``."""

    def __init__(self, profile):
        self.function = profile
        self._vectorised = None

    def __call__(self, delta):
        if self._vectorised is None:
            try:
                return np.asarray(self.function(delta), dtype=np.float64)
            except (TypeError, ValueError):
                self._vectorised = np.vectorize(self.function, otypes=[np.float64])
        return self._vectorised(delta)


class NumericalSpectrum:
    """Spectral and pitch densities of a 1-D profile, computed on first use."""

    def __init__(self, profile):
        self.profile = _ElementwiseProfile(profile)

    @cached_property
    def spectrum(self):
        return numerical_spectral_density(self.profile)

    @cached_property
    def pitch(self):
        return numerical_pitch_density(self.profile)

    def product_profile(self, delta):
        with np.errstate(over="ignore", under="ignore"):
            return np.prod(np.asarray(self.profile(delta), dtype=np.float64), axis=-1)

    def sample(self, rng, n_features, n_components):
        return self.spectrum.sample(rng, (n_features, n_components))

    def ppf(self, u):
        return self.spectrum.ppf(u)

    def sample_pitches(self, rng, size):
        return self.pitch.magnitude_ppf(rng.uniform(size=size))
