"""Numerics behind the spectral samplers: tabulated and discrete spectral densities,
orthogonal directions, quasi-Monte Carlo points and ridge leverage scores.

Everything here takes and returns NumPy arrays; the estimators in
:mod:`rffkit.features` and :mod:`rffkit.binning` only orchestrate these functions.

A one-dimensional kernel profile ``k(delta)`` with ``k(0) = 1`` is, by Bochner's
theorem, the characteristic function of a symmetric probability density
``p(omega) = (1 / pi) int_0^inf k(delta) cos(omega delta) d delta``. The density is
computed here by the exact cosine transform of the piecewise-linear interpolant of
``k`` on a uniform grid (a Filon-type rule),

    p(omega) = (h / 2 pi) sinc^2(omega h / 2) [k_0 + 2 sum_{j >= 1} k_j cos(omega j h)],

evaluated with a type-I discrete cosine transform. Sampling the result reproduces
the interpolant exactly, so the kernel error is that of linear interpolation,
``h^2 max|k''| / 8``.
"""

from __future__ import annotations

import numpy as np
from scipy import fft, stats

__all__ = [
    "DiscreteSpectrum",
    "TabulatedSpectrum",
    "numerical_spectral_density",
    "numerical_pitch_density",
    "orthogonal_directions",
    "qmc_uniforms",
    "ridge_leverage_scores",
    "ridge_leverage_scores_chunked",
]


def _as_symmetric(u, magnitude_ppf):
    """Signed quantile of a symmetric law from the quantile of its magnitude."""
    u = np.asarray(u, dtype=np.float64)
    return np.sign(u - 0.5) * magnitude_ppf(np.abs(2.0 * u - 1.0))


class DiscreteSpectrum:
    """A symmetric spectral measure on frequencies ``+-omega_n`` with masses ``q_n``.

    Periodic kernels ``k(delta) = sum_n q_n cos(omega_n delta)`` (``sum_n q_n = 1``)
    have such a spectrum. An optional power tail ``q_n ~ c / n^2`` on odd or all
    integers beyond the table is sampled from its continuous (Pareto) limit.

    Parameters
    ----------
    frequencies : array of shape (n,)
        Non-negative, increasing frequencies ``omega_n``.
    probabilities : array of shape (n,)
        Their masses; they sum to ``1 - tail_mass``.
    tail_mass : float, default=0.0
        Mass beyond the last tabulated frequency, drawn as ``omega_last / U``
        (a Pareto law of index 1, the ``1 / omega^2`` density of a kink).
    tail_step : float or None, default=None
        Spacing of the frequency lattice the tail draws are rounded onto.
    """

    def __init__(self, frequencies, probabilities, *, tail_mass=0.0, tail_step=None):
        self.frequencies = np.asarray(frequencies, dtype=np.float64)
        self.probabilities = np.asarray(probabilities, dtype=np.float64)
        self.tail_mass = float(tail_mass)
        self.tail_step = tail_step
        self._cdf = np.cumsum(self.probabilities)

    def magnitude_ppf(self, v):
        """Quantile function of ``|omega|`` (a step function)."""
        v = np.asarray(v, dtype=np.float64)
        index = np.searchsorted(self._cdf, v, side="right")
        inside = index < self.frequencies.size
        out = self.frequencies[np.minimum(index, self.frequencies.size - 1)]
        if self.tail_mass > 0 and not np.all(inside):
            last = self.frequencies[-1]
            excess = np.clip((1.0 - v[~inside]) / self.tail_mass, 1e-300, 1.0)
            tail = last / excess
            if self.tail_step is not None:
                # Round onto the lattice last + 2 k step beyond the table (odd harmonics).
                steps = np.maximum(1.0, np.round((tail - last) / (2.0 * self.tail_step)))
                tail = last + 2.0 * self.tail_step * steps
            out = out.copy()
            out[~inside] = tail
        return out

    def ppf(self, u):
        """Quantile function of the signed frequency (for quasi-Monte Carlo)."""
        return _as_symmetric(u, self.magnitude_ppf)

    def sample(self, rng, size):
        """Draw ``size`` i.i.d. signed frequencies with the generator ``rng``."""
        return self.ppf(rng.uniform(size=size))


