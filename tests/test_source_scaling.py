"""TableSource.standardized: a source's columns scaled as ``rffkit fit`` scales them for the ridge models."""

import warnings

import numpy as np
import pandas as pd
import pytest

import rffkit
from rffkit.io import open_table


def _write(tmp_path, n=300, seed=0):
    rng = np.random.default_rng(seed)
    length = rng.normal(size=n)  # the signal, in small units
    frame = pd.DataFrame({"length": length, "grams": rng.normal(4000.0, 800.0, size=n),
                          "colour": rng.choice(["red", "blue"], size=n), "flag": rng.integers(0, 2, size=n),
                          "label": np.where(np.sin(3 * length) > 0, "up", "down")})
    path = tmp_path / f"data{seed}.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_standardized_scales_the_numeric_columns_and_leaves_0s_and_1s(tmp_path):
    path, frame = _write(tmp_path)
    source = open_table(path, target="label")
    scaled = source.standardized()
    assert source.scaler is None and "standardized" in repr(scaled)
    X = np.concatenate([chunk.X for chunk in scaled])
    raw = np.concatenate([chunk.X for chunk in source])
    names = scaled.feature_names
    numeric = [names.index("length"), names.index("grams")]
    np.testing.assert_allclose(X[:, numeric].mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(X[:, numeric].std(axis=0), 1.0, rtol=1e-9)
    others = [j for j in range(len(names)) if j not in numeric]  # one-hot colour and the 0/1 integers
    np.testing.assert_array_equal(X[:, others], raw[:, others])
    assert scaled.with_dtype(np.float32).scaler is scaled.scaler
    assert next(iter(scaled.with_dtype(np.float32))).X.dtype == np.float32
    assert scaled.with_encoding(scaled.encoding).scaler is None


def test_new_rows_are_scaled_by_the_training_scaler(tmp_path):
    path, _ = _write(tmp_path)
    new_path, new = _write(tmp_path, n=50, seed=1)
    train = open_table(path, target="label").standardized()
    test = open_table(new_path, target="label", encoding=train.encoding).standardized(train.scaler)
    X = np.concatenate([chunk.X for chunk in test])
    np.testing.assert_allclose(X[:, train.feature_names.index("grams")],
                               (new["grams"] - train.scaler.mean_[1]) / train.scaler.scale_[1])
    with pytest.raises(ValueError, match="the scaler has 5 fitted columns, this source 1"):
        open_table(new_path, target="label", features=["length"]).standardized(train.scaler)


def test_classifier_on_a_standardized_source_sees_the_small_unit_signal(tmp_path):
    path, _ = _write(tmp_path)
    source = open_table(path, target="label")
    raw = rffkit.RFFClassifier(random_state=0).fit(source).score(source)
    scaled = source.standardized()
    assert rffkit.RFFClassifier(random_state=0).fit(scaled).score(scaled) > max(raw + 0.1, 0.9)


@pytest.mark.parametrize("make", [lambda: rffkit.RFFClassifier(random_state=0),
                                  lambda: rffkit.RFFRidge(random_state=0),
                                  lambda: rffkit.RFFNetRegressor(random_state=0, max_iter=3)])
def test_a_model_refuses_rows_standardised_otherwise_than_in_fit(tmp_path, make):
    """A model fitted on a standardised source predicts only on rows standardised by the same scaler, and
    one fitted on columns as they are only on such rows: otherwise it would see other units, without a sign."""
    path, _ = _write(tmp_path)
    new_path, _ = _write(tmp_path, n=50, seed=1)
    target = "label" if isinstance(make(), rffkit.RFFClassifier) else "length"
    train = open_table(path, target=target).standardized()
    model = make().fit(train)
    raw = open_table(new_path, target=target, encoding=train.encoding)
    with pytest.raises(ValueError, match="fitted on standardised columns"):
        model.predict(raw)
    with pytest.raises(ValueError, match="another scaler"):
        model.predict(raw.standardized())  # the new rows' own means and scales
    scaled = raw.standardized(train.scaler)
    X = pd.DataFrame(np.concatenate([chunk.X for chunk in scaled]), columns=scaled.feature_names)
    np.testing.assert_array_equal(model.predict(scaled), model.predict(X))
    as_opened = make().fit(open_table(path, target=target))
    with pytest.raises(ValueError, match="not standardised, and this source is standardised"):
        as_opened.predict(scaled)
    assert as_opened.predict(raw).shape == (50,)
    # a later fit on arrays drops what the fit on a source recorded
    model.fit(X, np.concatenate([chunk.y for chunk in scaled]))
    assert model.predict(raw).shape == (50,)


def test_the_scaler_check_allows_rounding_and_other_scalers(tmp_path):
    """The same training file reopened with another chunk size learns means that differ by rounding: accepted.
    A StandardScaler without scaling (scale_ None) and a MinMaxScaler are compared by their fitted arrays."""
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    path, _ = _write(tmp_path, n=900)
    train = open_table(path, target="length", chunk_rows=128).standardized()
    model = rffkit.RFFRidge(random_state=0).fit(train)
    again = open_table(path, target="length", chunk_rows=500).standardized()
    assert model.predict(again).shape == (900,)
    X = np.concatenate([chunk.X for chunk in open_table(path, target="length")])
    for scaler in (StandardScaler(with_std=False).fit(X), MinMaxScaler().fit(X)):
        scaled = open_table(path, target="length").standardized(scaler)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fitted = rffkit.RFFRidge(random_state=0).fit(scaled)
        # centred only, the grams (in the thousands) set the default map's one length scale: the fit says so
        assert any("length scale for all columns" in str(w.message) for w in caught) == (scaler.scale_ is None)
        assert fitted.predict(scaled).shape == (900,)
        with pytest.raises(ValueError, match="another scaler"):
            fitted.predict(open_table(path, target="length").standardized())
