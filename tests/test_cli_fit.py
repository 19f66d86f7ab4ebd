"""rffkit fit / predict / relevances / info on files: what they compute, print and save."""

import json
import re
import types
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

import rffkit
from rffkit import _cli_commands, _cli_support, cli
from rffkit._cli_support import (
    RowSplit, choose_task, column_relevances, parse_settings, takes_sources,
)
from rffkit._streaming import validation_mask
from rffkit.io import ArraySource, ColumnEncoding, TableSource, open_table
from rffkit.ridge import RFFRidge

N_ROWS = 300


def _columns(n=N_ROWS, seed=0):
    """y depends on x and on colour (red adds 1.5), not on z."""
    rng = np.random.default_rng(seed)
    x, z = rng.uniform(-2, 2, n), rng.normal(size=n)
    colour = rng.choice(["blue", "green", "red"], n)
    y = np.sin(2 * x) + 1.5 * (colour == "red") + 0.1 * rng.normal(size=n)
    return {"id": np.arange(n) + 1000, "x": x, "z": z, "colour": colour, "y": y}


@pytest.fixture
def table_csv(tmp_path):
    path = tmp_path / "data.csv"
    pa_csv.write_csv(pa.table(_columns()), path)
    return path


def _run(capsys, *argv):
    status = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def _encoded(path, bundle):
    """X of every row of ``path`` encoded as the model was, and y."""
    chunks = list(open_table(str(path), target="y",
                             encoding=ColumnEncoding.from_dict(bundle["encoding"])).iter_chunks())
    return np.concatenate([c.X for c in chunks]), np.concatenate([c.y for c in chunks])


def test_fit_reports_saves_and_predict_relevances_info_agree(table_csv, tmp_path, capsys):
    model_path, predictions = tmp_path / "m.rffkit", tmp_path / "p.parquet"
    out = _run(capsys, "fit", table_csv, "--target", "y", "--features", "x", "z", "colour",
               "--set", "max_iter=30", "--output", model_path)
    bundle = rffkit.load(model_path)
    meta, model = bundle["meta"], bundle["estimator"]
    assert bundle["format"] == "rffkit-command-line" and type(model).__name__ == "RFFNetRegressor"
    assert model.get_params()["max_iter"] == 30 and model.get_params()["random_state"] == 0
    assert meta["columns"] == ["x", "z", "colour"]
    assert meta["feature_names"] == ["x", "z", "colour=blue", "colour=green", "colour=red"]

    # the held-out score is R^2 of the saved model on the rows the hash holds out
    X, y = _encoded(table_csv, bundle)
    held_out = validation_mask(np.arange(N_ROWS), 0.2, seed=0)
    assert (meta["n_train"], meta["n_test"]) == (int((~held_out).sum()), int(held_out.sum()))
    residual = _cli_support.predictions(model, X[held_out]) - y[held_out]  # a streamed fit: the model knows its column names
    r2 = 1 - residual @ residual / np.sum((y[held_out] - y[held_out].mean()) ** 2)
    assert meta["score"]["r2"] == pytest.approx(r2, rel=1e-9) and r2 > 0.8
    assert f"held-out score on {held_out.sum()} rows: R^2 {r2:.3f}" in out

    # relevances by original column: the norm of the one-hot shares, then shares again; z, the noise, comes last
    shares = np.abs(model.feature_importances_) / np.abs(model.feature_importances_).sum()
    norms = {"x": shares[0], "z": shares[1], "colour": np.sqrt(np.sum(shares[2:] ** 2))}
    expected = {name: value / sum(norms.values()) for name, value in norms.items()}
    assert meta["relevances"] == pytest.approx(expected, rel=1e-12)
    assert list(meta["relevances"])[-1] == "z"
    out = _run(capsys, "relevances", model_path, "--json")
    assert json.loads(out)["relevances"] == pytest.approx(expected, rel=1e-12)

    # predict on the raw file: the same encoding, ids copied through, rows in file order
    out = _run(capsys, "predict", model_path, table_csv, "--id", "id", "--output", predictions)
    written = pq.read_table(predictions)
    assert written.column_names == ["id", "predicted_y"]
    assert written["id"].to_pylist() == list(range(1000, 1000 + N_ROWS))
    np.testing.assert_array_equal(written["predicted_y"].to_numpy(), _cli_support.predictions(model, X))
    assert out.strip() == f"wrote {N_ROWS} predictions to {predictions}"

    info = _run(capsys, "info", model_path)
    for text in ("estimator: RFFNetRegressor(max_iter=30, random_state=0)", "target 'y'",
                 f"held-out score: R^2 {r2:.3f}", "columns (3): x, z, colour",
                 "model inputs (5): x, z, colour=blue, colour=green, colour=red",
                 f"written by rffkit {rffkit.__version__}", "format version 1"):
        assert text in info


def test_verbose_reports_the_fit_and_not_the_trial_fits(tmp_path, capsys, caplog):
    """Whether the estimator takes a source is tried on 32 rows; --verbose had printed that trial's result
    ('fitted ... on 32 streamed rows') beside the real fit's."""
    x = np.random.default_rng(0).normal(size=300)
    pa_csv.write_csv(pa.table({"x": x, "y": np.sin(2 * x)}), tmp_path / "d.csv")
    status = cli.main(["fit", str(tmp_path / "d.csv"), "--target", "y", "--verbose", "--set", "n_components=40",
                       "--output", str(tmp_path / "v.rffkit")])
    assert status == 0, capsys.readouterr().err
    summaries = [record.getMessage() for record in caplog.records if "fitted in" in record.getMessage()]
    assert len(summaries) == 1 and "streamed rows" not in summaries[0], summaries


