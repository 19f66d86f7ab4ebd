"""Streamed ridge: sufficient statistics against NumPy, and streamed fits against in-memory ones.

References and tolerances:

- statistics (centred Gram matrix, cross products, norms) against NumPy's two-pass centring
  in float64: rtol 1e-9, with features offset by 1e6 (the shift keeps cancellation away);
- the held-out path against scikit-learn's ``Ridge`` refitted for every alpha: rtol 1e-8;
  the streamed leave-one-out sums against ``loo_path`` in memory: rtol 1e-10;
- streamed fits (ArraySource, memory map, Parquet shards, ``partial_fit``) against the fit on
  the same arrays in memory: predictions within 1e-8 relative in float64 (the issue asks 1e-6);
- fits on arrays equal the predictions recorded before streaming existed (commit 88ccb2c) to
  1e-10 relative (bit-identical on the machine that recorded them).
"""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.linear_model import Ridge

from rffkit import RandomFourierFeatures, RFFClassifier, RFFNetRegressor, RFFRidge
from rffkit._ridge_path import heldout_path, loo_path, loo_sums, ridge_spectrum
from rffkit._streaming import validation_mask
from rffkit._ridge_statistics import RidgeStatistics
from rffkit._sufficient import (
    MemoryBudgetError,
    max_components,
    parse_memory,
    statistics_bytes,
)
from rffkit.io import ArraySource, open_table


def relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


