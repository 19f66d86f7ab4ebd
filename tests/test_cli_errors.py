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
    pq.write_table(with_nan, tmp_path / "parquet_named.csv")  # binary data under a CSV name (helper-46)
    pa_csv.write_csv(pa.table({"x": x, "other": z}), tmp_path / "lacking.csv")
    spoilt = [f"{value:.3f}" for value in x]
    spoilt[7] = "?"
    pa_csv.write_csv(pa.table({"x": spoilt, "z": z, "y": x + z}), tmp_path / "spoilt_x.csv")
    spoilt[7], spoilt[5] = f"{x[7]:.3f}", "oops"
    pa_csv.write_csv(pa.table({"x": x, "z": z, "y": spoilt}), tmp_path / "spoilt_y.csv")
    pq.write_table(pa.Table.from_arrays([x, z, x + z], names=["a", "a", "y"]), tmp_path / "dup.parquet")
    (tmp_path / "dup.csv").write_text("a,a,y\n" + "".join(f"{a},{b},{a + b}\n" for a, b in zip(x, z)))
    drinks, cafe = ["tea", "caf\xe9"] * 30, "caf\xe9"
    latin = "x,z,colour,y\n" + "".join(f"{a},{b},{c},{a + b}\n" for a, b, c in zip(x, z, drinks))
    (tmp_path / "latin.csv").write_bytes(latin.encode("latin-1"))  # text in another encoding than UTF-8
    (tmp_path / "latin_header.csv").write_bytes(latin.replace("colour", cafe, 1).encode("latin-1"))
    (tmp_path / "dialects").mkdir()  # shards of one table written with different delimiters
    pa_csv.write_csv(pa.table({"x": x, "z": z, "y": x + z}), tmp_path / "dialects" / "a.csv")
    pa_csv.write_csv(pa.table({"x": x, "z": z, "y": x + z}), tmp_path / "dialects" / "b.csv",
                     pa_csv.WriteOptions(delimiter=";"))
    (tmp_path / "idshards").mkdir()  # the --id column in the first shard only
    pa_csv.write_csv(pa.table({"key": np.arange(60), "x": x, "z": z, "colour": ["a"] * 60}),
                     tmp_path / "idshards" / "0.csv")
    pa_csv.write_csv(pa.table({"x": x, "z": z, "colour": ["a"] * 60}), tmp_path / "idshards" / "1.csv")
    pa_csv.write_csv(pa.table({"x": x, "z": z, "colour": ["a"] * 60, "y": pa.nulls(60, pa.float64())}),
                     tmp_path / "unlabelled.csv")
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
    (("fit", "{d}/parquet_named.csv", "--target", "y", "--output", "{d}/new.rffkit"),
     ["parquet_named.csv' is not a CSV text file: its first bytes hold NUL bytes", "(.parquet)"]),
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
    (FIT + ("--model", "ridge", "--set", "n_components=50", "--set", "features__n_components=80"),
     ["--set n_components=50 and features__n_components=80 both set the width", "give one of them"]),
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
    # a column named twice, text that is not UTF-8, shards written with different delimiters
    (("fit", "{d}/dup.parquet", "--target", "y", "--output", "{d}/new.rffkit"),
     ["column 'a' appears twice in '{d}/dup.parquet'; columns are read by their names: give each its own name"]),
    (("fit", "{d}/dup.csv", "--target", "y", "--output", "{d}/new.rffkit"),
     ["column 'a' appears more than once in '{d}/dup.csv'; columns are read by their names"]),
    (("fit", "{d}/latin.csv", "--target", "y", "--output", "{d}/new.rffkit"),
     ["'{d}/latin.csv' is not UTF-8 text: column 'colour' holds b'caf\\xe9' on line 3", "convert the file to UTF-8"]),
    (PREDICT + ("{d}/latin.csv", "--output", "{d}/p.csv"), ["'{d}/latin.csv' is not UTF-8 text: column 'colour'"]),
    (("fit", "{d}/latin_header.csv", "--target", "y", "--output", "{d}/new.rffkit"),
     ["'{d}/latin_header.csv' is not UTF-8 text: its header holds the column name b'caf\\xe9'"]),
    (("fit", "{d}/dialects", "--target", "y", "--output", "{d}/new.rffkit"),
     ["the header of '{d}/dialects/b.csv' delimits its fields by ';', not by ','",
      "the files of one table share one delimiter", "--delimiter on the command line"]),
    (("score", "{d}/ridge.rffkit", "{d}/dialects"), ["the header of '{d}/dialects/b.csv' delimits its fields by ';'"]),
    # a classification of numbers that are not whole, refused before the report and the fit
    (FIT + ("--task", "classification"),
     ["the target holds numbers that are not whole (60 distinct values), and a classification needs labels: "
      "whole numbers, text or booleans; use --task regression"]),
    (("score", "{d}/ridge.rffkit", "{d}/unlabelled.csv"),
     ["no row of the data has a target: 'y' is missing on all 60 rows, and rffkit score needs labelled rows"]),
    (PREDICT + ("{d}/idshards", "--id", "key", "--output", "{d}/p.csv"),
     ["--id: column 'key' is in '{d}/idshards/0.csv' but not in '{d}/idshards/1.csv'"]),
])
def test_error(folder, capsys, argv, expected):
    (folder / "shards.csv").mkdir()
    err = _fails(capsys, folder, *argv)
    for text in expected:
        assert text.format(d=folder) in err


