"""rffkit.inspection: importances traced back to the input columns, and their bar chart."""

import sys

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.feature_selection import VarianceThreshold
from sklearn.impute import SimpleImputer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures, StandardScaler

from rffkit import RFFNetRegressor, relevance_stability
from rffkit.inspection import grouped_importances, plot_relevances

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


class FixedImportances(RegressorMixin, BaseEstimator):
    """A final estimator whose importances are given, so the grouping can be checked by hand."""

    def __init__(self, importances=None):
        self.importances = importances

    def fit(self, X, y):
        self.n_features_in_ = np.asarray(X).shape[1]
        self.feature_importances_ = np.asarray(self.importances, dtype=float)
        return self

    def predict(self, X):
        return np.zeros(np.asarray(X).shape[0])


def _bar_labels(ax):
    """(label, width) of each horizontal bar, top to bottom."""
    labels = {round(tick.get_position()[1]): tick.get_text() for tick in ax.get_yticklabels()}
    bars = sorted(ax.patches, key=lambda bar: -bar.get_y())
    return [(labels[round(bar.get_y() + bar.get_height() / 2)], bar.get_width()) for bar in bars]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    n = 30
    return pd.DataFrame({
        "cut": rng.choice(["a", "b", "c"], n),
        "color": rng.choice(["x", "y"], n),
        "carat": rng.normal(size=n),
        "depth": rng.normal(size=n),
    }), rng.normal(size=n)  # fmt: skip


def _pipeline(importances, **column_transformer):
    preprocessing = ColumnTransformer(
        [("cat", OneHotEncoder(), ["cut", "color"]), ("num", StandardScaler(), ["carat", "depth"])],
        **column_transformer,
    )
    return Pipeline([("prep", preprocessing), ("model", FixedImportances(importances))])


# columns after the preprocessing: cut_a cut_b cut_c color_x color_y carat depth; sum 20
IMPORTANCES = [1.0, 2.0, 3.0, 4.0, 0.0, 7.0, 3.0]


def test_sum_adds_the_shares_of_each_columns_dummies(table):
    X, y = table
    model = _pipeline(IMPORTANCES).fit(X, y)
    assert list(model[:-1].get_feature_names_out()) == [
        "cat__cut_a", "cat__cut_b", "cat__cut_c", "cat__color_x", "cat__color_y", "num__carat", "num__depth"]  # fmt: skip
    result = grouped_importances(model)
    assert isinstance(result, pd.Series)
    # carat 7/20, cut (1 + 2 + 3)/20, color (4 + 0)/20, depth 3/20, largest first
    assert list(result.index) == ["carat", "cut", "color", "depth"]
    assert_allclose(result.to_numpy(), [0.35, 0.30, 0.20, 0.15])
    assert result.sum() == pytest.approx(1.0)


def test_norm_takes_the_norm_of_each_columns_dummies_and_sums_to_one(table):
    X, y = table
    result = grouped_importances(_pipeline(IMPORTANCES).fit(X, y), aggregate="norm")
    # before normalising: carat 7, cut sqrt(1 + 4 + 9) = 3.742, color sqrt(16 + 0) = 4, depth 3 (over 20)
    norms = np.array([7.0, 4.0, np.sqrt(14.0), 3.0])
    assert list(result.index) == ["carat", "color", "cut", "depth"]
    assert_allclose(result.to_numpy(), norms / norms.sum())
    assert result.sum() == pytest.approx(1.0)


def test_auto_is_the_norm_for_rffkit_estimators_and_the_sum_for_others(table):
    """A tree's impurity importances add up over a column's dummies; RFFNet's relevances combine by their norm."""
    from sklearn.tree import DecisionTreeRegressor

    from rffkit import RFFNetRegressor

    X, y = table
    prep = ColumnTransformer([("cat", OneHotEncoder(), ["cut", "color"]), ("num", StandardScaler(), ["carat", "depth"])])
    tree = Pipeline([("prep", prep), ("model", DecisionTreeRegressor(max_depth=3, random_state=0))]).fit(X, y)
    assert grouped_importances(tree).to_dict() == grouped_importances(tree, aggregate="sum").to_dict()
    net = Pipeline([("prep", prep), ("model", RFFNetRegressor(n_components=50, max_iter=5, random_state=0))]).fit(X, y)
    assert grouped_importances(net).to_dict() == grouped_importances(net, aggregate="norm").to_dict()
    assert grouped_importances(net).to_dict() != grouped_importances(net, aggregate="sum").to_dict()


