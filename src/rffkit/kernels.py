"""Exact shift-invariant kernels and the spectral samplers behind their random features.

Every kernel here is written for unit length scale as a function of the difference
``delta = x - y`` and normalised so that ``k(0) = 1``. By Bochner's theorem such a
kernel is the characteristic function of a probability measure ``p(omega)``, the
*spectral density*, so that ``k(delta) = E_omega[cos(omega^T delta)]``. A length
scale ``l`` (scalar or one per feature) enters as ``k(delta / l)``, whose spectral
density is that of ``omega / l`` (Otto & Izbicki, 2022, Prop. 1): samplers draw unit
frequencies and callers divide by the length scale.

==========  ==============================================  ===============================
kernel      k(delta)                                        p(omega)
==========  ==============================================  ===============================
gaussian    exp(-||delta||_2^2 / 2)                         Normal(0, I)
laplacian   exp(-||delta||_1)                               prod_i Cauchy(0, 1)
cauchy      prod_i 1 / (1 + delta_i^2)                      prod_i Laplace(0, 1)
matern12    exp(-r),  r = ||delta||_2                       Student t_1 (multivariate)
matern32    (1 + sqrt3 r) exp(-sqrt3 r)                     Student t_3 (multivariate)
matern52    (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)         Student t_5 (multivariate)
induced     prod_i tri(delta_i), tri(t) = 1 - |t| on        prod_i, mass 8 / (pi n)^2 at
            [-2, 2], extended with period 4                 +-n pi / 2, n odd
spline      prod_i s(delta_i), s(t) = (1 + sum_{m<=M}       prod_i, mass m^{-2r} / Z at
            m^{-2r} cos(2 pi m t)) / Z, r=1, M=10           +-2 pi m, m = 0..M
==========  ==============================================  ===============================

The Matérn kernel of smoothness ``nu`` has spectral density proportional to
``(2 nu + ||omega||^2)^{-(nu + d / 2)}``, the multivariate Student t law with ``2 nu``
degrees of freedom and unit scale: ``omega = z sqrt(2 nu / g)`` with ``z ~ N(0, I)`` and
``g ~ chi^2_{2 nu}`` (Rasmussen & Williams, 2006, eq. 4.15).

The *induced* kernel (Yu, 2023, after Rahimi & Recht, 2008) is the
decision-stump kernel ``E_t[sgn(x - t) sgn(y - t)] = 1 - 2 |x - y| / (b - a)`` for a
threshold ``t ~ U[a, b]`` and ``x, y`` in ``[a, b]``. At unit length scale the box has
half-width 1 (``k = 1 - |delta|`` for ``|delta| <= 2``); a box of width ``w`` is
``length_scale = w / 2``. On the whole line it is continued as the triangle wave of
period 4, whose Fourier series ``(8 / pi^2) sum_{n odd} cos(n pi t / 2) / n^2`` has
non-negative coefficients: the spectrum is discrete and exact. Per-dimension kernels
are combined by product, as Yu (2023) does for random binning; an average over a random
coordinate would be a different, additive kernel.

The *spline* kernel ``k_2r`` (Yu, 2023, after Li et al., 2019) is periodic
with period 1 and normalised here by ``Z = 1 + sum_m m^{-2r}``; its spectrum is the
finite set of harmonics ``2 pi m``. A numerically computed density would smear these
atoms (the approximation error then stops falling with more features); sampling the
atoms is exact.

A kernel may also be given as a Python callable of a one-dimensional difference; it is
applied per dimension (product kernel) and its spectral density is computed
numerically (:func:`rffkit._spectral.numerical_spectral_density`).

References
----------
A. Rahimi and B. Recht (2007), "Random features for large-scale kernel machines",
NeurIPS 2007; (2008), "Weighted sums of random kitchen sinks", NeurIPS 2008.

C. E. Rasmussen and C. K. I. Williams (2006), *Gaussian Processes for Machine Learning*,
MIT Press.

Z. Li, J.-F. Ton, D. Oglic and D. Sejdinovic (2019), "Towards a unified analysis of
random Fourier features", ICML 2019.

M. P. Otto and R. Izbicki (2022), "RFFNet: Scalable and interpretable kernel methods via
random Fourier features", arXiv.

S.-C. Yu (2023), *Efficient approximation of random basis functions for covariance
kernels*, master's thesis, Technical University of Munich.

Examples
--------
>>> import numpy as np
>>> from rffkit.kernels import KERNELS, kernel_matrix
>>> sorted(KERNELS)
['cauchy', 'gaussian', 'induced', 'laplacian', 'matern12', 'matern32', 'matern52', 'spline']
>>> kernel_matrix("gaussian", np.array([[0.0], [1.0]])).round(4)
array([[1.    , 0.6065],
       [0.6065, 1.    ]])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import special, stats

from . import _samplers
from ._profiles import (bernoulli_cosine_series, cauchy_profile, gaussian_profile, induced_profile, laplacian_profile,
                        matern_profile, spline_profile_1d)

__all__ = [
    "Kernel",
    "KERNELS",
    "get_kernel",
    "kernel_matrix",
    "profile_kernel",
    "matern_kernel",
    "spline_kernel",
    "gaussian_profile",
    "laplacian_profile",
    "cauchy_profile",
    "induced_profile",
    "check_length_scale",
]


@dataclass(frozen=True)
class Kernel:
    """A shift-invariant kernel at unit length scale and its spectral sampler.

    The registered kernels are in ``KERNELS``; :func:`profile_kernel`,
    :func:`matern_kernel` and :func:`spline_kernel` build others. Every estimator that
    takes ``kernel=...`` accepts a ``Kernel`` too.

    Parameters
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
    radial_inverse_cdf : callable or None
        ``radial_inverse_cdf(u, n_features)``: quantile of ``||omega||`` for isotropic
        kernels (orthogonal random features); None for non-isotropic kernels.
    sample_pitches : callable or None
        ``sample_pitches(rng, size)``: grid pitches from ``p(delta) = delta k''(delta)``
        of a kernel that is a product of convex one-dimensional profiles (random
        binning features); None where that density is not valid.

    See Also
    --------
    get_kernel : a Kernel from a name, a Kernel or a profile callable.
    kernel_matrix : the exact Gram matrix of a kernel.

    Notes
    -----
    By Bochner's theorem ``k(delta) = E_omega[cos(omega^T delta)]`` with ``omega`` drawn
    from the spectral density ``p``; ``sample_frequencies`` draws from ``p`` and
    ``profile`` evaluates ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit.kernels import KERNELS
    >>> kernel = KERNELS["laplacian"]
    >>> kernel.name, kernel.is_isotropic(3)
    ('laplacian', False)
    >>> kernel.sample_frequencies(np.random.default_rng(0), 3, 5).shape
    (3, 5)
    """

    name: str
    profile: Callable[[np.ndarray], np.ndarray]
    sample_frequencies: Callable[[np.random.Generator, int, int], np.ndarray]
    spectral_inverse_cdf: Callable[[np.ndarray], np.ndarray] | None = None
    radial_inverse_cdf: Callable[[np.ndarray, int], np.ndarray] | None = None
    sample_pitches: Callable[[np.random.Generator, tuple], np.ndarray] | None = None

    def is_isotropic(self, n_features):
        """True when ``p(omega)`` depends on ``||omega||_2`` only (always in 1-D).

        Parameters
        ----------
        n_features : int
            Input dimension.

        Returns
        -------
        bool
            Whether orthogonal random features apply to this kernel in that dimension.
        """
        return self.radial_inverse_cdf is not None or n_features == 1

    def qmc_dimension(self, n_features):
        """Number of uniform coordinates :meth:`frequencies_from_uniforms` needs.

        Parameters
        ----------
        n_features : int
            Input dimension.

        Returns
        -------
        int
            ``n_features`` for a separable density, ``n_features + 1`` (a direction and
            a radius) for an isotropic one.
        """
        return n_features if self.spectral_inverse_cdf is not None else n_features + 1

    def frequencies_from_uniforms(self, u, n_features):
        """Map points ``u`` of the unit cube to frequencies (quasi-Monte Carlo sampling).

        Separable densities use the per-dimension inverse CDF; isotropic ones take a
        direction from the normal quantiles of the first ``n_features`` coordinates
        and a radius from the radial quantile of the last one.

        Parameters
        ----------
        u : ndarray of shape (n_components, qmc_dimension)
            Points in the open unit cube; ``qmc_dimension`` is
            :meth:`qmc_dimension` of ``n_features``.
        n_features : int
            Input dimension.

        Returns
        -------
        ndarray of shape (n_features, n_components)
            The frequencies, one per column.
        """
        if self.spectral_inverse_cdf is not None:
            return self.spectral_inverse_cdf(u[:, :n_features]).T
        z = special.ndtri(u[:, :n_features])
        directions = z / np.linalg.norm(z, axis=1, keepdims=True)
        radius = self.radial_inverse_cdf(u[:, n_features], n_features)
        return (directions * radius[:, None]).T


def matern_kernel(nu):
    """The Matérn kernel of smoothness ``nu`` in {0.5, 1.5, 2.5} (Euclidean norm).

    Parameters
    ----------
    nu : {0.5, 1.5, 2.5}
        Smoothness; the kernels are registered as ``'matern12'``, ``'matern32'`` and
        ``'matern52'``.

    Returns
    -------
    Kernel
        Its spectral density is the multivariate Student t law with ``2 nu`` degrees of
        freedom (Rasmussen & Williams, 2006, eq. 4.15), sampled as
        ``z sqrt(2 nu / g)``, ``z ~ N(0, I)``, ``g ~ chi^2_{2 nu}``.

    Examples
    --------
    >>> matern_kernel(1.5).name
    'matern32'
    """
    if nu not in (0.5, 1.5, 2.5):
        raise ValueError(
            f"Matérn smoothness nu={nu!r} is not supported; expected 0.5, 1.5 or 2.5."
        )
    dof = 2.0 * nu

    def profile(delta):
        return matern_profile(delta, nu)

    def sample(rng, n_features, n_components):
        z = rng.standard_normal((n_features, n_components))
        return z * np.sqrt(dof / rng.chisquare(dof, n_components))

    def radius_ppf(u, n_features):
        # ||omega||^2 / d = (||z||^2 / d) / (g / 2 nu) ~ F(d, 2 nu).
        return np.sqrt(n_features * stats.f.ppf(u, n_features, dof))

    name = {0.5: "matern12", 1.5: "matern32", 2.5: "matern52"}[nu]
    return Kernel(name, profile, sample, None, radius_ppf)


def spline_kernel(order=1.0, n_terms=10):
    """The periodic spline kernel ``k_2r`` (Yu, 2023), normalised to ``k(0) = 1``.

    Parameters
    ----------
    order : float, default=1.0
        ``r > 0``: harmonic ``m`` has weight ``m^{-2r}``. With ``n_terms=None`` only 1
        and 2 are supported.
    n_terms : int or None, default=10
        ``M``, the number of harmonics; None gives the full series.

    Returns
    -------
    Kernel
        Named ``'spline'`` for the defaults (the registered kernel), else
        ``'spline(r=..., M=...)'``.

    Notes
    -----
    ``k(delta) = prod_i (1 + sum_{m=1}^M m^{-2r} cos(2 pi m delta_i)) / Z`` with
    ``Z = 1 + sum_m m^{-2r}``, ``r = order`` and ``M = n_terms``; its spectrum puts mass
    ``m^{-2r} / Z`` on the frequencies ``+-2 pi m`` (``m = 0`` carries ``1 / Z``).
    ``n_terms=None`` gives the full series (Wahba's periodic spline kernel, used by
    Li et al., 2019) for ``order`` 1 or 2, in closed form through Bernoulli
    polynomials, e.g. ``sum_m cos(2 pi m t) / m^2 = pi^2 (t^2 - t + 1/6)`` on [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> kernel = spline_kernel(order=2, n_terms=None)
    >>> kernel.name, float(kernel.profile(np.array([[0.0]]))[0])
    ('spline(r=2, M=None)', 1.0)
    """
    infinite = n_terms is None
    if infinite and order not in (1, 2):
        raise ValueError(
            "spline_kernel: n_terms=None (the full series) needs order 1 or 2; "
            f"got order={order!r}."
        )
    if not infinite and not (order > 0 and int(n_terms) == n_terms and n_terms >= 1):
        raise ValueError(
            f"spline_kernel: order={order!r} must be > 0 and n_terms={n_terms!r} a positive "
            "integer (or None for the full series)."
        )
    table = 4096 if infinite else int(n_terms)
    spectrum, total = _samplers.spline_spectrum(order, table, infinite=infinite)

    def profile(delta):
        if infinite:
            return np.prod((1.0 + bernoulli_cosine_series(delta, order)) / total, axis=-1)
        return np.prod(spline_profile_1d(delta, order, table), axis=-1)

    def sample(rng, n_features, n_components):
        return spectrum.sample(rng, (n_features, n_components))

    name = "spline" if (order, n_terms) == (1.0, 10) else f"spline(r={order}, M={n_terms})"
    return Kernel(name, profile, sample, spectrum.ppf)


def profile_kernel(profile, name=None):
    """A product kernel ``prod_i profile(delta_i)`` from a one-dimensional profile.

    Its spectral density (and, for convex profiles, its binning pitch density) is
    computed numerically on first use; invalid profiles raise ``ValueError`` then
    (see :func:`rffkit._spectral.numerical_spectral_density`).

    Parameters
    ----------
    profile : callable
        ``k(t)`` of a one-dimensional difference, with ``k(0) = 1``; scalar-only
        callables (``math.exp``) are vectorised.
    name : str, default=None
        The kernel's name; None takes the callable's ``__name__``.

    Returns
    -------
    Kernel

    Examples
    --------
    >>> import numpy as np
    >>> kernel = profile_kernel(lambda d: np.exp(-np.abs(d)))
    >>> kernel.sample_frequencies(np.random.default_rng(0), 2, 3).shape
    (2, 3)
    """
    numeric = _samplers.NumericalSpectrum(profile)
    label = name or getattr(profile, "__name__", "profile")
    return Kernel(
        label, numeric.product_profile, numeric.sample, numeric.ppf, None, numeric.sample_pitches
    )


KERNELS = {
    "gaussian": Kernel("gaussian", gaussian_profile, _samplers.sample_normal, _samplers.normal_ppf,
                       _samplers.chi_radius_ppf),
    "laplacian": Kernel("laplacian", laplacian_profile, _samplers.sample_cauchy, _samplers.cauchy_ppf, None,
                        _samplers.sample_laplacian_pitch),
    "cauchy": Kernel("cauchy", cauchy_profile, _samplers.sample_laplace, _samplers.laplace_ppf),
    "matern12": matern_kernel(0.5),
    "matern32": matern_kernel(1.5),
    "matern52": matern_kernel(2.5),
    "induced": Kernel("induced", induced_profile, _samplers.sample_induced, _samplers.induced_ppf),
    "spline": spline_kernel(1.0, 10),
}


def get_kernel(kernel):
    """Return the :class:`Kernel` for a name, a :class:`Kernel`, or a 1-D profile callable.

    Parameters
    ----------
    kernel : str, Kernel or callable
        One of ``'gaussian'``, ``'laplacian'``, ``'cauchy'``, ``'matern12'``,
        ``'matern32'``, ``'matern52'``, ``'induced'``, ``'spline'`` (the keys of
        ``KERNELS``), a :class:`Kernel` (returned as is) or a profile callable
        (:func:`profile_kernel`).

    Returns
    -------
    Kernel

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> get_kernel("matern52").name
    'matern52'
    """
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str) and kernel in KERNELS:
        return KERNELS[kernel]
    if callable(kernel):
        return profile_kernel(kernel)
    raise ValueError(
        f"Unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}, a Kernel, or a "
        "callable k(delta) of a one-dimensional difference."
    )


def check_length_scale(length_scale, n_features, *, owner):
    """Validate a scalar or per-feature length scale; return it as a float array.

    Parameters
    ----------
    length_scale : float or array-like of shape (n_features,)
        Must be finite and strictly positive.
    n_features : int
        Number of input features a vector must match.
    owner : str
        Name used in error messages.

    Returns
    -------
    ndarray of shape () or (n_features,)
        The length scale as float64.

    Examples
    --------
    >>> check_length_scale([1, 2], 2, owner="example")
    array([1., 2.])
    """
    scale = np.asarray(length_scale, dtype=np.float64)
    if scale.ndim == 1 and scale.shape[0] != n_features:
        raise ValueError(f"{owner}: length_scale has {scale.shape[0]} entries but X has {n_features} features; "
                         "pass a scalar or one value per feature.")
    if scale.ndim > 1:
        raise ValueError(f"{owner}: length_scale must be a scalar or a 1-D array.")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError(f"{owner}: length_scale must be finite and strictly positive, got {length_scale!r}.")
    return scale


def kernel_matrix(kernel, X, Y=None, *, length_scale=1.0, chunk_size=None):
    """Exact Gram matrix ``K[i, j] = k((X[i] - Y[j]) / length_scale)``.

    Rows are processed in chunks so the ``(chunk, n_Y, n_features)`` temporary of
    differences stays below about 64 MB instead of growing as ``n_X * n_Y * d``.

    Parameters
    ----------
    kernel : str, Kernel or callable
        One of ``'gaussian'``, ``'laplacian'``, ``'cauchy'``, ``'matern12'``,
        ``'matern32'``, ``'matern52'``, ``'induced'``, ``'spline'``, a :class:`Kernel`,
        or a one-dimensional profile applied per dimension (product kernel).
    X : array-like of shape (n_X, n_features)
        First set of points.
    Y : array-like of shape (n_Y, n_features), default=None
        Second set of points; None means ``Y = X``.
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale ``l``; a vector gives an ARD kernel.
    chunk_size : int, default=None
        Rows of ``X`` per chunk; chosen from the memory budget when None.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)
        The exact Gram matrix.

    See Also
    --------
    rffkit.approximation.approximate_kernel_matrix : its estimate by a feature map.

    Examples
    --------
    >>> import numpy as np
    >>> kernel_matrix("laplacian", np.array([[0.0], [1.0]])).round(3)
    array([[1.   , 0.368],
           [0.368, 1.   ]])
    """
    kernel = get_kernel(kernel)
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    for name, points in (("X", X), ("Y", Y)):  # 1-D is ambiguous (n points or one), as scikit-learn's kernels say
        if points.ndim != 2:
            raise ValueError(f"kernel_matrix: {name} must be 2-D, (n_points, n_features); got shape {points.shape}."
                             f" For points of one feature pass {name}.reshape(-1, 1); for one point, "
                             f"{name}.reshape(1, -1).")
    if Y.shape[1] != X.shape[1]:
        raise ValueError(f"kernel_matrix: X has {X.shape[1]} features and Y {Y.shape[1]}; they must match.")
    scale = check_length_scale(length_scale, X.shape[1], owner="kernel_matrix")
    Xs, Ys = X / scale, Y / scale
    if chunk_size is None:
        chunk_size = max(1, int(8e6 // max(1, Ys.shape[0] * Ys.shape[1])))
    K = np.empty((Xs.shape[0], Ys.shape[0]))
    for start in range(0, Xs.shape[0], chunk_size):
        block = Xs[start : start + chunk_size]
        K[start : start + chunk_size] = kernel.profile(block[:, None, :] - Ys[None, :, :])
    return K