def test_fit_and_info_say_when_rffnet_is_the_linear_only_model(tmp_path, capsys):
    rng = np.random.default_rng(1)
    x, z = rng.normal(size=N_ROWS), rng.normal(size=N_ROWS)
    path, model_path = tmp_path / "linear.csv", tmp_path / "m.rffkit"
    pa_csv.write_csv(pa.table({"x": x, "z": z, "y": 2.0 * x + 0.5 * rng.normal(size=N_ROWS)}), path)
    out = _run(capsys, "fit", path, "--target", "y", "--output", model_path)
    bundle = rffkit.load(model_path)
    assert bundle["estimator"].linear_only_ and bundle["meta"]["linear_only"]
    assert "model: ridge regression (RFFNet's kernel model did not beat it" in out
    assert "(the linear-only model: random-feature weights 0)" in _run(capsys, "info", model_path)
    assert "its linear-only model's weight sizes as shares" in _run(capsys, "relevances", model_path)
    assert json.loads(_run(capsys, "relevances", model_path, "--json"))["linear_only"] is True
    # a class that follows a linear logit: logistic regression
    label = (rng.uniform(size=N_ROWS) < 1.0 / (1.0 + np.exp(-2.0 * x))).astype(int)
    pa_csv.write_csv(pa.table({"x": x, "z": z, "label": label}), tmp_path / "classes.csv")
    out = _run(capsys, "fit", tmp_path / "classes.csv", "--target", "label", "--output", tmp_path / "c.rffkit")
    assert "model: logistic regression (RFFNet's kernel model did not beat it" in out
    # the sine of the other tests is no linear model
    assert "linear-only" not in _run(capsys, "fit", _write(tmp_path / "sine.csv"), "--target", "y",
                                     "--features", "x", "z", "colour", "--output", tmp_path / "s.rffkit")


def _write(path):
    pa_csv.write_csv(pa.table(_columns()), path)
    return path


def test_column_relevances_combine_shares_by_original_column():
    class Fitted:
        feature_importances_ = np.array([1.5, -1.0, 0.3, 0.4])

    # c's two columns weigh as one of norm sqrt(0.3^2 + 0.4^2) = 0.5, beside 1.5 and 1.0: 0.5, 1/3, 1/6
    shares = column_relevances(Fitted(), ["a", "b", "c", "c"])
    assert list(shares) == ["a", "b", "c"]
    assert list(shares.values()) == pytest.approx([0.5, 1 / 3, 1 / 6])
    assert column_relevances(RFFRidge(), ["a"]) is None


@pytest.mark.parametrize("kind, values, task", [
    ("O", ["no", "yes"], "classification"),
    ("b", [False, True], "classification"),
    ("i", list(range(20)), "classification"),
    ("f", [0.0, 1.0, 2.0], "classification"),
    ("i", None, "regression"),            # more than 20 distinct whole numbers
    ("f", [0.5, 1.0], "regression"),
])
def test_task_auto_rule(kind, values, task):
    assert choose_task("auto", kind, values)[0] == task


def test_classes_need_two_rows_each_on_average():
    assert choose_task("auto", "i", list(range(10)), n_rows=20)[0] == "classification"
    task, why = choose_task("auto", "i", list(range(11)), n_rows=20)  # scikit-learn's type_of_target: continuous
    assert task == "regression" and "11 distinct whole numbers in 20 rows" in why
    assert choose_task("auto", "b", [False, True], n_rows=3)[0] == "classification"
    with pytest.raises(cli.CommandLineError, match="9,409 distinct values: a classification of more than 1,000"):
        choose_task("auto", "O", None, n_rows=26_217, n_distinct=9_409)  # DAAG nassCDS' caseid
    for kind, values, requested in (("O", None, "auto"), ("i", list(range(11)), "classification")):
        with pytest.raises(cli.CommandLineError, match="11 distinct values in 20 rows: a class has fewer than two rows"):
            choose_task(requested, kind, values, n_rows=20, n_distinct=11)


def test_classification_with_probabilities(tmp_path, capsys):
    columns = _columns()
    columns["y"] = np.digitize(columns["x"], [-0.7, 0.7])  # three classes 0, 1, 2
    path = tmp_path / "classes.parquet"
    pq.write_table(pa.table(columns), path)
    out = _run(capsys, "fit", path, "--target", "y", "--features", "x", "z", "--model", "ridge",
               "--set", "features__n_components=50", "--output", tmp_path / "c.rffkit")
    assert "task: classification (the target holds 3 distinct whole numbers" in out
    bundle = rffkit.load(tmp_path / "c.rffkit")
    model, meta = bundle["estimator"], bundle["meta"]
    assert [name for name, _ in model.steps] == ["standardscaler", "rffclassifier"]
    assert meta["classes"] == [0, 1, 2]

    X = np.column_stack([columns["x"], columns["z"]])
    held_out = validation_mask(np.arange(N_ROWS), 0.2, seed=0)
    proba = model.predict_proba(X[held_out])
    truth = columns["y"][held_out]
    assert meta["score"]["accuracy"] == pytest.approx(np.mean(model.predict(X[held_out]) == truth))
    assert meta["score"]["log_loss"] == pytest.approx(-np.mean(np.log(proba[np.arange(len(truth)), truth])))

    _run(capsys, "predict", tmp_path / "c.rffkit", path, "--proba", "--output", tmp_path / "p.csv")
    written = pa_csv.read_csv(tmp_path / "p.csv")
    assert written.column_names == ["predicted_y", "proba_0", "proba_1", "proba_2"]
    probabilities = np.column_stack([written[f"proba_{k}"].to_numpy() for k in range(3)])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(probabilities, model.predict_proba(X), rtol=1e-9)


def test_parse_settings_literals_and_text():
    assert parse_settings(["alphas=[0.1, 1.0]", "device=cuda", "alpha=auto", "random_state=None",
                           "features__n_components=2000", "name=a=b"]) == {
        "alphas": [0.1, 1.0], "device": "cuda", "alpha": "auto", "random_state": None,
        "features__n_components": 2000, "name": "a=b"}


def test_nested_set_on_the_default_feature_map(table_csv, tmp_path, capsys):
    _run(capsys, "fit", table_csv, "--target", "y", "--features", "x", "z", "--model", "ridge",
         "--set", "features__n_components=40", "--set", "alphas=(0.1, 1.0)", "--test-size", "0",
         "--output", tmp_path / "r.rffkit")
    bundle = rffkit.load(tmp_path / "r.rffkit")
    ridge = bundle["estimator"].steps[-1][1]
    assert ridge.features.n_components == 40 and ridge.features.length_scale == pytest.approx(1.0)
    assert ridge.coef_.shape == (40,) and ridge.alphas == (0.1, 1.0)
    assert bundle["meta"]["score"] is None and bundle["meta"]["n_train"] == N_ROWS