class TabulatedSpectrum:
    """A symmetric spectral density tabulated on ``[0, cutoff]`` with a power tail.

    Attributes
    ----------
    frequencies : ndarray of shape (m,)
        Grid of ``omega >= 0`` from 0 to ``cutoff``.
    density : ndarray of shape (m,)
        ``p(omega)`` on the grid (a density on the whole line, so
        ``2 int_0^cutoff p + tail_mass = 1``).
    tail_mass : float
        Probability of ``|omega| > cutoff``, drawn as ``cutoff * tail_mass / (1 - v)``
        (density ``~ 1 / omega^2``, the decay caused by a kink of ``k`` at 0).
    """

    def __init__(self, frequencies, density, tail_mass):
        self.frequencies = np.asarray(frequencies, dtype=np.float64)
        self.density = np.asarray(density, dtype=np.float64)
        self.tail_mass = float(tail_mass)
        clipped = np.maximum(self.density, 0.0)
        steps = 0.5 * (clipped[1:] + clipped[:-1]) * np.diff(self.frequencies)
        cdf = np.concatenate([[0.0], np.cumsum(2.0 * steps)])
        self._clipped = clipped
        self._cdf_scale = 2.0 * (1.0 - self.tail_mass) / cdf[-1]
        self._cdf = cdf * (1.0 - self.tail_mass) / cdf[-1]

    @property
    def cutoff(self):
        return self.frequencies[-1]

    def pdf(self, omega):
        """Density of the signed frequency (linear interpolation of the table)."""
        omega = np.abs(np.asarray(omega, dtype=np.float64))
        inside = np.interp(omega, self.frequencies, self.density, right=0.0)
        tail = self.tail_mass * self.cutoff / (2.0 * omega**2 + 1e-300)
        return np.where(omega <= self.cutoff, inside, tail)

    def magnitude_ppf(self, v):
        """Quantile function of ``|omega|``: exact inversion of the piecewise-linear
        density of the table (a quadratic CDF per cell), then the Pareto tail."""
        v = np.asarray(v, dtype=np.float64)
        body = 1.0 - self.tail_mass
        target = np.minimum(v, body)
        cell = np.clip(np.searchsorted(self._cdf, target, side="right") - 1, 0, self._cdf.size - 2)
        width = self.frequencies[cell + 1] - self.frequencies[cell]
        start, end = self._clipped[cell], self._clipped[cell + 1]
        scale = self._cdf_scale
        remaining = np.maximum(target - self._cdf[cell], 0.0)
        linear = scale * start
        quadratic = scale * (end - start) / (2.0 * width)
        root = np.sqrt(np.maximum(linear**2 + 4.0 * quadratic * remaining, 0.0))
        offset = 2.0 * remaining / np.maximum(linear + root, 1e-300)
        out = self.frequencies[cell] + np.minimum(offset, width)
        if self.tail_mass > 0:
            in_tail = v > body
            out = np.where(
                in_tail,
                self.cutoff * self.tail_mass / np.maximum(1.0 - v, 1e-300),
                out,
            )
        return out

    def ppf(self, u):
        """Quantile function of the signed frequency."""
        return _as_symmetric(u, self.magnitude_ppf)

    def sample(self, rng, size):
        """Draw ``size`` i.i.d. signed frequencies with the generator ``rng``."""
        return self.ppf(rng.uniform(size=size))


def _evaluate_profile(profile, delta):
    with np.errstate(all="ignore"):
        values = np.asarray(profile(delta), dtype=np.float64)
    if values.shape != np.shape(delta):
        values = np.broadcast_to(values, np.shape(delta)).astype(np.float64)
    return values


