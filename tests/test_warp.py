"""Quantile maps of heavy-tailed inputs: the maps, the layer that applies them, and the fits that learn them."""

import numpy as np
import pytest
import torch
from scipy.stats import norm

import rffkit
from rffkit import RFFNetRegressor
from rffkit._warp import heavy_tailed, quantile_warp
from rffkit.io import ArraySource
from rffkit.layers import ARDRandomFourierFeatures

WARP = dict(min_kurtosis=3.0, min_distinct=32, n_knots=64)


def _standardised(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


@pytest.fixture
def columns():
    """A log-normal column (excess kurtosis in the hundreds), a normal one and a 3-level one."""
    rng = np.random.default_rng(0)
    n = 2000
    return _standardised(np.c_[rng.lognormal(0.0, 2.0, n), rng.normal(size=n), rng.integers(0, 3, n)])


def test_only_heavy_tailed_columns_with_many_values_are_mapped(columns):
    assert heavy_tailed(columns, min_kurtosis=3.0, min_distinct=32).tolist() == [True, False, False]
    # the same heavy tail on 20 distinct values is a label, not a scale
    coarse = columns.copy()
    coarse[:, 0] = np.round(coarse[:, 0] * 2.0)
    assert len(np.unique(coarse[:, 0])) < 32
    assert not heavy_tailed(coarse, min_kurtosis=3.0, min_distinct=32).any()
    assert quantile_warp(columns[:, 1:], **WARP) is None
    # a pool area: zero on 90% of the rows, heavy-tailed elsewhere; its bulk is the one value
    rng = np.random.default_rng(1)
    pool = np.where(rng.random(2000) < 0.9, 0.0, rng.lognormal(3.0, 1.0, 2000))
    assert heavy_tailed(pool[:, None], min_kurtosis=3.0, min_distinct=32).tolist() == [True]
    assert heavy_tailed(pool[:, None], min_kurtosis=3.0, min_distinct=32, max_tie=0.5).tolist() == [False]


def test_kurtosis_is_scipys_and_a_constant_column_raises_no_warning(columns):
    import warnings

    from scipy.stats import kurtosis

    # the excess kurtosis it thresholds is the moment estimate (bias=True)
    excess = kurtosis(columns, axis=0, fisher=True, bias=True)
    for threshold in (excess[0] - 1e-6, excess[0] + 1e-6):
        assert heavy_tailed(columns[:, :1], min_kurtosis=threshold, min_distinct=32).tolist() == [threshold < excess[0]]
    constant = np.full((5, 2), 0.8216181373596191)  # scipy warns of precision loss on such a column
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not heavy_tailed(constant, min_kurtosis=3.0, min_distinct=1).any()
        assert quantile_warp(np.c_[constant, constant], **WARP) is None


def test_the_map_sends_a_heavy_tailed_column_to_normal_scores_and_leaves_the_others(columns):
    knots, values = quantile_warp(columns, **WARP)
    assert knots.shape == values.shape == (3, 64)
    assert np.all(np.diff(knots, axis=1) >= 0) and np.all(np.diff(values, axis=1) >= 0)
    mapped = np.interp(columns[:, 0], knots[0], values[0])
    # normal scores: the ranks kept, the quartiles of N(0, 1) to a knot spacing's interpolation error
    assert np.array_equal(np.argsort(mapped, kind="stable"), np.argsort(columns[:, 0], kind="stable"))
    np.testing.assert_allclose(np.quantile(mapped, [0.25, 0.5, 0.75]), norm.ppf([0.25, 0.5, 0.75]), atol=0.03)
    # the others: the identity between their minimum and maximum, the last knot repeated
    for j in (1, 2):
        np.testing.assert_array_equal(knots[j], values[j])
        assert knots[j, 0] == columns[:, j].min() and np.all(knots[j, 1:] == columns[:, j].max())
    bounds = (np.full(3, -9.0), np.full(3, 9.0))
    knots, _ = quantile_warp(columns, **WARP, bounds=bounds)
    assert knots[1, 0] == -9.0 and knots[1, -1] == 9.0 and knots[0, 0] == columns[:, 0].min()


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
def test_the_layer_passes_only_its_trigonometric_columns_through_the_warp(columns, variant):
    knots, values = quantile_warp(columns, **WARP)
    layer = ARDRandomFourierFeatures.from_kernel(3, 12, random_state=0, variant=variant, linear=True)
    x = torch.as_tensor(np.r_[columns[:50], [[-50.0, -50.0, -50.0], [50.0, 50.0, 50.0]]])
    plain = layer.replace(linear=False)(x).detach()  # before the warp is set
    layer.set_input_warp(knots, values)
    expected = np.column_stack([np.interp(x[:, j].numpy(), knots[j], values[j]) for j in range(3)])
    np.testing.assert_allclose(layer.kernel_inputs(x).numpy(), expected, rtol=1e-12, atol=1e-12)
    features = layer(x).detach()
    reference = ARDRandomFourierFeatures(layer.frequencies, layer.offsets, layer.relevances.detach(),
                                         variant=variant, n_components=12)
    np.testing.assert_allclose(features[:, :12].numpy(), reference(torch.as_tensor(expected)).detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    # the linear columns see x itself, beyond the training range too
    np.testing.assert_allclose(features[:, 12:].numpy(), (x * layer.relevances.detach()).numpy())
    assert not np.allclose(features[:, :12].numpy(), plain.numpy())
    # a replaced layer keeps the warp (and the input range), a removed warp restores the plain map
    layer.set_input_range(torch.full((3,), -1.0), torch.full((3,), 1.0))
    twin = layer.replace(relevances=layer.relevances.detach() * 2.0)
    assert twin.input_warp is not None and twin.input_range is not None
    np.testing.assert_array_equal(twin.input_warp[0].numpy(), knots)
    layer.set_input_warp(None, None).set_input_range(None, None)
    np.testing.assert_allclose(layer(x).detach()[:, :12].numpy(), plain.numpy(), rtol=1e-12, atol=1e-12)


def _log_signal(n, seed):
    """``y = sin(2 log v) + noise`` with ``v`` log-normal: a signal in the bulk of a heavy-tailed input."""
    rng = np.random.default_rng(seed)
    v = rng.lognormal(0.0, 2.0, n)
    X = np.c_[v, rng.normal(size=(n, 3))]
    return X, np.sin(2.0 * np.log(v)) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=n)


def _fit(X, y, warp_inputs, **params):
    return RFFNetRegressor(random_state=0, warp_inputs=warp_inputs, **params).fit(X, y)


def test_the_warp_resolves_a_signal_in_the_bulk_of_a_heavy_tailed_input():
    X, y = _log_signal(1500, 0)
    X_test, y_test = _log_signal(2000, 1)
    warped, plain = _fit(X, y, True), _fit(X, y, False)
    assert warped.model_.rff.input_warp is not None and plain.model_.rff.input_warp is None
    r2 = {name: model.score(X_test, y_test) for name, model in (("warped", warped), ("plain", plain))}
    # measured: 0.976 against 0.812 (the plain kernel's length scale cannot follow the bulk)
    assert r2["warped"] > 0.9 and r2["warped"] > r2["plain"] + 0.1, r2
    assert np.argmax(warped.relevances_) == 0


def test_a_warped_model_predicts_the_same_after_a_model_file_round_trip(tmp_path):
    X, y = _log_signal(600, 2)
    model = RFFNetRegressor(random_state=0, n_components=64, max_iter=20).fit(X, y)
    assert model.model_.rff.input_warp is not None
    path = tmp_path / "warped.rffkit"
    rffkit.save(model, path)
    loaded = rffkit.load(path)
    np.testing.assert_array_equal(loaded.predict(X[:100]), model.predict(X[:100]))
    np.testing.assert_array_equal(loaded.model_.rff.input_warp[0].numpy(), model.model_.rff.input_warp[0].numpy())


def test_a_streamed_fit_takes_its_quantiles_from_the_sample_and_its_range_from_every_row():
    X, y = _log_signal(3000, 3)
    model = RFFNetRegressor(random_state=0, n_components=64, max_iter=20).fit(ArraySource(X, y, chunk_rows=700))
    knots, values = (tensor.numpy() for tensor in model.model_.rff.input_warp)
    assert np.all(np.diff(values[0]) >= 0) and values[0, -1] > 2.0  # normal scores
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    # the normal columns: the identity on the range of every row, as the in-memory fit clamps
    np.testing.assert_allclose(knots[1, [0, -1]], [Xs[:, 1].min(), Xs[:, 1].max()], rtol=1e-6)
    np.testing.assert_array_equal(knots[1:], values[1:])


def test_a_model_file_from_before_warp_inputs_reads_back_as_fitted_without_maps(tmp_path):
    from sklearn.base import clone

    X, y = _log_signal(300, 4)
    model = RFFNetRegressor(random_state=0, n_components=32, max_iter=5, warp_inputs=False).fit(X, y)
    del model.__dict__["warp_inputs"]  # what a file written before the parameter existed holds
    rffkit.save(model, tmp_path / "old.rffkit")
    loaded = rffkit.load(tmp_path / "old.rffkit")
    assert loaded.get_params()["warp_inputs"] is False and "warp_inputs=False" in repr(loaded)
    np.testing.assert_array_equal(loaded.predict(X[:20]), model.predict(X[:20]))
    assert clone(loaded).warp_inputs is False


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_a_warped_layer_on_cuda_maps_and_replaces_as_on_the_cpu(columns):
    knots, values = quantile_warp(columns, **WARP)
    layer = ARDRandomFourierFeatures.from_kernel(3, 12, random_state=0, linear=True).set_input_warp(knots, values)
    x = torch.as_tensor(columns[:100])
    on_gpu = layer.to("cuda").replace(relevances=layer.relevances.detach().cuda() * 2.0)
    on_cpu = layer.to("cpu").replace(relevances=layer.relevances.detach() * 2.0)
    np.testing.assert_allclose(on_gpu(x.cuda()).detach().cpu().numpy(), on_cpu(x).detach().numpy(), atol=1e-10)