def problem(n=1500, p=4, seed=0, n_targets=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2
    y = f + 0.1 * rng.normal(size=n)
    if n_targets:
        y = np.column_stack([y] + [np.cos(X[:, k]) + 0.1 * rng.normal(size=n) for k in range(1, n_targets)])
    return X, y, rng.normal(size=(40, p))


def rff(n_components=120, length_scale=2.0):
    return RandomFourierFeatures(n_components=n_components, length_scale=length_scale)


# -- statistics -------------------------------------------------------------------------


@pytest.mark.parametrize("blocks", [[600], [1, 99, 500], [250] * 4 + [0, 100]])
def test_statistics_equal_numpy_centring_despite_a_large_offset(blocks):
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(600, 7)) * 1e-2 + 1e6  # raw sums of squares would lose ~16 digits
    y = rng.normal(size=(600, 2)) + 3e5
    statistics, start = RidgeStatistics(7, 2), 0
    for size in blocks:
        statistics.update(Z[start:start + size], y[start:start + size])
        start += size
    gram, cross, y_norm2, feature_mean, target_mean = (t.numpy() for t in statistics.centred())
    Zc, yc = Z - Z.mean(axis=0), y - y.mean(axis=0)
    assert statistics.count == 600
    np.testing.assert_allclose(gram, Zc.T @ Zc, rtol=1e-9)
    np.testing.assert_allclose(cross, Zc.T @ yc, rtol=1e-9, atol=1e-9 * np.abs(Zc.T @ yc).max())
    np.testing.assert_allclose(y_norm2, (yc * yc).sum(axis=0), rtol=1e-9)
    np.testing.assert_allclose(feature_mean, Z.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(target_mean, y.mean(axis=0), rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_wide_blocks_give_the_gram_matrix(dtype):
    rng = np.random.default_rng(7)
    Z, y = rng.normal(size=(300, 700)) + 0.5, rng.normal(size=300)  # 700 columns: syrk's upper triangle, mirrored
    statistics = RidgeStatistics(700).update(Z[:120].astype(dtype), y[:120]).update(Z[120:].astype(dtype), y[120:])
    merged = RidgeStatistics(700).update(Z[:50], y[:50]).merge(RidgeStatistics(700).update(Z[50:], y[50:]))
    Zc = Z - Z.mean(axis=0)
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    for gram in (statistics.centred()[0], merged.centred()[0]):
        np.testing.assert_allclose(gram.numpy(), Zc.T @ Zc, rtol=rtol, atol=rtol * 300)
    assert torch.equal(statistics.centred()[0], statistics.centred()[0].T)


def test_merge_and_reshift_equal_one_pass():
    rng = np.random.default_rng(2)
    Z, y = rng.normal(size=(900, 5)) + 4.0, rng.normal(size=900) - 2.0
    whole = RidgeStatistics(5).update(Z, y)
    parts = [RidgeStatistics(5).update(Z[a:b], y[a:b]) for a, b in [(0, 10), (10, 400), (400, 900)]]
    merged = RidgeStatistics(5)
    for part in parts:
        merged.merge(part)
    moved = whole.copy().reshift(np.full(5, -7.0), np.array([11.0]))
    for other in (merged, moved):
        for mine, theirs in zip(whole.centred(), other.centred()):
            np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-11, atol=1e-11)
    assert merged.count == 900


def test_no_intercept_keeps_the_uncentred_products():
    rng = np.random.default_rng(3)
    Z, y = rng.normal(size=(300, 4)) + 1.0, rng.normal(size=300)
    statistics = RidgeStatistics(4, fit_intercept=False).update(Z[:100], y[:100]).update(Z[100:], y[100:])
    gram, cross, y_norm2, feature_mean, _ = statistics.centred()
    np.testing.assert_allclose(gram.numpy(), Z.T @ Z, rtol=1e-12)
    np.testing.assert_allclose(cross.numpy()[:, 0], Z.T @ y, rtol=1e-12)
    np.testing.assert_allclose(y_norm2.numpy(), [y @ y], rtol=1e-12)
    assert not feature_mean.any()


def test_float32_blocks_are_summed_in_float64():
    rng = np.random.default_rng(4)
    Z = rng.normal(size=(4000, 6))
    y = Z[:, 0] + 0.1 * rng.normal(size=4000)
    statistics = RidgeStatistics(6)
    for start in range(0, 4000, 500):
        statistics.update(Z[start:start + 500].astype(np.float32), y[start:start + 500])
    gram = statistics.centred()[0]
    Zc = Z - Z.mean(axis=0)
    assert statistics.gram.dtype == torch.float64
    np.testing.assert_allclose(gram.numpy(), Zc.T @ Zc, rtol=1e-5, atol=1e-5 * 4000)


def test_heldout_path_equals_ridge_refitted_for_every_alpha():
    rng = np.random.default_rng(5)
    Z, y = rng.normal(size=(400, 12)) + 2.0, rng.normal(size=400)
    held = validation_mask(np.arange(400), 0.25, seed=3)
    train = RidgeStatistics(12).update(Z[~held], y[~held])
    heldout = RidgeStatistics(12).update(Z[held], y[held])
    spectrum = train.spectrum()
    alphas = [1e-3, 0.1, 10.0, 1e3]
    gram, cross, y_norm2 = heldout.centred_at(spectrum.feature_mean, spectrum.target_mean)
    scores = heldout_path(spectrum, alphas, gram, cross, y_norm2, heldout.count).numpy()[:, 0]
    naive = [np.mean((Ridge(alpha=a, solver="cholesky").fit(Z[~held], y[~held]).predict(Z[held]) - y[held]) ** 2)
             for a in alphas]
    np.testing.assert_allclose(scores, naive, rtol=1e-8)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_solve_at_one_penalty_equals_scikit_learn_ridge(fit_intercept):
    rng = np.random.default_rng(8)
    Z, y = rng.normal(size=(500, 15)) + 3.0, rng.normal(size=(500, 2))
    statistics = RidgeStatistics(15, 2, fit_intercept=fit_intercept).update(Z[:200], y[:200])
    statistics.merge(RidgeStatistics(15, 2, fit_intercept=fit_intercept).update(Z[200:], y[200:]))
    penalties = np.array([0.5, 40.0])  # one per target, on the sum of squares
    coef, intercept = statistics.solve(penalties)
    naive = Ridge(alpha=penalties, fit_intercept=fit_intercept, solver="cholesky").fit(Z, y)
    np.testing.assert_allclose(coef.numpy().T, naive.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(intercept.numpy(), naive.intercept_ if fit_intercept else [0.0, 0.0], atol=1e-9)
    same, _ = statistics.solve(0.5)  # one penalty for both targets
    np.testing.assert_allclose(same.numpy()[:, 0], coef.numpy()[:, 0], rtol=1e-12)


def test_solve_falls_back_to_the_spectrum_where_the_factorisation_fails():
    rng = np.random.default_rng(9)
    Z = rng.normal(size=(6, 10))  # 6 rows, 10 features: the centred Gram matrix has rank 5
    y = rng.normal(size=6)
    statistics = RidgeStatistics(10).update(Z, y)
    statistics.gram -= 1e-3 * torch.eye(10)  # eigenvalues of -1e-3: no Cholesky factor at penalty 1e-4
    coef, intercept = statistics.solve(1e-4)
    spectrum = statistics.spectrum()
    from rffkit._ridge_path import path_coefficients

    np.testing.assert_array_equal(coef.numpy(), path_coefficients(spectrum, 1e-4).numpy())
    assert np.all(np.isfinite(coef.numpy())) and np.isfinite(float(intercept[0]))


def test_streamed_loo_sums_equal_loo_path():
    rng = np.random.default_rng(6)
    Z, y = rng.normal(size=(300, 10)), rng.normal(size=(300, 2))
    alphas = [1e-2, 1.0, 100.0]
    spectrum = RidgeStatistics(10, 2).update(Z, y).spectrum()
    total = sum(loo_sums(spectrum, alphas, Z[a:a + 70], y[a:a + 70]) for a in range(0, 300, 70))
    in_memory = loo_path(ridge_spectrum(Z, y, fit_intercept=True, dtype=torch.float64, device="cpu"), alphas, Z, y)
    np.testing.assert_allclose((total / 300).numpy(), in_memory.numpy(), rtol=1e-10)


# -- the memory budget ------------------------------------------------------------------


def test_memory_budget_parsing_and_largest_width():
    assert parse_memory("2GB") == 2 * 10**9 and parse_memory("1.5GiB") == 3 * 2**29
    assert parse_memory(" 512 mb ") == 512 * 10**6 and parse_memory(12345) == 12345
    for bad in ("two GB", "5 parsecs", "-1GB", 0):
        with pytest.raises(ValueError):
            parse_memory(bad)
    largest = max_components("1GB")
    assert statistics_bytes(largest) <= 10**9 < statistics_bytes(largest + 1)
    assert statistics_bytes(2000) < 4 * 10**8  # D = 2,000: 0.16 GB of D x D matrices, 0.2 GB of blocks


def test_too_wide_a_feature_map_names_the_parameters():
    X, y, _ = problem(n=200)
    model = RFFRidge(features=rff(n_components=6000), memory_budget="200MB")
    with pytest.raises(MemoryBudgetError, match=r"memory_budget='200MB'.*lower features__n_components \(at most \d+ fit\)"):
        model.fit(ArraySource(X, y))
    assert not hasattr(model, "coef_")
    fitted = RFFRidge(features=rff(n_components=100), memory_budget=2 * 10**8).fit(ArraySource(X, y))
    assert fitted.coef_.shape == (100,)


# -- fits on arrays are unchanged ---------------------------------------------------------

# Predictions of the first four test rows, recorded at commit 88ccb2c (before streaming).
RECORDED = {
    "default": [0.7441232159525233, 1.845889369355371, 1.4735715449193114, -0.10389741354680315],
    "loo": [0.710739277530102, 3.025427717132326, 1.3534695021913554, -0.2083949339650668],
    "fixed_no_intercept": [0.5045514987561928, 0.6452305103916989, 1.28346382102061, -0.2136446366799424],
    "per_target": [1.0746675281331923, 0.19839682456312746, 0.8133770685725059, 0.5507408205003692],
    "dual": [0.7340505753437955, 0.8399153265476234, 0.8728694450178462, -0.1597864711836704],
}


def recorded_configurations():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=300)
    Y = np.column_stack([y, np.cos(X[:, 2])])
    X_test = rng.normal(size=(7, 5))
    return X_test, {
        "default": (RFFRidge(random_state=0), X, y),
        "loo": (RFFRidge(features=RandomFourierFeatures(n_components=60, length_scale=2.0),
                         alpha_selection="loo", random_state=1), X, y),
        "fixed_no_intercept": (RFFRidge(features=RandomFourierFeatures(n_components=50), alphas=0.3,
                                        alpha_selection=None, fit_intercept=False, random_state=2), X, y),
        "per_target": (RFFRidge(features=RandomFourierFeatures(n_components=70), alpha_per_target=True,
                                alpha_selection="gcv", random_state=4), X, Y),
        "dual": (RFFRidge(features=RandomFourierFeatures(n_components=400), random_state=5), X[:120], y[:120]),
    }


@pytest.mark.parametrize("name", list(RECORDED))
def test_fits_on_arrays_predict_as_before_streaming(name):
    X_test, configurations = recorded_configurations()
    model, X, y = configurations[name]
    predictions = model.fit(X, y).predict(X_test).ravel()[:4]
    np.testing.assert_allclose(predictions, RECORDED[name], rtol=1e-10)
    assert not hasattr(model, "n_rows_seen_")


# -- streamed fits equal in-memory fits --------------------------------------------------

CONFIGURATIONS = {
    "default features, gcv": dict(alpha_selection="gcv"),
    "default features, loo (the default)": dict(),
    "rff, gcv": dict(features=rff(), alpha_selection="gcv"),
    "wide rff (Gram in column blocks), gcv": dict(features=rff(n_components=600), alpha_selection="gcv"),
    "rff, loo": dict(features=rff(), alpha_selection="loo"),
    "fixed alpha, no intercept": dict(features=rff(), alphas=0.3, alpha_selection=None, fit_intercept=False),
}


@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_streamed_fit_equals_the_fit_in_memory(name):
    X, y, X_test = problem()
    parameters = dict(CONFIGURATIONS[name], random_state=0)
    in_memory = RFFRidge(**parameters).fit(X, y)
    streamed = RFFRidge(**parameters).fit(ArraySource(X, y, chunk_rows=400))
    assert streamed.alpha_ == in_memory.alpha_
    assert relative(streamed.predict(X_test), in_memory.predict(X_test)) < 1e-8
    if in_memory.cv_values_ is not None:
        assert relative(streamed.cv_values_, in_memory.cv_values_) < 1e-8
    assert streamed.n_rows_seen_ == 1500 and streamed.n_features_in_ == 4


def test_several_targets_with_one_alpha_each():
    X, Y, X_test = problem(n_targets=3)
    parameters = dict(features=rff(), alpha_per_target=True, random_state=0)
    in_memory = RFFRidge(**parameters).fit(X, Y)
    streamed = RFFRidge(**parameters).fit(ArraySource(X, Y, chunk_rows=333))
    np.testing.assert_array_equal(streamed.alpha_, in_memory.alpha_)
    assert streamed.coef_.shape == in_memory.coef_.shape == (3, 120)
    assert relative(streamed.predict(X_test), in_memory.predict(X_test)) < 1e-8


@pytest.mark.parametrize("n_targets", [None, 3])
def test_score_on_a_source_equals_the_score_on_arrays(tmp_path, n_targets):
    X, y, _ = problem(n_targets=n_targets)
    model = RFFRidge(features=rff(), random_state=0).fit(X, y)
    expected = model.score(X, y)  # scikit-learn's r2_score, the mean over targets
    assert model.score(ArraySource(X, y, chunk_rows=333)) == pytest.approx(expected, rel=1e-10)
    X_map = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float64, shape=X.shape)
    X_map[:] = X
    assert model.score(X_map, y) == pytest.approx(expected, rel=1e-10)
    weights = np.linspace(0.5, 2.0, X.shape[0])  # a weighted memory map is scored as an array
    assert model.score(X_map, y, sample_weight=weights) == pytest.approx(model.score(X, y, sample_weight=weights))
    if n_targets is None:
        source = open_table(write_shards(tmp_path / "train", X, y), target="y", chunk_rows=256)
        assert model.score(source) == pytest.approx(expected, rel=1e-10)


