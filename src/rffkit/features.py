"""scikit-learn transformers that map inputs to random Fourier features.

:class:`RandomFourierFeatures` maps ``x`` to ``z(x)`` with ``z(x)^T z(y)`` an unbiased
estimate of a shift-invariant kernel (Rahimi & Recht, 2007); :func:`draw_frequencies`
holds the sampling schemes it offers (i.i.d., orthogonal, quasi-Monte Carlo and
leverage-score sampling).
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._spectral import orthogonal_directions, qmc_uniforms, ridge_leverage_scores_chunked
from ._guards import atomic_fit, within_limits
from ._validation import SMALLEST_LENGTH_SCALE, check_finite_features, check_input, seed_from_random_state
from .kernels import KERNELS, Kernel, check_length_scale, get_kernel

__all__ = ["RandomFourierFeatures", "check_length_scale", "draw_frequencies"]

_LEVERAGE_POOL_FACTOR = 4
_LEVERAGE_MAX_SAMPLES = 1000


def _trig_features(X, weights, offset, variant):
    """Unnormalised features: sqrt(2) cos(XW + b), or [cos XW, sin XW] (cos_sin)."""
    projection = X @ weights
    if variant == "cos":
        projection += offset
        return np.sqrt(2.0) * np.cos(projection)
    return np.hstack([np.cos(projection), np.sin(projection)])


def draw_frequencies(kernel, X, n_frequencies, *, sampling, variant, scale, alpha, rng, owner):
    """Frequencies, phases and importance weights of a random Fourier map.

    The numerics behind :class:`RandomFourierFeatures`; see its ``sampling``
    parameter for the schemes.

    Parameters
    ----------
    kernel : Kernel
        The kernel whose spectral density is sampled.
    X : ndarray of shape (n_samples, n_features)
        Training inputs (used by ``sampling='leverage'`` only).
    n_frequencies : int
        Number of frequencies to draw.
    sampling : {'iid', 'orthogonal', 'qmc', 'leverage'}
        The sampling scheme.
    variant : {'cos', 'cos_sin'}
        Whether the map has random phases (``'cos'``) or cos/sin pairs.
    scale : ndarray, scalar or of shape (n_features,)
        Length scale the unit frequencies are divided by.
    alpha : float
        Ridge regularisation of the leverage scores.
    rng : numpy.random.Generator
        The source of every random draw.
    owner : str
        Name used in error messages.

    Returns
    -------
    weights : ndarray of shape (n_features, n_frequencies)
    offset : ndarray of shape (n_frequencies,)
        Uniform phases for ``variant='cos'``, zeros for ``'cos_sin'``.
    importance : ndarray of shape (n_frequencies,)
        ``1 / sqrt(n_pool q_j)`` for leverage sampling, ones otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit.kernels import KERNELS
    >>> W, b, weights = draw_frequencies(
    ...     KERNELS["gaussian"], np.zeros((4, 2)), 8, sampling="iid", variant="cos",
    ...     scale=np.float64(1.0), alpha=0.1, rng=np.random.default_rng(0), owner="example")
    >>> W.shape, b.shape, weights.tolist() == [1.0] * 8
    ((2, 8), (8,), True)
    """
    n_features = X.shape[1]
    column_scale = scale.reshape(-1, 1) if scale.ndim else scale
    importance = np.ones(n_frequencies)
    if sampling == "iid":
        unit = kernel.sample_frequencies(rng, n_features, n_frequencies)
        offset = rng.uniform(0.0, 2.0 * np.pi, n_frequencies)
    elif sampling == "orthogonal":
        if not kernel.is_isotropic(n_features):
            raise ValueError(
                f"{owner}: sampling='orthogonal' needs an isotropic spectral density "
                f"(gaussian or matern*), but kernel {kernel.name!r} is not isotropic in "
                f"{n_features} dimensions; use sampling='iid' or 'qmc'."
            )
        directions = orthogonal_directions(rng, n_features, n_frequencies)
        if kernel.radial_inverse_cdf is not None:
            radius = kernel.radial_inverse_cdf(rng.uniform(size=n_frequencies), n_features)
        else:  # one dimension: the radius is |omega|
            radius = np.abs(kernel.sample_frequencies(rng, 1, n_frequencies)[0])
        unit = directions * radius
        offset = rng.uniform(0.0, 2.0 * np.pi, n_frequencies)
    elif sampling == "qmc":
        if kernel.spectral_inverse_cdf is None and kernel.radial_inverse_cdf is None:
            raise ValueError(
                f"{owner}: sampling='qmc' needs a per-dimension or radial inverse CDF, "
                f"which kernel {kernel.name!r} does not provide; use sampling='iid'."
            )
        dimension = kernel.qmc_dimension(n_features) + 1
        points = qmc_uniforms(rng, n_frequencies, dimension)
        unit = kernel.frequencies_from_uniforms(points, n_features)
        offset = 2.0 * np.pi * points[:, -1]
    else:  # leverage
        n_pool = _LEVERAGE_POOL_FACTOR * n_frequencies
        pool = kernel.sample_frequencies(rng, n_features, n_pool) / column_scale
        pool_offset = rng.uniform(0.0, 2.0 * np.pi, n_pool)
        if X.shape[0] > _LEVERAGE_MAX_SAMPLES:
            X = X[rng.choice(X.shape[0], _LEVERAGE_MAX_SAMPLES, replace=False)]
        X = X.astype(np.float64)
        if variant == "cos":
            def columns(start, stop):
                return _trig_features(X, pool[:, start:stop], pool_offset[start:stop], "cos")

            scores = ridge_leverage_scores_chunked(columns, X.shape[0], n_pool, alpha)
        else:
            # Columns cos, sin of every frequency, interleaved; scaled by sqrt(2) so that
            # Z Z^T / (2 n_pool) estimates K; a frequency's score sums its two columns.
            def columns(start, stop):
                projection = X @ pool[:, start // 2 : stop // 2]
                interleaved = np.empty((X.shape[0], stop - start))
                interleaved[:, 0::2] = np.cos(projection)
                interleaved[:, 1::2] = np.sin(projection)
                return np.sqrt(2.0) * interleaved

            scores = ridge_leverage_scores_chunked(
                columns, X.shape[0], 2 * n_pool, alpha, chunk=2048
            )
            scores = scores.reshape(-1, 2).sum(axis=1)
        probabilities = scores / scores.sum()
        chosen = rng.choice(n_pool, size=n_frequencies, p=probabilities)
        importance = 1.0 / np.sqrt(n_pool * probabilities[chosen])
        weights = pool[:, chosen]
        offset = pool_offset[chosen] if variant == "cos" else np.zeros(n_frequencies)
        return weights, offset, importance
    if variant == "cos_sin":
        offset = np.zeros(n_frequencies)
    return unit / column_scale, offset, importance


class RandomFourierFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht, 2007).

    Maps ``x`` to ``z(x) = sqrt(2 / D) cos(W^T (x / l) + b)`` with the columns of
    ``W`` drawn from the kernel's spectral density and ``b ~ Uniform(0, 2 pi)``,
    so that ``z(x)^T z(y)`` is an unbiased estimate of ``k((x - y) / l)``.

    Parameters
    ----------
    kernel : str, Kernel or callable, default='gaussian'
        One of ``'gaussian'``, ``'laplacian'``, ``'cauchy'``, ``'matern12'``,
        ``'matern32'``, ``'matern52'``, ``'induced'``, ``'spline'`` (the keys of
        :data:`rffkit.kernels.KERNELS`, formulas in
        :mod:`rffkit.kernels`; for ``'induced'`` with thresholds uniform on a box of
        width ``w``, use ``length_scale = w / 2``), a :class:`rffkit.kernels.Kernel`
        such as ``spline_kernel(order, n_terms)``, or a callable
        ``k(delta)`` of a one-dimensional difference with ``k(0) = 1``, applied per
        dimension (product kernel) and whose spectral density is computed
        numerically; a callable whose transform is not a density raises ``ValueError``.
    n_components : int, default=100
        Number of output features ``D``. With ``variant='cos_sin'`` it must be even
        and ``D / 2`` frequencies are drawn.
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale ``l``; a vector gives an ARD kernel.
    sampling : {'iid', 'orthogonal', 'qmc', 'leverage'}, default='iid'
        How the frequencies are drawn:

        - ``'iid'``: independent draws from ``p(omega)``.
        - ``'orthogonal'``: blocks of ``n_features`` orthogonal directions with radii
          from the radial law of ``p`` (orthogonal random features, Yu et al. 2016).
          Only for isotropic kernels (``gaussian``, ``matern*``; any kernel in 1-D,
          where it reduces to ``'iid'``); others raise ``ValueError``.
        - ``'qmc'``: scrambled Sobol' points (Halton when the number of frequencies
          is not a power of two) pushed through the inverse CDF of ``p`` (per
          dimension, or direction and radius for isotropic densities) and of ``b``.
        - ``'leverage'``: a pool of ``P`` draws, four per frequency (``4 D`` for
          ``'cos'``, ``2 D`` for ``'cos_sin'``), is re-sampled in ``fit`` with
          probabilities ``q_j`` proportional to the ridge leverage scores on ``X``
          (at most 1000 rows) and re-weighted by ``1 / sqrt(P q_j)``
          (Avron et al., 2017; Yu, 2023).
    variant : {'cos', 'cos_sin'}, default='cos'
        ``'cos'``: ``sqrt(2 / D) cos(omega^T x + b)``. ``'cos_sin'``: the ``D / 2``
        pairs ``[cos(omega^T x), sin(omega^T x)] / sqrt(D / 2)`` (no phase; lower
        variance per frequency), cosines first.
    alpha : float, default=0.1
        Ridge parameter ``lambda`` of the leverage scores ``l(omega) = p(omega)
        z_omega(X)^T (K + n lambda I)^{-1} z_omega(X)`` (``sampling='leverage'`` only;
        Li et al., 2019, take ``lambda`` of order ``n^{-1/2}``).
    random_state : int, RandomState instance or None, default=None
        Controls every random draw. Global random state is never modified.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, n_frequencies)
        The frequencies ``W / l`` (already divided by the length scale);
        ``n_frequencies`` is ``n_components`` or ``n_components / 2`` (cos_sin).
    random_offset_ : ndarray of shape (n_frequencies,)
        The phases ``b`` (zeros for ``variant='cos_sin'``).
    importance_weights_ : ndarray of shape (n_frequencies,)
        Per-frequency factors ``sqrt(p / q)``: ones unless ``sampling='leverage'``.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.

    See Also
    --------
    sklearn.kernel_approximation.RBFSampler : the Gaussian-only i.i.d. equivalent.
    rffkit.RandomBinningFeatures : sparse random binning features.

    Notes
    -----
    ``k(x - y) = E_omega[cos(omega^T (x - y))]`` (Bochner) and ``2 cos(a + b) cos(c + b)``
    averages to ``cos(a - c)`` over ``b``, so ``z(x)^T z(y)`` is unbiased and its error
    decays like ``1 / sqrt(D)`` for ``'iid'`` sampling.

    References
    ----------
    A. Rahimi and B. Recht (2007), "Random features for large-scale kernel machines",
    NeurIPS 2007.

    F. X. Yu et al. (2016), "Orthogonal random features", NeurIPS 2016.

    J. Yang et al. (2014), "Quasi-Monte Carlo feature maps for shift-invariant kernels",
    ICML 2014.

    H. Avron et al. (2017), "Random Fourier features for kernel ridge regression:
    approximation bounds and statistical guarantees", ICML 2017.

    Z. Li, J.-F. Ton, D. Oglic and D. Sejdinovic (2019), "Towards a unified analysis of
    random Fourier features", ICML 2019.

    S.-C. Yu (2023), *Efficient approximation of random basis functions for covariance
    kernels*, master's thesis, Technical University of Munich.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> RandomFourierFeatures(n_components=8, random_state=0).fit_transform(X).shape
    (5, 8)
    """

    _parameter_constraints = {
        "kernel": [StrOptions(set(KERNELS)), Kernel, callable],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "length_scale": [Interval(numbers.Real, SMALLEST_LENGTH_SCALE, None, closed="left"), "array-like"],
        "sampling": [StrOptions({"iid", "orthogonal", "qmc", "leverage"})],
        "variant": [StrOptions({"cos", "cos_sin"})],
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        kernel="gaussian",
        n_components=100,
        length_scale=1.0,
        sampling="iid",
        variant="cos",
        alpha=0.1,
        random_state=None,
    ):
        self.kernel = kernel
        self.n_components = n_components
        self.length_scale = length_scale
        self.sampling = sampling
        self.variant = variant
        self.alpha = alpha
        self.random_state = random_state

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the random frequencies and phases for inputs like ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs: only their width matters, and their values for
            ``sampling='leverage'``.
        y : None
            Ignored.

        Returns
        -------
        self : RandomFourierFeatures
            The fitted transformer.
        """
        X = check_input(self, X, dtype=[np.float64, np.float32])
        owner = type(self).__name__
        scale = check_length_scale(self.length_scale, X.shape[1], owner=owner)
        if self.variant == "cos_sin" and self.n_components % 2:
            raise ValueError(
                f"{owner}: variant='cos_sin' outputs cos/sin pairs, so n_components must "
                f"be even; got n_components={self.n_components}."
            )
        n_frequencies = self.n_components // (2 if self.variant == "cos_sin" else 1)
        rng = np.random.default_rng(seed_from_random_state(self.random_state))
        weights, offset, importance = draw_frequencies(
            get_kernel(self.kernel),
            X,
            n_frequencies,
            sampling=self.sampling,
            variant=self.variant,
            scale=scale,
            alpha=self.alpha,
            rng=rng,
            owner=owner,
        )
        self.random_weights_ = weights
        self.random_offset_ = offset
        self.importance_weights_ = importance
        return self

    @within_limits
    def transform(self, X):
        """Map ``X`` to its random Fourier features ``z(X)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs; float32 stays float32, anything else is computed in float64.

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            The features, in the dtype of ``X``.
        """
        check_is_fitted(self)
        X = check_input(self, X, dtype=[np.float64, np.float32], reset=False)
        return self._map(X, lambda values: values.astype(X.dtype, copy=False))

    def _transform_tensor(self, X):
        """``z(X)`` of a float tensor, computed on its device in its dtype.

        For the streamed fits, which compute the features where the statistics are summed
        (a GPU): ``X`` comes from a validated source, so only the map's output is checked.
        """
        check_is_fitted(self)
        return self._map(X, lambda values: torch.as_tensor(values, dtype=X.dtype, device=X.device))

    def _map(self, X, like_X):
        """The map on a NumPy array or a tensor; ``like_X`` puts the fitted arrays in its dtype and place."""
        on_torch = isinstance(X, torch.Tensor)
        cos, sin = (torch.cos, torch.sin) if on_torch else (np.cos, np.sin)
        projection = check_finite_features(type(self).__name__, X @ like_X(self.random_weights_))
        if self.variant == "cos":
            projection += like_X(self.random_offset_)
            cos(projection, out=projection)
        else:
            parts = [cos(projection), sin(projection)]
            projection = torch.cat(parts, dim=1) if on_torch else np.hstack(parts)
        projection *= float(np.sqrt(2.0 / self.n_components))
        importance = like_X(self.importance_weights_)
        if self.variant == "cos_sin":
            importance = importance.repeat(2) if on_torch else np.tile(importance, 2)
        projection *= importance
        return projection

    @property
    def _n_features_out(self):
        """Output width, used by ``get_feature_names_out``."""
        return self.n_components

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
