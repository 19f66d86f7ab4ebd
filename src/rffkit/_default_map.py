"""The width of RFFRidge's and RFFClassifier's feature map: their ``n_components`` parameter.

``features=None`` builds a map of :data:`DEFAULT_N_COMPONENTS` components; ``n_components``,
when not None, sets the width of that map or overrides the ``n_components`` of a map given as
``features`` (:func:`with_width`), as ``random_state`` overrides its seed. :func:`map_width`
is the width a fit will use and :func:`width_parameter` the parameter that lowers it, for
the messages that advise doing so. :func:`default_features` builds the map ``features=None``
stands for, and :func:`warn_if_moments_differ` says when its one length scale cannot suit the columns.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from ._validation import fit_warning
from .features import RandomFourierFeatures

__all__ = [
    "DEFAULT_N_COMPONENTS", "FEATURE_MAP_PARAMETERS", "DefaultFeatureMap", "default_features",
    "default_features_from_moments", "default_features_warned", "map_width",
    "pooled_variance", "warn_if_moments_differ", "width_parameter", "with_width",
]

#: Components of the default feature map (``features=None``, ``n_components=None``).
DEFAULT_N_COMPONENTS = 500

#: The docstring entries of the two parameters, in RFFRidge's and RFFClassifier's.
FEATURE_MAP_PARAMETERS = """    features : transformer or None, default=None
        The feature map, cloned and fitted in ``fit``. None uses Gaussian
        :class:`~rffkit.RandomFourierFeatures` with 500 components (or ``n_components``) and
        length scale ``sqrt(n_features var(X) / 2)`` (scikit-learn's ``gamma='scale'``),
        one for every column: standardise the columns first (a ``StandardScaler`` in a
        pipeline; for a :class:`rffkit.io.TableSource`, which keeps its columns' units,
        ``source.standardized()``), or columns of large values dominate its distances.
    n_components : int or None, default=None
        Width of the feature map: when not None, it overrides the ``n_components`` of the
        map given as ``features`` (as ``random_state`` does); None: the map's own, 500 for
        the default map.
"""


def with_width(features, estimator):
    """``features`` (an unfitted map of ``estimator``'s) with ``estimator.n_components`` components when that is
    not None; a ValueError when the map has no ``n_components`` parameter."""
    if estimator.n_components is None:
        return features
    if "n_components" not in features.get_params(deep=False):
        raise ValueError(
            f"{type(estimator).__name__}: n_components={estimator.n_components!r} sets the width of the feature map, "
            f"and the map given, {type(features).__name__}, has no n_components parameter; leave n_components=None."
        )
    return features.set_params(n_components=estimator.n_components)


def map_width(estimator):
    """Components of the feature map a fit of ``estimator`` uses: ``n_components``, or the given map's own, or
    500 for the default map; None when the given map's is not an integer."""
    width, features = estimator.n_components, estimator.features
    if width is None:
        width = DEFAULT_N_COMPONENTS if features is None else getattr(features, "n_components", None)
    return int(width) if isinstance(width, numbers.Integral) else None


def width_parameter(estimator):
    """The parameter that lowers the width of ``estimator``'s feature map: ``'n_components'``, or
    ``'features__n_components'`` for a map given as ``features`` while ``n_components`` is None."""
    return "features__n_components" if estimator.features is not None and estimator.n_components is None \
        else "n_components"


class DefaultFeatureMap:
    """Mixin of the estimators whose ``features=None`` builds a default map when they fit.

    ``set_params(features__...)`` on the default map has no map to set; it says to set
    ``n_components`` or to give ``features``, instead of scikit-learn's ``AttributeError``
    on None.
    """

    #: Model files written before this parameter existed lack it in the instance: it was None.
    n_components = None

    def set_params(self, **params):
        """Set the parameters of this estimator, as scikit-learn's ``set_params`` does.

        ``features__...`` sets a parameter of the map given as ``features``; with
        ``features=None`` (the default map, built in ``fit``) it raises a ValueError that
        says to set ``n_components`` (the map's width) or to give the map.

        Parameters
        ----------
        **params : dict
            Estimator parameters, nested ones as ``features__length_scale``.

        Returns
        -------
        self : estimator
            This estimator.
        """
        nested = sorted(key for key in params if key.startswith("features__"))
        if nested and params.get("features", self.features) is None:
            width = (f"set n_components={params[nested[0]]!r} (the width of the map), or "
                     if nested[0] == "features__n_components" else "")
            raise ValueError(
                f"{type(self).__name__}: {nested[0]} sets a parameter of the feature map, and features=None (the "
                f"default map, built in fit); {width}give the map, e.g. features=RandomFourierFeatures("
                "n_components=500, length_scale=...), whose parameters features__... then set (in a grid too)."
            )
        return super().set_params(**params)


def default_features(X, random_state):
    """The feature map used when ``features=None`` (an estimator's ``n_components``, when given, sets its width).

    Gaussian random Fourier features with ``DEFAULT_N_COMPONENTS`` (500) components and
    the length scale of scikit-learn's ``gamma='scale'``: ``gamma = 1 / (p var(X))``,
    i.e. ``length_scale = sqrt(p var(X) / 2)`` (``1`` if ``X`` is constant).

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Training inputs; only their width and overall variance are used.
    random_state : int, RandomState instance or None
        Passed to the feature map.

    Returns
    -------
    RandomFourierFeatures
        Unfitted.

    Examples
    --------
    >>> import numpy as np
    >>> features = default_features(np.array([[0.0, 2.0], [2.0, 0.0]]), random_state=0)
    >>> features.n_components, features.length_scale
    (500, 1.0)
    """
    return _default_features(X.shape[1], pooled_variance(*_column_moments(X)), random_state)


def _column_moments(X):
    """The means and variances (ddof 0, float64) of the columns of ``X``; a sparse ``X`` is not made dense."""
    if sp.issparse(X):
        means = np.asarray(X.mean(axis=0, dtype=np.float64)).ravel()
        squares = np.asarray(X.multiply(X).mean(axis=0, dtype=np.float64)).ravel()
        return means, np.maximum(squares - means * means, 0.0)
    X = np.asarray(X)
    return np.mean(X, axis=0, dtype=np.float64), np.var(X, axis=0, dtype=np.float64)


def _default_features(n_features, variance, random_state):
    spread = n_features * variance
    length_scale = float(np.sqrt(spread / 2.0)) if spread > 0 else 1.0
    return RandomFourierFeatures(
        n_components=DEFAULT_N_COMPONENTS, length_scale=length_scale, random_state=random_state
    )


def default_features_from_moments(estimator, n_features, moments, names=None):
    """The map ``features=None`` stands for in a streamed fit, from ``moments`` (a
    :class:`~rffkit._streaming.RunningMoments` of every training row's inputs), after the warning of
    :func:`warn_if_moments_differ` where its one length scale cannot suit the columns."""
    warn_if_moments_differ(estimator, moments.mean, moments.variance, names)
    return _default_features(n_features, pooled_variance(moments.mean, moments.variance), estimator.random_state)


#: Ratio of the pooled variance (which sets the default map's single length scale) to the median
#: column's past which that length scale is too wide for most columns.
_SCALE_RATIO = 1e3


def default_features_warned(estimator, X):
    """:func:`default_features` of ``X`` for ``estimator``, after the warning of :func:`warn_if_moments_differ`
    on ``X``'s column moments: the map ``features=None`` stands for in a fit in memory
    (:func:`default_features_from_moments` in a streamed one)."""
    means, variances = _column_moments(X)
    warn_if_moments_differ(estimator, means, variances, getattr(estimator, "feature_names_in_", None))
    return _default_features(X.shape[1], pooled_variance(means, variances), estimator.random_state)


def _shares(means, variances):
    """Each column's part of the variance of all entries pooled (ddof 0): its variance and its mean's spread."""
    return variances + np.square(means - np.mean(means))


def pooled_variance(means, variances):
    """The variance of all entries of a table pooled, from its columns' means and variances (ddof 0)."""
    return float(np.mean(_shares(means, variances)))


def warn_if_moments_differ(estimator, means, variances, names=None):
    """Warn when one length scale for all columns, set by their :func:`pooled_variance`, cannot suit
    them: past :data:`_SCALE_RATIO` times the median variance of the columns (of those not 0/1
    indicators, when there are such: :func:`~rffkit._source_scaling.zero_one`), the kernel is nearly
    flat along most columns. Unscaled units, a column far from zero or one outlier do it; the column
    that adds most to the pooled variance is named (by ``names`` where given)."""
    from ._source_scaling import zero_one

    means, variances = np.asarray(means, dtype=np.float64), np.asarray(variances, dtype=np.float64)
    varying = variances > 0  # constant columns take no part in the kernel
    indicators = zero_one(means, variances)
    reference = variances[varying & ~indicators] if np.any(varying & ~indicators) else variances[varying]
    if reference.shape[0] == 0 or means.shape[0] < 2:
        return
    median = float(np.median(reference))
    shares = _shares(means, variances)
    pooled = float(shares.mean())
    if not pooled > _SCALE_RATIO * median:
        return
    largest = int(np.argmax(shares))
    column = f"column {names[largest]!r}" if names is not None else f"column {largest}"
    fit_warning(
        f"{type(estimator).__name__}: the default feature map has one length scale for all columns, set by the "
        f"variance of all their values pooled, {pooled:.3g}, which is {pooled / median:.3g} times the median "
        f"column's; {column} adds the most to it (unscaled units, values far from zero, or an outlier), and the "
        "kernel is then nearly flat along the other columns. Standardise the inputs "
        "(sklearn.preprocessing.StandardScaler in a pipeline, or source.standardized() for a table source) or pass "
        "features=RandomFourierFeatures(length_scale=[...]) with one length scale per column.", UserWarning)
