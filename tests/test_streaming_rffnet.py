"""RFFNetRegressor fitted from streamed sources (rffkit._rffnet_stream).

The same rows as an ArraySource, as Parquet shards and as a memory map give the same model;
the streamed head equals the in-memory ridge head (:func:`rffkit._ridge.select_ridge_alpha`)
on the same layer and rows; two gloo processes give the single-process relevances and
predictions; a source failing mid-stream, or a budget too small, leaves the estimator as it
was. The sample is made smaller than the data (``search_rows``) so that the search runs on a
true subsample and the head's layer extends the search layer.
"""

import copy
from dataclasses import replace
import json
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import rffkit
import rffkit._rffnet_stream as stream
import rffkit._stream_widths as widths
from rffkit import RFFNetRegressor
from rffkit._ridge import select_ridge_alpha, solve_ridge, walk_ridge_alpha
from rffkit._streaming import validation_mask
from rffkit._sufficient import MemoryBudgetError, statistics_bytes
from rffkit._validation import draw_seeds
from rffkit.io import ArraySource, open_table
from rffkit.layers import ARDRandomFourierFeatures

#: Training rows of the search sample in these tests (the data have 1,500 rows).
SEARCH_ROWS = 500
#: A fast configuration: one search at a fixed penalty, 60 head features (the sample's 500
#: training rows take 500 features in memory, so the search layer is the head's, truncated to 60;
#: EXTENDED makes the head wider than the search layer).
PARAMETERS = dict(n_components=60, alpha=1e-3, max_iter=15, random_state=0)
EXTENDED = dict(PARAMETERS, n_components=700)
N_ROWS, N_FEATURES = 1500, 6


def make_data(n_rows=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, N_FEATURES)) * [1.0, 3.0, 0.5, 1.0, 2.0, 1.0] + [0.0, 5.0, 0.0, -2.0, 0.0, 0.0]
    y = np.sin(2 * X[:, 0]) + (X[:, 1] - 5.0) ** 2 / 9 + 0.1 * rng.normal(size=n_rows)
    return X, y


def write_parquet(folder, X, y, n_files=3, row_group_size=200):
    folder.mkdir(parents=True, exist_ok=True)
    for number, rows in enumerate(np.array_split(np.arange(X.shape[0]), n_files)):
        table = pa.table({**{f"x{j}": X[rows, j] for j in range(X.shape[1])}, "y": y[rows]})
        pq.write_table(table, folder / f"part-{number}.parquet", row_group_size=row_group_size)
    return str(folder / "*.parquet")


@pytest.fixture(autouse=True)
def small_sample(monkeypatch):
    monkeypatch.setattr(stream, "STREAM_SETTINGS", stream.StreamSettings(search_rows=SEARCH_ROWS))


@pytest.fixture(scope="module")
def data():
    return make_data()


def test_nested_layers_truncate_and_extend_to_the_same_draw():
    for variant, width in (("cos", 9), ("cos_sin", 9), ("cos_sin", 10)):
        full = ARDRandomFourierFeatures.from_kernel(3, 25, random_state=0, dtype=torch.float32, variant=variant)
        short = widths.truncated_layer(full, width)
        assert short.n_components == width
        x = torch.randn(4, 3)
        if variant == "cos":  # the first columns of the draw, rescaled by sqrt(D / k)
            torch.testing.assert_close(short(x), full(x)[:, :width] * (25 / width) ** 0.5)
        torch.testing.assert_close(short(x), full(x, width))
        back = widths.extended_layer(short, full)
        assert torch.equal(back.frequencies, full.frequencies) and torch.equal(back.offsets, full.offsets)
        torch.testing.assert_close(back(x), full(x))