def test_max_takes_the_strongest_dummy_and_ties_keep_column_order(table):
    X, y = table
    result = grouped_importances(_pipeline(IMPORTANCES).fit(X, y), aggregate="max")
    # carat 7/20, color max(4, 0)/20, cut max(1, 2, 3)/20 and depth 3/20 tie: cut comes first in X
    assert list(result.index) == ["carat", "color", "cut", "depth"]
    assert_allclose(result.to_numpy(), [0.35, 0.20, 0.15, 0.15])


def test_remainder_dropped_columns_nested_pipelines_and_selectors(table):
    X, y = table
    X = X.assign(extra=np.arange(len(X), dtype=float), ignored=1.0)
    categorical = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(drop="first"))
    preprocessing = ColumnTransformer(
        [("cat", categorical, ["cut", "color"]), ("num", StandardScaler(), ["carat", "depth"]),
         ("gone", "drop", ["ignored"])],
        remainder="passthrough",
    )  # fmt: skip
    # outputs: cut_b cut_c color_y carat depth extra; VarianceThreshold keeps all six
    model = make_pipeline(preprocessing, VarianceThreshold(), FixedImportances([1, 1, 2, 0, 4, 2])).fit(X, y)
    result = grouped_importances(model)
    # every input column is listed; the one the preprocessing drops gets 0
    assert result.to_dict() == pytest.approx(
        {"depth": 0.4, "cut": 0.2, "color": 0.2, "extra": 0.2, "carat": 0.0, "ignored": 0.0})
    assert list(result.index) == ["depth", "cut", "color", "extra", "carat", "ignored"]
    # an imputer drops a column without any value: its outputs are the other columns, by name
    X = X.assign(empty=np.nan)
    imputed = ColumnTransformer([("num", SimpleImputer(), ["carat", "empty", "depth"])])
    with pytest.warns(UserWarning, match="Skipping features without any observed values"):
        model = make_pipeline(imputed, FixedImportances([1, 3])).fit(X, y)
    result = grouped_importances(model)
    assert result[["depth", "carat", "empty"]].to_list() == pytest.approx([0.75, 0.25, 0.0]) and result.sum() == 1.0


def test_columns_given_by_position_mask_and_a_search_object(table):
    X, y = table
    preprocessing = ColumnTransformer(
        [("cat", OneHotEncoder(categories=[["a", "b", "c"]]), [0]), ("num", StandardScaler(), [False, False, True, True])]
    )
    search = GridSearchCV(
        Pipeline([("prep", preprocessing), ("model", FixedImportances())]),
        {"model__importances": [[0, 0, 1, 1, 2]]},
        cv=2,
    ).fit(X[["cut", "color", "carat", "depth"]], y)
    # outputs cut_a cut_b cut_c carat depth; color is not used
    result = grouped_importances(search)
    assert result.to_dict() == pytest.approx({"depth": 0.5, "cut": 0.25, "carat": 0.25, "color": 0.0})