def test_score_on_a_source_is_checked():
    X, y, _ = problem(n=100)
    model = RFFRidge(features=rff()).fit(X, y)
    with pytest.warns(UndefinedMetricWarning, match="fewer than two rows"):  # as r2_score: NaN
        assert np.isnan(model.score(ArraySource(X[:1], y[:1])))
    constant = np.full(100, 0.1)  # a spread of exactly 0, where r2_score's rounding leaves one of 1e-33
    assert model.score(ArraySource(X, constant)) == 0.0
    with pytest.raises(ValueError, match="no target to score against"):
        model.score(ArraySource(X))
    with pytest.raises(ValueError, match="carries its own target"):
        model.score(ArraySource(X, y), y)
    with pytest.raises(ValueError, match="X has 3 features"):
        model.score(ArraySource(X[:, :3], y))


@pytest.mark.parametrize("make", [lambda: RFFRidge(features=rff(), random_state=0),
                                  lambda: RFFClassifier(random_state=0),
                                  lambda: RFFNetRegressor(n_components=64, random_state=0)])
def test_a_source_of_named_array_columns_is_checked_like_a_dataframe(make):
    """An ArraySource of a DataFrame carries its column names: a fit on it records them, and a source
    whose columns come in another order is refused, as a DataFrame is, instead of predicting from
    swapped columns; an ArraySource of a plain array is not checked by name. sample_weight is for arrays."""
    X, y, _ = problem(n=300)
    if isinstance(make(), RFFClassifier):
        y = (y > np.median(y)).astype(int)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = make().fit(ArraySource(frame, y))
    assert list(model.feature_names_in_) == ["a", "b", "c", "d"]
    expected = model.predict(frame)  # no warning about feature names: the fit recorded them
    np.testing.assert_allclose(model.predict(ArraySource(frame)), expected, rtol=1e-12)
    swapped = frame[["b", "a", "c", "d"]]
    with pytest.raises(ValueError, match=r"score: the source's columns differ from those seen in fit \(they come in "
                                         r"another order\); give the columns seen in fit"):
        model.score(ArraySource(swapped, y))
    with pytest.raises(ValueError, match="feature names"):  # scikit-learn's own check, for the DataFrame
        model.predict(swapped)
    assert model.predict(ArraySource(X)).shape == (300,)  # unnamed columns: their number is checked
    for unnamed in (ArraySource(X, y), ArraySource(pd.DataFrame(X), y)):  # integer column names are no names
        assert not hasattr(make().fit(unnamed), "feature_names_in_")
    with pytest.raises(ValueError, match="sample_weight is for arrays; a source is scored unweighted"):
        model.score(ArraySource(frame, y), sample_weight=np.ones(300))