def test_array_parquet_and_memmap_sources_give_the_same_model(data, tmp_path):
    X, y = data
    pattern = write_parquet(tmp_path / "shards", X, y)
    np.save(tmp_path / "X.npy", X)
    memmap = np.load(tmp_path / "X.npy", mmap_mode="r")
    assert isinstance(memmap, np.memmap)
    fits = {
        "arrays": RFFNetRegressor(**EXTENDED).fit(ArraySource(X, y, chunk_rows=200)),
        "parquet": RFFNetRegressor(**EXTENDED).fit(open_table(pattern, target="y", chunk_rows=300)),
        "memmap": RFFNetRegressor(**EXTENDED).fit(memmap, y),
    }
    reference = fits["arrays"]
    assert reference.n_rows_seen_ == N_ROWS and reference.n_components_ == 700
    expected = reference.predict(X)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(N_FEATURES)])
    for name, model in fits.items():
        np.testing.assert_allclose(model.relevances_, reference.relevances_, rtol=1e-6, atol=1e-7, err_msg=name)
        assert model.alpha_ == reference.alpha_
        inputs = frame if hasattr(model, "feature_names_in_") else X
        np.testing.assert_allclose(model.predict(inputs), expected, atol=1e-6 * np.abs(expected).max(), err_msg=name)
    assert list(fits["parquet"].feature_names_in_) == [f"x{j}" for j in range(N_FEATURES)]
    assert not hasattr(fits["memmap"], "feature_names_in_")
    # prediction and scores chunk by chunk equal those on arrays
    np.testing.assert_allclose(reference.predict(ArraySource(X, chunk_rows=111)), expected, rtol=1e-12)
    np.testing.assert_allclose(reference.predict(memmap), expected, rtol=1e-12)
    assert reference.score(ArraySource(X, y, chunk_rows=97)) == pytest.approx(reference.score(X, y), rel=1e-10)
    assert reference.score(open_table(pattern, target="y")) == pytest.approx(reference.score(X, y), rel=1e-10)


@pytest.mark.parametrize("alpha", ["auto", 1e-3])
def test_streamed_head_equals_the_in_memory_ridge_head(data, alpha):
    """Closed-form reference: select_ridge_alpha on the layer's float32 features of the same rows, then every row.

    Tolerance: predictions within 1e-4 of the target's standard deviation. The reference
    forms Z^T Z of the float32 features in float64; the stream multiplies float32 blocks in
    float32 and sums them in float64 (measured: 6e-5 at the chosen alpha = 1e-6, 7e-7 at 1e-3).
    """
    X, y = data
    model = RFFNetRegressor(**dict(EXTENDED, alpha=alpha)).fit(ArraySource(X, y, chunk_rows=256))
    layer = copy.deepcopy(model.model_.rff).float()
    split_seed = draw_seeds(0, 3)[0]
    held = validation_mask(np.arange(N_ROWS), model.validation_fraction, split_seed)
    with torch.no_grad():
        Z = layer(torch.as_tensor((X - model._x_mean) / model._x_scale, dtype=torch.float32))
    target = torch.as_tensor(((y - model._y_mean) / model._y_scale)[:, None], dtype=torch.float32)
    keep, out = torch.as_tensor(~held), torch.as_tensor(held)
    alphas = model._settings.alpha_grid if alpha == "auto" else (alpha,)
    Z, target = Z.double(), target.double()
    head = select_ridge_alpha(Z[keep], target[keep], Z[out], target[out], alphas)
    assert model.alpha_ == head.alpha
    # the held-out rows chose alpha; the head is then solved on every row
    solution = solve_ridge(Z, target, head.alpha)
    reference = (Z @ solution.coef + solution.intercept)[:, 0].numpy() * model._y_scale + model._y_mean
    assert np.max(np.abs(model.predict(X) - reference)) < 1e-4 * y.std()
    # validation R^2 from the held-out statistics equals that of the training rows' head
    chosen = (Z @ head.coef + head.intercept)[:, 0].numpy() * model._y_scale + model._y_mean
    r2 = 1 - np.sum((chosen[held] - y[held]) ** 2) / np.sum((y[held] - y[held].mean()) ** 2)
    assert model.best_validation_score_ == pytest.approx(r2, abs=1e-6)


def test_the_search_runs_on_a_sample_and_finds_the_relevant_features(data):
    X, y = data
    model = RFFNetRegressor(**EXTENDED).fit(ArraySource(X, y))
    assert set(np.argsort(-model.feature_importances_)[:2]) == {0, 1}
    assert model.score(X, y) > 0.8


