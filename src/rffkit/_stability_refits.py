"""The refits of :func:`rffkit.relevance_stability`: resamples drawn per stratum, clones seeded per
refit, and the importances each refit reports with the features they select (Meinshausen &
Bühlmann, 2010)."""

from __future__ import annotations

import operator

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.utils import _safe_indexing

from ._validation import SEED_BOUND, final_estimator

__all__ = ["importances_of", "refit", "resample", "select", "strata", "stratum_size", "with_seeds"]


def strata(estimator, y, n_rows):
    """Row indices resampled together: one stratum per class (per row of labels, for several
    outputs) for classifiers; missing labels form one of their own, for the estimator to judge."""
    if is_classifier(estimator):
        labels = np.asarray(y, dtype=object).reshape(n_rows, -1).astype(str)
        _, codes = np.unique(labels, axis=0, return_inverse=True)
        codes = codes.reshape(-1)
        return [np.flatnonzero(codes == c) for c in range(codes.max() + 1)]
    return [np.arange(n_rows)]


def stratum_size(n_rows, fraction):
    """Rows drawn from a stratum of ``n_rows``: the ``fraction`` of them, at least one."""
    return max(1, int(np.floor(fraction * n_rows)))


def resample(groups, fraction, method, seed):
    """Sorted row indices of one resample of the strata ``groups``, drawn from its own generator."""
    rng = np.random.default_rng(seed)
    replace = method == "bootstrap"
    parts = [rng.choice(rows, stratum_size(rows.shape[0], fraction), replace=replace) for rows in groups]
    return np.sort(np.concatenate(parts))


def with_seeds(estimator, seed):
    """A clone whose every ``random_state`` parameter (nested ones too) is derived from ``seed``."""
    estimator = clone(estimator)
    keys = sorted(key for key in estimator.get_params(deep=True)
                  if key == "random_state" or key.endswith("__random_state"))
    if keys:
        rng = np.random.RandomState(seed)
        estimator.set_params(**{key: int(rng.randint(SEED_BOUND)) for key in keys})
    return estimator


def refit(estimator, X, y, rows, seed, importance_getter):
    """``(importances, linear_only)`` of one refit; ``linear_only`` None where the estimator does not say."""
    fitted = with_seeds(estimator, seed).fit(_safe_indexing(X, rows), _safe_indexing(y, rows))
    linear_only = getattr(final_estimator(fitted), "linear_only_", None)
    return importances_of(fitted, importance_getter), None if linear_only is None else bool(linear_only)


def importances_of(fitted, importance_getter):
    name = type(fitted).__name__
    if callable(importance_getter):
        values = importance_getter(fitted)
    elif importance_getter == "auto":
        if not hasattr(fitted, "feature_importances_") and not hasattr(fitted, "coef_"):
            fitted = final_estimator(fitted)
        if hasattr(fitted, "feature_importances_"):
            values = fitted.feature_importances_
        elif hasattr(fitted, "coef_"):
            coef = np.asarray(fitted.coef_, dtype=float)
            values = np.abs(coef) if coef.ndim == 1 else np.linalg.norm(coef, axis=0)
        else:
            raise TypeError(
                f"relevance_stability: the fitted {name} exposes neither feature_importances_ nor "
                "coef_; use an estimator that does (RFFNetRegressor, SRFFRegressor, a tree ensemble, "
                "a linear model) or pass importance_getter (an attribute path or a callable)."
            )
    else:
        try:
            values = operator.attrgetter(importance_getter)(fitted)
        except AttributeError as exc:
            raise TypeError(
                f"relevance_stability: importance_getter={importance_getter!r} is not an attribute "
                f"of the fitted {name} ({exc})."
            ) from exc
    values = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(values)):
        raise ValueError(f"relevance_stability: the fitted {name} returned non-finite importances.")
    return values


def select(importances, threshold, top_k):
    """Boolean (n_resamples, n_features) selection and a description of the rule."""
    if top_k is not None:
        order = np.argsort(-importances, axis=1, kind="stable")[:, :top_k]
        selected = np.zeros(importances.shape, dtype=bool)
        np.put_along_axis(selected, order, True, axis=1)
        return selected, f"top {top_k}"
    if threshold == "mean":
        cut, rule = importances.mean(axis=1, keepdims=True), "importance > mean of the refit"
    elif threshold == "median":
        cut, rule = np.median(importances, axis=1, keepdims=True), "importance > median of the refit"
    else:
        cut, rule = float(threshold), f"importance > {threshold:g}"
    return importances > cut, rule
