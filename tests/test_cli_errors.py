"""Errors a user can act on: exit status 2, one line `rffkit: error: ...`, nothing half-written."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

import rffkit
from rffkit import _cli_commands, cli


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    x, z = rng.normal(size=60), rng.normal(size=60)
    pa_csv.write_csv(pa.table({"x": x, "z": z, "colour": rng.choice(["a", "b"], 60), "y": x + z}),
                     tmp_path / "data.csv")
    pa_csv.write_csv(pa.table({"x": x, "z": z, "colour": ["a"] * 60, "predicted_y": np.arange(60)}),
                     tmp_path / "ids.csv")
    (tmp_path / "empty.csv").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x,y\n1,2\n")
    with_nan = pa.table({"x": [1.0, 2.0, 3.0], "y": [1.0, float("nan"), 3.0]})
    pa_csv.write_csv(with_nan, tmp_path / "nan.csv")  # an empty field: a missing value
    pq.write_table(with_nan, tmp_path / "nan.parquet")
    pa_csv.write_csv(pa.table({"x": x, "other": z}), tmp_path / "lacking.csv")
    spoilt = [f"{value:.3f}" for value in x]
    spoilt[7] = "?"
    pa_csv.write_csv(pa.table({"x": spoilt, "z": z, "y": x + z}), tmp_path / "spoilt_x.csv")
    spoilt[7], spoilt[5] = f"{x[7]:.3f}", "oops"
    pa_csv.write_csv(pa.table({"x": x, "z": z, "y": spoilt}), tmp_path / "spoilt_y.csv")
    with open(tmp_path / "model.pkl", "wb") as file:
        pickle.dump({"not": "a model"}, file)
    assert cli.main(["fit", str(tmp_path / "data.csv"), "--target", "y", "--model", "ridge",
                     "--set", "features__n_components=20", "--output", str(tmp_path / "ridge.rffkit")]) == 0
    rffkit.save(rffkit.RFFRidge(), tmp_path / "bare.rffkit")
    return tmp_path


def _fails(capsys, folder, *argv):
    """Run the command in ``folder``; check the status, the one line, and that nothing appeared."""
    before = set(os.listdir(folder))
    capsys.readouterr()
    status = cli.main([arg.format(d=folder) for arg in argv])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("rffkit: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert set(os.listdir(folder)) == before  # no model, no predictions, no temporary file
    return err


FIT = ("fit", "{d}/data.csv", "--target", "y", "--output", "{d}/new.rffkit")
PREDICT = ("predict", "{d}/ridge.rffkit")


@pytest.mark.parametrize("argv, expected", [
    (("fit", "{d}/data.csv", "--target", "price", "--output", "{d}/new.rffkit"),
     ["target column 'price' is not in", "its columns are 'x', 'z', 'colour', 'y'"]),
    (("fit", "{d}/empty.csv", "--target", "y", "--output", "{d}/new.rffkit"), ["is empty (0 bytes)"]),
    (("fit", "{d}/notes.txt", "--target", "y", "--output", "{d}/new.rffkit"), ["is not a CSV or Parquet file"]),
    (("fit", "{d}/shards/*.parquet", "--target", "y", "--output", "{d}/new.rffkit"),
     ["no file matches the pattern"]),
    (("fit", "{d}/nan.csv", "--target", "y", "--missing", "error", "--output", "{d}/new.rffkit"),
     ["column 'y' holds a missing value (null) at row 1; drop the rows whose target is missing"]),
    (("fit", "{d}/nan.parquet", "--target", "y", "--missing", "error", "--output", "{d}/new.rffkit"),
     ["column 'y' holds NaN at row 1; drop the rows whose target is missing"]),
    (("fit", "{d}/spoilt_x.csv", "--target", "y", "--output", "{d}/new.rffkit"),
     ["column 'x' holds numbers and text: 59 of its distinct values are numbers and 1 is not: '?' (row 7)"]),
    (("fit", "{d}/spoilt_y.csv", "--target", "y", "--output", "{d}/new.rffkit"),
     ["column 'y' holds numbers and text", "'oops' (row 5)", "or pass --task classification to make each value"]),
    (("fit", "{d}/spoilt_y.csv", "--target", "y", "--task", "regression", "--output", "{d}/new.rffkit"),
     ["column 'y' holds numbers and text"]),
    (FIT + ("--set", "max_iters=5"), ["RFFNetRegressor has no parameter 'max_iters'", "max_iter, memory_budget, n_components"]),
    (FIT + ("--set", "max_iter"), ["--set takes PARAMETER=VALUE"]),
    (FIT + ("--set", "max_iter=-3"), ["'max_iter' parameter of RFFNetRegressor must be"]),
    (FIT + ("--test-size", "1.5"), ["--test-size must be at least 0 and below 1"]),
    (("fit", "{d}/data.csv", "--target", "y", "--output", "{d}/nowhere/m.rffkit"), ["does not exist"]),
    (FIT + ("--model", "srff", "--task", "classification"), ["--model srff fits regression only"]),
    (FIT + ("--task", "nonsense"), ["argument --task: invalid choice", "(see rffkit fit --help)"]),
    (("fit", "{d}/data.csv", "--output", "{d}/new.rffkit"), ["the following arguments are required: --target"]),
    (PREDICT + ("{d}/lacking.csv", "--output", "{d}/p.csv"),
     ["do not hold every column the model was trained on", "feature columns 'z', 'colour' are not in"]),
    (PREDICT + ("{d}/data.csv", "--output", "{d}/p.xlsx"), ["give a .csv or .parquet file name"]),
    (PREDICT + ("{d}/data.csv", "--proba", "--output", "{d}/p.csv"), ["--proba needs a classifier"]),
    (PREDICT + ("{d}/data.csv", "--id", "key", "--output", "{d}/p.csv"), ["--id: the column 'key' is not in"]),
    (("predict", "{d}/model.pkl", "{d}/data.csv", "--output", "{d}/p.csv"), ["it looks like a pickle"]),
    (("info", "{d}/data.csv"), ["is not an rffkit model file"]),
    (("info", "{d}/bare.rffkit"), ["holds a RFFRidge saved by rffkit.save, not a model written by rffkit fit"]),
    (("info", "{d}/missing.rffkit"), ["no model file at"]),
    (("relevances", "{d}/ridge.rffkit"), ["RFFRidge, which learns no relevance per column"]),
    # an output path that would replace an input, or cannot be written, is refused before the work
    (("fit", "{d}/data.csv", "--target", "y", "--output", "{d}/data.csv"),
     ["--output '{d}/data.csv' is the input file", "give another file name"]),
    (PREDICT + ("{d}/data.csv", "--output", "{d}/data.csv"), ["--output '{d}/data.csv' is the input file"]),
    (("relevances", "{d}/ridge.rffkit", "--plot", "{d}/ridge.rffkit"), ["--plot '{d}/ridge.rffkit' is the input"]),
    (("fit", "{d}/data.csv", "--target", "y", "--output", "{d}"), ["--output '{d}' is a folder"]),
    (PREDICT + ("{d}/data.csv", "--output", "{d}/shards.csv"), ["--output '{d}/shards.csv' is a folder"]),
    (("demo", "--plot", "{d}/nowhere/r.png"), ["--plot '{d}/nowhere/r.png': the folder", "does not exist"]),
    (("demo", "--dir", "{d}/data.csv"), ["--dir '{d}/data.csv' is a file"]),
    (PREDICT + ("{d}/ids.csv", "--id", "predicted_y", "--output", "{d}/p.csv"),
     ["--id 'predicted_y': the output has a column of that name already"]),
])
def test_error(folder, capsys, argv, expected):
    (folder / "shards.csv").mkdir()
    err = _fails(capsys, folder, *argv)
    for text in expected:
        assert text.format(d=folder) in err


def test_a_failed_fit_keeps_the_old_model(folder, capsys):
    before = (folder / "ridge.rffkit").read_bytes()
    _fails(capsys, folder, "fit", "{d}/data.csv", "--target", "y", "--model", "ridge",
           "--set", "alphas=-1", "--output", "{d}/ridge.rffkit")
    assert (folder / "ridge.rffkit").read_bytes() == before


def test_a_failed_prediction_leaves_no_file(folder, capsys, monkeypatch):
    def fail(model, X, method="predict"):
        raise ValueError("predicting failed")

    monkeypatch.setattr(_cli_commands, "predictions", fail)
    err = _fails(capsys, folder, "predict", "{d}/ridge.rffkit", "{d}/data.csv", "--output", "{d}/p.parquet")
    assert err == "rffkit: error: predicting failed\n"


def test_plot_without_matplotlib(folder, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert "--plot needs matplotlib" in _fails(capsys, folder, "relevances", "{d}/ridge.rffkit",
                                                "--plot", "{d}/r.png")


def test_python_m_rffkit_reports_one_line(folder):
    done = subprocess.run([sys.executable, "-m", "rffkit", "fit", str(folder / "data.csv"), "--target", "Y"],
                          capture_output=True, text=True, cwd=folder, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("rffkit: error: target column 'Y' is not in")
    assert done.stderr.count("\n") == 1 and not (folder / "model.rffkit").exists()


def test_a_warning_raised_from_two_places_is_printed_once(monkeypatch, capsys):
    """scikit-learn warns of a target of many classes from two places of one fit: one line is enough."""
    import warnings

    def command(args):
        warnings.simplefilter("default")  # the test run's filters turn warnings into errors
        warnings.warn("the same\n  thing", UserWarning)
        warnings.warn("the same\n  thing", UserWarning)  # another line: the filters would show both
        warnings.warn("another thing", UserWarning)
        return 0

    monkeypatch.setattr(_cli_commands, "info_command", command)
    capsys.readouterr()
    assert cli.main(["info", "model.rffkit"]) == 0
    assert capsys.readouterr().err == "rffkit: warning: the same thing\nrffkit: warning: another thing\n"


def test_under_torchrun_only_rank_0_prints_warnings(monkeypatch, capsys):
    """Every process of a torchrun job reads the same files: their warnings are printed once, by rank 0."""
    import warnings

    def command(args):
        warnings.simplefilter("default")
        warnings.warn("column 'name' has 400 distinct values in 400 rows: an identifier?", UserWarning)
        return 0

    monkeypatch.setattr(_cli_commands, "info_command", command)
    capsys.readouterr()
    monkeypatch.setenv("RANK", "1")
    assert cli.main(["info", "model.rffkit"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    assert cli.main(["info", "model.rffkit"]) == 0
    assert capsys.readouterr().err.startswith("rffkit: warning: column 'name'")