def test_the_head_layer_candidates_are_the_plain_widening_and_the_best_screened_aligned_one():
    """rffkit._head_layer.head_layer_candidates against direct ridge fits of each candidate on the same rows.

    The target is two sinusoids, so the frequencies aligned with it beat a plain draw. The
    candidates are the plain layer itself and the aligned layer of lowest validation error
    (each score equals walk_ridge_alpha's from the same start on the candidate's features,
    formed whole, to float32 rounding: 1e-4 relative, or 5e-6 of the target's variance, as the
    aligned head's error, 0.0025 against a variance near 1, sits in a float32 residual's lowest
    digits: 1 and 2 threads differ by 4e-5 relative on an AMD EPYC, and on one thread of an Intel
    Xeon with AVX-512 the two differ by 1.3e-6, 5e-4 relative), at its scale times the relevances. The
    noise is drawn from a seeded generator: from torch's global one, which the tests before
    it advance, the data changed with the test order. Both computations run on one thread, so that
    the comparison does not depend on the threads a pytest-xdist worker was left with (with the
    earlier 1e-6 tolerance it failed in full runs at bf94db8 and c29726e and passed alone).
    """
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            _check_head_layer_candidates()
    finally:
        torch.set_num_threads(previous)


def _check_head_layer_candidates():
    from rffkit._head_layer import head_layer_candidates
    from rffkit._settings import DEFAULT_SETTINGS
    from rffkit.kernels import KERNELS

    rng = np.random.default_rng(4)
    X = torch.as_tensor(rng.normal(size=(1200, 3)), dtype=torch.float32)
    noise = torch.randn(1200, 1, generator=torch.Generator().manual_seed(4))  # not the global generator
    y = (torch.sin(3 * X[:, :1]) + torch.cos(2 * X[:, 1:2]) + 0.05 * noise).float()
    layer = ARDRandomFourierFeatures.from_kernel(3, 40, random_state=0, dtype=torch.float32)
    with torch.no_grad():
        layer.relevances.copy_(torch.tensor([1.0, 1.0, 0.1]))
    generator = torch.Generator().manual_seed(0)
    chosen, scores = head_layer_candidates(layer, X[:800], y[:800], X[800:], y[800:], alpha=1e-3, generator=generator,
                                           sample_frequencies=KERNELS["gaussian"].sample_frequencies,
                                           settings=DEFAULT_SETTINGS)
    assert [name for name, _ in scores] == ["plain"] + [f"aligned x{s:g}" for s in DEFAULT_SETTINGS.align_scales]
    assert len(chosen) == 2 and chosen[0] is layer
    with torch.no_grad():
        again = [walk_ridge_alpha(c(X[:800]), y[:800], c(X[800:]), y[800:], DEFAULT_SETTINGS.alpha_grid, 1e-3).score
                 for c in chosen]
    values = [value for _, value in scores]
    best = 1 + int(np.argmin(values[1:]))
    assert again == pytest.approx([values[0], values[best]], rel=1e-4, abs=5e-6 * float(y[800:].var()))
    assert values[best] < values[0]  # aligned with the sinusoids, better than the plain draw
    scale = DEFAULT_SETTINGS.align_scales[best - 1]
    torch.testing.assert_close(chosen[1].relevances, scale * layer.relevances.detach())


