"""relevance_stability: selection frequencies, reproducibility, references and errors."""

import numpy as np
import pytest
import scipy.sparse
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rffkit import RelevanceStability, RFFNetRegressor, relevance_stability
from rffkit.datasets import make_jordan_se1


@pytest.fixture(scope="module")
def jordan():
    """Jordan SE1: y = x1 + noise, 18 inputs correlated 0.6^|i-j|; feature 0 is the only relevant one."""
    return make_jordan_se1(800, random_state=0)


@pytest.fixture(scope="module")
def rffnet_result(jordan):
    X, y = jordan
    return relevance_stability(
        # linear_term off: eight fits, each with the kernel-or-linear judge's five refits, took most of a minute
        RFFNetRegressor(max_iter=20, random_state=0, linear_term=False), X, y, n_resamples=8, threshold=0.5,
        random_state=0,
    )


def _forest():
    return RandomForestRegressor(n_estimators=10, max_depth=4)


def test_rffnet_selects_the_relevant_feature(rffnet_result):
    frequency = rffnet_result.selection_frequency
    assert frequency.shape == (18,)
    assert frequency[0] >= 0.8
    assert np.max(frequency[1:]) <= 0.3  # the correlated neighbours and the noise features
    assert_array_equal(rffnet_result.stable_features(0.8), [0])
    assert rffnet_result.selection_rule == "importance > 0.5"


def test_summaries_match_the_importance_matrix(rffnet_result):
    result = rffnet_result
    importances = result.importances
    assert importances.shape == (8, 18) and result.n_resamples == 8
    assert result.resample_size == 400 and result.method == "subsample"
    assert_allclose(result.mean, importances.mean(axis=0))
    assert_allclose(result.std, importances.std(axis=0, ddof=1))
    assert_allclose(result.lower, np.percentile(importances, 5, axis=0))
    assert_allclose(result.upper, np.percentile(importances, 95, axis=0))
    assert np.all(result.lower <= result.mean) and np.all(result.mean <= result.upper)
    assert_array_equal(result.selected, importances > 0.5)
    assert_allclose(result.selection_frequency, result.selected.mean(axis=0))
    # the refits really differ (different subsamples and seeds)
    assert np.all(result.std[1:] > 0)


@pytest.mark.slow  # 9 s: joblib starts two worker processes, each importing torch
def test_rffnet_results_independent_of_n_jobs(jordan, rffnet_result):
    X, y = jordan
    # resample r depends on (random_state, r) only: two resamples reproduce the first two of eight
    again = relevance_stability(
        RFFNetRegressor(max_iter=20, random_state=0, linear_term=False), X, y, n_resamples=2, threshold=0.5,
        random_state=0, n_jobs=2,
    )
    # refits run in other processes; float32 training may round differently with other
    # thread counts, so allow float32-level differences
    assert_allclose(again.importances, rffnet_result.importances[:2], rtol=1e-5, atol=1e-6)
    assert_array_equal(again.selected, rffnet_result.selected[:2])


def test_same_random_state_same_result_and_generic_estimator(jordan):
    X, y = jordan
    kwargs = dict(n_resamples=6, top_k=1, random_state=3)
    first = relevance_stability(_forest(), X, y, **kwargs)
    assert_array_equal(first.importances, relevance_stability(_forest(), X, y, **kwargs).importances)
    assert_array_equal(first.importances, relevance_stability(_forest(), X, y, n_jobs=2, **kwargs).importances)
    other_seed = relevance_stability(_forest(), X, y, n_resamples=6, random_state=4)
    assert not np.array_equal(first.importances, other_seed.importances)
    # a forest finds x1 in every refit
    assert_array_equal(first.selection_frequency, np.eye(18)[0])
    assert_allclose(first.importances.sum(axis=1), 1.0)  # tree importances sum to one


def test_each_refit_gets_its_own_seed(jordan):
    X, y = jordan
    # fraction 1: every refit sees all of the data, so only the derived seeds differ
    result = relevance_stability(_forest(), X, y, n_resamples=3, subsample_fraction=1.0, random_state=0)
    assert result.resample_size == 800
    assert not np.array_equal(result.importances[0], result.importances[1])
    # the estimator's own random_state is replaced by the derived seeds
    other = relevance_stability(
        _forest().set_params(random_state=123), X, y, n_resamples=3, subsample_fraction=1.0, random_state=0
    )
    assert_array_equal(result.importances, other.importances)


def test_nested_random_state_and_attribute_path(jordan):
    X, y = jordan
    pipe = make_pipeline(StandardScaler(), _forest())
    getter = "named_steps.randomforestregressor.feature_importances_"
    kwargs = dict(n_resamples=3, subsample_fraction=1.0, importance_getter=getter, random_state=0)
    result = relevance_stability(pipe, X, y, **kwargs)
    assert not np.array_equal(result.importances[0], result.importances[1])
    assert_array_equal(result.importances, relevance_stability(pipe, X, y, **kwargs).importances)


