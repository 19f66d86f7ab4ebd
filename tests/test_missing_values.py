"""Missing values in files: ColumnEncoding(missing='encode'), what open_table learns, the command line."""

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

import rffkit
from rffkit import cli
from rffkit._cli_support import column_relevances
from rffkit.io import (
    ColumnEncoding, DataSourceError, MissingValueError, UnknownCategoryError, open_table,
)


def _frame(n=240, seed=0):
    """A table with holes: x (numbers, 10% missing), flag (booleans, some missing), z (complete),
    colour (text, some missing), y depending on x, colour and on whether x is missing."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    colour = rng.choice(["blue", "green", "red"], n).astype(object)
    flag = rng.random(n) < 0.5
    x_missing = rng.random(n) < 0.1
    y = np.sin(2 * np.where(x_missing, 0.0, x)) + 1.5 * (colour == "red") + 2.0 * x_missing
    colour[rng.random(n) < 0.08] = None
    frame = pd.DataFrame({"x": np.where(x_missing, np.nan, x), "flag": pd.array(flag, dtype="boolean"),
                          "z": rng.normal(size=n), "colour": colour, "y": y + 0.05 * rng.normal(size=n)})
    frame.loc[rng.random(n) < 0.05, "flag"] = pd.NA
    return frame


def _reference(frame, columns):
    """The encoding by hand: mean and indicator for a numeric column with holes, a (missing)
    level last for a text one; the order of ``columns``."""
    blocks = []
    for column in columns:
        values = frame[column]
        if values.dtype == object:
            levels = sorted(v for v in values.dropna().unique())
            blocks += [(values == level).to_numpy(float) for level in levels]
            if values.isna().any():
                blocks.append(values.isna().to_numpy(float))
        else:
            numbers = values.astype("float64")
            blocks.append(numbers.fillna(numbers.mean()).to_numpy())
            if numbers.isna().any():
                blocks.append(numbers.isna().to_numpy(float))
    return np.column_stack(blocks)


@pytest.fixture
def holes_csv(tmp_path):
    path = tmp_path / "holes.csv"
    _frame().to_csv(path, index=False)
    return path


def test_encode_fills_means_indicates_and_gives_nulls_a_category(holes_csv):
    columns = ["x", "flag", "z", "colour"]
    frame = pd.read_csv(holes_csv)
    frame["colour"] = frame["colour"].astype(object).where(frame["colour"].notna(), None)
    # chunks of 37 rows: the learned means and categories cannot depend on the chunking
    source = open_table(holes_csv, target="y", features=columns, missing="encode", chunk_rows=37)
    encoding = source.encoding
    assert encoding.missing == "encode" and encoding.indicators == ("x", "flag")
    assert encoding.categories == {"colour": ("blue", "green", "red", None)}
    assert encoding.fill_values["x"] == pytest.approx(frame["x"].mean(), rel=1e-12)
    assert encoding.fill_values["z"] == pytest.approx(frame["z"].mean(), rel=1e-12)
    assert encoding.fill_values["flag"] == pytest.approx(frame["flag"].astype(float).mean(), rel=1e-12)
    assert source.feature_names == ["x", "x=(missing)", "flag", "flag=(missing)", "z", "colour=blue",
                                    "colour=green", "colour=red", "colour=(missing)"]
    assert encoding.groups == ["x", "x", "flag", "flag", "z", "colour", "colour", "colour", "colour"]
    X = np.concatenate([chunk.X for chunk in source.iter_chunks()])
    np.testing.assert_allclose(X, _reference(frame.assign(flag=frame["flag"].astype("float64")), columns),
                               rtol=0, atol=1e-12)


def test_the_default_refuses_missing_values_with_the_way_out(holes_csv):
    with pytest.raises(MissingValueError, match=r"column 'x' holds a missing value \(null\) at row \d+; drop or "
                       r"impute .* missing='encode'.* --missing encode"):
        next(open_table(holes_csv, target="y", features=["x", "z"]).iter_chunks())
    with pytest.raises(MissingValueError, match=r"column 'colour' holds a missing value"):
        open_table(holes_csv, target="y", features=["colour"])


def test_a_missing_target_is_an_error_that_says_to_drop_its_rows(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [1.0, None, 2.0]}).to_csv(path, index=False)
    source = open_table(path, target="y", missing="encode")
    with pytest.raises(MissingValueError, match=r"column 'y' holds .* at row 1; drop the rows whose target is missing"):
        list(source.iter_chunks())


def test_parquet_nan_is_missing_and_infinity_still_an_error(tmp_path):
    path = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"a": pa.array([1.0, np.nan, 3.0, None], from_pandas=False),
                             "y": [0.0, 1.0, 2.0, 3.0]}), path)
    source = open_table(path, target="y", missing="encode")
    assert source.encoding.fill_values == {"a": 2.0} and source.encoding.indicators == ("a",)
    np.testing.assert_array_equal(next(source.iter_chunks()).X, [[1, 0], [2, 1], [3, 0], [2, 1]])
    pq.write_table(pa.table({"a": [1.0, np.inf, None], "y": [0.0, 1.0, 2.0]}), path)
    with pytest.raises(DataSourceError, match=r"column 'a' holds inf at row 1; the estimators need finite"):
        open_table(path, target="y", missing="encode")


def test_new_data_with_holes_the_training_data_did_not_have():
    encoding = ColumnEncoding(["a", "b", "c"], {"c": ["u", "v"]}, missing="encode",
                              fill_values={"a": 0.5, "b": -1.0}, indicators=["a"])
    table = {"a": [None, 2.0], "b": [None, 4.0], "c": [None, "v"]}
    # b: filled with its mean, no indicator (it had no hole in training), and a warning; c: an unknown category
    with pytest.warns(UserWarning, match="column 'b' holds missing values, which the data the encoding was fitted on "
                      "did not have in it: they are filled in with its mean there"):
        X = encoding.transform(table)
    np.testing.assert_array_equal(X, [[0.5, 1, -1.0, 0, 0], [2.0, 0, 4.0, 0, 1]])
    strict = ColumnEncoding(["c"], {"c": ["u", "v"]}, handle_unknown="error", missing="encode")
    with pytest.raises(UnknownCategoryError, match=r"column 'c' holds a missing value at row 7, which the "
                       "encoding's categories do not include"):
        strict.transform({"c": ["u", None]}, rows=np.array([6, 7]))
    bare = ColumnEncoding(["a"], missing="encode")
    with pytest.raises(MissingValueError, match=r"column 'a' holds a missing value at row 1 and the encoding has "
                       "no value to fill in"):
        bare.transform({"a": [1.0, None]})


@pytest.mark.parametrize("kwargs, message", [
    ({"missing": "drop"}, "missing must be 'error' or 'encode'"),
    ({"fill_values": {"a": 1.0}}, "need missing='encode'"),
    ({"categories": {"c": ["u", None]}}, "need missing='encode'"),
    ({"missing": "encode", "fill_values": {"c": 1.0}}, "not among the numeric columns"),
    ({"missing": "encode", "fill_values": {"a": np.nan}}, "must be finite"),
    ({"missing": "encode", "fill_values": {"a": 1.0}, "indicators": ["b"]}, "indicators must be distinct columns"),
])
def test_encoding_parameters_are_checked(kwargs, message):
    arguments = {"columns": ["a", "b", "c"], "categories": {"c": ["u"]}, **kwargs}
    with pytest.raises(ValueError, match=message):
        ColumnEncoding(**arguments)


def test_to_dict_round_trip_and_older_descriptions(holes_csv):
    encoding = open_table(holes_csv, target="y", missing="encode").encoding
    description = encoding.to_dict()
    assert description["categories"]["colour"][-1] is None and description["indicators"] == ["x", "flag"]
    assert ColumnEncoding.from_dict(description) == encoding
    plain = {"columns": ["a", "c"], "categories": {"c": ["u"]}, "handle_unknown": "ignore"}
    assert ColumnEncoding.from_dict(plain).missing == "error"
    assert ColumnEncoding.from_dict(plain).to_dict() == plain  # files without missing values are unchanged


def _run(capsys, *argv):
    status = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def test_command_line_encodes_missing_values_by_default(holes_csv, tmp_path, capsys):
    model = tmp_path / "m.rffkit"
    out = _run(capsys, "fit", holes_csv, "--target", "y", "--output", model)
    assert "missing values: encoded in x, flag, colour" in out
    bundle = rffkit.load(model)
    assert bundle["version"] == 2 and bundle["encoding"]["missing"] == "encode"
    assert bundle["meta"]["missing_encoded"] == ["x", "flag", "colour"]
    relevances = column_relevances(bundle["estimator"], ColumnEncoding.from_dict(bundle["encoding"]).groups)
    assert sorted(relevances) == ["colour", "flag", "x", "z"]  # each indicator counts with its column
    assert bundle["meta"]["relevances"] == relevances and list(relevances)[:2] in (["x", "colour"], ["colour", "x"])
    # new rows with holes where training had none (z) and a category never seen: predictions, no error
    new = _frame(n=30, seed=1).drop(columns="y")
    new.loc[3, "z"] = np.nan
    new.loc[4, "colour"] = "purple"
    new.to_csv(tmp_path / "new.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # the test run's filters make warnings errors; a user's do not
        argv = ["predict", str(model), str(tmp_path / "new.csv"), "--output", str(tmp_path / "p.csv")]
        status = cli.main(argv)
    assert status == 0 and "rffkit: warning: column 'z' holds missing values" in capsys.readouterr().err
    predictions = pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy()
    assert predictions.shape == (30,) and np.isfinite(predictions).all()


def test_command_line_missing_error_and_files_without_holes(holes_csv, tmp_path, capsys):
    assert cli.main(["fit", str(holes_csv), "--target", "y", "--missing", "error",
                     "--output", str(tmp_path / "m.rffkit")]) != 0
    err = capsys.readouterr().err
    assert "holds a missing value (null)" in err and "--missing encode" in err and "Traceback" not in err
    complete = tmp_path / "complete.csv"
    _frame().dropna().to_csv(complete, index=False)
    out = _run(capsys, "fit", complete, "--target", "y", "--model", "ridge", "--output", tmp_path / "c.rffkit")
    assert "missing values" not in out
    bundle = rffkit.load(tmp_path / "c.rffkit")
    # no indicator, but the means are kept: holes in new data are filled in
    assert bundle["version"] == 2 and bundle["encoding"]["indicators"] == [] and bundle["meta"]["missing_encoded"] == []
    _run(capsys, "fit", complete, "--target", "y", "--model", "ridge", "--missing", "error",
         "--output", tmp_path / "e.rffkit")
    bundle = rffkit.load(tmp_path / "e.rffkit")
    assert bundle["version"] == 1 and "missing" not in bundle["encoding"]  # readable by rffkit before version 2


def test_rows_without_a_target_can_be_left_out(tmp_path):
    path = tmp_path / "t.parquet"
    y = [1.0, None, 2.0, np.nan, 3.0, 4.0, None]
    pq.write_table(pa.table({"x": [float(k) for k in range(7)], "y": pa.array(y, from_pandas=False)}), path,
                   row_group_size=2)
    source = open_table(path, target="y", drop_missing_target=True, chunk_rows=2)
    assert (source.n_rows, source.n_dropped) == (4, 3)
    chunks = list(source.iter_chunks())
    assert np.concatenate([c.rows for c in chunks]).tolist() == [0, 2, 4, 5]  # global rows kept
    assert np.concatenate([c.y for c in chunks]).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert np.concatenate([c.X for c in chunks])[:, 0].tolist() == [0.0, 2.0, 4.0, 5.0]
    for derived in (source.with_dtype(np.float32), source.with_encoding(source.encoding)):
        assert derived.drop_missing_target and derived.n_rows == 4
    # the two ranks of a distributed read share the kept rows
    shares = [np.concatenate([c.rows for c in source.iter_chunks(rank=r, world_size=2)]) for r in (0, 1)]
    assert sorted(np.concatenate(shares).tolist()) == [0, 2, 4, 5]
    from rffkit._cli_support import RowSplit
    for held_out in (False, True):
        split = RowSplit(source, 0.5, 0, held_out=held_out)
        assert split.n_rows == sum(c.X.shape[0] for c in split.iter_chunks())
    assert open_table(path, target="y").n_rows == 7


def test_command_line_leaves_out_rows_without_a_target(tmp_path, capsys):
    frame = _frame()
    frame.loc[[3, 50, 51], "y"] = np.nan
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    out = _run(capsys, "fit", path, "--target", "y", "--model", "ridge", "--output", tmp_path / "m.rffkit")
    assert "left out: 3 rows whose target is missing" in out and "237 rows" in out
    assert rffkit.load(tmp_path / "m.rffkit")["meta"]["n_rows_dropped"] == 3
    assert cli.main(["fit", str(path), "--target", "y", "--features", "z", "--missing", "error",
                     "--output", str(tmp_path / "e.rffkit")]) == 2
    assert "drop the rows whose target is missing" in capsys.readouterr().err
    frame["y"] = np.nan
    frame.to_csv(path, index=False)
    assert cli.main(["fit", str(path), "--target", "y", "--output", str(tmp_path / "e.rffkit")]) == 2
    assert "every row's target 'y' is missing" in capsys.readouterr().err


def test_arrays_and_frames_with_nan_get_the_column_row_and_way_out():
    """In Python the estimators need complete inputs; the error says where the first NaN is and what fills it."""
    from rffkit import RFFNetClassifier, RFFNetRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    X[[5, 9, 9], [2, 2, 0]] = np.nan
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"RFFNetRegressor: X holds a missing value \(NaN\) in column 2 at row 5 "
                       r"\(counting from 0; 2 rows have one\), .*make_pipeline\(SimpleImputer\(add_indicator=True\), "
                       r"RFFNetRegressor\(\)\)"):
        RFFNetRegressor().fit(X, rng.normal(size=40))
    with pytest.raises(ValueError, match=r"X holds a missing value \(NaN\) in column 'a' at row 9 \(counting from 0; "
                       "1 row has one"):
        RFFNetRegressor().fit(frame.fillna({"c": 0.0}), rng.normal(size=40))
    y = rng.normal(size=40)
    y[11] = np.nan
    with pytest.raises(ValueError, match=r"y holds a missing value \(NaN\) at row 11 \(counting from 0; "
                       r"1 row has one\); drop the rows whose target is missing"):
        RFFNetRegressor().fit(np.nan_to_num(X), y)
    with pytest.raises(ValueError, match=r"RFFNetClassifier: y holds 1 missing label \(nan, at row 11, counting"):
        RFFNetClassifier().fit(np.nan_to_num(X), y)
    with pytest.raises(ValueError, match="Input X contains infinity"):  # not a missing value: scikit-learn's message
        RFFNetRegressor().fit(np.where(np.isnan(X), np.inf, X), rng.normal(size=40))


def test_pandas_nullable_columns_with_na_get_the_column_row_and_way_out():
    """A pandas <NA> in a nullable Int64 or boolean column (or target) got scikit-learn's generic "Input X contains
    NaN" message, which names neither; it gets the column, the row and the imputer, as a float NaN does."""
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=40), "count": pd.array([*range(39), None], dtype="Int64"),
                          "flag": pd.array([True, False] * 20, dtype="boolean")})
    frame.loc[7, "flag"] = pd.NA
    with pytest.raises(ValueError, match=r"RFFRidge: X holds a missing value \(<NA>\) in column 'flag' at row 7 "
                       r"\(counting from 0; 2 rows have one\), .*SimpleImputer\(add_indicator=True\)"):
        rffkit.RFFRidge().fit(frame, rng.normal(size=40))
    with pytest.raises(ValueError, match=r"RFFClassifier: X holds a missing value \(<NA>\) in column 'count' at row "
                       r"39 \(counting from 0; 1 row has one\)"):
        rffkit.RFFClassifier().fit(frame.fillna({"flag": True}), np.arange(40) % 2)
    target = pd.Series(pd.array([*range(30), None, *range(9)], dtype="Int64"))
    with pytest.raises(ValueError, match=r"y holds a missing value \(NaN\) at row 30 \(counting from 0; 1 row has "
                       r"one\); drop the rows whose target is missing"):
        rffkit.RFFRidge().fit(frame.fillna({"flag": True, "count": 0}), target)
    model = make_pipeline(SimpleImputer(add_indicator=True), rffkit.RFFRidge(n_components=20, random_state=0))
    assert np.isfinite(model.fit(frame, rng.normal(size=40)).predict(frame)).all()  # the way out works