def test_float32_source_computes_in_float32_and_stays_close():
    X, y, X_test = problem()
    in_memory = RFFRidge(features=rff(), alphas=1.0, alpha_selection=None, random_state=0).fit(X, y)
    streamed = RFFRidge(features=rff(), alphas=1.0, alpha_selection=None, random_state=0).fit(
        ArraySource(X.astype(np.float32), y, chunk_rows=500))
    assert streamed.coef_.dtype == np.float32
    assert relative(streamed.predict(X_test), in_memory.predict(X_test)) < 1e-4


def test_memory_map_streams_fit_and_predict(tmp_path):
    X, y, X_test = problem()
    X_map = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float64, shape=X.shape)
    X_map[:] = X
    X_map.flush()
    X_map = np.load(tmp_path / "X.npy", mmap_mode="r")
    in_memory = RFFRidge(features=rff(), random_state=0).fit(X, y)
    streamed = RFFRidge(features=rff(), random_state=0).fit(X_map, y)
    assert streamed.n_rows_seen_ == 1500  # went through the streamed path
    assert relative(streamed.predict(X_map), in_memory.predict(X)) < 1e-8


def write_shards(folder, X, y, n_files=3, row_group_size=200):
    folder.mkdir(parents=True, exist_ok=True)
    for number, rows in enumerate(np.array_split(np.arange(X.shape[0]), n_files)):
        columns = {f"x{j}": X[rows, j] for j in range(X.shape[1])}
        columns["y"] = y[rows]
        pq.write_table(pa.table(columns), folder / f"part-{number}.parquet", row_group_size=row_group_size)
    return str(folder / "*.parquet")


