"""Which input columns does a fitted model rely on? Grouped importances and a bar chart.

RFFNet and SRFF learn one relevance per column of the matrix they are fitted on. In a
:class:`~sklearn.pipeline.Pipeline` that matrix is the output of the preprocessing: a
:class:`~sklearn.compose.ColumnTransformer` turns the categorical column ``color`` into
one indicator column per colour and scales the numeric ones, so the model ranks
``color_red``, ``color_blue``, ... one by one. :func:`grouped_importances` maps every
column the model saw back to the input column it was made from and combines its
importances (:func:`combine_shares`), so the ranking speaks of the columns of the user's
table. :func:`plot_relevances` draws that ranking, or the intervals of a
:class:`~rffkit.RelevanceStability`.

pandas and matplotlib are optional: without pandas the importances come back as a
``dict``; :func:`plot_relevances` needs matplotlib (``pip install "rffkit[plot]"``).
"""

from __future__ import annotations

import numpy as np
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.utils.validation import check_is_fitted

from ._validation import final_estimator
from .stability import RelevanceStability

__all__ = ["grouped_importances", "plot_relevances", "combine_shares"]

_AGGREGATES = ("auto", "norm", "sum", "max")
_INDICATOR_PREFIX = "missingindicator_"  # MissingIndicator's output names, also an imputer's add_indicator ones


def combine_shares(shares, owners, n_columns, aggregate):
    """Combine the shares of the model's columns into one value per input column.

    Parameters
    ----------
    shares : array of shape (m,)
        Non-negative importances of the columns the model saw, summing to 1.
    owners : array of int of shape (m,)
        The input column (``0 .. n_columns - 1``) each of them was made from.
    n_columns : int
    aggregate : {'norm', 'sum', 'max'}
        ``'norm'``: the Euclidean norm of a column's shares, the norms then divided by
        their sum. RFFNet's kernel measures distances as ``sum_j lambda_j^2 (x_j -
        x'_j)^2`` on standardised inputs, where each term has expectation ``2 lambda_j^2``:
        the indicator columns of one input column together weigh in the distance as one
        column of relevance ``sqrt(sum lambda_j^2)`` would (and a linear model's weights
        on them as one weight of that size, the group lasso's group norm; Yuan & Lin,
        2006). ``'sum'``: the shares added up (a tree's impurity importances add up this
        way). ``'max'``: the largest share. A column that the preprocessing passes on as
        one column gets its own share under ``'sum'`` and ``'max'``, and under
        ``'norm'`` too when no column has several.

    Returns
    -------
    values : ndarray of shape (n_columns,)
    """
    owners = np.asarray(owners)
    grouped = np.zeros(n_columns)
    if aggregate == "norm":
        np.add.at(grouped, owners, np.square(shares))
        grouped = np.sqrt(grouped)
        total = grouped.sum()
        return grouped / total if total > 0 else grouped
    (np.add if aggregate == "sum" else np.maximum).at(grouped, owners, shares)
    return grouped


def _resolved(aggregate, model):
    """``'auto'``: ``'norm'`` for rffkit's estimators (relevances of a kernel or weights), else ``'sum'``."""
    if aggregate not in _AGGREGATES:
        raise ValueError(f"grouped_importances: aggregate must be 'auto', 'norm', 'sum' or 'max', got {aggregate!r}.")
    if aggregate != "auto":
        return aggregate
    return "norm" if type(_final(model)).__module__.startswith("rffkit.") else "sum"