def _check_profile_basics(profile, *, decay_tol):
    """Check k(0) = 1, evenness, |k| <= 1 and decay; return the truncation length."""
    k0 = float(_evaluate_profile(profile, np.zeros(1))[0])
    if not np.isfinite(k0) or abs(k0 - 1.0) > 1e-6:
        raise ValueError(
            f"Kernel profile has k(0) = {k0!r}; expected k(0) = 1 for a spectral density "
            "to exist (a covariance profile must be normalised: divide it by k(0))."
        )
    probe = np.logspace(-4, 6, 201)
    right = _evaluate_profile(profile, probe)
    left = _evaluate_profile(profile, -probe)
    if not (np.all(np.isfinite(right)) and np.all(np.isfinite(left))):
        raise ValueError("Kernel profile returned non-finite values; expected finite k(delta).")
    asymmetry = np.max(np.abs(right - left))
    if asymmetry > 1e-8:
        raise ValueError(
            f"Kernel profile is not even: max |k(d) - k(-d)| = {asymmetry:.3g}; expected "
            "k(-d) = k(d) for a real shift-invariant kernel."
        )
    if np.max(np.abs(right)) > 1.0 + 1e-8:
        raise ValueError(
            f"Kernel profile exceeds k(0): max |k(d)| = {np.max(np.abs(right)):.6g} > 1; "
            "a positive-definite kernel satisfies |k(d)| <= k(0)."
        )
    above = np.nonzero(np.abs(right) >= decay_tol)[0]
    if above.size and above[-1] == probe.size - 1:
        raise ValueError(
            f"Kernel profile does not decay: |k({probe[-1]:.0e})| = {abs(right[-1]):.3g}; "
            f"expected |k(d)| < {decay_tol:g} for large d so that p(omega) is a "
            "normalisable density (periodic or constant profiles have discrete spectra)."
        )
    length = probe[above[-1] + 1] if above.size else probe[0]
    drop = np.nonzero(1.0 - right >= 0.1)[0]
    scale = probe[drop[0]] if drop.size else length
    return float(length), float(min(scale, length))


def _linear_filon_density(profile, step, length, pad):
    """Cosine transform of the linear interpolant of k on [0, length] with step h."""
    n = int(np.ceil(length / step)) + 1
    samples = np.zeros(pad * (n - 1) + 1)
    samples[:n] = _evaluate_profile(profile, step * np.arange(n))
    dtft = fft.dct(samples, type=1)  # k_0 + 2 sum_j k_j cos(pi m j / (N - 1))
    omega = np.pi * np.arange(samples.size) / ((samples.size - 1) * step)
    density = step / (2.0 * np.pi) * np.sinc(omega * step / (2.0 * np.pi)) ** 2 * dtft
    return omega, density, samples[:n]