def test_deterministic_estimator_on_all_data_matches_a_single_fit(jordan):
    """Reference: with fraction 1 and no randomness every row is the full fit's |coef_|."""
    X, y = jordan
    result = relevance_stability(LinearRegression(), X, y, n_resamples=3, subsample_fraction=1.0)
    expected = np.abs(LinearRegression().fit(X, y).coef_)
    for row in result.importances:
        assert_allclose(row, expected, rtol=1e-12)
    assert_allclose(result.std, 0.0, atol=1e-15)


def test_resample_sizes_and_stratification(jordan):
    X, y = jordan
    n_fit = lambda fitted: np.full(X.shape[1], fitted.n_samples_fit_)  # noqa: E731
    half = relevance_stability(KNeighborsRegressor(), X, y, n_resamples=2, importance_getter=n_fit)
    assert_array_equal(half.importances, 400)
    tenth = relevance_stability(
        KNeighborsRegressor(), X, y, n_resamples=2, subsample_fraction=0.1, importance_getter=n_fit
    )
    assert_array_equal(tenth.importances, 80)
    boot = relevance_stability(
        KNeighborsRegressor(), X, y, n_resamples=2, method="bootstrap", importance_getter=n_fit
    )
    assert_array_equal(boot.importances, 800)
    assert boot.subsample_fraction == 1.0

    # classifiers are resampled class by class: the class proportions are kept exactly
    labels = np.r_[np.zeros(700, dtype=int), np.ones(100, dtype=int)]
    prior = lambda fitted: np.r_[fitted.class_prior_, np.zeros(X.shape[1] - 2)]  # noqa: E731
    for method in ("subsample", "bootstrap"):
        strat = relevance_stability(
            DummyClassifier(), X, labels, n_resamples=4, method=method, importance_getter=prior, random_state=0
        )
        assert_allclose(strat.importances[:, :2], np.tile([0.875, 0.125], (4, 1)))


def test_bootstrap_rffnet_intervals(jordan):
    X, y = jordan
    result = relevance_stability(
        RFFNetRegressor(max_iter=20, random_state=0), X[:300], y[:300], n_resamples=4, method="bootstrap",
        subsample_fraction=0.5, percentiles=(0, 100), random_state=0,
    )
    assert_allclose(result.lower, result.importances.min(axis=0))
    assert_allclose(result.upper, result.importances.max(axis=0))
    assert result.selection_rule == "importance > mean of the refit"
    assert_array_equal(result.selected, result.importances > result.importances.mean(axis=1, keepdims=True))
    assert np.all(result.selection_frequency[0] == 1.0)


def test_top_k_selection_and_false_selection_bound(jordan):
    X, y = jordan
    result = relevance_stability(_forest(), X, y, n_resamples=4, top_k=3, random_state=0)
    assert_array_equal(result.selected.sum(axis=1), 3)
    top = np.argsort(-result.importances, axis=1, kind="stable")[:, :3]
    assert all(set(np.flatnonzero(row)) == set(t) for row, t in zip(result.selected, top))
    # Meinshausen & Buehlmann (2010), Theorem 1: q^2 / ((2 pi - 1) p)
    assert result.false_selection_bound(0.9) == pytest.approx(9 / (0.8 * 18))
    with pytest.raises(ValueError, match="min_frequency"):
        result.false_selection_bound(0.5)
    # |coef_| of a linear fit has no ties: exactly half of the 18 lie above the median
    median = relevance_stability(LinearRegression(), X, y, n_resamples=2, threshold="median", random_state=0)
    with pytest.raises(ValueError, match="top_k"):
        median.false_selection_bound(0.9)
    assert_array_equal(median.selected.sum(axis=1), 9)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n_resamples=1), ValueError, "n_resamples must be an integer >= 2"),
        (dict(n_resamples=2.5), ValueError, "n_resamples"),
        (dict(method="jackknife"), ValueError, "method must be 'subsample' or 'bootstrap'"),
        (dict(subsample_fraction=0.0), ValueError, r"subsample_fraction must lie in \(0, 1\]"),
        (dict(subsample_fraction=1.5), ValueError, r"subsample_fraction must lie in \(0, 1\]"),
        (dict(threshold="max"), ValueError, "threshold must be"),
        (dict(threshold=np.nan), ValueError, "threshold must be"),
        (dict(top_k=0), ValueError, "top_k must be a positive integer"),
        (dict(top_k=19), ValueError, "top_k=19 exceeds the number of features"),
        (dict(percentiles=(95, 5)), ValueError, "percentiles"),
        (dict(percentiles=(5,)), ValueError, "percentiles"),
        (dict(importance_getter=3), ValueError, "importance_getter"),
    ],
)
def test_invalid_parameters(jordan, kwargs, error, match):
    X, y = jordan
    with pytest.raises(error, match=match):
        relevance_stability(_forest(), X, y, **kwargs)