class FailingSource(ArraySource):
    """An ArraySource whose ``fail_at``-th chunk (counted over every pass) raises."""

    def __init__(self, *args, fail_at, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_at, self.served = fail_at, 0

    def iter_chunks(self, chunk_rows=None, *, rank=0, world_size=1):
        for chunk in super().iter_chunks(chunk_rows, rank=rank, world_size=world_size):
            self.served += 1
            if self.served == self.fail_at:
                raise OSError("the disk went away")
            yield chunk


@pytest.mark.parametrize("fail_at", [3, 9])  # pass 1, pass 2 (6 chunks per pass)
def test_a_source_failing_mid_stream_leaves_the_estimator_as_it_was(data, fail_at):
    X, y = data
    model = RFFNetRegressor(**PARAMETERS).fit(X[:300, :4], y[:300])
    before = {name: copy.deepcopy(value) for name, value in vars(model).items()}
    predictions = model.predict(X[:5, :4])
    with pytest.raises(OSError, match="disk went away"):
        model.fit(FailingSource(X, y, chunk_rows=250, fail_at=fail_at))
    assert set(vars(model)) == set(before)
    assert model.n_features_in_ == 4 and not hasattr(model, "n_rows_seen_")
    np.testing.assert_array_equal(model.relevances_, before["relevances_"])
    np.testing.assert_array_equal(model.predict(X[:5, :4]), predictions)
    unfitted = RFFNetRegressor(**PARAMETERS)
    with pytest.raises(OSError):
        unfitted.fit(FailingSource(X, y, chunk_rows=250, fail_at=fail_at))
    assert not hasattr(unfitted, "model_") and not hasattr(unfitted, "n_features_in_")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_streamed_fit_on_cuda_matches_the_cpu_fit(data, tmp_path):
    """device='cuda' moves each chunk to the GPU and sums the statistics there: the search, the
    penalty and the head are those of the CPU fit, to float32 summation order (1e-3 relative)."""
    X, y = data
    pattern = write_parquet(tmp_path / "shards", X, y)
    cpu = RFFNetRegressor(**EXTENDED).fit(open_table(pattern, target="y", chunk_rows=300))
    gpu = RFFNetRegressor(**EXTENDED, device="cuda").fit(open_table(pattern, target="y", chunk_rows=300))
    assert gpu.alpha_ == cpu.alpha_ and gpu.n_components_ == cpu.n_components_
    np.testing.assert_allclose(gpu.relevances_, cpu.relevances_, rtol=1e-3, atol=1e-3 * np.abs(cpu.relevances_).max())
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(N_FEATURES)])
    expected = cpu.predict(frame)
    np.testing.assert_allclose(gpu.predict(frame), expected, atol=1e-3 * np.abs(expected).max())
    np.testing.assert_allclose(gpu.predict(open_table(pattern, target="y")), expected, atol=1e-3 * np.abs(expected).max())