def test_json_report(table_csv, tmp_path, capsys):
    out = _run(capsys, "fit", table_csv, "--target", "y", "--model", "ridge", "--features", "x",
               "colour", "--json", "--output", tmp_path / "r.rffkit")
    report = json.loads(out)
    assert report["model_file"] == str(tmp_path / "r.rffkit")
    assert report["estimator"] == "RFFRidge" and report["task"] == "regression"
    assert report["score"]["r2"] == rffkit.load(tmp_path / "r.rffkit")["meta"]["score"]["r2"]
    info = json.loads(_run(capsys, "info", tmp_path / "r.rffkit", "--json"))
    assert info["file"]["format_version"] == 1 and info["parameters"]["random_state"] == "0"


# -- the streamed path ------------------------------------------------------------------------
class ReadsSources(RFFRidge):
    """An RFFRidge that also takes a source (by reading its chunks) and keeps what it got."""

    sources = []

    def fit(self, X, y=None):
        if isinstance(X, (TableSource, ArraySource)):
            ReadsSources.sources.append(X)
            chunks = list(X.iter_chunks())
            X, y = (np.concatenate([c[k] for c in chunks]) for k in (0, 1))
        return super().fit(X, y)


def test_an_estimator_that_takes_sources_gets_the_training_rows(table_csv, monkeypatch, capsys):
    saved = []
    monkeypatch.setattr(_cli_commands, "save", lambda obj, path: saved.append(obj))
    argv = ["fit", table_csv, "--target", "y", "--model", "ridge", "--set",
            "features__n_components=30", "--features", "x", "z", "colour"]
    monkeypatch.setattr(_cli_commands, "takes_sources", lambda estimator, sample: False)
    assert "in memory: 300 x 5 values" in _run(capsys, *argv)

    monkeypatch.undo()
    monkeypatch.setattr(_cli_commands, "save", lambda obj, path: saved.append(obj))
    estimators = _cli_support.estimators()
    estimators["ridge", "regression"] = (ReadsSources, True)
    monkeypatch.setattr(_cli_commands, "estimators", lambda: estimators)
    # float64 as in memory, to compare the two fits to rounding
    assert "streamed: ReadsSources reads the training rows" in _run(capsys, *argv, "--stream", "always",
                                                                   "--dtype", "float64")

    source = ReadsSources.sources[-1]
    assert isinstance(source, RowSplit)
    held_out = validation_mask(np.arange(N_ROWS), 0.2, seed=0)
    rows = np.concatenate([chunk.rows for chunk in source.iter_chunks()])
    np.testing.assert_array_equal(rows, np.flatnonzero(~held_out))
    in_memory, streamed = saved
    X, _ = _encoded(table_csv, in_memory)
    np.testing.assert_allclose(streamed["estimator"].predict(X), in_memory["estimator"].predict(X), rtol=1e-10)
    assert streamed["meta"]["score"]["r2"] == pytest.approx(in_memory["meta"]["score"]["r2"], rel=1e-10)
    assert (streamed["meta"]["n_train"], streamed["meta"]["n_test"]) == (in_memory["meta"]["n_train"],
                                                                          in_memory["meta"]["n_test"])


def test_stream_auto_reads_into_memory_what_fits_and_streams_the_rest(table_csv, monkeypatch, capsys):
    from rffkit import _memory

    saved = []
    ReadsSources.sources.clear()

    def _split_fits():  # fits on the training rows as a source (takes_sources also fits a 32-row sample)
        return sum(isinstance(source, RowSplit) for source in ReadsSources.sources)

    estimators = _cli_support.estimators()
    estimators["ridge", "regression"] = (ReadsSources, True)
    monkeypatch.setattr(_cli_commands, "estimators", lambda: estimators)
    monkeypatch.setattr(_cli_commands, "save", lambda obj, path: saved.append(obj))
    argv = ["fit", table_csv, "--target", "y", "--model", "ridge", "--set", "features__n_components=30",
            "--features", "x", "z", "colour"]
    out = _run(capsys, *argv)
    assert "in memory: 300 x 5 values" in out and "the in-memory fit needs about" in out
    assert _split_fits() == 0 and saved[-1]["meta"]["streamed"] is False
    # the fit's estimate (features and 30 x 30 statistics, the table twice) over half the memory
    monkeypatch.setattr(_memory, "available_memory", lambda: 1000)
    with rffkit.config_context(check_memory=False):  # the fit itself, once streamed, would refuse 1000 bytes
        out = _run(capsys, *argv)
    assert "streamed: ReadsSources reads the training rows from the files chunk by chunk in float32 (the " \
           "in-memory fit would need about" in out and "more than half of the 1.0 KB available" in out
    assert _split_fits() == 1 and saved[-1]["meta"]["streamed"] is True
    monkeypatch.setattr(_memory, "available_memory", lambda: 10**12)
    assert "in memory: 300 x 5 values (12.0 KB); --stream never" in _run(capsys, *argv, "--stream", "never")
    assert _split_fits() == 1


def test_stream_choices_that_cannot_be_kept_are_refused(table_csv, capsys):
    assert cli.main(["fit", str(table_csv), "--target", "y", "--exclude", "id", "--model", "srff", "--stream",
                     "always"]) == 2
    err = capsys.readouterr().err
    assert "--stream always: SRFFRegressor does not fit from a data source" in err
    with pytest.raises(cli.CommandLineError, match="--stream never reads the table into one process"):
        source = open_table(str(table_csv), target="y", features=["x", "z"])
        first = next(source.iter_chunks(chunk_rows=32))
        _cli_commands._streams("never", RFFRidge(), source, (first.X, first.y), world_size=2)


def test_row_split_partitions_rows_over_ranks(table_csv):
    source = open_table(str(table_csv), target="y", chunk_rows=64, exclude=["id"])
    train, test = RowSplit(source, 0.3, 5), RowSplit(source, 0.3, 5, held_out=True)
    assert train.n_rows + test.n_rows == N_ROWS
    per_rank = [np.concatenate([c.rows for c in train.iter_chunks(rank=r, world_size=2)]) for r in (0, 1)]
    test_rows = np.concatenate([c.rows for c in test.iter_chunks()])
    assert sorted(np.concatenate(per_rank + [test_rows]).tolist()) == list(range(N_ROWS))
    assert sum(map(len, per_rank)) == train.n_rows and len(test_rows) == test.n_rows
    assert takes_sources(rffkit.RFFNetRegressor(max_iter=5), (np.arange(8.0).reshape(4, 2), np.arange(4.0)))
    # one class in the first rows (a file sorted by its label): both fits fail, the sample is at fault
    assert takes_sources(rffkit.RFFClassifier(), (np.arange(8.0).reshape(4, 2), np.zeros(4)))