def test_invalid_estimators_and_data(jordan):
    X, y = jordan
    with pytest.raises(TypeError, match="neither feature_importances_ nor coef_"):
        relevance_stability(KNeighborsRegressor(), X, y, n_resamples=2)
    with pytest.raises(TypeError, match="is not an attribute of the fitted"):
        relevance_stability(_forest(), X, y, n_resamples=2, importance_getter="relevances_")
    with pytest.raises(ValueError, match="have 2 entries but X has 18 features"):
        relevance_stability(_forest(), X, y, n_resamples=2, importance_getter=lambda fitted: np.ones(2))
    with pytest.raises(TypeError, match="must be a scikit-learn estimator"):
        relevance_stability(object(), X, y)
    with pytest.raises(ValueError, match="X has 800 rows but y has 799; give one target per row"):
        relevance_stability(_forest(), X, y[:-1])
    with pytest.raises(ValueError, match="y must hold one target per row of X; got float"):
        relevance_stability(_forest(), X, 3.0)
    with pytest.raises(ValueError, match="X has 1 row.s.; at least 2 are needed"):
        relevance_stability(_forest(), X[:1], y[:1])
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="contains NaN"):  # the estimator's own check
        relevance_stability(LinearRegression(), X_nan, y)


def test_data_reach_the_refits_as_given():
    """A DataFrame reaches a pipeline whose column transformer selects columns by name, encodes a text
    column and imputes missing values (the check of arrays up front had refused all three); classes
    with a missing label are strata of their own, and the estimator refuses them."""
    pd = pytest.importorskip("pandas")
    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OrdinalEncoder

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200),
                          "colour": rng.choice(["red", "blue"], 200)})
    frame.loc[::17, "b"] = np.nan
    y = 3.0 * frame["a"] + 0.1 * rng.normal(size=200)
    model = make_pipeline(make_column_transformer((SimpleImputer(), ["a", "b"]), (OrdinalEncoder(), ["colour"])),
                          _forest())
    result = relevance_stability(model, frame, y, n_resamples=4, top_k=1, random_state=0)
    assert result.feature_names.tolist() == ["a", "b", "colour"]
    assert_array_equal(result.selection_frequency, [1.0, 0.0, 0.0])
    labels = np.where(frame["a"] > 0, "up", "down").astype(object)
    forest = RandomForestClassifier(n_estimators=5, random_state=0)
    result = relevance_stability(make_pipeline(SimpleImputer(), forest), frame[["a", "b"]], labels, n_resamples=3,
                                 top_k=1, random_state=0)
    assert_array_equal(result.selection_frequency, [1.0, 0.0])
    labels[3] = None
    with pytest.raises((TypeError, ValueError)):
        relevance_stability(make_pipeline(SimpleImputer(), forest), frame[["a", "b"]], labels, n_resamples=2)


def test_plot(rffnet_result):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = rffnet_result.plot(relevant=[0])
    bars = [patch for patch in ax.patches]
    assert len(bars) == 18
    assert_allclose([bar.get_height() for bar in bars], rffnet_result.mean)
    assert bars[0].get_facecolor() != bars[1].get_facecolor()  # the relevant feature stands out
    _, ax2 = plt.subplots()
    assert rffnet_result.plot(ax=ax2, sort=True, max_features=5, show_frequency=False) is ax2
    assert len(ax2.patches) == 5 and ax2.get_xticklabels()[0].get_text() == "0"
    plt.close("all")


def test_result_is_a_frozen_dataclass(rffnet_result):
    assert isinstance(rffnet_result, RelevanceStability)
    with pytest.raises(AttributeError):
        rffnet_result.mean = None
    assert repr(rffnet_result) == (
        "RelevanceStability(n_resamples=8, n_features=18, method='subsample', resample_size=400, "
        "selection='importance > 0.5')"
    )


def test_sparse_input_matches_dense(jordan):
    X, y = jordan
    dense = relevance_stability(LinearRegression(), X, y, n_resamples=3, random_state=0)
    sparse = relevance_stability(LinearRegression(), scipy.sparse.csr_matrix(X), y, n_resamples=3, random_state=0)
    # same resamples; sparse LinearRegression solves by LSQR, hence the tolerance
    assert_allclose(sparse.importances, dense.importances, atol=1e-5)