def grouped_importances(estimator_or_pipeline, *, aggregate="auto"):
    """Importances of a fitted model, one per original input column, largest first.

    The final estimator's ``feature_importances_`` (one per column it was fitted on)
    are made non-negative and divided by their sum, so each is a share of the model's
    total relevance. When the model ends a :class:`~sklearn.pipeline.Pipeline`, each of
    those columns is traced back through the preprocessing to the input column it came
    from (through a :class:`~sklearn.compose.ColumnTransformer`, with
    ``output_indices_`` and ``transformers_``, through a
    :class:`~sklearn.pipeline.FeatureUnion`, and through nested pipelines, feature
    selectors and column-wise transformers), and the shares of the columns made from
    one input column are combined by ``aggregate`` (:func:`combine_shares`).

    Parameters
    ----------
    estimator_or_pipeline : fitted estimator or Pipeline
        A fitted estimator with ``feature_importances_`` (RFFNet, SRFF, a tree
        ensemble, ...), a fitted Pipeline ending in one, or a fitted search object
        (``GridSearchCV``, ...) whose ``best_estimator_`` is either, or a fitted
        ``TransformedTargetRegressor`` whose regressor is.
    aggregate : {'auto', 'norm', 'sum', 'max'}, default='auto'
        How the shares of the columns made from one input column are combined
        (:func:`combine_shares`); 'auto' is 'norm' for rffkit's estimators and 'sum' for
        others (a tree ensemble's impurity importances add up).

        - ``'norm'``: the Euclidean norm of the shares of a column's indicator columns,
          normalised so that the grouped values sum to 1: the weight of the column in
          RFFNet's kernel distance, or the size of a linear model's weights on it. A
          column of many levels that are noise, each with a small relevance, gains as the
          square root of the number of levels, not in proportion.
        - ``'sum'``: the input column's share of the total relevance. A categorical
          column counts as much as the model uses all of its indicator columns together,
          but a column with many levels collects a small relevance for each, even when it
          is noise (``benchmarks/results/categorical_relevance.md``).
        - ``'max'``: the share of its strongest indicator column. It does not grow with
          the number of levels, but it understates a column whose effect is spread
          over several levels, and the grouped values no longer sum to 1.

        A numeric column that the preprocessing passes on as one column gets the same
        value under every aggregate when no column has several.

    Returns
    -------
    importances : pandas.Series or dict
        One entry per input column, indexed by its name (``feature_names_in_`` when
        the data had column names, else ``'x0'``, ``'x1'``, ...), sorted by decreasing
        importance (ties in input column order). Columns the preprocessing drops get 0.
        A ``dict`` in the same order when pandas is not installed.

    Raises
    ------
    ValueError
        When a column of the preprocessing output cannot be traced to a single input
        column (e.g. an interaction of two columns made by ``PolynomialFeatures``).

    See Also
    --------
    plot_relevances : a bar chart of these importances.
    rffkit.relevance_stability : how much the importances vary over resamples.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import OneHotEncoder, StandardScaler
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> X = pd.DataFrame({"colour": list("rgbrgbrg"), "size": [1., 2, 3, 4, 5, 6, 7, 8]})
    >>> y = [0., 1, 0, 0, 1, 0, 0, 1]
    >>> prep = make_column_transformer((OneHotEncoder(), ["colour"]), (StandardScaler(), ["size"]))
    >>> model = make_pipeline(prep, DecisionTreeRegressor(random_state=0)).fit(X, y)
    >>> grouped_importances(model)
    colour    1.0
    size      0.0
    Name: importance, dtype: float64
    """
    aggregate = _resolved(aggregate, estimator_or_pipeline)
    shares, owners, names = _shares_and_owners(estimator_or_pipeline)
    return _sorted_series(names, combine_shares(shares, owners, len(names), aggregate))