@pytest.mark.parametrize("command", ["predict", "score"])
def test_a_model_and_data_given_the_other_way_round_are_named(folder, capsys, command):
    """DATA given as MODEL (a CSV or Parquet file): the error says what the file looks like, and, when a
    DATA is a model file, that the arguments look swapped."""
    pq.write_table(pa_csv.read_csv(folder / "data.csv"), folder / "data.parquet")
    output = ("--output", "{d}/p.csv") if command == "predict" else ()
    err = _fails(capsys, folder, command, "{d}/data.csv", "{d}/ridge.rffkit", *output)
    assert err == (f"rffkit: error: '{folder}/data.csv' is not an rffkit model file: it looks like text such as a "
                   "CSV file (it starts '\"x\",\"z\",\"colour\",\"y\"'); expected a model written by rffkit fit "
                   f"--output or rffkit.save. '{folder}/ridge.rffkit' is a model file: were the arguments swapped? "
                   f"rffkit {command} takes MODEL first, then DATA.\n")
    err = _fails(capsys, folder, command, "{d}/data.parquet", "{d}/data.csv", *output)
    assert "data.parquet' is not an rffkit model file: it looks like a Parquet file; expected" in err
    assert "swapped" not in err  # no DATA is a model file
    err = _fails(capsys, folder, "info", "{d}/data.parquet")
    assert "data.parquet' is not an rffkit model file: it looks like a Parquet file; expected a model" in err
    (folder / "shards").mkdir()
    pq.write_table(pa_csv.read_csv(folder / "data.csv"), folder / "shards" / "part-0.parquet")
    err = _fails(capsys, folder, command, "{d}/shards", "{d}/ridge.rffkit", *output)
    assert err == (f"rffkit: error: '{folder}/shards' is a folder, not a model file; MODEL is the one file that "
                   f"rffkit fit --output wrote. '{folder}/ridge.rffkit' is a model file: were the arguments swapped? "
                   f"rffkit {command} takes MODEL first, then DATA.\n")
    err = _fails(capsys, folder, command, "{d}/shards/*.parquet", "{d}/ridge.rffkit", *output)
    assert err.startswith(f"rffkit: error: no model file at '{folder}/shards/*.parquet'. '{folder}/ridge.rffkit' is a "
                          "model file: were the arguments swapped?")


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


def _edited(folder, name, edit):
    """ridge.rffkit re-saved after ``edit(bundle)``: a file edited by hand, its digest recomputed."""
    bundle = rffkit.load(folder / "ridge.rffkit")
    bundle = {**bundle, "meta": dict(bundle["meta"]), "encoding": dict(bundle["encoding"])}
    edit(bundle)
    rffkit.save(bundle, folder / name)


