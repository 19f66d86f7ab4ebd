"""Profiles of the shift-invariant kernels: ``k(delta)`` at unit length scale.

Each function takes differences ``delta = x - y`` (the last axis holds the features, or
one dimension for the ``_1d`` and wave functions) and returns the kernel value, with
``k(0) = 1``. :mod:`rffkit.kernels` pairs each profile with the sampler of its spectral
density (:mod:`rffkit._samplers`) and documents the formulas and their sources.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "gaussian_profile",
    "laplacian_profile",
    "cauchy_profile",
    "matern_profile",
    "triangle_wave",
    "induced_profile",
    "spline_profile_1d",
    "bernoulli_cosine_series",
]


def gaussian_profile(delta):
    """Gaussian kernel ``k(delta) = exp(-||delta||_2^2 / 2)`` on the last axis.

    Parameters
    ----------
    delta : ndarray of shape (..., n_features)
        Differences ``x - y`` at unit length scale.

    Returns
    -------
    ndarray of shape (...)
        The kernel value of each difference, in ``(0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> float(gaussian_profile(np.array([1.0, 1.0])).round(4))
    0.3679
    """
    return np.exp(-0.5 * np.sum(delta * delta, axis=-1))


def laplacian_profile(delta):
    """Laplacian kernel ``k(delta) = exp(-||delta||_1)`` on the last axis.

    Parameters
    ----------
    delta : ndarray of shape (..., n_features)
        Differences ``x - y`` at unit length scale.

    Returns
    -------
    ndarray of shape (...)
        The kernel value of each difference, in ``(0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> float(laplacian_profile(np.array([0.5, -0.5])).round(4))
    0.3679
    """
    return np.exp(-np.sum(np.abs(delta), axis=-1))


def cauchy_profile(delta):
    """Cauchy kernel ``k(delta) = prod_i 1 / (1 + delta_i^2)`` on the last axis.

    Parameters
    ----------
    delta : ndarray of shape (..., n_features)
        Differences ``x - y`` at unit length scale.

    Returns
    -------
    ndarray of shape (...)
        The kernel value of each difference, in ``(0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> float(cauchy_profile(np.array([1.0, 1.0])))
    0.25
    """
    return np.prod(1.0 / (1.0 + delta * delta), axis=-1)


def matern_profile(delta, nu):
    """Matérn kernel of smoothness ``nu`` in {0.5, 1.5, 2.5}, Euclidean norm of the last axis.

    With ``r = ||delta||_2``: ``exp(-r)`` (``nu = 0.5``), ``(1 + sqrt3 r) exp(-sqrt3 r)``
    (1.5) and ``(1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)`` (2.5).

    Parameters
    ----------
    delta : ndarray of shape (..., n_features)
        Differences ``x - y`` at unit length scale.
    nu : {0.5, 1.5, 2.5}
        Smoothness; any other value is treated as 2.5 (use :func:`matern_kernel`,
        which checks it).

    Returns
    -------
    ndarray of shape (...)
        The kernel value of each difference.

    Examples
    --------
    >>> import numpy as np
    >>> float(matern_profile(np.array([1.0]), 0.5).round(4))
    0.3679
    """
    r = np.sqrt(np.sum(delta * delta, axis=-1))
    if nu == 0.5:
        return np.exp(-r)
    if nu == 1.5:
        s = np.sqrt(3.0) * r
        return (1.0 + s) * np.exp(-s)
    s = np.sqrt(5.0) * r
    return (1.0 + s + s * s / 3.0) * np.exp(-s)


def triangle_wave(t):
    """``1 - |t|`` on ``[-2, 2]``, continued with period 4 (values in ``[-1, 1]``).

    The one-dimensional profile of the induced kernel.

    Parameters
    ----------
    t : array-like
        Differences at unit length scale.

    Returns
    -------
    ndarray
        The wave at each ``t``, same shape as ``t``.

    Examples
    --------
    >>> triangle_wave([0.0, 1.0, 2.0, 3.0, 4.0])
    array([ 1.,  0., -1.,  0.,  1.])
    """
    t = np.mod(np.abs(t), 4.0)
    return np.where(t <= 2.0, 1.0 - t, t - 3.0)


def induced_profile(delta):
    """Induced (decision-stump) kernel ``prod_i tri(delta_i)`` on the last axis.

    ``tri`` is :func:`triangle_wave`.

    Parameters
    ----------
    delta : ndarray of shape (..., n_features)
        Differences ``x - y`` at unit length scale.

    Returns
    -------
    ndarray of shape (...)
        The kernel value of each difference, in ``[-1, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> float(induced_profile(np.array([0.5, 0.5])))
    0.25
    """
    return np.prod(triangle_wave(delta), axis=-1)


def spline_profile_1d(t, order=1.0, n_terms=10):
    """``(1 + sum_{m=1}^M m^{-2r} cos(2 pi m t)) / (1 + sum_m m^{-2r})``, elementwise.

    Parameters
    ----------
    t : array-like
        Differences at unit length scale (the profile has period 1).
    order : float, default=1.0
        ``r``: the weight of harmonic ``m`` is ``m^{-2r}``.
    n_terms : int, default=10
        ``M``, the number of harmonics.

    Returns
    -------
    ndarray
        The profile at each ``t``, same shape as ``t``; 1 at integers.

    Examples
    --------
    >>> spline_profile_1d([0.0, 0.5, 1.0]).round(6).tolist()
    [1.0, 0.071394, 1.0]
    """
    t = np.asarray(t, dtype=np.float64)
    weights = np.arange(1, n_terms + 1, dtype=np.float64) ** (-2.0 * order)
    total = np.ones_like(t)
    for m, weight in enumerate(weights, start=1):
        total = total + weight * np.cos(2.0 * np.pi * m * t)
    return total / (1.0 + weights.sum())


def bernoulli_cosine_series(t, order):
    """``sum_{m >= 1} cos(2 pi m t) / m^{2r}`` for r = 1, 2 (Bernoulli polynomials)."""
    t = np.mod(t, 1.0)
    if order == 1:
        return np.pi**2 * (t * t - t + 1.0 / 6.0)
    return np.pi**4 / 90.0 - np.pi**4 / 3.0 * (t * (1.0 - t)) ** 2