def test_parquet_shards_fit_and_predict_like_arrays(tmp_path):
    X, y, X_test = problem()
    pattern = write_shards(tmp_path / "train", X, y)
    source = open_table(pattern, target="y", chunk_rows=256)
    in_memory = RFFRidge(random_state=0).fit(X, y)
    streamed = RFFRidge(random_state=0).fit(source)
    assert list(streamed.feature_names_in_) == ["x0", "x1", "x2", "x3"]
    assert relative(streamed.predict(source), in_memory.predict(X)) < 1e-8
    test_source = open_table(write_shards(tmp_path / "test", X_test, np.zeros(40), n_files=1), target="y")
    assert relative(streamed.predict(test_source), in_memory.predict(X_test)) < 1e-8
    renamed = pa.table({"x0": X_test[:, 0], "x1": X_test[:, 1], "x2": X_test[:, 2], "z": X_test[:, 3]})
    pq.write_table(renamed, tmp_path / "renamed.parquet")
    with pytest.raises(ValueError, match=r"lacks \['x3'\]"):
        streamed.predict(open_table(tmp_path / "renamed.parquet"))


def test_holdout_scores_the_held_out_rows_and_refits_on_all():
    X, y, X_test = problem()
    alphas = [1e-3, 1e-1, 10.0]
    model = RFFRidge(features=rff(), alphas=alphas, alpha_selection="holdout", validation_fraction=0.2,
                     random_state=0).fit(X, y)
    held = validation_mask(np.arange(1500), 0.2, seed=0)
    Z = rff().set_params(random_state=0).fit(X).transform(X)
    naive = [np.mean((Ridge(alpha=a, solver="cholesky").fit(Z[~held], y[~held]).predict(Z[held]) - y[held]) ** 2)
             for a in alphas]
    np.testing.assert_allclose(model.cv_values_, naive, rtol=1e-8)
    assert model.alpha_ == alphas[int(np.argmin(naive))]
    on_all_rows = RFFRidge(features=rff(), alphas=model.alpha_, alpha_selection=None, random_state=0).fit(X, y)
    assert relative(model.predict(X_test), on_all_rows.predict(X_test)) < 1e-8


