"""The refits of :func:`rffkit.relevance_stability`: resamples drawn per stratum, clones seeded per
refit, and the importances each refit reports with the features they select (Meinshausen &
Bühlmann, 2010)."""

from __future__ import annotations

import operator
from collections.abc import Mapping

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.pipeline import Pipeline
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


def refit(estimator, X, y, rows, seed, importance_getter, columns):
    """``(importances, linear_only)`` of one refit; ``linear_only`` None where the estimator does not say."""
    fitted = with_seeds(estimator, seed).fit(_safe_indexing(X, rows), _safe_indexing(y, rows))
    linear_only = getattr(final_estimator(fitted), "linear_only_", None)
    return importances_of(fitted, importance_getter, columns), None if linear_only is None else bool(linear_only)


def importances_of(fitted, importance_getter, columns):
    """One importance per entry of ``columns`` (the column labels of X) from a fitted estimator."""
    name = type(fitted).__name__
    if callable(importance_getter):
        values = importance_getter(fitted)
    elif importance_getter == "auto":
        values = _auto_importances(fitted)
    else:
        try:
            values = operator.attrgetter(importance_getter)(fitted)
        except AttributeError as exc:
            raise TypeError(
                f"relevance_stability: importance_getter={importance_getter!r} is not an attribute "
                f"of the fitted {name} ({exc})."
            ) from exc
    values = np.asarray(_by_label(values, columns, name), dtype=float).ravel()
    if values.shape[0] != len(columns):
        raise ValueError(
            f"relevance_stability: the importances of {name} have {values.shape[0]} entries but X has "
            f"{len(columns)} features; pass an importance_getter that returns one importance per input feature "
            "(a pipeline whose preprocessing makes several columns of one input column, e.g. one-hot encoding, "
            "needs them grouped back: rffkit.inspection.grouped_importances)."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError(f"relevance_stability: the fitted {name} returned non-finite importances.")
    return values


def _auto_importances(fitted):
    """``feature_importances_``, else ``|coef_|``, of ``fitted`` or else of its final estimator."""
    model = fitted
    if not hasattr(model, "feature_importances_") and not hasattr(model, "coef_"):
        model = final_estimator(model)
    if hasattr(model, "feature_importances_"):
        values = np.asarray(model.feature_importances_, dtype=float).ravel()
    elif hasattr(model, "coef_"):
        coef = np.asarray(model.coef_, dtype=float)
        values = np.abs(coef) if coef.ndim == 1 else np.linalg.norm(coef, axis=0)
    else:
        raise TypeError(
            f"relevance_stability: the fitted {type(fitted).__name__} exposes neither feature_importances_ nor "
            "coef_; use an estimator that does (RFFNetRegressor, SRFFRegressor, a tree ensemble, "
            "a linear model) or pass importance_getter (an attribute path or a callable)."
        )
    return values if model is fitted else _by_input_column(fitted, values)


def _by_input_column(fitted, values):
    """The importances of a pipeline's final estimator grouped by the input column each of its columns comes from.

    The preprocessing is traced as :func:`rffkit.inspection.grouped_importances` traces it, and a
    column's importance is the Euclidean norm (rffkit's estimators) or the sum (others) of the
    importances of the columns made from it: ``grouped_importances`` up to a factor per refit,
    without its division by the total, so that a column-wise preprocessing leaves the values as the
    estimator reports them. Untraceable preprocessing leaves them as they are.
    """
    from .inspection import _pipeline_owners, _resolved  # inspection imports stability, which imports this

    model = getattr(fitted, "best_estimator_", fitted)
    if not isinstance(model, Pipeline) or len(model.steps) == 1:
        return values
    try:
        names, owners = _pipeline_owners(model)
    except ValueError:
        return values
    if len(owners) != values.shape[0] or owners == list(range(len(names))):
        return values
    owners = np.asarray(owners, dtype=int)
    if _resolved("auto", model) == "norm":
        return np.sqrt(np.bincount(owners, weights=np.square(values), minlength=len(names)))
    return np.bincount(owners, weights=np.abs(values), minlength=len(names))


def _by_label(values, columns, name):
    """A pandas Series or a dict of importances put in the order of ``columns``, matched by label."""
    if isinstance(values, Mapping):
        labels, values = list(values), list(values.values())
    elif getattr(values, "ndim", None) == 1 and hasattr(values, "index") and hasattr(values, "to_numpy"):
        labels, values = list(values.index), values.to_numpy()
    else:
        return values
    labels = [str(label) for label in labels]
    if labels == [str(i) for i in range(len(labels))] and set(labels) != {str(c) for c in columns}:
        return values  # a default (positional) index, as pandas.Series(array) has
    position = {str(column): i for i, column in enumerate(columns)}
    if len(position) != len(columns) or sorted(labels) != sorted(position):
        raise ValueError(
            f"relevance_stability: the importances of {name} are labelled {_listed(labels)}, which are not the "
            f"columns of X ({_listed(position)}); a Series or dict of importances needs one entry per column "
            "of X, labelled by its name ('x0', 'x1', ... when X has no column names), matched by label."
        )
    ordered = np.empty(len(labels))
    ordered[[position[label] for label in labels]] = np.asarray(values, dtype=float).ravel()
    return ordered


def _listed(labels, limit=6):
    labels = [str(label) for label in labels]
    return repr(labels[:limit])[:-1] + (", ...]" if len(labels) > limit else "]")


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
