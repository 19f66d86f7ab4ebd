"""Minimum data, string columns and short messages (the rules of ``rffkit.exceptions``).

- Fewer than 2 rows: a ValueError for every regressor and classifier; the transformers fit
  on one row. SRFF's validation search needs 2 training rows after its hold-out.
- Under 20 rows, or under 10 rows in a class: a SmallSampleWarning, issued only when the
  fit succeeded, at the line that called fit, whether the rows are arrays or streamed (a
  memory map, a source of rffkit.io); 20 rows and 10 per class: none.
- A classifier's labels: a missing one (None, NaN, pandas' NA) is an error counting them and
  naming the first row; integers in an object array are labels 0, 1, ...; pandas' nullable
  Int64 and boolean labels come back from predict as NumPy ints and booleans.
- A column of strings: a ValueError naming the column (by name in a DataFrame, by position
  in an array) and the encoders to use; a regressor's string target: one naming y.
- Messages never print whole arrays: a 1-D X of 1,000 values gives a message of a few
  hundred characters.
"""

import datetime
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone, is_classifier

from rffkit import (
    RandomBinningFeatures,
    RandomFourierFeatures,
    RFFClassifier,
    RFFNetClassifier,
    RFFNetRegressor,
    RFFRidge,
    SRFFRegressor,
)
from rffkit.exceptions import SmallSampleWarning
from rffkit.io import ArraySource

SUPERVISED = [
    RFFRidge(features=RandomFourierFeatures(n_components=16), random_state=0),
    RFFClassifier(features=RandomFourierFeatures(n_components=16), max_iter=20, random_state=0),
    SRFFRegressor(n_components=10, alphas=1, max_iter=5, random_state=0),
    RFFNetRegressor(n_components=16, max_iter=5, random_state=0),
    RFFNetClassifier(n_components=16, max_iter=5, solver="adam", random_state=0),
]
TRANSFORMERS = [RandomFourierFeatures(n_components=16, random_state=0), RandomBinningFeatures(n_components=5)]
ALL = SUPERVISED + TRANSFORMERS


def _ids(estimator):
    return type(estimator).__name__


def _target(estimator, n, rng):
    if is_classifier(estimator):
        return np.arange(n) % 2
    return rng.normal(size=n)


def _fit(estimator, X, y=None):
    return estimator.fit(X) if y is None else estimator.fit(X, y)


@pytest.mark.parametrize("estimator", SUPERVISED, ids=_ids)
def test_one_row_is_an_error(estimator):
    X = np.ones((1, 3))
    with pytest.raises(ValueError, match=r"1 sample\(s\) .* minimum of 2 is required"):
        clone(estimator).fit(X, _target(estimator, 1, np.random.default_rng(0)))


@pytest.mark.parametrize("estimator", TRANSFORMERS, ids=_ids)
def test_transformers_fit_on_one_row(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = clone(estimator).fit_transform(np.ones((1, 3)))
    assert Z.shape[0] == 1


def test_srff_needs_two_training_rows_after_its_hold_out():
    X, y = np.random.default_rng(0).normal(size=(2, 3)), np.array([0.0, 1.0])
    with pytest.raises(ValueError, match="too few to hold out validation_fraction"):
        SRFFRegressor(n_components=10, alphas=3).fit(X, y)


@pytest.mark.parametrize("n_rows", [2, 5, 19])
@pytest.mark.parametrize("estimator", SUPERVISED, ids=_ids)
def test_under_twenty_rows_warns_after_the_fit(estimator, n_rows):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(n_rows, 3)), _target(estimator, n_rows, rng)
    model = clone(estimator)
    with pytest.warns(SmallSampleWarning, match=f"fitted on {n_rows} rows; under 20") as caught:
        model.fit(X, y)
    assert hasattr(model, "n_features_in_")  # the warning comes from a finished fit
    assert all(w.filename == __file__ for w in caught if w.category is SmallSampleWarning)


@pytest.mark.parametrize("estimator", SUPERVISED, ids=_ids)
def test_twenty_rows_and_ten_per_class_do_not_warn(estimator):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 3)), _target(estimator, 20, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        clone(estimator).fit(X, y)


@pytest.mark.parametrize("estimator", [e for e in SUPERVISED if is_classifier(e)], ids=_ids)
def test_a_class_under_ten_rows_warns(estimator):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.array(["common"] * 33 + ["rare"] * 7)
    with pytest.warns(SmallSampleWarning, match="class 'rare' has only 7 rows; under 10 per class"):
        clone(estimator).fit(X, y)


@pytest.mark.parametrize("estimator", SUPERVISED, ids=_ids)
def test_a_failing_small_fit_raises_its_error_alone(estimator):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 3))
    X[0, 0] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"X holds a missing value \(NaN\) in column 0 at row 0"):
            clone(estimator).fit(X, _target(estimator, 5, rng))
    assert not [w for w in caught if w.category is SmallSampleWarning]