def test_partial_fit_refits_on_every_row_seen_and_keeps_its_features():
    X, y, X_test = problem()
    model = RFFRidge(features=rff(), random_state=0)
    assert model.partial_fit(X[:300], y[:300]) is model
    weights = model.features_.random_weights_.copy()
    # partial_fit keeps no rows, so it scores the penalties by GCV: the fits in memory do too
    first = RFFRidge(features=rff(), alpha_selection="gcv", random_state=0).fit(X[:300], y[:300])
    assert relative(model.predict(X_test), first.predict(X_test)) < 1e-8
    for start in range(300, 1500, 400):
        model.partial_fit(X[start:start + 400], y[start:start + 400])
    np.testing.assert_array_equal(model.features_.random_weights_, weights)
    everything = RFFRidge(features=rff(), alpha_selection="gcv", random_state=0).fit(X, y)
    assert model.alpha_ == everything.alpha_ and model.n_rows_seen_ == 1500
    assert relative(model.predict(X_test), everything.predict(X_test)) < 1e-8
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(X[:10, :3], y[:10])
    with pytest.raises(ValueError, match="target"):
        model.partial_fit(X[:10], np.column_stack([y[:10], y[:10]]))
    assert model.n_rows_seen_ == 1500  # failed calls left the statistics as they were
    # a later chunk's y is checked as the first chunk's is (helper-43: 1e200 had made every score NaN)
    before = model.predict(X_test)
    huge = y[:10].copy()
    huge[3] = 1e200
    with pytest.raises(ValueError, match="y holds values as large as 1e\\+200"):
        model.partial_fit(X[:10], huge)
    with pytest.raises(ValueError, match="y"):
        model.partial_fit(X[:10], np.array(["a"] * 10))
    assert model.n_rows_seen_ == 1500
    np.testing.assert_array_equal(model.predict(X_test), before)