def test_predict_on_shards_keeps_the_row_order(table_csv, tmp_path, capsys):
    _run(capsys, "fit", table_csv, "--target", "y", "--model", "ridge", "--features", "x", "colour",
         "--output", tmp_path / "r.rffkit")
    table = pa_csv.read_csv(table_csv)
    for part, start in enumerate((0, 100, 250)):
        pa_csv.write_csv(table.slice(start, {0: 100, 100: 150, 250: 50}[start]), tmp_path / f"part-{part}.csv")
    _run(capsys, "predict", tmp_path / "r.rffkit", tmp_path / "part-*.csv", "--id", "id", "z",
         "--output", tmp_path / "p.csv")
    _run(capsys, "predict", tmp_path / "r.rffkit", table_csv, "--output", tmp_path / "whole.csv")
    shards, whole = pa_csv.read_csv(tmp_path / "p.csv"), pa_csv.read_csv(tmp_path / "whole.csv")
    assert shards.column_names == ["id", "z", "predicted_y"]
    assert shards["id"].to_pylist() == table["id"].to_pylist()
    assert shards["z"].to_pylist() == table["z"].to_pylist()
    assert shards["predicted_y"].to_pylist() == whole["predicted_y"].to_pylist()
    # files named one by one keep the order given (helper-46: they had been sorted by path, so predictions for
    # jan.csv feb.csv came out feb first); a glob's files come sorted, and a file named twice is read once
    named = [tmp_path / f"part-{part}.csv" for part in (2, 0, 1)]
    _run(capsys, "predict", tmp_path / "r.rffkit", *named, tmp_path / "part-*.csv", "--id", "id",
         "--output", tmp_path / "given.csv")
    given = pa_csv.read_csv(tmp_path / "given.csv")["id"].to_pylist()
    assert given == table["id"].to_pylist()[250:] + table["id"].to_pylist()[:250]


def test_a_streamed_pipeline_predicts_on_arrays_as_the_in_memory_one(table_csv, tmp_path, capsys):
    """The scaler and the model behind it know no column names, streamed or not (no warning on arrays)."""
    bundles = {}
    for stream in ("never", "always"):
        path = tmp_path / f"{stream}.rffkit"
        _run(capsys, "fit", table_csv, "--target", "y", "--model", "ridge", "--set", "features__n_components=30",
             "--features", "x", "z", "colour", "--stream", stream, "--dtype", "float64", "--output", path)
        bundles[stream] = rffkit.load(path)
    X, _ = _encoded(table_csv, bundles["never"])
    for bundle in bundles.values():
        assert not any(hasattr(step, "feature_names_in_") for _, step in bundle["estimator"].steps)
    in_memory = bundles["never"]["estimator"].predict(X)  # warnings are errors in the tests
    np.testing.assert_allclose(bundles["always"]["estimator"].predict(X), in_memory, rtol=1e-6,
                               atol=1e-6 * np.abs(in_memory).max())


def test_dtype_auto_streams_in_float32_and_reads_float64_into_memory(table_csv, tmp_path, capsys):
    argv = ["fit", table_csv, "--target", "y", "--model", "ridge", "--set", "features__n_components=30",
            "--features", "x", "z", "colour", "--output", tmp_path / "m.rffkit"]
    assert "chunk by chunk in float32 (--stream always)" in _run(capsys, *argv, "--stream", "always")
    assert rffkit.load(tmp_path / "m.rffkit")["estimator"].steps[-1][1].coef_.dtype == np.float32
    assert "in memory: 300 x 5 values (12.0 KB)" in _run(capsys, *argv)
    assert rffkit.load(tmp_path / "m.rffkit")["estimator"].steps[-1][1].coef_.dtype == np.float64


@pytest.mark.parametrize("model, stream", [("ridge", "always"), ("ridge", "never"), ("rffnet", "never")])
def test_dtype_float32_reads_and_fits_in_single_precision(table_csv, tmp_path, capsys, model, stream):
    settings = ["--set", "features__n_components=30"] if model == "ridge" else ["--set", "max_iter=20"]
    fitted = {}
    for dtype in ("float64", "float32"):
        path = tmp_path / f"{dtype}.rffkit"
        out = _run(capsys, "fit", table_csv, "--target", "y", "--model", model, *settings, "--features", "x", "z",
                   "colour", "--stream", stream, "--dtype", dtype, "--output", path)
        if stream == "never":
            assert f"300 x 5 values ({'12.0' if dtype == 'float64' else '6.0'} KB)" in out
        fitted[dtype] = rffkit.load(path)
    X, _ = _encoded(table_csv, fitted["float64"])
    single, double = fitted["float32"]["estimator"], fitted["float64"]["estimator"]
    if model == "ridge":  # RFFNet reports its relevances in float64 whatever it computed in
        assert single.steps[-1][1].coef_.dtype == np.float32
    expected = double.predict(X)
    np.testing.assert_allclose(single.predict(X.astype(np.float32)), expected, atol=0.05 * np.abs(expected).max())


def test_a_date_column_is_an_input_and_the_report_says_how(tmp_path, capsys):
    rng = np.random.default_rng(0)
    days = np.datetime64("2013-01-01") + rng.integers(0, 365, 200).astype("timedelta64[D]")
    x = rng.normal(size=200)
    y = np.sin(2 * np.pi * (days - days.min()).astype(float) / 365) + 0.3 * x
    clock = pa.array((rng.integers(0, 86_400, 200) * 1_000_000).astype(np.int64), type=pa.time64("us"))
    pq.write_table(pa.table({"day": days, "at": clock, "x": x, "y": y}), tmp_path / "t.parquet")
    out = _run(capsys, "fit", tmp_path / "t.parquet", "--target", "y", "--model", "ridge",
               "--output", tmp_path / "m.rffkit")
    assert "dates and times: day as days since 1970-01-01; at as hours since midnight" in out
    assert rffkit.load(tmp_path / "m.rffkit")["meta"]["time_columns"] == ["day", "at"]
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "t.parquet", "--output", tmp_path / "p.csv")