def plot_relevances(estimator_or_pipeline_or_stability, ax=None, top=None, grouped=True, *, aggregate="auto"):
    """Horizontal bar chart of a model's importances, the largest on top.

    Parameters
    ----------
    estimator_or_pipeline_or_stability : fitted estimator, Pipeline or RelevanceStability
        A fitted model as accepted by :func:`grouped_importances`, or the result of
        :func:`rffkit.relevance_stability`, which is drawn by its own
        :meth:`~rffkit.RelevanceStability.plot`: mean importances with their
        percentile intervals and selection frequencies, sorted by mean.
    ax : matplotlib Axes, default=None
        Where to draw; None creates a new figure.
    top : int, default=None
        Show only the ``top`` most important columns.
    grouped : bool, default=True
        Group the importances by original input column (:func:`grouped_importances`);
        False shows one bar per column the final estimator saw, named as the
        preprocessing names them (``get_feature_names_out``). Ignored for a
        RelevanceStability: it holds one interval per column it was computed on, and
        intervals do not add up.
    aggregate : {'auto', 'norm', 'sum', 'max'}, default='auto'
        Passed to :func:`grouped_importances` when ``grouped``.

    Returns
    -------
    ax : matplotlib Axes
    """
    if top is not None and (isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1):
        raise ValueError(f"plot_relevances: top must be a positive integer or None, got {top!r}.")
    plt = _pyplot()
    if isinstance(estimator_or_pipeline_or_stability, RelevanceStability):
        return estimator_or_pipeline_or_stability.plot(ax=ax, sort=True, max_features=top)

    if grouped:
        importances = grouped_importances(estimator_or_pipeline_or_stability, aggregate=aggregate)
        xlabel = ("largest share among its columns" if _resolved(aggregate, estimator_or_pipeline_or_stability) == "max"
                  else "share of the total relevance")
    else:
        shares, _, _ = _shares_and_owners(estimator_or_pipeline_or_stability)
        importances = _sorted_series(_model_input_names(estimator_or_pipeline_or_stability, len(shares)), shares)
        xlabel = "share of the total relevance"
    names, values = _names_and_values(importances)
    names, values = names[:top], values[:top]
    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 0.3 * len(names) + 1.2))
    positions = np.arange(len(names))[::-1]  # the first (largest) bar at the top
    ax.barh(positions, values, color="tab:blue", alpha=0.85)
    ax.set_yticks(positions)
    ax.set_yticklabels([str(name) for name in names], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_title(f"{type(_final(estimator_or_pipeline_or_stability)).__name__} importances", fontsize=9)
    return ax


# -- helpers --------------------------------------------------------------------------


def _pyplot():
    try:
        import matplotlib.pyplot as plt  # optional dependency: imported only to plot
    except ImportError as exc:
        raise ImportError(
            'plot_relevances needs matplotlib, which rffkit does not install by default: pip install "rffkit[plot]" '
            "(or pip install matplotlib)."
        ) from exc
    return plt


def _unwrap(model):
    """A fitted search object stands for its best estimator, a TransformedTargetRegressor for its regressor."""
    model = getattr(model, "best_estimator_", model)
    if isinstance(model, TransformedTargetRegressor) and hasattr(model, "regressor_"):
        return _unwrap(model.regressor_)
    return model


def _final(model):
    """The estimator whose importances are read: the last step of ``model`` (after :func:`_unwrap`), itself
    read through a fitted TransformedTargetRegressor's regressor (one that is a Pipeline stays: its
    preprocessing would follow the outer one's)."""
    final = final_estimator(_unwrap(model))
    while (isinstance(final, TransformedTargetRegressor) and hasattr(final, "regressor_")
           and not isinstance(final.regressor_, Pipeline)):
        final = final.regressor_
    return final


def _shares_and_owners(model):
    """Normalised importances of the final estimator, the input column each comes from, input names."""
    model = _unwrap(model)
    final = _final(model)
    if isinstance(model, Pipeline):
        check_is_fitted(model)
    name = type(final).__name__
    if not hasattr(final, "feature_importances_"):
        raise TypeError(
            f"grouped_importances: the fitted {name} has no feature_importances_; use an estimator that has "
            "(RFFNetRegressor, RFFNetClassifier, SRFFRegressor, a tree ensemble) and fit it first."
        )
    importances = np.abs(np.asarray(final.feature_importances_, dtype=float).ravel())
    if not np.all(np.isfinite(importances)):
        raise ValueError(f"grouped_importances: the fitted {name} has non-finite feature_importances_.")
    total = importances.sum()
    shares = importances / total if total > 0 else importances

    if not isinstance(model, Pipeline) or len(model.steps) == 1:
        names = _input_names(final, importances.shape[0])
        return shares, np.arange(importances.shape[0]), names
    names, owners = _pipeline_owners(model)
    if len(owners) != shares.shape[0]:
        raise ValueError(
            f"grouped_importances: the preprocessing outputs {len(owners)} columns but {name} has "
            f"{shares.shape[0]} feature_importances_."
        )
    return shares, np.asarray(owners, dtype=int), names


def _pipeline_owners(model):
    """Input column names of a fitted Pipeline, and the input column each column of its final estimator comes from.

    Raises ValueError when a column of the preprocessing output cannot be traced to one input column.
    """
    preprocessing = model[:-1]
    names = _input_names(model, None)
    if names is None:
        names = _input_names(preprocessing.steps[0][1], None)
    if names is None:
        raise ValueError("grouped_importances: cannot tell how many input columns the pipeline was fitted on.")
    _, owners = _trace(preprocessing, names)
    return names, owners


def _input_names(fitted, n_features):
    names = getattr(fitted, "feature_names_in_", None)
    if names is not None:
        return [str(name) for name in names]
    n_features = getattr(fitted, "n_features_in_", n_features)
    return None if n_features is None else [f"x{i}" for i in range(n_features)]


def _model_input_names(model, n_columns):
    """Names of the columns the final estimator saw (the preprocessing's output names)."""
    model = _unwrap(model)
    if isinstance(model, Pipeline) and len(model.steps) > 1:
        try:
            return [str(name) for name in model[:-1].get_feature_names_out()]
        except (AttributeError, ValueError):
            pass
    return _input_names(_final(model), n_columns)


def _trace(transformer, names):
    """Output names of a fitted ``transformer`` fed columns ``names``, and each one's input index."""
    if transformer is None or (isinstance(transformer, str) and transformer == "passthrough"):
        return list(names), list(range(len(names)))
    if isinstance(transformer, str) and transformer == "drop":
        return [], []
    if isinstance(transformer, Pipeline):
        out_names, owners = list(names), list(range(len(names)))
        for _, step in transformer.steps:
            out_names, step_owners = _trace(step, out_names)
            owners = [owners[j] for j in step_owners]
        return out_names, owners
    if isinstance(transformer, ColumnTransformer):
        return _trace_column_transformer(transformer, names)
    if isinstance(transformer, FeatureUnion):
        return _trace_feature_union(transformer, names)
    if hasattr(transformer, "get_support"):  # feature selectors keep a subset of their input
        kept = np.flatnonzero(transformer.get_support()).tolist()
        return [names[j] for j in kept], kept
    return _trace_by_name(transformer, names)


def _trace_column_transformer(transformer, names):
    out_names, owners = [], []
    for label, fitted, columns in transformer.transformers_:
        block = transformer.output_indices_[label]
        if block.stop <= block.start:  # dropped, or selected no column
            continue
        indices = _column_indices(columns, names)
        sub_names, sub_owners = _trace(fitted, [names[i] for i in indices])
        if len(sub_owners) != block.stop - block.start:
            raise ValueError(
                f"grouped_importances: the transformer {label!r} of the ColumnTransformer outputs "
                f"{block.stop - block.start} columns but {len(sub_owners)} could be traced to its inputs."
            )
        out_names += sub_names
        owners += [indices[j] for j in sub_owners]
    try:  # the names a next step was fitted on: the ColumnTransformer's own (``num__a`` when prefixed)
        own = [str(name) for name in transformer.get_feature_names_out()]
    except (AttributeError, ValueError, TypeError):
        own = []
    return (own if len(own) == len(owners) else out_names), owners


def _trace_feature_union(union, names):
    """Each fitted part of a FeatureUnion sees every input column: its outputs, one after another."""
    out_names, owners = [], []
    for _, part in union.transformer_list:
        sub_names, sub_owners = _trace(part, names)
        out_names += sub_names
        owners += sub_owners
    try:  # the names a next step was fitted on: the union's own (``standardscaler__age``)
        own = [str(name) for name in union.get_feature_names_out(names)]
    except (AttributeError, ValueError, TypeError):
        own = []
    return (own if len(own) == len(owners) else out_names), owners


def _column_indices(columns, names):
    """Positions in ``names`` of a ColumnTransformer column specification (names, ints, mask, slice)."""
    if isinstance(columns, slice):
        if isinstance(columns.start, str) or isinstance(columns.stop, str):  # label slices include the stop
            start = 0 if columns.start is None else names.index(columns.start)
            stop = len(names) if columns.stop is None else names.index(columns.stop) + 1
            return list(range(start, stop))
        return list(range(len(names)))[columns]
    columns = [columns] if np.isscalar(columns) else list(columns)
    if columns and all(isinstance(c, (bool, np.bool_)) for c in columns):
        return np.flatnonzero(columns).tolist()
    return [names.index(str(c)) if isinstance(c, str) else int(c) for c in columns]


def _trace_by_name(transformer, names):
    """Trace the outputs of a transformer through its ``get_feature_names_out``.

    Outputs named as inputs: column-wise (a scaler; an imputer, which may drop some),
    where a missing-value indicator ``missingindicator_<input>`` (a ``MissingIndicator``,
    an imputer's ``add_indicator=True``) counts toward the input it marks. One input:
    every output comes from it. Otherwise each output must be named after one input
    followed by ``_`` (a one-hot encoder's ``color_red``); when two input names both fit,
    the longer one wins.
    """
    label = type(transformer).__name__
    try:
        out_names = [str(name) for name in transformer.get_feature_names_out(names)]
    except (AttributeError, ValueError, TypeError) as exc:
        raise ValueError(
            f"grouped_importances: cannot trace the columns of {label}: it has no usable get_feature_names_out ({exc})."
        ) from exc
    marked = [_marked_input(name, names) for name in out_names]
    if set(marked) <= set(names):  # column-wise, some columns dropped (an imputer drops all-missing ones)
        return out_names, [list(names).index(name) for name in marked]
    if len(names) == 1:
        return out_names, [0] * len(out_names)
    owners = []
    for out_name in out_names:
        matches = [i for i, name in enumerate(names) if out_name.startswith(f"{name}_")]
        if not matches:
            raise ValueError(
                f"grouped_importances: the output column {out_name!r} of {label} does not come from a single input "
                f"column among {list(names)}; grouping needs each output traced to one input (apply such a "
                "transformer to one column at a time in the ColumnTransformer)."
            )
        owners.append(max(matches, key=lambda i: len(names[i])))
    return out_names, owners


def _marked_input(out_name, names):
    """The input a missing-value indicator column marks (scikit-learn names it ``missingindicator_<input>``),
    else ``out_name`` itself."""
    marked = out_name[len(_INDICATOR_PREFIX):] if out_name.startswith(_INDICATOR_PREFIX) else None
    return marked if marked in names else out_name


def _names_and_values(importances):
    """Names and values of a result of :func:`grouped_importances` (a Series or a dict)."""
    if isinstance(importances, dict):
        return list(importances), np.asarray(list(importances.values()), dtype=float)
    return [str(name) for name in importances.index], importances.to_numpy(dtype=float)


def _sorted_series(names, values):
    order = np.argsort(-np.asarray(values, dtype=float), kind="stable")
    try:
        import pandas as pd  # optional dependency
    except ImportError:
        return {names[i]: float(values[i]) for i in order}
    return pd.Series(np.asarray(values, dtype=float)[order], index=[names[i] for i in order], name="importance")