def test_an_empty_column_draws_a_warning(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("a,b,y\n1.0,,0.5\n2.0,,1.5\n3.0,,2.5\n")
    with pytest.warns(UserWarning, match=r"column 'b' has no value in 3 rows: it carries nothing for the model"):
        source = open_table(path, target="y", missing="encode")
    assert source.encoding.fill_values["b"] == 0.0 and source.encoding.indicators == ("b",)


def test_the_encoding_can_be_learned_on_some_rows_and_checks_them_all(tmp_path):
    frame = _frame()
    frame.loc[7, "colour"] = "purple"  # a category of an odd row only
    frame.loc[4, "colour"] = "orange"  # of an even row whose target is missing
    frame.loc[[4, 9], "y"] = np.nan
    frame["w"] = np.where(np.arange(len(frame)) % 2 == 1, np.nan, frame["z"] + 1)  # holes where nothing is learned
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    even = lambda rows: rows % 2 == 0  # noqa: E731
    source = open_table(path, target="y", missing="encode", drop_missing_target=True, learn_rows=even, chunk_rows=37)
    learned = frame[(frame.index % 2 == 0) & frame["y"].notna()]
    encoding = source.encoding
    assert encoding.fill_values["x"] == pytest.approx(learned["x"].mean(), rel=1e-12)
    assert encoding.fill_values["z"] == pytest.approx(learned["z"].mean(), rel=1e-12)
    assert list(encoding.categories["colour"]) == ["blue", "green", "red", None]
    assert encoding.fill_values["w"] == pytest.approx(learned["z"].mean() + 1, rel=1e-12)
    assert list(encoding.indicators) == ["x", "flag"]  # not w: no learned row misses it
    # every row is still read and checked: a null is an error under 'error' even where nothing is learned
    holes = frame.copy()
    holes.loc[7, "colour"] = None
    holes.to_csv(path, index=False)
    with pytest.raises(MissingValueError, match="row 7"):
        open_table(path, target="y", features=["colour"], learn_rows=even)
    with pytest.raises(TypeError, match="boolean mask of the"):
        open_table(path, target="y", missing="encode", learn_rows=lambda rows: rows)


def test_command_line_learns_the_encoding_on_the_training_rows(tmp_path, capsys):
    from rffkit._streaming import validation_mask
    frame = _frame()
    held_out = validation_mask(np.arange(len(frame)), 0.2, 0)
    frame.loc[np.flatnonzero(held_out)[:3], "colour"] = "purple"  # seen in held-out rows only
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # the command line prints them
        _run(capsys, "fit", path, "--target", "y", "--model", "ridge", "--output", tmp_path / "m.rffkit")
    encoding = rffkit.load(tmp_path / "m.rffkit")["encoding"]
    assert "purple" not in encoding["categories"]["colour"]
    assert encoding["fill_values"]["x"] == pytest.approx(frame.loc[~held_out, "x"].mean(), rel=1e-12)
    assert encoding["fill_values"]["x"] != pytest.approx(frame["x"].mean(), rel=1e-6)


def test_a_column_of_row_numbers_draws_a_warning(tmp_path):
    frame = _frame()
    frame.sort_values("y").reset_index(drop=True).to_csv(tmp_path / "pandas.csv")  # the index, from 0, unnamed
    with pytest.warns(UserWarning, match=r"column '' \(the unnamed column .*\) holds the row numbers \(0, 1, 2"):
        open_table(tmp_path / "pandas.csv", target="y", missing="encode")
    frame.insert(0, "rownames", np.arange(1, len(frame) + 1))
    frame.to_csv(tmp_path / "r.csv", index=False)
    with pytest.warns(UserWarning, match=r"column 'rownames' holds the row numbers \(1, 2, 3, \.\.\. in file order\)"):
        source = open_table(tmp_path / "r.csv", target="y", missing="encode", chunk_rows=50)
    assert "rownames" in source.feature_names  # a warning: the user decides
    complete = frame.dropna()  # missing='error' reads no numeric column to learn: the first chunk is looked at
    complete.assign(rownames=np.arange(1, len(complete) + 1)).to_csv(tmp_path / "complete.csv", index=False)
    complete.drop(columns=["colour", "flag"]).assign(rownames=np.arange(1, len(complete) + 1)).to_csv(
        tmp_path / "numbers.csv", index=False)
    for name in ("complete.csv", "numbers.csv"):  # with a text column, whose categories are learned, and without
        with pytest.warns(UserWarning, match=r"column 'rownames' holds the row numbers \(1, 2, 3, \.\.\. in") as caught:
            open_table(tmp_path / name, target="y", chunk_rows=50)
        assert caught[0].filename == __file__  # the user's call, however deep inside rffkit it is found
    # missing='error' agrees with missing='encode' past the first chunk: a count that starts again is no row label,
    # and row groups smaller than a chunk are looked at together
    runs = complete.drop(columns=["colour", "flag", "rownames"]).assign(step=np.arange(len(complete)) % 60)
    runs.to_csv(tmp_path / "runs.csv", index=False)
    pq.write_table(pa.Table.from_pandas(runs.assign(step=np.arange(len(runs))), preserve_index=False),
                   tmp_path / "groups.parquet", row_group_size=10)
    with pytest.warns(UserWarning, match=r"column 'step' holds the row numbers \(0, 1, 2") as caught:
        open_table(tmp_path / "groups.parquet", target="y", chunk_rows=50)
    assert caught[0].filename == __file__
    for missing in ("error", "encode"):
        with pytest.warns(UserWarning, match="column 'rownames'") as caught:
            open_table(tmp_path / "complete.csv", target="y", chunk_rows=50, missing=missing)
        assert caught[0].filename == __file__
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            open_table(tmp_path / "runs.csv", target="y", chunk_rows=50, missing=missing)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_table(tmp_path / "r.csv", target="y", missing="encode", exclude=["rownames"])
    # under a row label's name, a different whole number on every row is a label too: R's row names after
    # rows were dropped, a shuffled split's (helper-42: 'rownames' of R tables sorted by the class took 0.95
    # of the relevance and accuracy 1.000); the same numbers under another name are data
    kept = complete.iloc[::2].copy()  # row names with gaps, rising
    shuffled = complete.sample(frac=1.0, random_state=0)
    for label, table in (("rownames", kept), ("Unnamed: 0", shuffled), ("id", shuffled)):
        table.rename(columns={"rownames": label}).to_csv(tmp_path / "labels.csv", index=False)
        for missing in ("error", "encode"):
            with pytest.warns(UserWarning, match=rf"column '{label}' holds a different whole number on each of its"):
                open_table(tmp_path / "labels.csv", target="y", missing=missing, chunk_rows=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shuffled.rename(columns={"rownames": "count"}).to_csv(tmp_path / "count.csv", index=False)
        open_table(tmp_path / "count.csv", target="y", missing="encode")
        repeated = shuffled.assign(rownames=np.arange(len(shuffled)) // 2)  # a label repeats: no row label
        repeated.to_csv(tmp_path / "repeated.csv", index=False)
        open_table(tmp_path / "repeated.csv", target="y", missing="encode", chunk_rows=50)


def test_a_dataframe_with_a_row_label_column_draws_the_warning_files_get():
    """R's row names read with pandas.read_csv, in a fit on the DataFrame: the row-label check had run on files
    only (helper-45). Under another name the same numbers are data."""
    from rffkit import RFFRidge

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"rownames": rng.permutation(200) + 1, "x": rng.normal(size=200)})
    y = frame["x"] + 0.1 * rng.normal(size=200)
    with pytest.warns(UserWarning, match=r"RFFRidge: column 'rownames' holds a different whole number on each of its "
                                         r"200 rows .* drop it from X") as caught:
        RFFRidge(random_state=0).fit(frame, y)
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RFFRidge(random_state=0).fit(frame.rename(columns={"rownames": "count"}), y)