def numerical_spectral_density(
    profile, *, tol=1e-2, negative_tol=1e-3, decay_tol=1e-6, max_points=2**21
):
    """Spectral density of a one-dimensional profile by numerical cosine transform.

    Parameters
    ----------
    profile : callable
        Vectorised ``k(delta)`` of a one-dimensional difference, with ``k(0) = 1``.
    tol : float, default=1e-2
        Accepted error of the normalisation ``int p = k(0)`` and of the kernel
        reconstructed from the tabulated density.
    negative_tol : float, default=1e-3
        Negative values of ``p`` below ``-negative_tol * max p`` mean the profile is
        not positive definite (Bochner) and it is refused.
    decay_tol : float, default=1e-6
        The integral is truncated where ``|k|`` stays below this value.
    max_points : int, default=2**21
        Largest grid the refinement may use.

    Returns
    -------
    TabulatedSpectrum

    Raises
    ------
    ValueError
        If ``k(0) != 1``, ``k`` is not even, exceeds ``k(0)``, does not decay, has a
        significantly negative transform, or the quadrature cannot meet ``tol``.

    Notes
    -----
    The grid ends at ``L``, where ``|k|`` falls below ``decay_tol``; the step starts
    at ``h = min(L / 4096, d_10 / 32)`` where ``d_10`` is where ``k`` first drops by
    10% (the curvature scale at 0) and is halved until the checks pass. The density
    is tabulated up to the Nyquist frequency ``pi / h``; the missing mass goes to a
    ``1 / omega^2`` tail, the exact asymptotics of a kink ``k'(0+) != 0``.
    """
    length, scale = _check_profile_basics(profile, decay_tol=decay_tol)
    step = min(length / 4096.0, scale / 32.0)
    pad = 8
    if pad * length / step > max_points:
        raise ValueError(
            f"Kernel profile decays too slowly to tabulate its spectral density: |k| stays "
            f"above {decay_tol:g} up to delta = {length:.3g} while it varies on a scale of "
            f"{scale:.3g} near 0, which needs more than max_points={max_points} grid points; "
            "expected a profile that decays within about 1e4 of its length scale."
        )
    while True:
        omega, density, samples = _linear_filon_density(profile, step, length, pad)
        peak = np.max(density)
        if np.min(density) < -negative_tol * peak:
            at = omega[np.argmin(density)]
            raise ValueError(
                f"Kernel profile is not positive definite: its cosine transform reaches "
                f"p({at:.3g}) = {np.min(density):.3g} (peak {peak:.3g}); expected a "
                "non-negative spectral density (Bochner's theorem)."
            )
        clipped = np.maximum(density, 0.0)
        body = 2.0 * np.sum(0.5 * (clipped[1:] + clipped[:-1]) * np.diff(omega))
        slope = (1.0 - samples[1]) / step  # -k'(0+), zero for smooth profiles
        expected_tail = 2.0 * slope / (np.pi * omega[-1]) if slope > 1e-3 * step else 0.0
        normalisation_error = abs(body + expected_tail - 1.0)
        spectrum = TabulatedSpectrum(omega, density, max(0.0, 1.0 - body))
        probe = scale * np.array([0.5, 1.0, 2.0, 4.0, 8.0])
        weights = np.concatenate([[0.5], np.ones(omega.size - 2), [0.5]]) * np.diff(omega[:2])
        rebuilt = 2.0 * (np.cos(np.outer(probe, omega)) * clipped) @ weights
        reconstruction_error = np.max(np.abs(rebuilt - _evaluate_profile(profile, probe)))
        if normalisation_error <= tol and reconstruction_error <= tol:
            return spectrum
        if pad * (length / step) * 2 > max_points:
            raise ValueError(
                f"Could not resolve the spectral density of the profile: normalisation "
                f"error {normalisation_error:.3g}, reconstruction error "
                f"{reconstruction_error:.3g}; expected both <= tol={tol:g}. The profile "
                "may decay too slowly or be too rough."
            )
        step /= 2.0


def numerical_pitch_density(profile, *, tol=1e-2, decay_tol=1e-6, n_points=2**14):
    """Grid-pitch density ``p(delta) = delta k''(delta)`` of random binning features.

    Valid when ``k`` is convex and decreasing on ``(0, inf)`` with ``k(inf) = 0``; then
    ``int_0^inf delta k''(delta) d delta = k(0) = 1`` (Rahimi & Recht, 2007, Lemma 1).
    ``k''`` is computed by second differences on a uniform grid.

    Returns
    -------
    TabulatedSpectrum
        Used as a table of the pitch magnitude: only ``magnitude_ppf`` is meaningful.

    Raises
    ------
    ValueError
        If ``k`` is not convex (``delta k''`` significantly negative) or the density
        does not integrate to 1 within ``tol``.
    """
    length, _ = _check_profile_basics(profile, decay_tol=decay_tol)
    grid = np.linspace(0.0, length, n_points + 1)
    step = grid[1]
    values = _evaluate_profile(profile, np.concatenate([grid, [length + step]]))
    second = np.zeros_like(grid)
    second[1:] = (values[2:] - 2.0 * values[1:-1] + values[:-2]) / step**2
    density = grid * second
    if np.min(density) < -1e-3 * np.max(np.abs(density)):
        at = grid[np.argmin(density)]
        raise ValueError(
            f"Kernel profile is not convex on (0, inf): delta k''(delta) = "
            f"{np.min(density):.3g} at delta = {at:.3g}; random binning needs a "
            "non-negative pitch density p(delta) = delta k''(delta)."
        )
    density = np.maximum(density, 0.0)
    mass = np.sum(0.5 * (density[1:] + density[:-1]) * step)
    if abs(mass - 1.0) > tol:
        raise ValueError(
            f"The pitch density delta k''(delta) integrates to {mass:.4g}; expected 1 "
            f"within {tol:g} (k must decrease from k(0) = 1 to 0 with delta k' -> 0)."
        )
    # TabulatedSpectrum tabulates a symmetric law; halve to store |pitch| correctly.
    return TabulatedSpectrum(grid, density / (2.0 * mass), 0.0)