@pytest.mark.parametrize("edit, expected", [
    (lambda bundle: bundle.pop("meta"), "it lacks 'meta'"),
    (lambda bundle: bundle.pop("encoding"), "it lacks 'encoding'"),
    (lambda bundle: bundle["meta"].pop("target"), "its meta lacks 'target'"),
    (lambda bundle: bundle.update(version="2"), "its version is '2', not a positive integer"),
    (lambda bundle: bundle["meta"].update(classes=["a"]), "its meta's task is 'regression', with classes ['a']"),
    (lambda bundle: bundle["meta"].update(n_test="12"), "its meta's 'n_test' is '12', not of type int"),
    (lambda bundle: bundle["encoding"].pop("columns"), "its encoding lacks 'columns'"),
    (lambda bundle: bundle["encoding"].update(columns=["z", "x", "colour"]),
     "its encoding makes the inputs 'z', 'x', 'colour=a', 'colour=b', but its meta says the model was fitted on "
     "'x', 'z', 'colour=a', 'colour=b'"),
    (lambda bundle: bundle["encoding"].update(columns=["x", "colour"], fill_values={"x": 0.0}),
     "its encoding makes the inputs 'x', 'colour=a', 'colour=b', but"),
    (lambda bundle: bundle["encoding"].update(columns=["x", "colour"]),
     "its encoding cannot be read (ColumnEncoding: fill_values given for 'z', not among the numeric columns)"),
])
def test_an_edited_model_file_is_refused_by_every_command(folder, capsys, edit, expected):
    """A model file whose dict lacks an entry, holds one of the wrong type, or whose encoding makes
    other inputs than the model was fitted on (columns swapped) is refused, naming what is wrong."""
    _edited(folder, "edited.rffkit", edit)
    for argv in (("info", "{d}/edited.rffkit"), ("relevances", "{d}/edited.rffkit"),
                 ("predict", "{d}/edited.rffkit", "{d}/data.csv", "--output", "{d}/p.csv"),
                 ("score", "{d}/edited.rffkit", "{d}/data.csv")):
        err = _fails(capsys, folder, *argv)
        assert f"'{folder}/edited.rffkit' is not a valid rffkit model file: {expected}" in err, err


def test_a_classifier_file_whose_classes_were_reordered_is_refused(folder, capsys):
    """predict --proba names its columns by the classes of meta: they must be the estimator's."""
    assert cli.main(["fit", str(folder / "data.csv"), "--target", "colour", "--model", "ridge",
                     "--set", "features__n_components=20", "--output", str(folder / "classes.rffkit")]) == 0
    bundle = rffkit.load(folder / "classes.rffkit")
    bundle["meta"]["classes"] = ["b", "a"]
    rffkit.save(bundle, folder / "swapped.rffkit")
    err = _fails(capsys, folder, "predict", "{d}/swapped.rffkit", "{d}/data.csv", "--proba", "--output", "{d}/p.csv")
    assert "is not a valid rffkit model file: its estimator's classes are 'a', 'b', but its meta says 'b', 'a'" in err


def test_predict_and_score_advise_what_they_can_do(folder, capsys):
    """The data layer's advice names options of rffkit fit (--missing encode, --exclude) and Python's
    (exclude=[...]); predict and score say what applies to a fitted model instead."""
    assert cli.main(["fit", str(folder / "data.csv"), "--target", "y", "--model", "ridge", "--missing", "error",
                     "--set", "features__n_components=20", "--output", str(folder / "strict.rffkit")]) == 0
    rng = np.random.default_rng(1)
    x = rng.normal(size=60)
    x[3] = np.nan
    y = np.arange(60.0)
    pa_csv.write_csv(pa.table({"x": x, "z": y, "colour": ["a"] * 60, "y": y}), folder / "holes.csv")
    pq.write_table(pa.table({"x": [[1.0]] * 60, "z": y, "colour": ["a"] * 60, "y": y}), folder / "lists.parquet")
    for command in (("predict", "{d}/strict.rffkit", "{d}/holes.csv", "--output", "{d}/p.csv"),
                    ("score", "{d}/strict.rffkit", "{d}/holes.csv")):
        err = _fails(capsys, folder, *command)
        assert "column 'x' holds a missing value (null) at row 3; the model was fitted with --missing error" in err
        assert "refit the model with rffkit fit ... --missing encode" in err
        assert "in Python" not in err and "before fitting" not in err
    for command in (("predict", "{d}/ridge.rffkit", "{d}/lists.parquet", "--output", "{d}/p.csv"),
                    ("score", "{d}/ridge.rffkit", "{d}/lists.parquet")):
        err = _fails(capsys, folder, *command)
        assert "feature column 'x' has type list<element: double>" in err
        assert "the model needs the column: correct it in the data, or refit the model without it (rffkit fit ... " \
            "--exclude COL)" in err
        assert "in Python" not in err and "fit an encoding" not in err