def test_a_target_of_one_value_or_one_training_class_is_a_clear_error(tmp_path, capsys):
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=60), "n": 20})
    frame.to_csv(tmp_path / "one.csv", index=False)
    assert cli.main(["fit", str(tmp_path / "one.csv"), "--target", "n", "--output", str(tmp_path / "m.rffkit")]) == 2
    assert "the target 'n' holds one value (20) on all 60 rows" in capsys.readouterr().err
    held_out = validation_mask(np.arange(60), 0.2, 0)
    frame["n"] = np.where(np.arange(60) == np.flatnonzero(held_out)[0], "rare", "common")
    frame.to_csv(tmp_path / "rare.csv", index=False)
    assert cli.main(["fit", str(tmp_path / "rare.csv"), "--target", "n", "--output", str(tmp_path / "m.rffkit")]) == 2
    err = capsys.readouterr().err
    assert "training rows hold one class ('common'); the others ('rare') are only on held-out rows" in err
    assert not (tmp_path / "m.rffkit").exists()


def test_a_text_target_of_one_value_per_row_is_refused(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "t.csv"
    pa_csv.write_csv(pa.table({"x": rng.normal(size=50), "name": [f"car {k % 40}" for k in range(50)]}), path)
    assert cli.main(["fit", str(path), "--target", "name", "--output", str(tmp_path / "m.rffkit")]) == 2
    err = capsys.readouterr().err
    assert "the target holds 40 distinct values in 50 rows" in err and "choose another --target." in err


def test_a_classification_of_more_than_a_thousand_whole_numbers_is_refused(tmp_path, capsys):
    # summarise_target stops counting numbers past 1,000: the count must still refuse the classification
    rng = np.random.default_rng(0)
    path = tmp_path / "many.csv"
    pa_csv.write_csv(pa.table({"x": rng.normal(size=3000), "y": rng.permutation(3000) % 1500}), path)
    argv = ["fit", str(path), "--target", "y", "--task", "classification", "--output", str(tmp_path / "m.rffkit")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "the target holds more than 1,000 distinct values: a classification of more than 1,000" in err
    assert "or --task regression." in err and not (tmp_path / "m.rffkit").exists()


def test_exclude_leaves_an_identifier_out(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.normal(size=1500)
    path = tmp_path / "t.csv"
    pa_csv.write_csv(pa.table({"id": [f"row{k}" for k in range(1500)], "x": x, "y": np.sin(x)}), path)
    assert cli.main(["fit", str(path), "--target", "y", "--output", str(tmp_path / "m.rffkit")]) == 2
    assert "leave it out (--exclude id)" in capsys.readouterr().err
    _run(capsys, "fit", path, "--target", "y", "--exclude", "id", "--model", "ridge", "--output", tmp_path / "m.rffkit")
    assert rffkit.load(tmp_path / "m.rffkit")["encoding"]["columns"] == ["x"]
    assert cli.main(["fit", str(path), "--target", "y", "--exclude", "id", "--features", "x"]) == 2
    assert "argument --features: not allowed with argument --exclude" in capsys.readouterr().err
    # a column named like an option: argparse's error says how to write it
    assert cli.main(["fit", str(path), "--target", "-a"]) == 2
    assert "a value that starts with '-' is written --target=VALUE" in capsys.readouterr().err


def test_a_trial_fit_that_fails_numerically_does_not_end_the_command(monkeypatch):
    """takes_sources: a LinAlgError (a RuntimeError) of the 32-row trial fit is a failed trial, not a traceback."""
    import torch

    from rffkit import RFFRidge

    def fail(self, X, y=None):
        raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")

    monkeypatch.setattr(RFFRidge, "fit", fail)
    X, y = np.random.default_rng(0).normal(size=(32, 3)), np.arange(32.0)
    assert takes_sources(RFFRidge(), (X, y))  # both trials failed: the rows are at fault, the real fit will say


def test_the_code_hint_names_codes_and_not_counts_or_measures_of_a_code(tmp_path):
    """A name ending in a code's word is a code (subjectID, county_fips), unless a count or a measure
    word comes before it (persons_in_household, price_per_unit, years_school)."""
    from rffkit._cli_report import code_hints

    columns = ["subjectID", "county_fips", "persons_in_household", "price_per_unit", "years_school", "week"]
    values = np.repeat(np.arange(1, 11), 4)  # 10 whole numbers, 4 rows each
    pa_csv.write_csv(pa.table({**{name: values for name in columns}, "y": np.arange(40.0)}), tmp_path / "t.csv")
    source = open_table(tmp_path / "t.csv", target="y")
    hints = code_hints(source, np.concatenate([chunk.X for chunk in source.iter_chunks()]))
    assert [hint.split()[1] for hint in hints] == ["subjectID", "county_fips"]


def test_categorical_fits_a_code_stored_as_numbers_as_one_input_per_value(tmp_path, capsys):
    """Panel data: the target is a subject's level, the subject a number. Read as one number the code
    says little; one-hot encoded (--categorical) it names each subject. The model file remembers it."""
    rng = np.random.default_rng(0)
    subject = np.repeat(np.arange(1, 41), 8)
    levels = rng.normal(size=41)
    path = tmp_path / "panel.csv"
    pa_csv.write_csv(pa.table({"subject": subject, "week": np.tile(np.arange(8), 40),
                               "y": levels[subject] + 0.05 * rng.normal(size=subject.size)}), path)
    scores = {}
    for option in ([], ["--categorical", "subject"]):
        out = _run(capsys, "fit", path, "--target", "y", *option, "--model", "ridge", "--json",
                   "--output", tmp_path / "m.rffkit")
        report = json.loads(out)
        scores[bool(option)] = report["score"]["r2"]
        assert report["hints"] == ([] if option else [
            "hint: subject holds 40 whole numbers, each on 8 rows on average: if they are codes (a subject, a site), "
            "--categorical subject makes each its own input"])  # not for week, whose name is no code's
    assert report["categorical_codes"] == ["subject"] and len(report["feature_names"]) == 41
    assert scores[True] > 0.95 > 0.5 > scores[False]
    bundle = rffkit.load(tmp_path / "m.rffkit")
    assert bundle["version"] == 3 and bundle["encoding"]["categories"]["subject"][:3] == ["1", "2", "3"]
    out = _run(capsys, "fit", path, "--target", "y", "--categorical", "subject", "--model", "ridge",
               "--output", tmp_path / "m.rffkit")
    assert "one-hot encoded: subject (subject as codes, --categorical; 41 model inputs in all)" in out
    info = _run(capsys, "info", tmp_path / "m.rffkit")  # the first 30 inputs of the 41
    assert "model inputs (41): subject=1, subject=2, " in info and "subject=30, ... (11 more; --json lists all)" in info
    # new rows, one of a subject never seen: predicted from week alone, with a warning that names it

    def predict(name):
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # the command line prints them
            assert cli.main(["predict", str(tmp_path / "m.rffkit"), str(tmp_path / name), "--output",
                             str(tmp_path / "p.csv")]) == 0
        return pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy(), capsys.readouterr().err

    pa_csv.write_csv(pa.table({"subject": [3, 99], "week": [1, 1]}), tmp_path / "new.csv")
    predicted, err = predict("new.csv")
    assert abs(predicted[0] - levels[3]) < 0.2 and np.isfinite(predicted[1])
    assert ("rffkit: warning: column 'subject': 1 row holds 1 category the model was not fitted on ('99'); the model "
            "sees that row as none of the column's 40 categories ('1', '2', '3', '4', '5', ... (40 in all)).") in err
    # the codes written as text in a file where the column is text ('3.0' beside 'x'): 3.0 is subject 3
    (tmp_path / "text.csv").write_text("subject,week\n3.0,1\n 3 ,1\nx,1\n,1\n")
    as_text, err = predict("text.csv")
    np.testing.assert_allclose(as_text, predicted[[0, 0, 1, 1]], rtol=1e-12)
    assert "2 rows hold 2 categories the model was not fitted on ('x', '(missing)')" in err
    assert cli.main(["fit", str(path), "--target", "y", "--categorical", "y"]) == 2
    assert "categorical names 'y', not a feature column" in capsys.readouterr().err


def test_dates_written_as_text_are_fitted_as_dates_and_predicted_from_either_form(tmp_path, capsys):
    """A CSV of US dates (12/31/2020), which CSV readers leave as text, was 702 one-hot inputs, one per
    date (held-out R^2 0.473 on this table); read as days since 1970 it is one input (R^2 above 0.99).
    The model file (version 4) keeps the form, and new data may write the dates either way."""
    rng = np.random.default_rng(0)
    days = rng.integers(0, 730, 3000)
    dates = (np.datetime64("2020-01-01") + days).astype(object)
    x = rng.normal(size=3000)
    y = 2 * np.sin(days / 730 * 2 * np.pi) + x + 0.1 * rng.normal(size=3000)
    pa_csv.write_csv(pa.table({"day": [f"{d.month}/{d.day}/{d.year}" for d in dates], "x": x, "y": y}),
                     tmp_path / "t.csv")
    out = _run(capsys, "fit", tmp_path / "t.csv", "--target", "y", "--model", "ridge", "--output",
               tmp_path / "m.rffkit")
    assert "dates and times: day as days since 1970-01-01 (day written %m/%d/%Y)" in out
    assert float(re.search(r"R\^2 (\S+),", out).group(1)) > 0.99
    bundle = rffkit.load(tmp_path / "m.rffkit")
    assert bundle["version"] == 4 and bundle["encoding"]["dates"] == {"day": "%m/%d/%Y"}
    info = _run(capsys, "info", tmp_path / "m.rffkit").splitlines()
    assert info[6].startswith("columns (2): day, x") and info[7] == "dates written as text: day (%m/%d/%Y)"
    pa_csv.write_csv(pa.table({"day": ["12/31/2021", "1/5/2020"], "x": [0.0, 0.0]}), tmp_path / "text.csv")
    pa_csv.write_csv(pa.table({"day": np.array(["2021-12-31", "2020-01-05"], dtype="datetime64[D]"), "x": [0.0, 0.0]}),
                     tmp_path / "iso.csv")
    predicted = []
    for name in ("text.csv", "iso.csv"):
        _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / name, "--output", tmp_path / "p.csv")
        predicted.append(pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy())
    np.testing.assert_allclose(predicted[0], predicted[1], rtol=1e-12)
    np.testing.assert_allclose(predicted[0], 2 * np.sin(np.array([730, 4]) / 730 * 2 * np.pi), atol=0.2)
    # day first, where no day is over 12 in the file: the form given by --dates
    early = [d for d in dates if d.day <= 12]
    pa_csv.write_csv(pa.table({"day": [f"{d.day}/{d.month}/{d.year}" for d in early], "y": np.arange(len(early))}),
                     tmp_path / "early.csv")
    out = _run(capsys, "fit", tmp_path / "early.csv", "--target", "y", "--model", "ridge", "--dates", "day=%d/%m/%Y",
               "--output", tmp_path / "m.rffkit")
    assert "dates and times: day as days since 1970-01-01 (day written %d/%m/%Y)" in out
    assert cli.main(["fit", str(tmp_path / "early.csv"), "--target", "y", "--dates", "day"]) == 2
    err = capsys.readouterr().err
    assert "--dates 'day': give COL=FORM, a column and its strptime form such as day=%d/%m/%Y." in err


def test_fit_warns_of_categories_that_only_held_out_rows_hold(tmp_path, capsys):
    """The encoding is learned on the training rows, so a category that only held-out rows hold is none of
    the model's inputs there: the held-out score covers such rows, and fit says how many and which."""
    rng = np.random.default_rng(0)
    held_out = np.flatnonzero(validation_mask(np.arange(200), 0.2, 0))
    code = np.where(np.arange(200) % 2 == 0, "a", "b").astype(object)
    code[held_out[:3]] = "c"
    x = rng.normal(size=200)
    pa_csv.write_csv(pa.table({"code": code, "x": x, "y": x + (code == "a")}), tmp_path / "t.csv")
    for stream in ("never", "always"):
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # the command line prints them
            assert cli.main(["fit", str(tmp_path / "t.csv"), "--target", "y", "--model", "ridge", "--stream", stream,
                             "--output", str(tmp_path / "m.rffkit")]) == 0
        err = capsys.readouterr().err
        assert ("rffkit: warning: column 'code': 3 held-out rows hold 1 category the training rows do not have "
                "('c'); the model sees those rows as none of the column's 2 categories ('a', 'b').") in err


def test_fit_and_predict_read_a_european_csv(tmp_path, capsys):
    """Fields delimited by ';' and decimal commas: found, reported, and read the same way by predict."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    path = tmp_path / "t.csv"
    path.write_text("id;x;y\n" + "".join(f"{k};{a:.4f};{2 * a:.4f}\n".replace(".", ",") for k, a in enumerate(x)))
    out = _run(capsys, "fit", path, "--target", "y", "--exclude", "id", "--model", "ridge", "--output",
               tmp_path / "m.rffkit")
    assert "data: 1 CSV file (t.csv; fields delimited by ';', decimal point ','), 200 rows" in out
    assert float(re.search(r"R\^2 (\S+),", out).group(1)) > 0.99
    _run(capsys, "predict", tmp_path / "m.rffkit", path, "--id", "id", "--output", tmp_path / "p.csv")
    predicted = pa_csv.read_csv(tmp_path / "p.csv")
    assert predicted.column("id").to_pylist() == list(range(200))
    np.testing.assert_allclose(predicted.column("predicted_y").to_numpy(), 2 * x, atol=0.05)
    # a given delimiter overrides the guess; a wrong one is named, beside the one the header uses
    assert cli.main(["fit", str(path), "--target", "y", "--delimiter", ","]) == 2
    err = capsys.readouterr().err
    assert "delimits its fields by ';', not by ',' (the delimiter given" in err and "--delimiter" in err


def test_score_rates_a_saved_model_on_labelled_files(table_csv, tmp_path, capsys):
    """rffkit score: the model's R^2 and RMSE (or accuracy and log-loss) on new labelled rows, equal to
    scikit-learn's on rffkit predict's output; rows without a target are left out and counted."""
    from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, r2_score

    _run(capsys, "fit", table_csv, "--target", "y", "--exclude", "id", "--model", "ridge", "--output",
         tmp_path / "m.rffkit")
    test = _columns(seed=1)
    test["y"] = np.where(np.arange(N_ROWS) == 5, np.nan, test["y"])
    pa_csv.write_csv(pa.table(test), tmp_path / "test.csv")
    out = _run(capsys, "score", tmp_path / "m.rffkit", tmp_path / "test.csv", "--json")
    result = json.loads(out)
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "test.csv", "--output", tmp_path / "p.csv")
    predicted = np.delete(pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy(), 5)
    y = np.delete(test["y"], 5)
    assert result["n_rows"] == N_ROWS - 1 and result["n_rows_dropped"] == 1 and result["task"] == "regression"
    assert result["score"]["r2"] == pytest.approx(r2_score(y, predicted), abs=1e-9)
    assert result["score"]["rmse"] == pytest.approx(np.sqrt(mean_squared_error(y, predicted)), rel=1e-9)
    out = _run(capsys, "score", tmp_path / "m.rffkit", tmp_path / "test.csv")
    assert re.search(rf"score on {N_ROWS - 1} rows of test.csv: R\^2 \S+, RMSE \S+\nleft out: 1 row whose target "
                     r"is missing\nheld-out score at fit, on \d+ rows: R\^2", out)
    # a classifier: accuracy and log-loss, as scikit-learn computes them from the probabilities
    _run(capsys, "fit", table_csv, "--target", "colour", "--exclude", "id", "--model", "ridge", "--output",
         tmp_path / "c.rffkit")
    pa_csv.write_csv(pa.table(_columns(seed=1)), tmp_path / "test.csv")
    result = json.loads(_run(capsys, "score", tmp_path / "c.rffkit", tmp_path / "test.csv", "--json"))
    _run(capsys, "predict", tmp_path / "c.rffkit", tmp_path / "test.csv", "--proba", "--output", tmp_path / "p.csv")
    table = pa_csv.read_csv(tmp_path / "p.csv")
    proba = np.column_stack([table.column(f"proba_{label}").to_numpy() for label in ("blue", "green", "red")])
    labels = _columns(seed=1)["colour"]
    assert result["score"]["accuracy"] == pytest.approx(accuracy_score(labels, table.column("predicted_colour")))
    assert result["score"]["log_loss"] == pytest.approx(log_loss(labels, proba, labels=["blue", "green", "red"]))
    # unlabelled rows are for predict
    pa_csv.write_csv(pa.table({k: v for k, v in _columns().items() if k != "colour"}), tmp_path / "new.csv")
    assert cli.main(["score", str(tmp_path / "c.rffkit"), str(tmp_path / "new.csv")]) == 2
    assert "the data do not hold the target: target column 'colour' is not in" in capsys.readouterr().err


def test_predict_copies_identifiers_as_written(tmp_path, capsys):
    """--id columns are copied as the text of the CSV fields (leading zeros, exponents and codes past 2**63
    kept, and NA or null as text: only an empty field is missing), and as text where the shards disagree on
    their type; a Parquet column keeps its type."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    codes = ["007", "1e3", "18446744073709551617", "18446744073709551618", "NA", "null", "N/A", "nan"] * 5
    pa_csv.write_csv(pa.table({"code": codes, "x": x, "y": 2 * x}), tmp_path / "a.csv")
    _run(capsys, "fit", tmp_path / "a.csv", "--target", "y", "--model", "ridge", "--exclude", "code",
         "--output", tmp_path / "m.rffkit")
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "a.csv", "--id", "code", "--output", tmp_path / "p.csv")
    as_text = pa_csv.ConvertOptions(column_types={"code": pa.string()}, null_values=[""])
    written = pa_csv.read_csv(tmp_path / "p.csv", convert_options=as_text)
    assert written["code"].to_pylist() == codes
    (tmp_path / "shards").mkdir()
    pa_csv.write_csv(pa.table({"code": np.arange(20), "x": x[:20]}), tmp_path / "shards" / "0.csv")
    pa_csv.write_csv(pa.table({"code": codes[20:], "x": x[20:]}), tmp_path / "shards" / "1.csv")
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "shards", "--id", "code", "--output", tmp_path / "s.pq")
    assert pq.read_table(tmp_path / "s.pq")["code"].to_pylist() == [str(i) for i in range(20)] + codes[20:]
    for part, values in enumerate((np.arange(20), codes[20:])):
        pq.write_table(pa.table({"code": values, "x": x[20 * part:20 * part + 20]}), tmp_path / f"{part}.parquet")
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "*.parquet", "--id", "code",
         "--output", tmp_path / "t.pq")
    assert pq.read_table(tmp_path / "t.pq")["code"].to_pylist() == [str(i) for i in range(20)] + codes[20:]
    pq.write_table(pa.table({"code": np.arange(40), "x": x}), tmp_path / "1.parquet")
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "1.parquet", "--id", "code",
         "--output", tmp_path / "u.pq")
    assert pq.read_table(tmp_path / "u.pq")["code"].type == pa.int64()