def test_a_feature_union_and_a_transformed_target_are_traced(table):
    """Every part of a FeatureUnion sees all input columns (outputs carat depth, then carat depth cut_a
    cut_b cut_c); a TransformedTargetRegressor is read through its
    fitted regressor."""
    X, y = table
    numeric = X[["carat", "depth"]]
    union = FeatureUnion([("scaled", ColumnTransformer([("num", StandardScaler(), ["carat", "depth"])])),
                          ("both", ColumnTransformer([("num", "passthrough", ["carat", "depth"]),
                                                      ("cat", OneHotEncoder(), ["cut"])]))])
    model = Pipeline([("union", union), ("model", FixedImportances([1.0, 2.0, 3.0, 0.0, 1.0, 1.0, 2.0]))])
    result = grouped_importances(model.fit(X[["carat", "depth", "cut"]], y), aggregate="sum")
    assert result.to_dict() == pytest.approx({"depth": 0.2, "carat": 0.4, "cut": 0.4})
    wrapped = TransformedTargetRegressor(FixedImportances([1.0, 3.0]), func=np.exp, inverse_func=np.log,
                                         check_inverse=False).fit(numeric, y)
    assert grouped_importances(wrapped).to_dict() == pytest.approx({"x1": 0.75, "x0": 0.25})
    ending = Pipeline([("scale", StandardScaler()), ("model", clone(wrapped))]).fit(numeric, y)
    assert grouped_importances(ending).to_dict() == pytest.approx({"depth": 0.75, "carat": 0.25})
    assert plot_relevances(ending).get_title() == "FixedImportances importances"


def test_bare_estimator_uses_feature_names_or_positions(table):
    X, y = table
    numeric = X[["carat", "depth"]]
    result = grouped_importances(FixedImportances([1.0, 3.0]).fit(numeric, y))
    assert list(result.index) == ["x1", "x0"]  # FixedImportances keeps no column names
    model = RFFNetRegressor(max_iter=5, random_state=0).fit(numeric, y)
    named = grouped_importances(model)
    assert set(named.index) == {"carat", "depth"}
    expected = model.feature_importances_ / model.feature_importances_.sum()
    assert_allclose(named[["carat", "depth"]].to_numpy(), expected)
    assert named.iloc[0] >= named.iloc[1]


def test_rffnet_pipeline_groups_to_the_input_columns(table):
    X, y = table
    preprocessing = ColumnTransformer([("cat", OneHotEncoder(), ["cut", "color"]),
                                       ("num", StandardScaler(), ["carat", "depth"])])
    model = make_pipeline(preprocessing, RFFNetRegressor(max_iter=5, random_state=0)).fit(X, y)
    result = grouped_importances(model)
    assert sorted(result.index) == ["carat", "color", "cut", "depth"]
    assert result.sum() == pytest.approx(1.0)
    shares = model[-1].feature_importances_ / model[-1].feature_importances_.sum()
    norms = [np.linalg.norm(shares[:3]), np.linalg.norm(shares[3:5]), shares[5], shares[6]]  # cut, color, carat, depth
    assert result["cut"] == pytest.approx(norms[0] / sum(norms))


def test_without_pandas_a_dict_in_the_same_order(table, monkeypatch):
    X, y = table
    model = _pipeline(IMPORTANCES).fit(X, y)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    result = grouped_importances(model)
    assert isinstance(result, dict)
    assert list(result) == ["carat", "cut", "color", "depth"]
    assert list(result.values()) == pytest.approx([0.35, 0.30, 0.20, 0.15])
    assert len(plot_relevances(model).patches) == 4


def test_errors_name_the_problem(table):
    X, y = table
    model = _pipeline(IMPORTANCES).fit(X, y)
    with pytest.raises(ValueError, match="aggregate must be 'auto', 'norm', 'sum' or 'max'"):
        grouped_importances(model, aggregate="mean")
    with pytest.raises(ValueError, match="outputs 7 columns but FixedImportances has 3"):
        grouped_importances(_pipeline([1, 2, 3]).fit(X, y))
    interactions = ColumnTransformer([("poly", PolynomialFeatures(2), ["carat", "depth"])])
    with pytest.raises(ValueError, match="does not come from a single input column"):
        grouped_importances(make_pipeline(interactions, FixedImportances([1] * 6)).fit(X, y))
    with pytest.raises(TypeError, match="has no feature_importances_"):
        grouped_importances(make_pipeline(StandardScaler(), StandardScaler()).fit(X[["carat"]], y))