# the estimators whose fit streams a memory map or a source
STREAMED = [e for e in SUPERVISED if isinstance(e, (RFFClassifier, RFFNetClassifier, RFFNetRegressor, RFFRidge))] + [
    RFFNetClassifier(n_components=16, max_iter=5, random_state=0),  # 'varpro'
    RFFNetRegressor(n_components=16, max_iter=5, solver="adam", random_state=0),
]


def _streamed(kind, X, y, tmp_path):
    if kind == "source":
        return ArraySource(X, y), None
    mapped = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float64, shape=X.shape)
    mapped[:] = X
    return mapped, y


@pytest.mark.parametrize("kind", ["source", "memmap"])
@pytest.mark.parametrize("estimator", STREAMED, ids=lambda e: _ids(e) + f"-{getattr(e, 'solver', 'lbfgs')}")
def test_a_streamed_fit_warns_as_a_fit_on_arrays(estimator, kind, tmp_path):
    # was: no SmallSampleWarning at all for a memory map or a source
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(12, 3)), _target(estimator, 12, rng)
    model = clone(estimator)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(*_streamed(kind, X, y, tmp_path))
    small = [w for w in caught if w.category is SmallSampleWarning]
    assert model.n_rows_seen_ == 12
    assert len(small) == 1 and "fitted on 12 rows; under 20" in str(small[0].message)
    assert small[0].filename == __file__
    if is_classifier(estimator):
        X, y = rng.normal(size=(40, 3)), np.array(["common"] * 33 + ["rare"] * 7)
        with pytest.warns(SmallSampleWarning, match="class 'rare' has only 7 rows; under 10 per class") as caught:
            clone(estimator).fit(*_streamed(kind, X, y, tmp_path))
        assert all(w.filename == __file__ for w in caught if w.category is SmallSampleWarning)


@pytest.mark.parametrize("estimator", ALL, ids=_ids)
def test_a_string_column_of_a_dataframe_is_named(estimator):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=30), "colour": ["red", "blue", "green"] * 10, "age": rng.normal(size=30)})
    y = None if estimator in TRANSFORMERS else _target(estimator, 30, rng)
    model = clone(estimator)
    with pytest.raises(ValueError) as raised:
        _fit(model, X, y)
    message = str(raised.value)
    assert "column 'colour' (position 1)" in message
    assert "'red'" in message and "OneHotEncoder" in message and "OrdinalEncoder" in message
    assert not hasattr(model, "n_features_in_")


@pytest.mark.parametrize("estimator", ALL, ids=_ids)
def test_a_string_column_of_an_array_is_named_by_position(estimator):
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=30), rng.normal(size=30), np.where(rng.normal(size=30) > 0, "u", "v")])
    X = X.astype(object)
    X[:, :2] = X[:, :2].astype(float)
    y = None if estimator in TRANSFORMERS else _target(estimator, 30, rng)
    with pytest.raises(ValueError, match=r"column 2 of X holds strings such as '[uv]' .*OneHotEncoder"):
        _fit(clone(estimator), X, y)