def test_a_code_the_training_rows_never_held_is_advised_as_a_category(folder, capsys):
    """Cars93's Cylinders (3 to 8, or 'rotary'): a training split without the rotary car reads the column as
    numbers, and new data with 'rotary' had drawn advice about placeholders only (helper-42); predict and score
    name --categorical too."""
    rng = np.random.default_rng(0)
    cylinders = rng.choice([4, 6, 8], size=80)
    y = cylinders + rng.normal(size=80)
    pa_csv.write_csv(pa.table({"cylinders": cylinders, "y": y}), folder / "cars.csv")
    assert cli.main(["fit", str(folder / "cars.csv"), "--target", "y", "--model", "ridge", "--set",
                     "features__n_components=20", "--output", str(folder / "cars.rffkit")]) == 0
    pa_csv.write_csv(pa.table({"cylinders": ["rotary"] * 3, "y": [1.0] * 3}), folder / "rotary.csv")
    pa_csv.write_csv(pa.table({"cylinders": ["4"] * 30 + ["rotary"], "y": [1.0] * 31}), folder / "mixed.csv")
    for data in ("rotary", "mixed"):
        for command in (("predict", "{d}/cars.rffkit", f"{{d}}/{data}.csv", "--output", "{d}/p.csv"),
                        ("score", "{d}/cars.rffkit", f"{{d}}/{data}.csv")):
            err = _fails(capsys, folder, *command)
            assert "refit the model naming it (rffkit fit ... --categorical COL)" in err
            assert "in Python" not in err and "fit an encoding" not in err


def test_a_column_of_too_many_categories_is_refused_with_what_fit_can_do(folder, capsys):
    """A text column of more than 1,000 values (flights' tailnum) advised raising max_categories, which rffkit fit has
    no option for; it names --exclude with the column. Python's message still names the parameter."""
    rng = np.random.default_rng(0)
    table = pa.table({"x": rng.normal(size=1300), "tail num": [f"N{k:04d}" for k in range(1300)],
                      "y": rng.normal(size=1300)})
    pa_csv.write_csv(table, folder / "tails.csv")
    err = _fails(capsys, folder, "fit", "{d}/tails.csv", "--target", "y", "--test-size", "0", "--output",
                 "{d}/new.rffkit")
    assert "column 'tail num' has more than 1000 distinct values, the most rffkit fit one-hot encodes in a column; " \
        "leave it out (--exclude 'tail num')" in err
    assert "max_categories" not in err and "in Python" not in err
    with pytest.raises(rffkit.io.DataSourceError, match=r"more than max_categories=1000 .*raise max_categories"):
        rffkit.io.open_table(str(folder / "tails.csv"), target="y")


def test_id_columns_that_cannot_be_copied_name_their_file(folder, capsys):
    """An --id column of a type that cannot be text in one shard names that shard; a nested column
    cannot go to a CSV file."""
    (folder / "nested").mkdir()
    columns = {"x": np.ones(4), "z": np.ones(4), "colour": ["a"] * 4}
    pq.write_table(pa.table({"key": np.arange(4), **columns}), folder / "nested" / "0.parquet")
    pq.write_table(pa.table({"key": [[1]] * 4, **columns}), folder / "nested" / "1.parquet")
    err = _fails(capsys, folder, *PREDICT, "{d}/nested", "--id", "key", "--output", "{d}/p.parquet")
    assert f"--id: shards disagree on column 'key', which is list<element: int64> in '{folder}/nested/1.parquet'" \
        in err
    err = _fails(capsys, folder, *PREDICT, "{d}/nested/1.parquet", "--id", "key", "--output", "{d}/p.csv")
    assert "--id 'key' is a column of type list<element: int64>, which a CSV file cannot hold" in err


def test_text_that_is_not_utf8_past_the_csv_reader_s_first_block(folder, capsys):
    """Bytes of another encoding after the block where the CSV reader infers the types: the file, column
    and line are named, and converting to UTF-8 is the advice (not a column of numbers that holds text)."""
    rows = "".join(f"{k},{k % 7},tea,{k % 5}\n" for k in range(120_000))
    (folder / "late.csv").write_bytes(("x,z,colour,y\n" + rows + "1,2,caf\xe9,3\n").encode("latin-1"))
    err = _fails(capsys, folder, "fit", "{d}/late.csv", "--target", "y", "--output", "{d}/new.rffkit")
    assert f"cannot read '{folder}/late.csv': it is not UTF-8 text: column 'colour' holds bytes of another " \
           "encoding on line 120002; convert the file to UTF-8" in err
    assert "only numbers" not in err


def test_a_classification_of_fractions_is_refused_before_the_report(folder, capsys):
    """--task classification of a target of numbers that are not whole stops before anything is printed
    (it had failed in the estimator's fit, after the report)."""
    capsys.readouterr()
    assert cli.main(["fit", str(folder / "data.csv"), "--target", "y", "--task", "classification", "--output",
                     str(folder / "new.rffkit")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "the target holds numbers that are not whole" in err
