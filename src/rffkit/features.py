"""scikit-learn transformers that map inputs to random features."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .kernels import KERNELS, get_kernel
from ._validation import seed_from_random_state

__all__ = ["RandomFourierFeatures", "check_length_scale"]


def check_length_scale(length_scale, n_features, *, owner):
    """Validate a scalar or per-feature length scale; return it as a float array."""
    scale = np.asarray(length_scale, dtype=np.float64)
    if scale.ndim == 1 and scale.shape[0] != n_features:
        raise ValueError(
            f"{owner}: length_scale has {scale.shape[0]} entries but X has "
            f"{n_features} features; pass a scalar or one value per feature."
        )
    if scale.ndim > 1:
        raise ValueError(f"{owner}: length_scale must be a scalar or a 1-D array.")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError(
            f"{owner}: length_scale must be finite and strictly positive, got {length_scale!r}."
        )
    return scale


class RandomFourierFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht, 2007).

    Maps ``x`` to ``z(x) = sqrt(2 / D) cos(W^T (x / l) + b)`` with the columns of
    ``W`` drawn i.i.d. from the kernel's spectral density and ``b ~ Uniform(0, 2 pi)``,
    so that ``z(x)^T z(y)`` is an unbiased estimate of ``k((x - y) / l)``.

    Parameters
    ----------
    kernel : {'gaussian', 'laplacian', 'cauchy'}, default='gaussian'
        The kernel to approximate (see :mod:`rffkit.kernels` for the formulas).
    n_components : int, default=100
        Number of random features ``D``.
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale ``l``; a vector gives an ARD kernel.
    random_state : int, RandomState instance or None, default=None
        Controls the draw of ``W`` and ``b``. Global random state is never modified.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, n_components)
        The frequencies ``W / l`` (already divided by the length scale).
    random_offset_ : ndarray of shape (n_components,)
        The phases ``b``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.

    See Also
    --------
    sklearn.kernel_approximation.RBFSampler : the Gaussian-only equivalent.

    Notes
    -----
    The Monte-Carlo error of ``z(x)^T z(y)`` decays like ``1 / sqrt(D)``.

    References
    ----------
    A. Rahimi and B. Recht, "Random features for large-scale kernel machines",
    NeurIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> RandomFourierFeatures(n_components=8, random_state=0).fit_transform(X).shape
    (5, 8)
    """

    _parameter_constraints = {
        "kernel": [StrOptions(set(KERNELS))],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "length_scale": [Interval(numbers.Real, 0, None, closed="neither"), "array-like"],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel="gaussian", n_components=100, length_scale=1.0, random_state=None):
        self.kernel = kernel
        self.n_components = n_components
        self.length_scale = length_scale
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the random frequencies and phases for inputs like ``X``."""
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        n_features = X.shape[1]
        scale = check_length_scale(self.length_scale, n_features, owner=type(self).__name__)
        rng = np.random.default_rng(seed_from_random_state(self.random_state))
        unit = get_kernel(self.kernel).sample_frequencies(rng, n_features, self.n_components)
        self.random_weights_ = unit / scale.reshape(-1, 1) if scale.ndim else unit / scale
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, self.n_components)
        return self

    def transform(self, X):
        """Return ``z(X)`` of shape (n_samples, n_components), in the dtype of ``X``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        W = self.random_weights_.astype(X.dtype, copy=False)
        b = self.random_offset_.astype(X.dtype, copy=False)
        projection = X @ W
        projection += b
        np.cos(projection, out=projection)
        projection *= np.sqrt(2.0 / self.n_components).astype(X.dtype)
        return projection

    @property
    def _n_features_out(self):
        """Output width, used by ``get_feature_names_out``."""
        return self.n_components

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