def test_plot_draws_one_bar_per_column_largest_on_top(table):
    X, y = table
    model = _pipeline(IMPORTANCES).fit(X, y)
    bars = _bar_labels(plot_relevances(model))
    assert [label for label, _ in bars] == ["carat", "cut", "color", "depth"]
    assert_allclose([width for _, width in bars], [0.35, 0.30, 0.20, 0.15])

    bars = _bar_labels(plot_relevances(model, top=2))
    assert [label for label, _ in bars] == ["carat", "cut"]
    # one bar per column the model saw: cut_c and depth tie at 0.15, cut_c comes first
    bars = _bar_labels(plot_relevances(model, grouped=False, top=3))
    assert bars == [("num__carat", pytest.approx(0.35)), ("cat__color_x", pytest.approx(0.2)),
                    ("cat__cut_c", pytest.approx(0.15))]
    _, given = plt.subplots()
    assert plot_relevances(model, given, aggregate="max") is given
    with pytest.raises(ValueError, match="top must be a positive integer"):
        plot_relevances(model, top=0)


def test_plot_of_a_stability_result_shows_its_intervals(table):
    X, y = table
    numeric = X[["carat", "depth"]].assign(noise=np.linspace(0, 1, len(X)))
    stability = relevance_stability(
        FixedImportances([3.0, 1.0, 2.0]), numeric, y, n_resamples=3, top_k=1, random_state=0
    )
    ax = plot_relevances(stability, top=2)
    assert len(ax.patches) == 2
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["carat", "noise"]
    assert len(ax.collections) == 1  # the error bars of the percentile intervals


def test_missing_matplotlib_says_how_to_install_it(table, monkeypatch):
    X, y = table
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r'pip install "rffkit\[plot\]"'):
        plot_relevances(_pipeline(IMPORTANCES).fit(X, y))


def test_missing_value_indicators_count_toward_the_column_they_mark(table):
    """make_pipeline(SimpleImputer(add_indicator=True), model), as rffkit's message on NaN suggests: the output
    ``missingindicator_carat`` is carat's, alone or in a ColumnTransformer, also after one (prefixed names)."""
    from sklearn.impute import MissingIndicator

    X, y = table
    X = X.assign(carat=X["carat"].mask(np.arange(len(X)) % 5 == 0))
    numeric = X[["carat", "depth"]]
    model = make_pipeline(SimpleImputer(add_indicator=True), FixedImportances([1, 2, 1])).fit(numeric, y)
    assert list(model[:-1].get_feature_names_out()) == ["carat", "depth", "missingindicator_carat"]
    assert grouped_importances(model, aggregate="sum").to_dict() == pytest.approx({"carat": 0.5, "depth": 0.5})
    imputed = ColumnTransformer([("num", SimpleImputer(add_indicator=True), ["carat", "depth"]),
                                 ("cat", OneHotEncoder(), ["color"])])  # carat depth indicator color_x color_y
    model = make_pipeline(imputed, FixedImportances([1, 2, 3, 1, 1])).fit(X, y)
    assert grouped_importances(model, aggregate="sum").to_dict() == pytest.approx(
        {"carat": 0.5, "depth": 0.25, "color": 0.25, "cut": 0.0})
    marked = ColumnTransformer([("mark", MissingIndicator(features="all"), ["carat", "depth"]),
                                ("num", SimpleImputer(), ["carat", "depth"])])
    model = make_pipeline(marked, FixedImportances([1, 1, 1, 1])).fit(X, y)
    assert grouped_importances(model)[["carat", "depth", "cut"]].to_list() == pytest.approx([0.5, 0.5, 0.0])
    for output in ("default", "pandas"):  # a next step is fitted on the prefixed names num__carat, ...
        scaled = ColumnTransformer([("num", StandardScaler(), ["carat", "depth"]),
                                    ("cat", OneHotEncoder(sparse_output=False), ["color"])])
        scaled.set_output(transform=output)
        model = make_pipeline(scaled, SimpleImputer(add_indicator=True), FixedImportances([1, 2, 1, 1, 3])).fit(X, y)
        assert model[:-1].get_feature_names_out()[-1] == "missingindicator_num__carat"
        assert grouped_importances(model, aggregate="sum").to_dict() == pytest.approx(
            {"carat": 0.5, "depth": 0.25, "color": 0.25, "cut": 0.0})