def test_fitted_model_holds_its_kernel_part_constant_beyond_the_training_range(data, tmp_path):
    """In memory and streamed alike, the fitted layer's input range is the training rows'
    (standardised); without the linear term a prediction beyond it is the prediction at it."""
    X, y = data
    in_memory = RFFNetRegressor(**PARAMETERS, linear_term=False).fit(X, y)
    streamed = RFFNetRegressor(**PARAMETERS, linear_term=False).fit(
        open_table(write_parquet(tmp_path / "s", X, y), target="y", chunk_rows=300))
    for model in (in_memory, streamed):
        lower, upper = (bound.numpy() for bound in model.model_.rff.input_range)
        np.testing.assert_allclose(lower * model._x_scale + model._x_mean, X.min(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(upper * model._x_scale + model._x_mean, X.max(axis=0), rtol=1e-12, atol=1e-12)
    far = np.array([[40.0, -30.0, 0.0, 9.0, -8.0, 0.5]])
    at_edge = np.clip(far, X.min(axis=0), X.max(axis=0))
    names = [f"x{j}" for j in range(N_FEATURES)]
    np.testing.assert_allclose(in_memory.predict(far), in_memory.predict(at_edge), rtol=1e-12)
    rffkit.save(in_memory, tmp_path / "model.rffkit")  # the range is part of the model file
    np.testing.assert_array_equal(rffkit.load(tmp_path / "model.rffkit").predict(far), in_memory.predict(far))
    np.testing.assert_allclose(streamed.predict(pd.DataFrame(far, columns=names)),
                               streamed.predict(pd.DataFrame(at_edge, columns=names)), rtol=1e-12)


def test_memory_budget_limits_the_head_or_refuses_up_front(data):
    X, y = data
    small = RFFNetRegressor(**dict(PARAMETERS, n_components=None), memory_budget="20MB").fit(ArraySource(X, y))
    assert small.n_components_ < 1000
    assert statistics_bytes(small.n_components_, n_statistics=2, itemsize=4) <= 20e6
    model = RFFNetRegressor(**dict(PARAMETERS, n_components=5000), memory_budget="100MB")
    with pytest.raises(MemoryBudgetError, match="n_components"):
        model.fit(ArraySource(X, y))
    assert not hasattr(model, "model_")


def test_the_streamed_head_is_wider_than_the_in_memory_cap_only_above_it():
    from rffkit._search import varpro_n_components

    settings = RFFNetRegressor._settings
    for n in (500, 5_000, 100_000):  # under the in-memory cap: the in-memory rule
        assert widths.default_head_width(n, settings) == varpro_n_components(n, settings) < 4000
    assert varpro_n_components(10**6, settings) == settings.max_default_features == 4000
    assert widths.default_head_width(10**6, settings) == settings.stream_max_features == 5000
    budget = statistics_bytes(3000, n_statistics=2, itemsize=4)  # the memory budget still lowers it
    assert widths._sizes(RFFNetRegressor(memory_budget=budget), 10**6, 18, 2_000, budget, 4)[1] == 3000


@pytest.mark.parametrize("variant", ["cos", "cos_sin"])
def test_a_head_wider_than_the_cap_keeps_the_capped_draw_first(variant):
    estimator = RFFNetRegressor(variant=variant)
    cap = estimator._settings.max_default_features
    capped = widths.head_draw(estimator, 5, cap, 7, "cpu")
    torch.testing.assert_close(capped.frequencies, estimator._draw_layer(5, cap, 7, "cpu").frequencies)
    wide = widths.head_draw(estimator, 5, cap + 600, 7, "cpu")
    assert wide.n_components == cap + 600
    k = capped.frequencies.shape[1]
    assert torch.equal(wide.frequencies[:, :k], capped.frequencies) and torch.equal(wide.offsets[:k], capped.offsets)
    tail = estimator._draw_layer(5, cap + 600, 8, "cpu")  # the rest: the tail of a wider draw, the next seed
    assert torch.equal(wide.frequencies[:, k:], tail.frequencies[:, k:])
    assert torch.equal(wide.offsets[k:], tail.offsets[k:])
    x = torch.randn(6, 5, dtype=torch.float32)
    search = widths.truncated_layer(wide, 300)  # the search layer does not depend on the head's width
    torch.testing.assert_close(search(x), widths.truncated_layer(capped, 300)(x))
    torch.testing.assert_close(wide(x, 300), search(x))


def test_bad_streamed_inputs_get_clear_errors(data):
    X, y = data
    with pytest.raises(ValueError, match="'varpro'"):
        RFFNetRegressor(solver="varpro", hidden_layer_sizes=(4,)).fit(ArraySource(X, y))
    with pytest.raises(ValueError, match="no target"):
        RFFNetRegressor(**PARAMETERS).fit(ArraySource(X))
    with pytest.raises(ValueError, match="carries its own target"):
        RFFNetRegressor(**PARAMETERS).fit(ArraySource(X, y), y)
    with pytest.raises(ValueError, match="numeric"):
        RFFNetRegressor(**PARAMETERS).fit(ArraySource(X, np.array(["a", "b", "c"] * 500)))
    model = RFFNetRegressor(**PARAMETERS).fit(ArraySource(X, y))
    with pytest.raises(ValueError, match="expecting 6 features"):
        model.predict(ArraySource(X[:, :4]))


# -- two processes --------------------------------------------------------------------------------
TIMEOUT_SECONDS = 240


def _rank_main(rank, world_size, port, pattern, output):
    torch.set_num_threads(1)
    stream.STREAM_SETTINGS = stream.StreamSettings(search_rows=SEARCH_ROWS)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        model = RFFNetRegressor(**EXTENDED).fit(open_table(pattern, target="y", chunk_rows=300))
        with open(f"{output}-{rank}.json", "w") as handle:
            json.dump({"relevances": model.relevances_.tolist(), "predictions": model.predict(held_out_frame()).tolist(),
                       "alpha": model.alpha_, "rows": model.n_rows_seen_}, handle)
    finally:
        dist.destroy_process_group()


def held_out_frame():
    return pd.DataFrame(make_data(50, seed=1)[0], columns=[f"x{j}" for j in range(N_FEATURES)])


@pytest.mark.slow
def test_two_gloo_processes_give_the_single_process_model(data, tmp_path):
    from test_distributed import free_port

    X, y = data
    pattern = write_parquet(tmp_path / "shards", X, y)
    single = RFFNetRegressor(**EXTENDED).fit(open_table(pattern, target="y", chunk_rows=300))
    context = mp.start_processes(_rank_main, args=(2, free_port(), pattern, str(tmp_path / "report")),
                                 nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not context.join(timeout=1.0):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the 2-process job did not finish in {TIMEOUT_SECONDS} s")
    expected = single.predict(held_out_frame())
    for rank in range(2):
        with open(tmp_path / f"report-{rank}.json") as handle:
            report = json.load(handle)
        np.testing.assert_allclose(report["relevances"], single.relevances_, rtol=1e-5, atol=1e-6)
        assert report["alpha"] == single.alpha_ and report["rows"] == N_ROWS
        assert np.max(np.abs(np.asarray(report["predictions"]) - expected)) <= 1e-5 * np.max(np.abs(expected))



def test_streamed_linear_head_equals_the_in_memory_one(data):
    """The linear-only head that the kernel model is compared with (rffkit._heads.reduce_to_linear),
    streamed, against RidgeHeads.fit_linear on the same standardised rows and split.

    Tolerance: coefficients within 1e-5 of the largest (float32 inputs; float64 sums).
    """
    from rffkit._heads import RidgeHeads
    from rffkit._streamed_heads import StreamedRidgeHeads, _Standardiser

    X, y = data
    standardise = _Standardiser(X.mean(axis=0), X.std(axis=0), y.mean(), y.std(), torch.device("cpu"))
    seed, fraction = 7, 0.2
    held = validation_mask(np.arange(N_ROWS), fraction, seed)
    alphas = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))
    streamed = StreamedRidgeHeads(ArraySource(X, y, chunk_rows=256), standardise, validated=True,
                                  fraction=fraction, seed=seed, alphas=alphas, owner="test")
    layer = ARDRandomFourierFeatures.from_kernel(N_FEATURES, 20, random_state=0, dtype=torch.float32,
                                                 variant="cos_sin", linear=True)
    with torch.no_grad():
        layer.relevances.copy_(torch.tensor([1.0, 0.5, 0.0, 0.2, 1.0, 0.3]))
    inputs = standardise.inputs(X).double()
    target = torch.as_tensor(standardise.target(y)[:, None])
    keep, out = torch.as_tensor(~held), torch.as_tensor(held)
    in_memory = RidgeHeads(inputs[keep], target[keep], inputs[out], target[out], alpha="auto",
                           alphas=alphas).fit_linear(layer.double())
    head = streamed.fit_linear(layer)
    assert head.alpha == in_memory.alpha
    assert torch.count_nonzero(head.coef[: layer.n_components]) == 0 and head.coef[layer.n_components + 2] == 0
    scale = float(in_memory.coef.abs().max())
    torch.testing.assert_close(head.coef.double(), in_memory.coef.double(), rtol=0, atol=1e-5 * scale)
    assert streamed.validated


def test_one_pass_statistics_of_two_layers_equal_two_passes(data):
    """StreamedRidgeHeads.statistics_of (the last pass with two candidate layers) against one pass per
    layer: the same heads (alpha, coefficients to 1e-12 relative, validation error)."""
    from rffkit._streamed_heads import StreamedRidgeHeads, _head_from_statistics, _Standardiser

    X, y = data
    standardise = _Standardiser(X.mean(axis=0), X.std(axis=0), y.mean(), y.std(), torch.device("cpu"))
    alphas = (1e-5, 1e-3, 1e-1)
    streamed = StreamedRidgeHeads(ArraySource(X, y, chunk_rows=211), standardise, validated=True,
                                  fraction=0.2, seed=5, alphas=alphas, owner="test")
    layer = ARDRandomFourierFeatures.from_kernel(N_FEATURES, 24, random_state=1, dtype=torch.float32, linear=True)
    layers = [layer, layer.replace(relevances=torch.full((N_FEATURES,), 0.5))]
    for together, layer in zip(streamed.statistics_of(layers), layers):
        one = _head_from_statistics(*together, alphas)
        alone = _head_from_statistics(*streamed.statistics(layer), alphas)
        assert one[0] == alone[0] and one[3] == pytest.approx(alone[3], rel=1e-12)
        torch.testing.assert_close(one[1], alone[1], rtol=1e-12, atol=0)


def test_paired_loss_gain_equals_the_in_memory_differences(data):
    """The refinement's paired comparison, streamed (three all-reduced sums), against the per-row
    differences of the two heads' squared errors on the same validation rows in memory.

    Tolerance: 1e-6 relative (float32 features computed in other blocks differ by rounding;
    measured 2e-8 on the mean).
    """
    from rffkit._streamed_heads import HeldOutLosses, PairedLossGain, StreamedRidgeHeads, _Standardiser

    X, y = data
    standardise = _Standardiser(X.mean(axis=0), X.std(axis=0), y.mean(), y.std(), torch.device("cpu"))
    seed, fraction = 3, 0.25
    held = validation_mask(np.arange(N_ROWS), fraction, seed)
    streamed = StreamedRidgeHeads(ArraySource(X, y, chunk_rows=97), standardise, validated=True,
                                  fraction=fraction, seed=seed, alphas=(1e-4, 1e-2), owner="test")
    layer = ARDRandomFourierFeatures.from_kernel(N_FEATURES, 30, random_state=0, dtype=torch.float32)
    rougher = layer.replace(relevances=torch.full((N_FEATURES,), 2.0))
    heads = [streamed.fit(layer), streamed.fit(rougher)]
    kept, new = streamed.validation_losses(heads[0], layer), streamed.validation_losses(heads[1], rougher)
    assert isinstance(kept, HeldOutLosses)
    gain = (kept - new).double()
    assert isinstance(gain, PairedLossGain)
    with torch.no_grad():
        inputs = standardise.inputs(X[held])
        target = torch.as_tensor(standardise.target(y[held])[:, None], dtype=torch.float32)
        reference = (heads[0].sample_losses(layer(inputs), target).double()
                     - heads[1].sample_losses(rougher(inputs), target).double())
    assert gain.shape == reference.shape == (int(held.sum()),)
    assert gain.mean() == pytest.approx(float(reference.mean()), rel=1e-6)
    assert gain.std() == pytest.approx(float(reference.std()), rel=1e-6)
    with pytest.raises(TypeError, match="same validation rows"):
        kept - reference


def test_refined_retry_follows_the_training_rows_not_the_sample(monkeypatch):
    """The search is retried at a larger penalty by the training rows a fit stands for, not its sample's."""
    import rffkit._rffnet_base as base
    import rffkit._search_refine as search_refine
    from rffkit import RFFNetClassifier

    seen, search = [], search_refine.search_relevances

    def spy(*args, **kwargs):
        seen.append((kwargs["alpha"], args[1].shape[0]))
        return search(*args, **kwargs)

    monkeypatch.setattr(search_refine, "search_relevances", spy)
    X, y = make_data(3000)
    labels = (y > np.median(y)).astype(int)
    fast = dict(n_components=60, max_iter=3, random_state=0, linear_term=False, rescale_groups=False,
                align_frequencies=False, prune_relevances=False)
    # a retry on at most 2,000 training rows, above 200
    settings = replace(base.DEFAULT_SETTINGS, first_stage_rows=200, refined_retry_rows=2000)
    for X_fit, y_fit in ((X[:1000], labels[:1000]), (ArraySource(X, labels, chunk_rows=400), None)):
        model = RFFNetClassifier(**fast)
        model._settings = settings
        model.fit(X_fit, y_fit)
    alpha = settings.default_alpha
    # in memory: 900 training rows, two searches; streamed: a sample of the 2,700 training rows, one
    assert [a for a, _ in seen] == [alpha, 10 * alpha, alpha], seen
    assert seen[0][1] == seen[1][1] == 900 and 200 < seen[2][1] < 2000
