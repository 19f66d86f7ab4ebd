"""Command-line model files used from Python, and what fit and predict print and write around them."""

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from sklearn.pipeline import Pipeline

import rffkit
from rffkit import cli
from rffkit.io import ColumnEncoding, open_table


def _run(capsys, *argv):
    status = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def test_fit_says_how_many_relevances_it_did_not_print(tmp_path, capsys):
    rng = np.random.default_rng(0)
    columns = {f"x{j}": rng.normal(size=200) for j in range(23)}
    columns["y"] = np.sin(columns["x0"]) + 0.1 * rng.normal(size=200)
    pa_csv.write_csv(pa.table(columns), tmp_path / "wide.csv")
    out = _run(capsys, "fit", tmp_path / "wide.csv", "--target", "y", "--model", "srff",
               "--output", tmp_path / "m.rffkit")
    lines = out.splitlines()
    shown = [line for line in lines if line.lstrip().split(".")[0].isdigit()]
    assert len(shown) == 20
    assert f"  (3 more: rffkit relevances {tmp_path / 'm.rffkit'} lists them)" in lines


@pytest.fixture(params=["never", "always"])
def boolean_model(tmp_path, capsys, request):
    """A ridge classifier's model file, fitted in memory or streamed (columns in units far from 1)."""
    rng = np.random.default_rng(0)
    x, z = rng.normal(size=200), rng.normal(size=200)
    pa_csv.write_csv(pa.table({"x": 100 * x, "z": 0.01 * z, "colour": rng.choice(["red", "blue"], 200),
                               "y": x + 0.3 * z > 0}), tmp_path / "b.csv")
    _run(capsys, "fit", tmp_path / "b.csv", "--target", "y", "--model", "ridge", "--stream", request.param,
         "--output", tmp_path / "b.rffkit")
    return tmp_path / "b.rffkit", tmp_path / "b.csv"


def test_boolean_classes_are_named_as_the_csv_writes_the_predictions(boolean_model, tmp_path, capsys):
    model, data = boolean_model
    _run(capsys, "predict", model, data, "--proba", "--output", tmp_path / "p.csv")
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == '"predicted_y","proba_false","proba_true"'
    assert {line.split(",")[0] for line in lines[1:]} == {"true", "false"}
    _run(capsys, "predict", model, data, "--proba", "--output", tmp_path / "p.parquet")
    assert pq.read_table(tmp_path / "p.parquet").column_names == ["predicted_y", "proba_false", "proba_true"]


def test_whole_number_classes_stored_as_floats_are_named_as_the_csv_writes_them(tmp_path, capsys):
    """A target of 1.0 and 2.0: the CSV writes the predictions 1 and 2, so the columns are proba_1 and proba_2."""
    x = np.random.default_rng(0).normal(size=200)
    pa_csv.write_csv(pa.table({"x": x, "y": np.where(x > 0, 2.0, 1.0)}), tmp_path / "f.csv")
    _run(capsys, "fit", tmp_path / "f.csv", "--target", "y", "--task", "classification", "--model", "ridge",
         "--output", tmp_path / "f.rffkit")
    _run(capsys, "predict", tmp_path / "f.rffkit", tmp_path / "f.csv", "--proba", "--output", tmp_path / "p.csv")
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == '"predicted_y","proba_1","proba_2"'
    assert {line.split(",")[0] for line in lines[1:]} == {"1", "2"}


def test_a_command_line_model_predicts_from_python_as_rffkit_predict(boolean_model, tmp_path, capsys):
    path, data = boolean_model
    bundle = rffkit.load(path)
    assert isinstance(bundle["encoding"], dict)
    source = open_table(data, encoding=bundle["encoding"])  # the dict, as the file holds it
    assert source.encoding.to_dict() == ColumnEncoding.from_dict(bundle["encoding"]).to_dict()
    model = bundle["estimator"]
    assert isinstance(model, Pipeline)
    model, source = model[-1], source.standardized(model[0])
    _run(capsys, "predict", path, data, "--output", tmp_path / "p.csv")
    written = pa_csv.read_csv(tmp_path / "p.csv")["predicted_y"].to_numpy()
    np.testing.assert_array_equal(model.predict(source), written)
    with pytest.raises(ValueError, match="the encoding dict is not one of ColumnEncoding.to_dict()"):
        open_table(data, encoding={"categories": {}})