def test_score_names_the_labels_a_classifier_was_not_fitted_on(table_csv, tmp_path, capsys):
    """A log-loss that labels outside the model's classes leave undefined is explained in score's terms."""
    _run(capsys, "fit", table_csv, "--target", "colour", "--exclude", "id", "--model", "ridge", "--output",
         tmp_path / "c.rffkit")
    test = _columns(seed=1)
    test["colour"] = np.where(test["colour"] == "red", "violet", test["colour"])
    pa_csv.write_csv(pa.table(test), tmp_path / "test.csv")
    out = _run(capsys, "score", tmp_path / "c.rffkit", tmp_path / "test.csv")
    n_violet = int(np.sum(test["colour"] == "violet"))
    assert (f"log-loss undefined ({n_violet} of the {N_ROWS} rows hold a label the model was not fitted on: "
            f"'violet' ({n_violet} rows); its classes are 'blue', 'green', 'red')") in out
    assert "held-out class" not in out.splitlines()[0]
    result = json.loads(_run(capsys, "score", tmp_path / "c.rffkit", tmp_path / "test.csv", "--json"))
    assert result["labels_not_fitted"] == {"violet": n_violet} and result["score"]["log_loss"] is None
    test["colour"] = np.full(N_ROWS, "violet")
    pa_csv.write_csv(pa.table(test), tmp_path / "test.csv")
    out = _run(capsys, "score", tmp_path / "c.rffkit", tmp_path / "test.csv")
    assert f"accuracy 0.000, log-loss undefined (every one of the {N_ROWS} rows holds a label the model" in out


