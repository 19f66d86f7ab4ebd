"""Exact shift-invariant kernels and the spectral samplers behind their random features.

Every kernel here is written for unit length scale as a function of the difference
``delta = x - y`` and normalised so that ``k(0) = 1``. By Bochner's theorem such a
kernel is the characteristic function of a probability density ``p(omega)``, the
*spectral density*, so that ``k(delta) = E_omega[cos(omega^T delta)]``. A length
scale ``l`` (scalar or one per feature) enters as ``k(delta / l)``, whose spectral
density is that of ``omega / l`` (Prop. 1 of Otto & Izbicki): samplers draw unit
frequencies and callers divide by the length scale.

The kernels of Table 1 of Otto's dissertation, renormalised to ``k(0) = 1``:

==========  ===============================  ====================================
kernel      k(delta)                          p(omega), per dimension
==========  ===============================  ====================================
gaussian    exp(-||delta||_2^2 / 2)           Normal(0, 1): exp(-w^2/2)/sqrt(2 pi)
laplacian   exp(-||delta||_1)                 Cauchy(0, 1): 1 / (pi (1 + w^2))
cauchy      prod_i 1 / (1 + delta_i^2)        Laplace(0, 1): exp(-|w|) / 2
==========  ===============================  ====================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = [
    "Kernel",
    "KERNELS",
    "get_kernel",
    "kernel_matrix",
    "gaussian_profile",
    "laplacian_profile",
    "cauchy_profile",
]


def gaussian_profile(delta):
    """Gaussian kernel ``k(delta) = exp(-||delta||_2^2 / 2)`` on the last axis."""
    return np.exp(-0.5 * np.sum(delta * delta, axis=-1))


def laplacian_profile(delta):
    """Laplacian kernel ``k(delta) = exp(-||delta||_1)`` on the last axis."""
    return np.exp(-np.sum(np.abs(delta), axis=-1))


def cauchy_profile(delta):
    """Cauchy kernel ``k(delta) = prod_i 1 / (1 + delta_i^2)`` on the last axis."""
    return np.prod(1.0 / (1.0 + delta * delta), axis=-1)


def _sample_normal(rng, n_features, n_components):
    return rng.standard_normal((n_features, n_components))


def _sample_cauchy(rng, n_features, n_components):
    return rng.standard_cauchy((n_features, n_components))


def _sample_laplace(rng, n_features, n_components):
    return rng.laplace(0.0, 1.0, (n_features, n_components))


@dataclass(frozen=True)
class Kernel:
    """A shift-invariant kernel at unit length scale and its spectral sampler.

    Attributes
    ----------
    name : str
        The name users pass as ``kernel=...``.
    profile : callable
        ``profile(delta) -> k(delta)``, reducing over the last axis of ``delta``.
    sample_frequencies : callable
        ``sample_frequencies(rng, n_features, n_components)`` returns an array of
        shape ``(n_features, n_components)`` whose columns are i.i.d. draws from the
        spectral density, using the ``numpy.random.Generator`` ``rng``.
    spectral_inverse_cdf : callable or None
        Per-dimension inverse CDF of the spectral density when the density factorises
        over dimensions (used by quasi-Monte Carlo sampling); None otherwise.
    """

    name: str
    profile: Callable[[np.ndarray], np.ndarray]
    sample_frequencies: Callable[[np.random.Generator, int, int], np.ndarray]
    spectral_inverse_cdf: Callable[[np.ndarray], np.ndarray] | None = None


def _normal_ppf(u):
    from scipy.special import ndtri

    return ndtri(u)


def _cauchy_ppf(u):
    return np.tan(np.pi * (u - 0.5))


def _laplace_ppf(u):
    return -np.sign(u - 0.5) * np.log1p(-2.0 * np.abs(u - 0.5))


KERNELS = {
    "gaussian": Kernel("gaussian", gaussian_profile, _sample_normal, _normal_ppf),
    "laplacian": Kernel("laplacian", laplacian_profile, _sample_cauchy, _cauchy_ppf),
    "cauchy": Kernel("cauchy", cauchy_profile, _sample_laplace, _laplace_ppf),
}


def get_kernel(kernel):
    """Return the :class:`Kernel` registered under ``kernel`` (or ``kernel`` itself)."""
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str) and kernel in KERNELS:
        return KERNELS[kernel]
    raise ValueError(
        f"Unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}."
    )


def kernel_matrix(kernel, X, Y=None, *, length_scale=1.0, chunk_size=None):
    """Exact Gram matrix ``K[i, j] = k((X[i] - Y[j]) / length_scale)``.

    Rows are processed in chunks so the ``(chunk, n_Y, n_features)`` temporary of
    differences stays below about 64 MB instead of growing as ``n_X * n_Y * d``.

    Parameters
    ----------
    kernel : str or Kernel
        Name of a registered kernel.
    X : array of shape (n_X, n_features)
    Y : array of shape (n_Y, n_features), default=None
        ``None`` means ``Y = X``.
    length_scale : float or array of shape (n_features,), default=1.0
    chunk_size : int, default=None
        Rows of ``X`` per chunk; chosen from the memory budget when None.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)
    """
    kernel = get_kernel(kernel)
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    scale = np.asarray(length_scale, dtype=np.float64)
    Xs, Ys = X / scale, Y / scale
    if chunk_size is None:
        chunk_size = max(1, int(8e6 // max(1, Ys.shape[0] * Ys.shape[1])))
    K = np.empty((Xs.shape[0], Ys.shape[0]))
    for start in range(0, Xs.shape[0], chunk_size):
        block = Xs[start : start + chunk_size]
        K[start : start + chunk_size] = kernel.profile(block[:, None, :] - Ys[None, :, :])
    return K