def test_which_refits_kept_the_linear_only_model(jordan, rffnet_result):
    X, y = jordan
    # linear_term off: always the kernel model; an estimator without linear_only_: None
    assert_array_equal(rffnet_result.linear_only, np.zeros(8, dtype=bool))
    assert relevance_stability(_forest(), X, y, n_resamples=2, random_state=0).linear_only is None
    # y = x1 + noise on 400-row halves: RFFNet (at the end of a pipeline too) keeps ridge regression
    model = make_pipeline(StandardScaler(), RFFNetRegressor(max_iter=20, n_components=60, random_state=0))
    result = relevance_stability(model, X, y, n_resamples=2, top_k=1, random_state=0,
                                 importance_getter="named_steps.rffnetregressor.feature_importances_")
    assert_array_equal(result.linear_only, [True, True])
    assert_array_equal(result.selection_frequency, np.eye(18)[0])


@pytest.fixture(scope="module")
def mixed():
    """A table with a rare category (some half-samples lack it, so a one-hot encoder makes fewer columns)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "blue"], 80)
    colour[7] = "rare"
    frame = pd.DataFrame({"b": rng.normal(size=80), "colour": colour, "a": rng.normal(size=80)})
    return frame, 3.0 * frame["a"] + (frame["colour"] == "red") + 0.1 * rng.normal(size=80)


def _encoded(model):
    from sklearn.compose import make_column_transformer
    from sklearn.preprocessing import OneHotEncoder

    # the encoded colour comes first: the columns the model sees are not in the order of X
    return make_pipeline(make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["colour"]),
                                                 (StandardScaler(), ["a", "b"])), model)


def test_a_series_or_dict_of_importances_is_matched_to_the_columns_by_label(jordan, mixed):
    """grouped_importances returns a Series sorted by value: its values must land on their columns, not in its order."""
    from rffkit.inspection import grouped_importances

    frame, y = mixed
    kwargs = dict(n_resamples=3, random_state=0)
    result = relevance_stability(_encoded(_forest()), frame, y, importance_getter=grouped_importances, **kwargs)
    assert_array_equal(result.selection_frequency, [0.0, 0.0, 1.0])  # a, not the first column
    assert np.all(result.importances[:, 2] > 0.5)
    numeric = frame[["b", "a"]]
    plain = relevance_stability(_forest(), numeric, y, **kwargs).importances
    for getter in (lambda fitted: grouped_importances(fitted).to_dict(),
                   lambda fitted: grouped_importances(fitted)[::-1]):
        assert_allclose(relevance_stability(_forest(), numeric, y, importance_getter=getter, **kwargs).importances,
                        plain)
    X, target = jordan  # no column names: labelled 'x0', 'x1', ...; a default index is positional
    plain = relevance_stability(_forest(), X[:, :3], target, **kwargs).importances  # impurity shares: sum 1
    for getter in (lambda fitted: grouped_importances(fitted)[::-1],
                   lambda fitted: type(frame["a"])(fitted.feature_importances_)):  # a pandas Series
        assert_allclose(relevance_stability(_forest(), X[:, :3], target, importance_getter=getter,
                                            **kwargs).importances, plain)
    with pytest.raises(ValueError, match=r"labelled \['a', 'c'\], which are not the columns of X \(\['b', 'a'\]\)"):
        relevance_stability(_forest(), numeric, y, importance_getter=lambda fitted: {"a": 1.0, "c": 2.0}, **kwargs)


def test_the_default_importances_of_a_pipeline_are_grouped_by_input_column(mixed):
    """Resamples without the rare category have fewer encoded columns; every refit still gives one value per column
    of X: grouped_importances' values (a tree's sum), or in proportion to them (RFFNet's norm)."""
    from rffkit.inspection import grouped_importances

    frame, y = mixed
    kwargs = dict(n_resamples=4, random_state=0)
    widths = relevance_stability(_encoded(_forest()), frame, y, importance_getter=lambda fitted: [
        fitted[-1].n_features_in_] * 3, **kwargs).importances[:, 0]
    assert set(widths) == {4.0, 5.0}
    default = relevance_stability(_encoded(_forest()), frame, y, **kwargs)
    grouped = relevance_stability(_encoded(_forest()), frame, y, importance_getter=grouped_importances, **kwargs)
    assert_allclose(default.importances, grouped.importances)
    assert default.feature_names.tolist() == ["b", "colour", "a"]
    assert_array_equal(default.selection_frequency, [0.0, 0.0, 1.0])
    net = _encoded(RFFNetRegressor(n_components=50, max_iter=5, linear_term=False, random_state=0))
    default = relevance_stability(net, frame, y, **kwargs).importances
    grouped = relevance_stability(net, frame, y, importance_getter=grouped_importances, **kwargs).importances
    assert_allclose(default / default.sum(axis=1, keepdims=True), grouped)
    # an importance per encoded column does not fit the columns of X: a clear message, before stacking the refits
    with pytest.raises(ValueError, match="have [45] entries but X has 3 features; pass an importance_getter"):
        relevance_stability(_encoded(_forest()), frame, y,
                            importance_getter=lambda fitted: fitted[-1].feature_importances_, **kwargs)