@pytest.mark.parametrize("stream", ["never", "always"])
def test_ridge_leaves_columns_of_0s_and_1s_unscaled(tmp_path, capsys, stream):
    """The StandardScaler before the ridge models standardises the numbers, and leaves one-hot columns,
    missing-value indicators and booleans as they are: standardised, a rare one (3 missing values in 500
    rows) became about 11, far from every row, and the model's predictions there went astray."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (500, 5))
    columns = {f"x{j}": X[:, j].copy() for j in range(5)}
    columns["x0"][:3] = np.nan  # rows 1 and 2 are held out
    flag, colour = rng.random(500) < 0.5, rng.choice(["blue", "red"], 500)
    rare, count = (rng.random(500) < 0.02).astype(np.int64), rng.integers(0, 3, 500)  # 0/1 and 0/1/2 integers
    y = (X ** 2).sum(axis=1) + 0.5 * flag + 0.5 * (colour == "red") + 0.5 * rare + 0.2 * count
    pa_csv.write_csv(pa.table({**columns, "flag": flag, "colour": colour, "rare": rare, "count": count, "y": y}),
                     tmp_path / "t.csv")
    out = _run(capsys, "fit", tmp_path / "t.csv", "--target", "y", "--model", "ridge", "--stream", stream,
               "--output", tmp_path / "m.rffkit")
    bundle = rffkit.load(tmp_path / "m.rffkit")
    assert bundle["meta"]["score"]["r2"] > 0.95  # 0.76 (in memory) and 0.80 (streamed) with the 0/1 columns scaled
    assert "on standardised columns (4 of 0s and 1s as they are: one-hot, missing-value indicators, booleans)" in out
    scaler = bundle["estimator"].steps[0][1]
    names = bundle["meta"]["feature_names"]
    assert "left as they are too: 1 integer column(s) of 0s and 1s (rare)" in out
    assert names == ["x0", "x0=(missing)", "x1", "x2", "x3", "x4", "flag", "colour=blue", "colour=red", "rare",
                     "count"]
    kept = [1, 6, 7, 8, 9]
    assert bundle["meta"]["unscaled_inputs"] == [names[j] for j in kept]
    np.testing.assert_array_equal(scaler.mean_[kept], 0.0)
    np.testing.assert_array_equal(scaler.scale_[kept], 1.0)
    assert np.all(np.abs(scaler.scale_[[0, 2, 3, 4, 5]] - np.sqrt(4 / 3)) < 0.1)  # uniform(-2, 2): sd 1.15
    assert abs(scaler.mean_[10] - 1.0) < 0.1 and abs(scaler.scale_[10] - np.sqrt(2 / 3)) < 0.1  # 0, 1, 2: scaled


def test_only_integer_columns_of_0s_and_1s_count_as_such():
    """E[x (x - 1)] is 0 for integers only when every value is 0 or 1: a single 2, a -1, a constant, or a
    column of 0/1 whose missing values were filled with the mean is standardised."""
    from sklearn.preprocessing import StandardScaler

    source = types.SimpleNamespace(encoding=ColumnEncoding([]), _kinds={})
    columns = {"a": [0] * 999 + [1], "b": [0] * 998 + [1, 2], "c": [1] * 999 + [-1], "d": [1] * 1000,
               "e": [0] * 900 + [1] * 99 + [0.1], "f": [0.0, 1.0] * 500}
    source.encoding = ColumnEncoding(list(columns))
    source._kinds = dict.fromkeys(columns, "integer") | {"f": "float"}
    scaler = StandardScaler().fit(np.column_stack(list(columns.values())))
    assert _cli_support.unscaled_inputs(source, scaler) == [0]
    assert _cli_support.unscaled_inputs(source) == []


def test_predict_copies_an_id_column_that_holds_text_past_the_first_block(tmp_path, capsys):
    """An --id column of numbers in the CSV reader's first block (where it infers types) and text further
    down is copied as written, not an error about a column of numbers (predict reads --id columns as text)."""
    n = 80_000
    x = np.random.default_rng(2).normal(size=n)
    keys = [str(k) for k in range(n)]
    keys[-3] = "K-79997"
    (tmp_path / "a.csv").write_text("key,x,y\n" + "".join(f"{k},{a},{2 * a}\n" for k, a in zip(keys, x)))
    assert pa_csv.open_csv(tmp_path / "a.csv").schema.field("key").type == pa.int64()  # in the first block
    pa_csv.write_csv(pa.table({"x": x[:200], "y": 2 * x[:200]}), tmp_path / "small.csv")
    _run(capsys, "fit", tmp_path / "small.csv", "--target", "y", "--model", "ridge", "--output", tmp_path / "m.rffkit")
    _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / "a.csv", "--id", "key", "--output", tmp_path / "p.pq")
    assert pq.read_table(tmp_path / "p.pq")["key"].to_pylist() == keys