def orthogonal_directions(rng, n_features, n_components):
    """Unit directions in blocks of ``n_features`` mutually orthogonal vectors.

    Each block is the Q factor of a Gaussian matrix with the signs of ``diag(R)``
    fixed, i.e. a Haar-distributed orthogonal matrix (Yu et al., 2016).

    Returns
    -------
    ndarray of shape (n_features, n_components)
    """
    n_blocks = -(-n_components // n_features)
    blocks = []
    for _ in range(n_blocks):
        q, r = np.linalg.qr(rng.standard_normal((n_features, n_features)))
        blocks.append(q * np.sign(np.diag(r)))
    return np.concatenate(blocks, axis=1)[:, :n_components]


def qmc_uniforms(seed, n_points, dimension):
    """Scrambled low-discrepancy points in ``(0, 1)^dimension``.

    Sobol' points when ``n_points`` is a power of two (their balance properties
    need it), scrambled Halton points otherwise; ``seed`` drives the scrambling.

    Returns
    -------
    ndarray of shape (n_points, dimension)
    """
    if n_points & (n_points - 1) == 0:
        engine = stats.qmc.Sobol(dimension, scramble=True, seed=seed)
        points = engine.random_base2(int(np.log2(n_points)))
    else:
        points = stats.qmc.Halton(dimension, scramble=True, seed=seed).random(n_points)
    eps = np.finfo(np.float64).eps
    return np.clip(points, eps, 1.0 - eps)


def ridge_leverage_scores(features, alpha):
    """Ridge leverage scores of the columns of a random-feature matrix.

    For ``Z`` of shape (n, s) whose columns are features ``z_j(X)`` drawn from the
    spectral density, ``K ~ Z Z^T / s`` and (Avron et al., 2017; Li et al., 2019)

        l_j = z_j^T (Z Z^T / s + n alpha I)^{-1} z_j,

    computed from the thin SVD ``Z = U S V^T`` as
    ``l_j = sum_k V_jk^2 S_k^2 / (S_k^2 / s + n alpha)``.

    Returns
    -------
    ndarray of shape (s,)
        Non-negative scores; ``q = l / sum(l)`` is the leverage sampling law.
    """
    n_samples, n_pool = features.shape
    _, singular, vt = np.linalg.svd(features, full_matrices=False)
    shrink = singular**2 / (singular**2 / n_pool + n_samples * alpha)
    return np.einsum("kj,k->j", vt**2, shrink)


def ridge_leverage_scores_chunked(feature_columns, n_samples, n_pool, alpha, chunk=1024):
    """:func:`ridge_leverage_scores` without holding all ``n_pool`` columns at once.

    ``feature_columns(start, stop)`` returns the columns ``start:stop`` of ``Z``
    (shape ``(n_samples, stop - start)``). Two passes: ``G = Z Z^T`` is accumulated,
    ``A = G / s + n alpha I`` factorised (Cholesky), then
    ``l_j = z_j^T A^{-1} z_j`` chunk by chunk; memory ``O(n^2 + n chunk)``.
    """
    from scipy.linalg import cho_factor, cho_solve

    gram = np.zeros((n_samples, n_samples))
    for start in range(0, n_pool, chunk):
        block = feature_columns(start, min(n_pool, start + chunk))
        gram += block @ block.T
    system = gram / n_pool + n_samples * alpha * np.eye(n_samples)
    try:
        factor = cho_factor(system)

        def solve(block):
            return cho_solve(factor, block)

    except np.linalg.LinAlgError:  # numerically singular for a tiny alpha
        eigenvalues, eigenvectors = np.linalg.eigh(system)
        inverse = np.where(eigenvalues > 0, 1.0 / np.maximum(eigenvalues, 1e-300), 0.0)

        def solve(block):
            return eigenvectors @ (inverse[:, None] * (eigenvectors.T @ block))

    scores = np.empty(n_pool)
    for start in range(0, n_pool, chunk):
        stop = min(n_pool, start + chunk)
        block = feature_columns(start, stop)
        scores[start:stop] = np.einsum("ij,ij->j", block, solve(block))
    return scores