@pytest.mark.parametrize("estimator", ALL, ids=_ids)
def test_a_column_of_dates_or_durations_is_named_with_a_way_out(estimator):
    """NumPy's message ('The DType DateTime64DType could not be promoted by Float64DType') named no
    column: a DataFrame's dates, times, durations or periods are refused by name, with how to make them
    numbers, and so is a NumPy array of dates (which a fit had read as its integers, in the array's unit)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=30), "age": rng.normal(size=30)})
    y = None if estimator in TRANSFORMERS else _target(estimator, 30, rng)
    for when, shown in ((pd.date_range("2020-01-01", periods=30), "'2020-01-01 00:00:00'"),
                        (pd.date_range("2020-01-01", periods=30, tz="UTC"), "'2020-01-01 00:00:00+00:00'"),
                        (pd.to_timedelta(np.arange(30), unit="D"), "'0 days 00:00:00'"),
                        ([datetime.date(2020, 1, 2)] * 30, "'2020-01-02'"), ([pd.NaT] * 30, "'NaT'")):
        with pytest.raises(ValueError, match=rf"column 'day' \(position 1\) of X holds dates or times such as "
                                             rf"{re.escape(shown)}; make them numbers first.*rffkit.io.open_table"):
            _fit(clone(estimator), X.assign(day=when)[["size", "day", "age"]], y)
    period = pd.period_range("2020-01", periods=30, freq="M")  # pandas' periods, and a NumPy array of dates
    with pytest.raises(ValueError, match=r"column 'day' \(position 1\) of X holds dates or times such as '2020-01'"):
        _fit(clone(estimator), X.assign(day=period)[["size", "day", "age"]], y)
    days = np.arange("2020-01-01", "2020-01-31", dtype="datetime64[D]").reshape(-1, 1)
    with pytest.raises(ValueError, match=r"column 0 of X holds dates or times such as '2020-01-01'"):
        _fit(clone(estimator), days, y)


@pytest.mark.parametrize("estimator", ALL, ids=_ids)
def test_predict_names_a_string_column_too(estimator):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=30), "age": rng.normal(size=30)})
    y = None if estimator in TRANSFORMERS else _target(estimator, 30, rng)
    model = _fit(clone(estimator), X, y)
    method = getattr(model, "predict", None) or model.transform
    with pytest.raises(ValueError, match="column 'age' .* 'old'"):
        method(X.assign(age=["old"] * 30))


def test_numeric_strings_and_objects_still_work():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = rng.normal(size=30)
    model = RFFRidge(features=RandomFourierFeatures(n_components=16), random_state=0)
    expected = model.fit(X, y).predict(X)
    np.testing.assert_array_equal(model.fit(X.astype(str), y).predict(X), expected)
    np.testing.assert_array_equal(model.fit(X.astype(object), y.astype(str)).predict(X), expected)


@pytest.mark.parametrize("estimator", [e for e in SUPERVISED if not is_classifier(e)], ids=_ids)
def test_a_regressors_string_target_is_named(estimator):
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = np.array(["low", "high", "mid"] * 10)
    with pytest.raises(ValueError, match="y must be numeric for a regressor; it holds 'low'.*classifier"):
        clone(estimator).fit(X, y)


@pytest.mark.parametrize("estimator", ALL, ids=_ids)
def test_numbers_spoilt_by_a_placeholder_are_named_with_its_row(estimator):
    """A numeric column with one '?' is not a column to one-hot encode: the message says what it likely is."""
    rng = np.random.default_rng(0)
    dose = rng.normal(size=30).astype(object)
    dose[11] = "?"
    X = pd.DataFrame({"size": rng.normal(size=30), "dose": dose})
    y = None if estimator in TRANSFORMERS else _target(estimator, 30, rng)
    with pytest.raises(ValueError, match=r"column 'dose' \(position 1\) of X holds numbers and text: 29 of its "
                                         r"distinct values are numbers and 1 is not: '\?' \(row 11\)\. Is that a "
                                         r"placeholder for missing values\? .*pandas.to_numeric"):
        _fit(clone(estimator), X, y)
    with pytest.raises(ValueError, match=r"column 1 of X holds numbers and text: .* '\?' \(row 11\)"):
        _fit(clone(estimator), X.to_numpy(), y)


def test_numbers_with_a_decimal_comma_are_named_as_such():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=30), "dose": [f"{v:.2f}".replace(".", ",") for v in rng.normal(size=30)]})
    with pytest.raises(ValueError, match=r"column 'dose' \(position 1\) of X holds numbers written with a "
                                         r"decimal comma \(such as '.*'\), read as text: make them numbers "
                                         r"first \(for a pandas column: "
                                         r"pandas.to_numeric\(column.str.replace\(',', '.'\)\)\)\.$"):
        RFFRidge().fit(X, rng.normal(size=30))


def test_numbers_with_thousands_separators_are_named_as_numbers_written_as_text():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=30), "amount": [f"{v:,.1f}" for v in rng.uniform(1e3, 1e6, 30)]})
    with pytest.raises(ValueError, match=r"column 'amount' \(position 1\) of X holds numbers written as text "
                                         r"\(30 distinct values, each a number\): store it as a numeric column\.$"):
        RFFRidge().fit(X, rng.normal(size=30))


@pytest.mark.parametrize("estimator", [e for e in SUPERVISED if not is_classifier(e)], ids=_ids)
def test_a_regressors_target_spoilt_by_text_is_named_with_its_row(estimator):
    rng = np.random.default_rng(0)
    y = rng.normal(size=30).astype(str).astype(object)
    y[4] = "n.a."
    with pytest.raises(ValueError, match=r"y holds numbers and text: 29 .* 'n\.a\.' \(row 4\)\. Is that a placeholder"):
        clone(estimator).fit(rng.normal(size=(30, 3)), y)


@pytest.mark.parametrize("estimator", [e for e in SUPERVISED if is_classifier(e)], ids=_ids)
def test_labels_mixing_strings_and_numbers_are_named(estimator):
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = np.array(["a", 1] * 15, dtype=object)
    with pytest.raises(ValueError, match="y mixes strings and other labels"):
        clone(estimator).fit(X, y)


CLASSIFIERS = [e for e in SUPERVISED if is_classifier(e)]


@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=_ids)
def test_integer_labels_in_an_object_array_are_labels(estimator):
    # was: scikit-learn's "Unknown label type: unknown" (its LogisticRegression refuses them too)
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.array([0, 1] * 20, dtype=object)
    model = clone(estimator).fit(X, y)
    assert model.classes_.tolist() == [0, 1] and model.classes_.dtype.kind == "i"
    assert set(model.predict(X).tolist()) <= {0, 1}


@pytest.mark.parametrize("labels", [
    np.array(["a", "b"] * 9 + [None, "b"], dtype=object),
    np.array(["a", "b"] * 9 + [np.nan, "b"], dtype=object),
    np.array([0.0, 1.0] * 9 + [np.nan, 1.0]),
    pd.Series(["a", "b"] * 9 + [None, "b"], dtype="string"),
    pd.Series(pd.Categorical(["a", "b"] * 9 + [None, "b"])),
    pd.Series([0, 1] * 9 + [None, 1], dtype="Int64"),
], ids=["None", "nan-among-strings", "nan", "pandas-string", "categorical", "Int64"])
@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=_ids)
def test_missing_labels_are_counted_and_the_first_row_named(estimator, labels):
    # was: scikit-learn's "Input contains NaN" or pandas' "boolean value of NA is ambiguous"
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = labels.copy()
    y[4] = y[18]  # two missing labels, the first at row 4
    with pytest.raises(ValueError, match=rf"{type(estimator).__name__}: y holds 2 missing labels \(the first, "
                                         r".*, at row 4, counting from 0\); drop those rows"):
        clone(estimator).fit(X, y)


@pytest.mark.parametrize("dtype", ["Int64", "boolean"])
@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=_ids)
def test_nullable_pandas_labels_come_back_as_numpy_labels_of_their_kind(estimator, dtype):
    # was: classes_ and predict in float64 (0.0, 1.0), as scikit-learn's LogisticRegression gives
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = pd.Series(X[:, 0] > 0, dtype=dtype) if dtype == "boolean" else pd.Series((X[:, 0] > 0) * 3, dtype=dtype)
    model = clone(estimator).fit(X, y)
    expected = np.dtype(bool) if dtype == "boolean" else np.dtype(np.int64)
    assert model.classes_.dtype == expected and model.predict(X).dtype == expected
    assert model.classes_.tolist() == ([False, True] if dtype == "boolean" else [0, 3])


@pytest.mark.parametrize("estimator", ALL, ids=_ids)
def test_messages_never_print_whole_arrays(estimator):
    X = np.arange(1000.0)
    y = None if estimator in TRANSFORMERS else _target(estimator, 1000, np.random.default_rng(0))
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array instead") as raised:
        _fit(clone(estimator), X, y)
    message = str(raised.value)
    assert len(message) < 400, message
    assert "999." in message and "500." not in message  # the ends, not the middle


@pytest.mark.parametrize("estimator", SUPERVISED, ids=_ids)
def test_huge_values_are_refused_with_the_name_of_the_input(estimator):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), _target(estimator, 30, rng)
    with pytest.raises(ValueError, match=r"X holds values as large as 1e\+300 .*StandardScaler"):
        clone(estimator).fit(np.where(X > 2, 1e300, X), y)
    if not is_classifier(estimator):
        with pytest.raises(ValueError, match=r"y holds values as large as"):
            clone(estimator).fit(X, y * 1e200)


@pytest.mark.parametrize("n_rows", [12, 19])
def test_under_twenty_rows_the_kernel_must_beat_the_linear_model_too(n_rows):
    """Too few rows for a validation split: the kernel-or-linear choice is cross-validated all the same
    (helper-42: under 20 rows the kernel model had always been kept). A linear target on 12 rows: test MSE
    1.40 with the kernel model, 0.011 with the linear-only one; the classifier keeps its linear-only head."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, 4))
    y = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n_rows)
    X_test = rng.normal(size=(500, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        regressor = RFFNetRegressor(random_state=0).fit(X, y)
        classifier = RFFNetClassifier(random_state=0).fit(X, (y > 0).astype(int))
    assert regressor.linear_only_ and classifier.linear_only_
    assert np.mean((regressor.predict(X_test) - X_test[:, 0] - 0.5 * X_test[:, 1]) ** 2) < 0.2
    assert np.abs(classifier.relevances_[2:]).max() < np.abs(classifier.relevances_[:2]).min()
