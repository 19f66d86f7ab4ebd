"""How sure are we that a feature matters? Relevance stability under resampling.

:func:`relevance_stability` refits a model on many random subsamples (or bootstrap
samples) of the data and collects its feature importances: their spread says how much
a single fit's ranking can be trusted, and the fraction of refits in which a feature
is *selected* (importance above a threshold, or among the ``top_k``) is its selection
frequency, the quantity behind stability selection (Meinshausen & Bühlmann, 2010).

Any estimator works that exposes ``feature_importances_`` after ``fit`` (RFFNet,
SRFF, tree ensembles, ...), or ``coef_`` (linear models, through ``|coef_|``), or
whatever an ``importance_getter`` extracts.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_features, _num_samples

from ._stability_refits import refit, resample, select, strata, stratum_size
from ._validation import SEED_BOUND

__all__ = ["RelevanceStability", "relevance_stability"]


@dataclass(frozen=True, repr=False)
class RelevanceStability:
    """Feature importances of one estimator refitted on ``n_resamples`` resamples.

    Returned by :func:`relevance_stability` (a frozen dataclass whose fields are the
    parameters below); every per-feature array has shape ``(n_features,)``.

    Parameters
    ----------
    importances : ndarray of shape (n_resamples, n_features)
        The importances of each refit (one row per resample), as the estimator reports
        them (RFFNet: ``|lambda|`` scaled to [0, 1]; trees: impurity decrease summing to 1),
        one per column of ``X`` (a pipeline's are grouped by input column, see
        ``importance_getter`` of :func:`relevance_stability`).
    selected : ndarray of bool, shape (n_resamples, n_features)
        Whether the feature was selected in that refit.
    mean, std : ndarray of shape (n_features,)
        Mean and standard deviation (``ddof=1``) of the importances over the resamples.
    lower, upper : ndarray of shape (n_features,)
        The ``percentiles`` of the importances over the resamples (an empirical interval).
    selection_frequency : ndarray of shape (n_features,)
        Fraction of the resamples in which the feature was selected.
    percentiles : tuple of float
        The percentiles behind ``lower`` and ``upper``.
    selection_rule : str
        How a feature counts as selected, e.g. ``'importance > 0.5'`` or ``'top 3'``.
    method : str
        'subsample' or 'bootstrap'.
    subsample_fraction : float
        The resample size as a fraction of the data (per class for classifiers).
    resample_size : int
        Samples drawn per resample.
    feature_names : ndarray of str or None
        Column names of ``X`` when it had string column names.
    top_k : int or None
        ``k`` when features were selected as the ``top_k`` largest importances.
    n_features_total : int
        Number of features ``p`` (used by :meth:`false_selection_bound`).
    linear_only : ndarray of bool, shape (n_resamples,), or None
        For an estimator with ``linear_only_`` (RFFNet, also at the end of a pipeline):
        whether each refit kept the linear-only model, whose importances are the sizes of
        its weights rather than the kernel's relevances (``importances[~linear_only]``
        keeps the kernel refits); None for other estimators.

    Attributes
    ----------
    n_resamples : int
        Number of refits (rows of ``importances``).

    See Also
    --------
    relevance_stability : the function that computes it.
    rffkit.inspection.plot_relevances : draws it with its intervals.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> from rffkit.datasets import make_jordan_se1
    >>> X, y = make_jordan_se1(200, n_features=4, random_state=0)
    >>> result = relevance_stability(LinearRegression(), X, y, n_resamples=4, top_k=1, random_state=0)
    >>> result.n_resamples, result.stable_features(0.75).tolist()
    (4, [0])
    """

    importances: np.ndarray
    selected: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    selection_frequency: np.ndarray
    percentiles: tuple
    selection_rule: str
    method: str
    subsample_fraction: float
    resample_size: int
    feature_names: np.ndarray | None = None
    top_k: int | None = None
    n_features_total: int = field(default=0)
    linear_only: np.ndarray | None = None

    @property
    def n_resamples(self):
        return self.importances.shape[0]

    def __repr__(self):
        return (
            f"RelevanceStability(n_resamples={self.n_resamples}, n_features={self.importances.shape[1]}, "
            f"method={self.method!r}, resample_size={self.resample_size}, selection={self.selection_rule!r})"
        )

    def stable_features(self, min_frequency=0.8):
        """Indices of the features selected in at least ``min_frequency`` of the resamples.

        Parameters
        ----------
        min_frequency : float in (0, 1], default=0.8
            The cut-off ``pi`` on the selection frequency.

        Returns
        -------
        ndarray of int
            The feature indices, in increasing order.
        """
        if not 0 < min_frequency <= 1:
            raise ValueError(f"stable_features: min_frequency must lie in (0, 1], got {min_frequency!r}.")
        return np.flatnonzero(self.selection_frequency >= min_frequency)

    def false_selection_bound(self, min_frequency):
        """Meinshausen & Bühlmann's bound on the expected number of false selections.

        ``E[V] <= k^2 / ((2 pi - 1) p)`` for the features kept at frequency
        ``pi = min_frequency`` (Theorem 1 of the paper, for ``pi > 1/2``), with
        ``k = top_k`` features selected per resample out of ``p``. It assumes
        subsamples of half the data and that the noise features are exchangeable and
        the selector no worse than random guessing, so it is only offered for
        ``method='subsample'``, ``subsample_fraction=0.5`` and ``top_k`` selection.

        Parameters
        ----------
        min_frequency : float in (0.5, 1]
            The cut-off ``pi`` on the selection frequency.

        Returns
        -------
        float
            The bound on the expected number of noise features kept.

        References
        ----------
        N. Meinshausen and P. Bühlmann (2010), "Stability selection", Journal of the
        Royal Statistical Society: Series B, 72(4):417-473.
        """
        if self.top_k is None or self.method != "subsample" or self.subsample_fraction != 0.5:
            raise ValueError(
                "false_selection_bound needs method='subsample', subsample_fraction=0.5 and "
                "top_k selection (a fixed number k of selected features per resample)."
            )
        if not 0.5 < min_frequency <= 1:
            raise ValueError(f"false_selection_bound: min_frequency must lie in (0.5, 1], got {min_frequency!r}.")
        return self.top_k**2 / ((2 * min_frequency - 1) * self.n_features_total)

    def plot(self, ax=None, *, relevant=None, sort=False, max_features=None, show_frequency=True):
        """Bar chart of the mean importances with their percentile intervals.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw; None creates a new figure.
        relevant : array-like of int, default=None
            Indices of truly relevant features, drawn in a different colour.
        sort : bool, default=False
            Order the bars by decreasing mean importance.
        max_features : int, default=None
            Show only this many features (the first, or the largest with ``sort``).
        show_frequency : bool, default=True
            Also print each feature's selection frequency above its bar.

        Returns
        -------
        ax : matplotlib Axes
        """
        import matplotlib.pyplot as plt  # optional dependency: imported only to plot

        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 0.4 * self.mean.shape[0] + 1.5), 3.2))
        order = np.argsort(-self.mean, kind="stable") if sort else np.arange(self.mean.shape[0])
        if max_features is not None:
            order = order[:max_features]
        relevant = set() if relevant is None else {int(i) for i in np.atleast_1d(relevant)}
        colours = ["tab:red" if i in relevant else "tab:blue" for i in order]
        positions = np.arange(order.shape[0])
        mean = self.mean[order]
        errors = np.vstack([mean - self.lower[order], self.upper[order] - mean])
        ax.bar(positions, mean, color=colours, alpha=0.8)
        ax.errorbar(positions, mean, yerr=np.clip(errors, 0, None), fmt="none", ecolor="black", capsize=2, lw=1)
        labels = self.feature_names[order] if self.feature_names is not None else [str(i) for i in order]
        ax.set_xticks(positions)
        ax.set_xticklabels(labels, rotation=90 if order.shape[0] > 20 else 0, fontsize=8)
        ax.set_xlabel("feature")
        low, high = self.percentiles
        ax.set_ylabel(f"importance (mean, {low:g}-{high:g}%)")
        if show_frequency:
            top = float(np.max(self.upper[order])) if order.shape[0] else 1.0
            for x, i in zip(positions, order):
                ax.text(x, self.upper[i] + 0.02 * top, f"{self.selection_frequency[i]:.2f}",
                        ha="center", va="bottom", fontsize=6, rotation=90)
            ax.set_ylim(0, 1.2 * top if top > 0 else 1.0)
        ax.set_title(f"{self.n_resamples} {self.method} refits; selected: {self.selection_rule}", fontsize=9)
        return ax


def relevance_stability(
    estimator,
    X,
    y,
    *,
    n_resamples=20,
    method="subsample",
    subsample_fraction=None,
    threshold="mean",
    top_k=None,
    percentiles=(5, 95),
    importance_getter="auto",
    n_jobs=None,
    random_state=None,
):
    """Refit ``estimator`` on resamples of ``(X, y)`` and summarise its feature importances.

    Each refit uses a clone of ``estimator`` on its own resample; when the estimator
    (or any estimator nested in it, e.g. a pipeline step) has a ``random_state``
    parameter, each clone gets its own seed derived from ``random_state``. Resample
    ``r`` and its seeds depend only on ``random_state`` and ``r``, so results do not
    depend on ``n_jobs``, and a run with more resamples extends one with fewer.

    Parameters
    ----------
    estimator : estimator object
        Unfitted; must expose importances after ``fit`` (see ``importance_getter``).
    X : array-like, sparse matrix or DataFrame of shape (n_samples, n_features)
        Training inputs, passed to the refits as they are (rows taken with scikit-learn's
        indexing): a pipeline that selects DataFrame columns by name, encodes text or
        imputes missing values receives them as ``estimator.fit`` would.
    y : array-like of shape (n_samples,)
        Targets.
    n_resamples : int, default=20
        Number of refits (at least 2).
    method : {'subsample', 'bootstrap'}, default='subsample'
        'subsample' draws ``subsample_fraction * n_samples`` rows without replacement
        (stability selection); 'bootstrap' draws that many rows with replacement.
    subsample_fraction : float in (0, 1], default=None
        Resample size as a fraction of ``n_samples``. None means 0.5 for 'subsample'
        (Meinshausen & Bühlmann's choice) and 1.0 for 'bootstrap'. For classifiers
        each class is resampled separately at this fraction (at least one row each).
    threshold : float, 'mean' or 'median', default='mean'
        A feature is selected in a refit when its importance is strictly above this
        value; 'mean' and 'median' use the mean or median of that refit's importances,
        which suits any scale. Ignored when ``top_k`` is given.
    top_k : int, default=None
        Select instead the ``top_k`` largest importances of each refit (ties broken by
        the lower feature index). This is the selection of the error bound in
        :meth:`RelevanceStability.false_selection_bound`.
    percentiles : tuple of two floats, default=(5, 95)
        Percentiles of the interval reported in ``lower`` and ``upper``.
    importance_getter : 'auto', str or callable, default='auto'
        'auto' reads ``feature_importances_`` and falls back on ``|coef_|`` (the norm
        over outputs for 2-D ``coef_``), of the fitted estimator or else of a pipeline's
        last step. A pipeline's preprocessing is traced back to the columns of ``X`` as
        :func:`rffkit.inspection.grouped_importances` traces it, and the importances of
        the columns made from one column of ``X`` (a one-hot encoder's indicators, an
        imputer's missing-value indicator) are combined into one: their Euclidean norm
        for rffkit's estimators, their sum for others (preprocessing that keeps one
        column per column of ``X``, in order, leaves the values as the estimator reports
        them). A string is a dotted attribute path of the fitted estimator (e.g.
        ``'named_steps.model.feature_importances_'``); a callable takes the fitted
        estimator and returns the importances (e.g. ``grouped_importances``). An array
        must hold one value per column of ``X``, in order; a pandas Series or a dict is
        matched to the columns of ``X`` by its labels (``'x0'``, ``'x1'``, ... when
        ``X`` has no column names), which must be exactly those columns.
    n_jobs : int, default=None
        Parallel refits through joblib (None: one, unless in a ``parallel_config``).
    random_state : int, RandomState instance or None, default=None
        Seeds the resamples and the refits.

    Returns
    -------
    result : RelevanceStability
        The importances of every refit and their summaries.

    See Also
    --------
    RelevanceStability : the result and its plot.

    Notes
    -----
    Stability selection keeps the features whose selection frequency over subsamples
    of half the data exceeds a cut-off ``pi`` in (0.6, 0.9); with ``k`` features
    selected per subsample out of ``p``, the expected number of falsely kept features
    is at most ``k^2 / ((2 pi - 1) p)`` under the paper's exchangeability assumption.
    The percentile interval describes the variability of the importances across
    resamples of a smaller size than the data; it is not a confidence interval for the
    importance of a fit on all of the data.

    References
    ----------
    N. Meinshausen and P. Bühlmann (2010), "Stability selection", Journal of the Royal
    Statistical Society: Series B, 72(4):417-473.

    Examples
    --------
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from rffkit.datasets import make_jordan_se1
    >>> from rffkit.stability import relevance_stability
    >>> X, y = make_jordan_se1(200, n_features=5, random_state=0)
    >>> forest = RandomForestRegressor(n_estimators=10, random_state=0)
    >>> result = relevance_stability(forest, X, y, n_resamples=5, top_k=1, random_state=0)
    >>> result.selection_frequency
    array([1., 0., 0., 0., 0.])
    """
    _check_parameters(estimator, n_resamples, method, subsample_fraction, threshold, top_k, percentiles,
                      importance_getter)
    feature_names = _feature_names(X)
    n_rows, n_features = _rows_and_columns(X, y)
    if top_k is not None and top_k > n_features:
        raise ValueError(f"relevance_stability: top_k={top_k} exceeds the number of features ({n_features}).")
    fraction = subsample_fraction if subsample_fraction is not None else (0.5 if method == "subsample" else 1.0)
    groups = strata(estimator, y, n_rows)

    rng = check_random_state(random_state)
    # Row r holds the seeds of resample r, so the first k resamples are the same
    # whatever n_resamples >= k is (a run can be extended) and whatever n_jobs is.
    seeds = rng.randint(SEED_BOUND, size=(n_resamples, 2))
    columns = list(X.columns) if hasattr(X, "columns") else [f"x{i}" for i in range(n_features)]
    jobs = (
        delayed(refit)(estimator, X, y, resample(groups, fraction, method, resample_seed), estimator_seed,
                        importance_getter, columns)
        for resample_seed, estimator_seed in seeds
    )
    refits = Parallel(n_jobs=n_jobs)(jobs)  # each refit checks it has one importance per column
    importances = np.vstack([values for values, _ in refits])
    flags = [flag for _, flag in refits]
    linear_only = None if any(flag is None for flag in flags) else np.array(flags, dtype=bool)

    selected, rule = select(importances, threshold, top_k)
    lower, upper = np.percentile(importances, percentiles, axis=0)
    return RelevanceStability(
        importances=importances,
        selected=selected,
        mean=importances.mean(axis=0),
        std=importances.std(axis=0, ddof=1),
        lower=lower,
        upper=upper,
        selection_frequency=selected.mean(axis=0),
        percentiles=tuple(float(q) for q in percentiles),
        selection_rule=rule,
        method=method,
        subsample_fraction=float(fraction),
        resample_size=int(sum(stratum_size(indices.shape[0], fraction) for indices in groups)),
        feature_names=feature_names,
        top_k=top_k,
        n_features_total=n_features,
        linear_only=linear_only,
    )


# -- helpers --------------------------------------------------------------------------


def _check_parameters(estimator, n_resamples, method, subsample_fraction, threshold, top_k, percentiles,
                      importance_getter):
    where = "relevance_stability"
    if not hasattr(estimator, "fit") or not hasattr(estimator, "get_params"):
        raise TypeError(f"{where}: estimator must be a scikit-learn estimator with fit and get_params, "
                        f"got {type(estimator).__name__}.")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 2:
        raise ValueError(f"{where}: n_resamples must be an integer >= 2 (importances need a spread), "
                         f"got {n_resamples!r}.")
    if method not in ("subsample", "bootstrap"):
        raise ValueError(f"{where}: method must be 'subsample' or 'bootstrap', got {method!r}.")
    if subsample_fraction is not None and (
        isinstance(subsample_fraction, bool)
        or not isinstance(subsample_fraction, numbers.Real)
        or not 0 < subsample_fraction <= 1
    ):
        raise ValueError(f"{where}: subsample_fraction must lie in (0, 1], got {subsample_fraction!r}.")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1):
        raise ValueError(f"{where}: top_k must be a positive integer or None, got {top_k!r}.")
    if top_k is None and not (
        threshold in ("mean", "median")
        or (isinstance(threshold, numbers.Real) and not isinstance(threshold, bool) and np.isfinite(threshold))
    ):
        raise ValueError(f"{where}: threshold must be a finite number, 'mean' or 'median', got {threshold!r}.")
    if (
        len(np.atleast_1d(percentiles)) != 2
        or not np.all(np.isfinite(np.asarray(percentiles, dtype=float)))
        or not 0 <= percentiles[0] <= percentiles[1] <= 100
    ):
        raise ValueError(f"{where}: percentiles must be two numbers 0 <= low <= high <= 100, got {percentiles!r}.")
    if not (importance_getter == "auto" or isinstance(importance_getter, str) or callable(importance_getter)):
        raise ValueError(f"{where}: importance_getter must be 'auto', an attribute path or a callable, "
                         f"got {importance_getter!r}.")


def _feature_names(X):
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    names = np.asarray(columns, dtype=object)
    return names.astype(str) if all(isinstance(name, str) for name in names) else None


def _rows_and_columns(X, y):
    """Rows and columns of ``X``, checked against ``y``; the values are the estimator's to check."""
    try:
        n_rows, n_features = _num_samples(X), _num_features(X)
    except TypeError as error:
        raise ValueError(f"relevance_stability: X must be a table of rows and columns: {error}") from None
    try:
        n_targets = _num_samples(y)
    except TypeError:
        raise ValueError(f"relevance_stability: y must hold one target per row of X; got {type(y).__name__}.") from None
    if n_targets != n_rows:
        raise ValueError(f"relevance_stability: X has {n_rows} rows but y has {n_targets}; give one target per row.")
    if n_rows < 2:
        raise ValueError(f"relevance_stability: X has {n_rows} row(s); at least 2 are needed to resample.")
    return n_rows, n_features