def test_fit_after_partial_fit_starts_afresh():
    X, y, X_test = problem()
    model = RFFRidge(features=rff(), random_state=0).partial_fit(X[:100], y[:100])
    model.fit(X[100:], y[100:])
    assert not hasattr(model, "n_rows_seen_")
    model.partial_fit(X[:100], y[:100])  # a new accumulation: these 100 rows only
    assert model.n_rows_seen_ == 100


def test_sources_are_checked():
    X, y, _ = problem(n=100)
    with pytest.raises(ValueError, match="has no target"):
        RFFRidge().fit(ArraySource(X))
    with pytest.raises(ValueError, match="carries its own target"):
        RFFRidge().fit(ArraySource(X, y), y)
    with pytest.raises(ValueError, match="must be numeric"):
        RFFRidge().fit(ArraySource(X, np.array(["a", "b"] * 50, dtype=object)))
    with pytest.raises(ValueError, match="held out no row"):
        RFFRidge(features=rff(), alpha_selection="holdout", validation_fraction=1e-9).fit(X, y)
    fitted = RFFRidge(features=rff()).fit(ArraySource(X, y))
    with pytest.raises(ValueError, match="X has 3 features, but RFFRidge is expecting 4"):
        fitted.predict(ArraySource(X[:, :3]))


def test_streamed_fit_on_each_device_matches_the_cpu(device):
    X, y, X_test = problem()
    cpu = RFFRidge(features=rff(), random_state=0).fit(ArraySource(X, y, chunk_rows=400))
    there = RFFRidge(features=rff(), random_state=0, device=device).fit(ArraySource(X, y, chunk_rows=400))
    assert there.alpha_ == cpu.alpha_ and isinstance(there.coef_, np.ndarray)
    assert relative(there.predict(X_test), cpu.predict(X_test)) < 1e-8


def test_dask_ml_incremental_feeds_partial_fit_the_blocks_and_gives_the_in_memory_model():
    """dask-ml's ``Incremental`` calls ``partial_fit`` once per block of a dask array: the
    model is then the fit on all rows (GCV over every row), predictions within 1e-8 relative."""
    da = pytest.importorskip("dask.array")
    wrappers = pytest.importorskip("dask_ml.wrappers")
    X, y, X_test = problem(n=1200)
    calls = []

    class Counted(RFFRidge):
        def partial_fit(self, X, y):
            calls.append(len(X))
            return super().partial_fit(X, y)

    incremental = wrappers.Incremental(Counted(features=rff(), random_state=0), shuffle_blocks=False)
    incremental.fit(da.from_array(X, chunks=(300, 4)), da.from_array(y, chunks=300))
    fitted = incremental.estimator_
    assert calls == [300] * 4 and fitted.n_rows_seen_ == 1200
    reference = RFFRidge(features=rff(), alpha_selection="gcv", random_state=0).fit(X, y)  # partial_fit's GCV
    assert fitted.alpha_ == reference.alpha_
    assert relative(fitted.predict(X_test), reference.predict(X_test)) < 1e-8
