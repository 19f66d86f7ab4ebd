"""Streamed data sources (rffkit.io) and the streaming numerics under them (rffkit._streaming)."""

import datetime
import doctest
import json
import os
import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from rffkit import _streaming, io
from rffkit._text_dates import date_format, text_dates
from rffkit._streaming import BottomKSample, RunningMoments, rechunk, validation_mask
from rffkit.io import (
    ArraySource,
    Chunk,
    ColumnEncoding,
    ColumnNotFoundError,
    DataSourceError,
    MissingValueError,
    SchemaMismatchError,
    TableSource,
    UnknownCategoryError,
    as_source,
    open_table,
)

N_ROWS = 97


@pytest.fixture
def table(rng):
    """Numbers, integers, booleans, strings and a float target; 97 rows."""
    return pa.table({
        "a": rng.normal(size=N_ROWS),
        "b": rng.integers(-5, 5, size=N_ROWS),
        "flag": rng.random(N_ROWS) < 0.5,
        "color": rng.choice(["red", "green", "blue"], size=N_ROWS),
        "y": rng.normal(size=N_ROWS),
    })


def _numeric(table):
    return table.drop_columns(["color"])


def _write(table, folder, name, sizes=None, row_group_size=None):
    """Write ``table`` as shards ``name-0``, ``name-1``, ... with ``sizes`` rows; return paths."""
    sizes = [table.num_rows] if sizes is None else sizes
    folder.mkdir(exist_ok=True)
    paths, start = [], 0
    for number, size in enumerate(sizes):
        part = table.slice(start, size)
        start += size
        path = folder / f"{name}-{number}.{'csv' if name.startswith('csv') else 'parquet'}"
        if path.suffix == ".csv":
            pa_csv.write_csv(part, path)
        else:
            pq.write_table(part, path, row_group_size=row_group_size)
        paths.append(path)
    return paths


def _read_all(source, **kwargs):
    chunks = list(source.iter_chunks(**kwargs))
    if not chunks:
        return np.empty((0, source.n_features)), None, np.empty(0, dtype=np.int64)
    y = None if chunks[0].y is None else np.concatenate([chunk.y for chunk in chunks])
    return (np.concatenate([chunk.X for chunk in chunks]), y,
            np.concatenate([chunk.rows for chunk in chunks]))


def _expected_X(table):
    columns = [np.asarray(table.column(name), dtype=np.float64) for name in ("a", "b", "flag")]
    return np.column_stack(columns)


# --- opening files ---------------------------------------------------------------------------


def test_single_parquet_file_reads_every_row_in_order(table, tmp_path):
    (path,) = _write(_numeric(table), tmp_path, "part", row_group_size=10)
    source = open_table(path, target="y")
    assert isinstance(source, TableSource)
    assert source.feature_names == ["a", "b", "flag"] and source.n_features == 3
    assert source.target == "y" and source.n_rows == N_ROWS and source.files == [str(path)]
    X, y, rows = _read_all(source, chunk_rows=16)
    np.testing.assert_array_equal(X, _expected_X(table))
    np.testing.assert_array_equal(y, table.column("y").to_numpy())
    np.testing.assert_array_equal(rows, np.arange(N_ROWS))
    assert X.dtype == np.float64 and rows.dtype == np.int64
    first = next(iter(source))  # the default chunk (65,536 rows) holds the whole table
    assert isinstance(first, Chunk) and first.X.shape == (N_ROWS, 3)
    assert first.X.flags["C_CONTIGUOUS"]


def test_pandas_index_columns_are_not_features(table, tmp_path):
    frame = table.to_pandas()
    frame.index = [f"r{i}" for i in range(N_ROWS)]  # an unnamed index is stored as a column
    frame.to_parquet(tmp_path / "frame.parquet")
    assert "__index_level_0__" in pq.read_schema(tmp_path / "frame.parquet").names
    source = open_table(tmp_path / "frame.parquet", target="y")
    assert source.encoding.columns == ("a", "b", "flag", "color")
    assert open_table(tmp_path / "frame.parquet", target="y", features="a").feature_names == ["a"]


def test_a_glob_or_directory_reads_its_shards_sorted_and_a_list_in_the_order_given(table, tmp_path):
    paths = _write(_numeric(table), tmp_path / "data", "part", sizes=[30, 30, 37])
    expected = _read_all(open_table(tmp_path / "data" / "*.parquet", target="y"))
    np.testing.assert_array_equal(expected[0], _expected_X(table))
    np.testing.assert_array_equal(_read_all(open_table(str(tmp_path / "data"), target="y"))[0], expected[0])
    pattern = str(tmp_path / "data" / "part-[01].parquet")
    for spec, order in ((list(reversed(paths)), [2, 1, 0]), ([paths[2], pattern], [2, 0, 1]),
                        ([paths[1], pattern, paths[1]], [1, 0])):
        X, y, rows = _read_all(open_table(spec, target="y"))
        shards = np.split(expected[0], [30, 60])
        np.testing.assert_array_equal(X, np.concatenate([shards[k] for k in order]))
        np.testing.assert_array_equal(rows, np.arange(X.shape[0]))  # global rows count in reading order


def test_directory_skips_hidden_and_underscore_files(table, tmp_path):
    _write(_numeric(table), tmp_path / "data", "part")
    (tmp_path / "data" / "_SUCCESS").write_text("")
    (tmp_path / "data" / ".part-0.parquet.crc").write_text("x")
    assert open_table(tmp_path / "data", target="y").n_rows == N_ROWS


@pytest.mark.parametrize("variant", ["csv", "csv.gz", "tsv"])
def test_csv_and_parquet_give_identical_chunks(table, tmp_path, variant):
    shards = _write(table, tmp_path / "pq", "part", sizes=[40, 57], row_group_size=25)
    csv_shards = _write(table, tmp_path / "csv", "csv", sizes=[40, 57])
    if variant != "csv":
        import gzip

        for path in csv_shards:
            text = path.read_text()
            if variant == "tsv":
                path.with_suffix(".tsv").write_text(text.replace(",", "\t"))
            else:
                with gzip.open(f"{path}.gz", "wt") as handle:
                    handle.write(text)
            path.unlink()
    parquet = open_table(shards, target="y")
    text = open_table(str(tmp_path / "csv" / f"*.{variant}"), target="y")
    names = ["a", "b", "flag", "color=blue", "color=green", "color=red"]
    assert parquet.feature_names == text.feature_names == names
    assert text.n_rows == N_ROWS  # a counting pass for CSV
    for first, second in zip(parquet.iter_chunks(chunk_rows=32), text.iter_chunks(chunk_rows=32)):
        np.testing.assert_array_equal(first.X, second.X)
        np.testing.assert_array_equal(first.y, second.y)
        np.testing.assert_array_equal(first.rows, second.rows)


def test_integer_and_string_targets_keep_their_type(table, tmp_path):
    labelled = table.set_column(4, "y", pa.array(np.arange(N_ROWS) % 3))
    labelled = labelled.append_column("label", table.column("color"))
    for name, paths in (("part", None), ("csv", None)):
        paths = _write(labelled, tmp_path / name, name)
        y = _read_all(open_table(paths, target="y", features=["a"]))[1]
        assert y.dtype == np.int64
        np.testing.assert_array_equal(y, np.arange(N_ROWS) % 3)
        labels = _read_all(open_table(paths, target="label", features=["a"]))[1]
        assert labels.dtype == object and list(labels) == table.column("color").to_pylist()


@pytest.mark.parametrize("chunk_rows", [1, 7, 25, 64, 1000])
def test_chunk_size_changes_neither_data_nor_row_indices(table, tmp_path, chunk_rows):
    paths = _write(table, tmp_path, "part", sizes=[20, 50, 27], row_group_size=8)
    source = open_table(paths, target="y")
    reference = _read_all(source, chunk_rows=N_ROWS)
    chunks = list(source.iter_chunks(chunk_rows=chunk_rows))
    assert all(len(chunk.rows) == chunk_rows for chunk in chunks[:-1])
    X, y, rows = _read_all(source, chunk_rows=chunk_rows)
    np.testing.assert_array_equal(X, reference[0])
    np.testing.assert_array_equal(y, reference[1])
    np.testing.assert_array_equal(rows, np.arange(N_ROWS))


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("kind", ["part", "csv"])
def test_ranks_partition_the_rows(table, tmp_path, world_size, kind):
    paths = _write(table, tmp_path, kind, sizes=[20, 50, 27], row_group_size=8)
    source = open_table(paths, target="y")
    X_all, y_all, _ = _read_all(source)
    shares = [_read_all(source, chunk_rows=13, rank=rank, world_size=world_size)
              for rank in range(world_size)]
    rows = np.concatenate([share[2] for share in shares])
    np.testing.assert_array_equal(np.sort(rows), np.arange(N_ROWS))  # every row exactly once
    assert all(len(share[2]) > 0 for share in shares)
    for X, y, share_rows in shares:
        np.testing.assert_array_equal(X, X_all[share_rows])
        np.testing.assert_array_equal(y, y_all[share_rows])
        assert np.all(np.diff(share_rows) > 0)  # file order within a rank
    with pytest.raises(ValueError, match="rank must be"):
        next(source.iter_chunks(rank=world_size, world_size=world_size))


def test_passes_reread_the_files_and_agree(table, tmp_path):
    paths = _write(table, tmp_path, "part", row_group_size=10)
    source = open_table(paths, target="y", dtype=np.float32)
    first, second = _read_all(source, chunk_rows=9), _read_all(source, chunk_rows=9)
    assert first[0].dtype == np.float32
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_allclose(first[0][:, :3], _expected_X(table), rtol=1e-7)


# --- encoding -----------------------------------------------------------------------------------


def test_one_hot_encoding_of_strings_and_categoricals_with_groups(table, tmp_path):
    sizes = np.where(table.column("b").to_numpy() > 0, "L", "S")
    categorical = table.append_column("size", pa.array(sizes).dictionary_encode())
    (path,) = _write(categorical, tmp_path, "part", row_group_size=30)
    source = open_table(path, target="y")
    assert source.feature_names == ["a", "b", "flag", "color=blue", "color=green", "color=red",
                                    "size=L", "size=S"]
    assert source.encoding.groups == ["a", "b", "flag", "color", "color", "color", "size", "size"]
    assert source.encoding.categories == {"color": ("blue", "green", "red"), "size": ("L", "S")}
    X = _read_all(source, chunk_rows=20)[0]
    colors = np.asarray(table.column("color").to_pylist())
    one_hot = np.column_stack([colors == color for color in ("blue", "green", "red")])
    np.testing.assert_array_equal(X[:, 3:6], one_hot)
    np.testing.assert_array_equal(X[:, 6], table.column("b").to_numpy() > 0)
    np.testing.assert_array_equal(X[:, :3], _expected_X(table))
    assert ColumnEncoding.from_dict(source.encoding.to_dict()) == source.encoding


def test_training_encoding_applies_to_test_data_with_unknown_categories(table, tmp_path):
    train = open_table(_write(table, tmp_path / "train", "part"), target="y")
    unseen = table.set_column(3, "color", pa.array(["violet"] * N_ROWS))
    test_path = _write(unseen, tmp_path / "test", "part")
    X = _read_all(open_table(test_path, target="y", encoding=train.encoding))[0]
    assert X.shape == (N_ROWS, 6) and not X[:, 3:].any()  # unknown -> all-zero block
    strict = ColumnEncoding(train.encoding.columns, train.encoding.categories,
                            handle_unknown="error")
    with pytest.raises(UnknownCategoryError, match=r"column 'color' holds 'violet' at row 0"):
        _read_all(open_table(test_path, target="y", encoding=strict))
    narrower = train.with_encoding(ColumnEncoding(["a", "color"], {"color": ["red"]}))
    assert narrower.feature_names == ["a", "color=red"]
    single = train.with_dtype(np.float32)
    X64, X32 = _read_all(train)[0], _read_all(single)[0]
    assert X32.dtype == np.float32 and single.encoding is train.encoding and train.dtype == np.float64
    np.testing.assert_array_equal(X32, X64.astype(np.float32))


def test_too_many_categories_names_the_column(table, tmp_path):
    source = open_table(_write(table, tmp_path, "part"), target="y")
    with pytest.raises(DataSourceError, match=r"column 'color' has more than max_categories=2"):
        source.fit_encoding(max_categories=2)


def _spoilt(rng, spoilers):
    """A table whose text column 'dose' holds numbers and, at the given rows, other values."""
    dose = [f"{value:.4f}" for value in rng.normal(size=N_ROWS)]
    for row, value in spoilers.items():
        dose[row] = value
    return pa.table({"a": rng.normal(size=N_ROWS), "dose": dose, "y": rng.normal(size=N_ROWS)})


@pytest.mark.parametrize("sizes", [None, [40, 57]])
@pytest.mark.parametrize("name", ["csv", "part"])
def test_a_numeric_column_with_text_in_it_is_refused_naming_the_values_and_their_rows(rng, tmp_path, name, sizes):
    """Read as text, 94 numbers and '?' and '-' would be 97 one-hot columns: the error names the two and their rows."""
    paths = _write(_spoilt(rng, {12: "?", 45: "-", 80: "?"}), tmp_path, name, sizes)
    with pytest.raises(DataSourceError) as excinfo:
        open_table(paths, target="y", chunk_rows=16)
    message = _message(excinfo)
    assert message.startswith("column 'dose' holds numbers and text: 94 of its distinct values are numbers and 2 "
                              "are not: '?' (row 12), '-' (row 45). Is that a placeholder for missing values?")
    assert message.endswith("or leave it out (exclude=[...] in Python, --exclude on the command line).")


def test_past_max_categories_the_text_among_numbers_is_still_named(rng, tmp_path):
    """max_categories is passed in the first chunks; the '?' in a later one is what the error names."""
    paths = _write(_spoilt(rng, {90: "?"}), tmp_path, "part")
    source = open_table(paths, target="y", chunk_rows=16, encoding=ColumnEncoding(["a", "dose"], {"dose": ["0"]}))
    with pytest.raises(DataSourceError, match=r"^column 'dose' holds numbers and text: 96 .* '\?' \(row 90\)\."):
        source.fit_encoding(max_categories=30)
    text = _spoilt(rng, {k: f"word {k}" for k in range(0, N_ROWS, 5)})  # 20 words: too many for numbers in text
    source = open_table(_write(text, tmp_path, "words"), target="y", encoding=ColumnEncoding(["a", "dose"],
                                                                                              {"dose": ["0"]}))
    with pytest.raises(DataSourceError, match=r"column 'dose' has more than max_categories=30"):
        source.fit_encoding(max_categories=30)


def test_numbers_stored_as_text_are_refused_and_codes_are_categories(rng, tmp_path):
    """A string column of numbers only asks to be stored as numbers; 13 grade codes one-hot encode as they are."""
    numbers = _spoilt(rng, {})
    with pytest.raises(DataSourceError, match=r"column 'dose' holds numbers written as text \(97 distinct values, "
                                              r"each a number\): store it as a numeric column"):
        open_table(_write(numbers, tmp_path, "part"), target="y")
    grades = ["K"] + [str(k) for k in range(1, 13)]
    coded = numbers.set_column(1, "dose", pa.array([grades[k % 13] for k in range(N_ROWS)]))
    source = open_table(_write(coded, tmp_path, "coded"), target="y")
    assert list(source.encoding.categories["dose"]) == sorted(grades)


def test_numbers_written_as_text_named_categorical_are_categories(rng, tmp_path):
    """Product numbers stored as text in Parquet: refused as numbers written as text, with the advice to
    name the column categorical; so named, its 30 values are the categories, sorted as numbers."""
    codes = [str(1000 + 7 * (k % 30)) for k in range(N_ROWS)]
    table = pa.table({"a": rng.normal(size=N_ROWS), "product": codes, "y": rng.normal(size=N_ROWS)})
    path = _write(table, tmp_path, "part")
    with pytest.raises(DataSourceError, match=r"holds numbers written as text \(30 distinct values, each a number\): "
                                              r"store it as a numeric column; or, if its numbers are codes, name it "
                                              r"categorical \(categorical=\[...\] in Python, --categorical"):
        open_table(path, target="y")
    source = open_table(path, target="y", categorical=["product"])
    assert list(source.encoding.categories["product"]) == sorted(set(codes), key=int)
    X = np.concatenate([chunk.X for chunk in source])
    assert X.shape == (N_ROWS, 31) and np.all(X[:, 1:].sum(axis=1) == 1)


def test_numbers_with_thousands_separators_are_numbers_written_as_text(rng, tmp_path):
    amounts = [f"{value:,.2f}" for value in rng.uniform(1000, 1e6, N_ROWS)]  # '123,456.78'
    table = pa.table({"a": rng.normal(size=N_ROWS), "amount": amounts, "y": rng.normal(size=N_ROWS)})
    with pytest.raises(DataSourceError, match=r"column 'amount' holds numbers written as text \(97 distinct"):
        open_table(_write(table, tmp_path, "csv"), target="y")


def test_a_text_column_with_a_value_per_row_is_named_as_an_identifier(table, tmp_path):
    names = pa.array([f"patient {k}" for k in range(N_ROWS)])
    with pytest.warns(UserWarning, match=r"column 'name' has 97 distinct values in 97 rows: an identifier\? .*"
                                         r"--exclude on the command line"):
        source = open_table(_write(table.append_column("name", names), tmp_path, "part", sizes=[50, 47]), target="y")
    assert len(source.encoding.categories["name"]) == N_ROWS  # a warning: the user may mean it
    few = pa.array([f"ward {k % 20}" for k in range(N_ROWS)])  # 20 levels, any number of rows: no warning
    open_table(_write(table.append_column("ward", few), tmp_path, "wards"), target="y")
    # on a small table, a name on every row (R's row names of mtcars: helper-42 found them first in the relevances)
    small = table.slice(0, 12)
    cars = small.append_column("car", pa.array([f"car {k}" for k in range(12)]))
    with pytest.warns(UserWarning, match=r"column 'car' has 12 distinct values in 12 rows: an identifier\?"):
        open_table(_write(cars, tmp_path, "cars"), target="y")
    shared = small.append_column("make", pa.array([f"make {k % 6}" for k in range(12)]))  # 6 makes of 12 cars
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        open_table(_write(shared, tmp_path, "makes"), target="y")


def test_new_data_whose_numbers_a_placeholder_made_text_is_named(table, tmp_path):
    """Predicting on a file where '?' turned a numeric column into text: the error names it, not the column's type."""
    source = open_table(_write(_numeric(table), tmp_path, "train"), target="y")
    spoilt = [f"{value:.3f}" for value in table.column("a").to_pylist()]
    spoilt[3] = spoilt[60] = "?"
    new = _numeric(table).set_column(0, "a", pa.array(spoilt))
    with pytest.raises(DataSourceError) as excinfo:
        open_table(_write(new, tmp_path, "csv-new", sizes=[50, 47]), target="y", encoding=source.encoding)
    assert _message(excinfo).startswith("feature column 'a' holds text where the encoding expects numbers: '?' (row 3). "
                                        "Is that a placeholder for missing values?")


def test_new_data_with_numbers_written_as_text_is_read_as_numbers(table, tmp_path):
    """A Parquet file whose numeric column was written as text (every value a number) is parsed where the
    encoding reads numbers; a value that is no number is named with its row."""
    source = open_table(_write(_numeric(table), tmp_path, "train"), target="y")
    expected = np.concatenate([chunk.X for chunk in source.iter_chunks()])
    as_text = _numeric(table).set_column(0, "a", pa.array([repr(value) for value in table.column("a").to_pylist()]))
    new = open_table(_write(as_text, tmp_path, "part-new", sizes=[50, 47]), target="y", encoding=source.encoding)
    np.testing.assert_array_equal(np.concatenate([chunk.X for chunk in new.iter_chunks()]), expected)
    with pytest.raises(DataSourceError, match=r"column 'a' holds 'x' at row 1, where the encoding expects a number"):
        source.encoding.transform({**{name: [0.0, 0.0] for name in source.encoding.columns}, "a": ["1.5", "x"]})


def test_string_feature_without_categories_is_refused(table, tmp_path):
    source = open_table(_write(table, tmp_path, "part"), target="y")
    with pytest.raises(DataSourceError, match=r"feature column 'color' has type string"):
        source.with_encoding(ColumnEncoding(["a", "color"]))


# --- errors a user can act on ------------------------------------------------------------------


def _message(excinfo):
    message = str(excinfo.value)
    assert len(message) < 400  # never a whole array
    return message


def test_no_match_names_the_pattern(tmp_path):
    with pytest.raises(FileNotFoundError) as excinfo:
        open_table(str(tmp_path / "data" / "*.parquet"))
    assert "no file matches the pattern" in _message(excinfo) and "*.parquet" in str(excinfo.value)
    with pytest.raises(FileNotFoundError, match="no such file"):
        open_table(tmp_path / "missing.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no data files"):
        open_table(tmp_path / "empty")


def test_files_that_are_not_csv_or_parquet_are_named(table, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(DataSourceError, match=r"notes\.txt' is not a CSV or Parquet file .*; remove it, name the "
                                              r"data files \(a glob such as 'folder/\*.parquet'\), or, if it is one, "
                                              r"pass format= \(Python\)\."):
        open_table(tmp_path / "notes.txt")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataSourceError, match=r"cannot read '.*broken\.parquet'"):
        open_table(tmp_path / "broken.parquet")
    _write(table, tmp_path, "part")
    _write(table, tmp_path, "csv")
    with pytest.raises(DataSourceError, match="mix formats"):
        open_table([tmp_path / "part-0.parquet", tmp_path / "csv-0.csv"])


def test_empty_files_and_tables(table, tmp_path):
    (tmp_path / "zero.csv").write_text("")
    with pytest.raises(DataSourceError, match=r"zero\.csv' is empty \(0 bytes\)"):
        open_table(tmp_path / "zero.csv")
    (tmp_path / "header.csv").write_text("a,y\n")
    with pytest.raises(DataSourceError, match="the table has no rows"):
        open_table(tmp_path / "header.csv", target="y")
    pq.write_table(table.slice(0, 0), tmp_path / "none.parquet")
    with pytest.raises(DataSourceError, match="the table has no rows"):
        open_table(tmp_path / "none.parquet", target="y")


def test_missing_target_and_feature_columns(table, tmp_path):
    path = _write(table, tmp_path, "part")
    with pytest.raises(ColumnNotFoundError) as excinfo:
        open_table(path, target="price")
    assert "'price'" in _message(excinfo) and "'a', 'b', 'flag', 'color', 'y'" in str(excinfo.value)
    with pytest.raises(ColumnNotFoundError, match=r"feature column 'weight' is not in"):
        open_table(path, target="y", features=["a", "weight"])
    with pytest.raises(ValueError, match="cannot also be a feature"):
        open_table(path, target="y", features=["a", "y"])


def test_shards_that_disagree_are_named(table, tmp_path):
    good = _write(table, tmp_path / "missing", "part")[0]
    pq.write_table(table.drop_columns(["b"]), tmp_path / "missing" / "part-1.parquet")
    message = r"column 'b' is in .*part-0.parquet' but not in .*part-1.parquet'"
    with pytest.raises(SchemaMismatchError, match=message):
        open_table(tmp_path / "missing", target="y")
    extra = table.append_column("z", pa.array(np.ones(N_ROWS)))
    pq.write_table(extra, tmp_path / "missing" / "part-1.parquet")
    with pytest.raises(SchemaMismatchError, match=r"column 'z' is in .*part-1.parquet'"):
        open_table(tmp_path / "missing", target="y")
    assert open_table(tmp_path / "missing", target="y", features=["a"]).n_rows == 2 * N_ROWS
    strings = table.set_column(0, "a", pa.array([f"s{i}" for i in range(N_ROWS)]))
    _write(table, tmp_path / "types", "csv")
    pa_csv.write_csv(strings, tmp_path / "types" / "csv-1.csv")
    message = r"disagree on column 'a': double in .*csv-0.csv' but string in .*csv-1.csv'"
    with pytest.raises(SchemaMismatchError, match=message):
        open_table(tmp_path / "types", target="y")
    assert good.exists()


def test_missing_values_name_the_column_and_row(table, tmp_path):
    a = table.column("a").to_numpy().copy()
    a[41] = np.nan
    with_nan = table.set_column(0, "a", pa.array(a))
    (nan_path,) = _write(with_nan, tmp_path / "nan", "part", row_group_size=16)
    with pytest.raises(MissingValueError, match=r"column 'a' holds NaN at row 41"):
        _read_all(open_table(nan_path, target="y"), chunk_rows=10)
    nulls = table.set_column(4, "y", pa.array([None if i == 60 else 1.0 for i in range(N_ROWS)]))
    _write(nulls, tmp_path / "null", "csv", sizes=[50, 47])
    message = r"column 'y' holds a missing value \(null\) at row 60.*\(row 60 is row 10 of 'csv-1.csv'\)\.$"
    with pytest.raises(MissingValueError, match=message):  # several files: the file and its own row (helper-46)
        _read_all(open_table(tmp_path / "null", target="y"))
    colors = pa.array([None if i == 5 else "red" for i in range(N_ROWS)])
    empty_color = table.set_column(3, "color", colors)
    message = r"column 'color' holds a missing value \(null\) at row 5"
    with pytest.raises(MissingValueError, match=message):
        open_table(_write(empty_color, tmp_path / "color", "csv"), target="y")
    X = np.ones((30, 2))
    X[17, 1] = np.inf
    with pytest.raises(DataSourceError, match=r"column 'x1' holds inf at row 17"):
        _read_all(ArraySource(X, chunk_rows=4))
    X[17, 1], X[23, 0] = 0.0, np.nan
    with pytest.raises(MissingValueError, match=r"column 'f0' holds NaN at row 23"):
        _read_all(ArraySource(X, chunk_rows=4, feature_names=["f0", "f1"]))


# --- arrays -----------------------------------------------------------------------------------


def test_array_source_chunks_of_a_memmap_are_views_never_a_whole_copy(tmp_path):
    n_rows, n_features = 40_000, 25  # 8 MB on disk
    memmap = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float64,
                                       shape=(n_rows, n_features))
    memmap[:] = np.arange(n_rows, dtype=np.float64)[:, None]
    memmap.flush()
    X = np.load(tmp_path / "X.npy", mmap_mode="r")
    source = as_source(X, np.arange(n_rows, dtype=np.float64))
    tracemalloc.start()
    try:
        total = 0.0
        for chunk in source.iter_chunks(chunk_rows=1000):
            assert np.shares_memory(chunk.X, X)
            total += chunk.X[:, 0].sum()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == n_rows * (n_rows - 1) / 2
    assert peak < X.nbytes / 20  # about one chunk's temporaries, far from the 8 MB array


def test_array_source_ranks_names_and_as_source(rng):
    X, y = rng.normal(size=(23, 3)), rng.normal(size=23)
    source = ArraySource(X, y, chunk_rows=4)
    assert source.feature_names == ["x0", "x1", "x2"]
    assert source.n_rows == 23 and source.n_features == 3 and source.target == "y"
    shares = [_read_all(source, rank=rank, world_size=3) for rank in range(3)]
    np.testing.assert_array_equal(np.concatenate([share[2] for share in shares]), np.arange(23))
    np.testing.assert_array_equal(np.concatenate([share[0] for share in shares]), X)
    assert as_source(source) is source
    with pytest.raises(ValueError, match="already carries its target"):
        as_source(source, y)
    with pytest.raises(TypeError, match="open_table"):
        as_source("data/*.parquet")
    integers = ArraySource(np.arange(6).reshape(3, 2))
    assert next(iter(integers)).X.dtype == np.float64


# --- streaming numerics -----------------------------------------------------------------------


def _random_cuts(rng, n, pieces):
    return np.sort(rng.choice(np.arange(1, n), size=pieces - 1, replace=False))


@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_running_moments_match_numpy_in_any_chunking_and_merge_order(rng, offset):
    X = offset + rng.normal(scale=0.5, size=(5_000, 3)) * [1.0, 2.0, 0.01]
    parts = np.split(X, _random_cuts(rng, len(X), 12))
    moments = []
    for part in parts:
        piece = RunningMoments()
        for sub in np.array_split(part, 3):
            piece.update(sub)
        moments.append(piece)
    merged = RunningMoments()
    for index in rng.permutation(len(moments)):
        merged.merge(moments[index])
    assert merged.count == len(X)
    np.testing.assert_allclose(merged.mean, X.mean(axis=0), rtol=1e-12)
    # X - X[0] is exact (Sterbenz), so np.var of it is np.var without the rounding of the
    # offset; np.var(X) itself is off by ~1e-9 on the narrow column at offset 1e8.
    np.testing.assert_allclose(merged.variance, (X - X[0]).var(axis=0), rtol=1e-12)
    np.testing.assert_allclose(merged.variance, X.var(axis=0), rtol=1e-12 if not offset else 1e-7)
    np.testing.assert_allclose(merged.std, (X - X[0]).std(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(merged.minimum, X.min(axis=0))
    np.testing.assert_array_equal(merged.maximum, X.max(axis=0))
    if offset:  # the naive sum of squares loses every digit here
        naive = (X**2).mean(axis=0) - X.mean(axis=0) ** 2
        assert np.max(np.abs(naive / X.var(axis=0) - 1)) > 1e-3


def test_validation_mask_fraction_and_chunk_independence():
    rows = np.arange(200_000)
    mask = validation_mask(rows, 0.1, seed=3)
    tolerance = 5 * np.sqrt(0.1 * 0.9 / rows.size)  # five binomial standard deviations
    assert abs(mask.mean() - 0.1) < tolerance
    parts = np.array_split(rows[::-1], 7)
    pieces = np.concatenate([validation_mask(part, 0.1, seed=3) for part in parts])
    np.testing.assert_array_equal(pieces, mask[::-1])
    # Another seed is an independent split: agreement 0.9**2 + 0.1**2 = 0.82.
    assert abs((validation_mask(rows, 0.1, seed=4) == mask).mean() - 0.82) < 0.01
    assert not validation_mask(rows, 0.0, 3).any() and validation_mask(rows, 1.0, 3).all()


def test_bottom_k_sample_is_independent_of_chunks_and_ranks(rng):
    X, y = rng.normal(size=(1_000, 2)), rng.normal(size=1_000)
    source = ArraySource(X, y)

    def sample(chunk_rows, world_size):
        shares = []
        for rank in range(world_size):
            share = BottomKSample(50, seed=9)
            for chunk in source.iter_chunks(chunk_rows, rank=rank, world_size=world_size):
                share.update(chunk.X, chunk.y, chunk.rows)
            shares.append(share)
        for share in shares[1:]:
            shares[0].merge(share)
        return shares[0]

    reference = sample(1_000, 1)
    X_s, y_s, rows_s = reference.result()
    assert reference.n_seen == 1_000 and len(rows_s) == 50 and np.all(np.diff(rows_s) > 0)
    np.testing.assert_array_equal(X_s, X[rows_s])
    np.testing.assert_array_equal(y_s, y[rows_s])
    for chunk_rows, world_size in ((7, 1), (64, 3), (1, 2)):
        np.testing.assert_array_equal(sample(chunk_rows, world_size).result()[2], rows_s)
    assert not np.isin(rows_s, np.flatnonzero(validation_mask(np.arange(1_000), 0.0, 9))).any()
    with pytest.raises(ValueError, match="same k and seed"):
        BottomKSample(50, seed=1).merge(reference)
    with pytest.raises(ValueError, match="offered twice"):
        BottomKSample(5).update(X[:3], None, np.array([1, 2, 1]))


def test_bottom_k_sample_is_roughly_uniform():
    n, k, repeats = 200, 20, 400
    counts = np.zeros(n)
    for seed in range(repeats):
        sample = BottomKSample(k, seed=seed).update(np.zeros((n, 1)), None, np.arange(n))
        counts[sample.result()[2]] += 1
    expected = repeats * k / n  # 40 per row; binomial sd about 5.7
    assert abs(counts.mean() - expected) < 1e-12
    assert np.all(np.abs(counts - expected) < 6 * np.sqrt(expected * (1 - k / n)))
    halves = counts[: n // 2].sum() / counts.sum()
    assert abs(halves - 0.5) < 0.02


def test_rechunk_makes_exact_chunks_and_passes_whole_pieces_as_views():
    big = np.arange(20.0).reshape(10, 2)
    pieces = [(big, None, np.arange(10)), (np.ones((3, 2)), None, np.arange(10, 13))]
    chunks = list(rechunk(pieces, 4))
    assert [len(rows) for _, _, rows in chunks] == [4, 4, 4, 1]
    assert np.shares_memory(chunks[0][0], big)
    np.testing.assert_array_equal(np.concatenate([rows for _, _, rows in chunks]), np.arange(13))


@pytest.mark.parametrize("module", [io, _streaming], ids=["io", "_streaming"])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
    assert os.path.basename(module.__file__) in ("io.py", "_streaming.py")


def test_timestamps_and_dates_are_days_since_1970(tmp_path):
    """A time column is one number: days since 1970-01-01 (UTC for a zoned timestamp), the time of day its fraction."""

    from rffkit._column_kinds import numbers

    moments = [datetime.datetime(1970, 1, 2, 12, 0), None, datetime.datetime(2013, 1, 1, 6, 0)]
    expected = [1.5, np.nan, 15706.25]
    for unit in ("s", "ms", "us", "ns"):
        np.testing.assert_array_equal(numbers(pa.array(moments, type=pa.timestamp(unit))), expected)
    zoned = pa.array(moments, type=pa.timestamp("s", tz="UTC"))
    np.testing.assert_array_equal(numbers(zoned), expected)
    days = [datetime.date(1970, 1, 11), datetime.date(1969, 12, 31), None]
    np.testing.assert_array_equal(numbers(pa.array(days, type=pa.date32())), [10.0, -1.0, np.nan])
    np.testing.assert_array_equal(numbers(pa.array(days, type=pa.date64())), [10.0, -1.0, np.nan])

    path = tmp_path / "t.csv"
    path.write_text("when,day,x,y\n2013-01-01T06:00:00Z,2013-01-02,1.0,0.5\n"
                    "2013-01-02T18:00:00Z,2013-01-03,2.0,1.5\n")
    source = open_table(path, target="y")
    assert source.time_columns == {"when": "days since 1970-01-01", "day": "days since 1970-01-01"}
    assert source.feature_names == ["when", "day", "x"]
    np.testing.assert_array_equal(next(source.iter_chunks()).X, [[15706.25, 15707.0, 1.0], [15707.75, 15708.0, 2.0]])
    with pytest.raises(DataSourceError, match="target column 'day' has an unsupported type"):
        open_table(path, target="day")


def test_times_of_day_are_hours_and_durations_seconds(tmp_path):

    from rffkit._column_kinds import numbers

    clock = [datetime.time(6, 30), None, datetime.time(23, 59, 59)]
    for type_ in (pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns")):
        np.testing.assert_allclose(numbers(pa.array(clock, type=type_)), [6.5, np.nan, 23 + 3599 / 3600], rtol=1e-15)
    spans = [datetime.timedelta(minutes=90), datetime.timedelta(seconds=-2), None]
    for unit in ("s", "ms", "us", "ns"):
        np.testing.assert_array_equal(numbers(pa.array(spans, type=pa.duration(unit))), [5400.0, -2.0, np.nan])
    # a CSV's HH:MM(:SS) column is read as a time of day; a duration comes from Parquet
    path = tmp_path / "t.csv"
    path.write_text("dep,x,y\n06:15,1.0,0.5\n18:45:30,2.0,1.5\n")
    source = open_table(path, target="y")
    assert source.time_columns == {"dep": "hours since midnight"}
    np.testing.assert_allclose(next(source.iter_chunks()).X[:, 0], [6.25, 18 + 45.5 / 60], rtol=1e-15)
    pq.write_table(pa.table({"air": pa.array(spans, type=pa.duration("ms")), "y": [1.0, 2.0, 3.0]}),
                   tmp_path / "d.parquet")
    source = open_table(tmp_path / "d.parquet", target="y", missing="encode")
    assert source.time_columns == {"air": "seconds"}
    np.testing.assert_array_equal(next(source.iter_chunks()).X, [[5400.0, 0.0], [-2.0, 0.0], [2699.0, 1.0]])
    with pytest.raises(DataSourceError, match="target column 'air' has an unsupported type"):
        open_table(tmp_path / "d.parquet", target="air")
    # one file's times of day and another's timestamps are not one column
    pq.write_table(pa.table({"air": pa.array([datetime.datetime(2020, 1, 1)] * 3), "y": [1.0, 2.0, 3.0]}),
                   tmp_path / "e.parquet")
    with pytest.raises(DataSourceError, match="air"):
        open_table([tmp_path / "d.parquet", tmp_path / "e.parquet"], target="y")


def test_exclude_leaves_columns_out_of_the_default_features(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,a,b,y\nr1,1.0,2.0,0.5\nr2,2.0,3.0,1.5\n")
    assert open_table(path, target="y", exclude=["id"]).feature_names == ["a", "b"]
    assert open_table(path, target="y", exclude="b").feature_names == ["id=r1", "id=r2", "a"]
    with pytest.raises(ColumnNotFoundError, match="excluded column 'c' is not in"):
        open_table(path, target="y", exclude=["c"])
    with pytest.raises(ValueError, match="give features or exclude, not both"):
        open_table(path, target="y", features=["a"], exclude=["id"])
    with pytest.raises(DataSourceError, match="no feature columns"):
        open_table(path, target="y", exclude=["id", "a", "b"])
    # test rows opened as the training rows were, with the training encoding: exclude agrees, or is named
    train = open_table(path, target="y", exclude=["id"])
    assert open_table(path, target="y", exclude=["id"], encoding=train.encoding).feature_names == ["a", "b"]
    with pytest.raises(ValueError, match="exclude names 'a', which the encoding reads; the encoding fixes the columns"):
        open_table(path, target="y", exclude=["a"], encoding=train.encoding)


def _late_csv(path, first, last):
    """A CSV whose column v cycles through ``first`` on 200,000 rows (past pyarrow's first block, where
    it infers the column's type), then is ``last``."""
    with open(path, "w") as handle:
        handle.write("x,v,y\n")
        handle.write("".join(f"1.5,{value},2.0\n" for value in first) * (200_000 // len(first)))
        handle.write(f"1.5,{last},2.0\n")
    return path


def test_a_csv_column_of_empty_fields_then_text_is_read_as_text(tmp_path):
    """pyarrow infers a CSV column's type from the first block; text further down makes it a text column,
    with a warning, and new data opened with the learned encoding read it the same way."""
    path = _late_csv(tmp_path / "t.csv", [""], "NO")
    with pytest.warns(UserWarning, match=r"CSV column 'v' holds only numbers or empty fields in the first rows of "
                                         r".*t.csv', where its type is inferred, and text further down \('NO'\): it is "
                                         r"read as text"):
        source = open_table(path, target="y", missing="encode")
    assert source.feature_names == ["x", "v=NO", "v=(missing)"]
    X = np.concatenate([chunk.X for chunk in source.iter_chunks()])
    np.testing.assert_array_equal(X[-2:, 1:], [[0, 1], [1, 0]])
    again = open_table(path, target="y", encoding=source.encoding)  # no learning pass: the encoding says text
    np.testing.assert_array_equal(np.concatenate([chunk.X for chunk in again.iter_chunks()]), X)
    # dates further down: found where the column first holds values; no warning where their form is given
    dated = _late_csv(tmp_path / "d.csv", [""], "1/31/2020")
    with pytest.warns(UserWarning, match=r"text further down \('1/31/2020'\): it is read as dates\."):
        source = open_table(dated, target="y", missing="encode")
    assert source.encoding.dates == {"v": "%m/%d/%Y"} and source.feature_names == ["x", "v", "v=(missing)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = open_table(dated, target="y", missing="encode", dates={"v": "%m/%d/%Y"})
    assert named.encoding.dates == {"v": "%m/%d/%Y"}
    assert np.concatenate([chunk.X for chunk in named.iter_chunks()])[-1, 1] == 18292.0


def test_a_csv_column_of_numbers_then_text_is_named(tmp_path):
    # learned: read as text, it is a column of numbers spoilt by a placeholder
    path = _late_csv(tmp_path / "t.csv", [str(k) for k in range(40)], "?")
    with pytest.raises(DataSourceError, match=r"column 'v' holds numbers and text: .* '\?' \(row 200000\)"):
        open_table(path, target="y", missing="encode")
    # not learned (no text column, missing='error'): the read names the column and the way out
    with pytest.raises(DataSourceError, match=r"invalid value '\?' \(column #1 is 'v'\); a CSV column's type "
                                              r"is inferred from the file's first rows.*--exclude on the command line"):
        for _ in open_table(path, target="y").iter_chunks():
            pass


def test_categorical_one_hot_encodes_codes_stored_as_numbers(tmp_path):
    """A code (a subject, a site) stored as a number is one input per value, matched by its text: the
    same categories from CSV and Parquet, from integers and floats, sorted as numbers; NaN is missing."""
    site = pa.array([3, 10, 3, None, 1, 10])
    dose = pa.array([4.0, 2.5, float("nan"), 4.0, -0.0, 0.0])
    pq.write_table(pa.table({"site": site, "dose": dose, "x": np.arange(6.0), "y": np.ones(6)}), tmp_path / "a.parquet")
    pa_csv.write_csv(pa.table({"site": pc.cast(site, pa.float64()), "dose": dose, "x": np.arange(6.0),
                               "y": np.ones(6)}), tmp_path / "a.csv")
    sources = [open_table(tmp_path / name, target="y", categorical=["site", "dose"], missing="encode")
               for name in ("a.parquet", "a.csv")]
    for source in sources:
        assert source.feature_names == ["site=1", "site=3", "site=10", "site=(missing)",
                                        "dose=0", "dose=2.5", "dose=4", "dose=(missing)", "x"]
        assert source.categorical_codes == ["site", "dose"]
        X = next(source.iter_chunks()).X
        np.testing.assert_array_equal(X[:, :4].argmax(axis=1), [1, 2, 1, 3, 0, 2])
        np.testing.assert_array_equal(X[:, 4:8].argmax(axis=1), [2, 1, 3, 2, 0, 0])  # -0 and 0 are one code
        np.testing.assert_array_equal(X[:, 8], np.arange(6.0))
    assert sources[0].encoding == sources[1].encoding
    encoding = sources[0].encoding
    assert ColumnEncoding.from_dict(json.loads(json.dumps(encoding.to_dict()))) == encoding
    # new data: a known code of another type is the same category, an unseen one an all-zero block
    X = encoding.transform({"site": [10.0, 7.0], "dose": [2.5, 4.0], "x": [0.0, 0.0]})
    np.testing.assert_array_equal(X[:, :4], [[0, 0, 1, 0], [0, 0, 0, 0]])
    with pytest.raises(UnknownCategoryError, match=r"column 'site' holds '7' at row 1"):
        ColumnEncoding.from_dict({**encoding.to_dict(), "handle_unknown": "error"}).transform(
            {"site": [10, 7], "dose": [2.5, 4.0], "x": [0.0, 0.0]})
    # without missing='encode' a NaN code is a missing value, named with its row
    with pytest.raises(MissingValueError, match=r"column 'dose' holds a missing value \(null\) at row 2"):
        open_table(tmp_path / "a.parquet", target="y", features=["dose", "x"], categorical=["dose"])


def test_codes_written_as_other_number_text_are_known_and_unknown_ones_are_tallied():
    """A text column whose values write a known code as another number ("4.0", " 4", "4e0", "+4") is
    that code, and "4" is the code learned as "4.0"; text that is a code only as another number ("007"
    for "7") is not rescued where no such category exists; the values that stay unknown are tallied
    per column with their rows."""
    encoding = ColumnEncoding(["code", "name"], {"code": [1, 4, 10], "name": ["007", "ann"]}, missing="encode")
    table = {"code": ["4.0", " 4", "4e0", "+4", "1.00", "10", "x", None, "4.5"],
             "name": ["007", "7", "ann", "ann", "7.0", "ann", "bob", "007", "ann"]}
    unknown = {}
    X = encoding.transform(table, unknown=unknown)
    np.testing.assert_array_equal(X[:, :3].argmax(axis=1)[:6], [1, 1, 1, 1, 0, 2])
    assert not X[6:, :3].any()  # 'x', missing (no missing category here) and 4.5: none of the codes
    np.testing.assert_array_equal(X[:, 3:5], [[1, 0], [0, 0], [0, 1], [0, 1], [0, 0], [0, 1], [0, 0], [1, 0], [0, 1]])
    assert unknown == {"code": {"x": 1, None: 1, "4.5": 1}, "name": {"7": 1, "7.0": 1, "bob": 1}}
    encoding.transform({"code": [4.5, 4.0], "name": ["bob", "ann"]}, unknown=unknown)  # a tally adds up
    assert unknown == {"code": {"x": 1, None: 1, "4.5": 2}, "name": {"7": 1, "7.0": 1, "bob": 2}}
    with pytest.raises(UnknownCategoryError, match=r"column 'code' holds 'x' at row 0"):
        ColumnEncoding.from_dict({**encoding.to_dict(), "handle_unknown": "error"}).transform(
            {"code": ["4.0", "x"], "name": ["ann", "ann"]}, rows=np.array([1, 0]))
    # the other way round: categories learned from text that writes numbers ("4.0" beside "x") know 4
    learned = ColumnEncoding(["code"], {"code": ["1.0", "4.0", "x", "007"]})
    unknown = {}
    X = learned.transform({"code": ["4", " 1", "4.00", "7", "x"]}, unknown=unknown)
    np.testing.assert_array_equal(X, [[0, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]])
    assert unknown == {"code": {"7": 1}}  # '007' is text, not the number 7
    long = ColumnEncoding(["code"], {"code": ["12345678901234567", "x"]})  # past 2**53: no float rounds them together
    unknown = {}
    assert not long.transform({"code": ["12345678901234568"]}, unknown=unknown).any()
    assert unknown == {"code": {"12345678901234568": 1}}


@pytest.mark.parametrize("texts, expected", [
    (["1/5/2020", "12/31/2020"], ("%m/%d/%Y", None, [])),  # a second field over 12: month first
    (["13/1/2020", " 1/2/2020 "], ("%d/%m/%Y", None, [])),  # a first field over 12: day first
    (["1.2.2020"], ("%d.%m.%Y", None, [])),  # dots: day first
    (["2020-1-5", "2020-12-31"], ("%Y-%m-%d", None, [])),  # year first, not zero-padded (no CSV reader's ISO)
    (["2020/01/05T10:30:00"], ("%Y/%m/%dT%H:%M:%S", None, [])),
    (["31-12-2020 9:05", "1-1-2021 10:30"], ("%d-%m-%Y %H:%M", None, [])),
    (["1/2/2020", "3/4/2020"], (None, "they are dates whose day and month no value tells apart (such as "
                                      "'1/2/2020': every field 12 or less), written '%d/%m/%Y' or '%m/%d/%Y'", [])),
    (["13/13/2020", "1/2/2020"], (None, None, [])),  # no order of day and month reads both
    (["2020-1-5 10:30:01", "2020-1-6 9:05"], (None, "they are dates written in more than one form (such as "
                                                     "'2020-1-5 10:30:01' and '2020-1-6 9:05')", [])),  # two clocks
    (["1/2/2020", "1-2-2020"], (None, "they are dates written in more than one form (such as '1/2/2020' and "
                                      "'1-2-2020')", [])),  # two separators
    (["1/31/2020", "13/1/2020"], (None, "they are dates written day first (such as '13/1/2020') and month first "
                                        "(such as '1/31/2020')", [])),
    (["1-2-3", "1/2/3"], (None, None, [])),  # no four-digit year: no dates, in one form or two
    (["1/2/20", "13/2/20"], (None, "they look like dates with a two-digit year (such as '1/2/20'), which are read "
                                   "as dates only where their form is named, as the century and the order of the "
                                   "fields are guesses: written '%d/%m/%y'", [])),  # the century is a guess
    (["red", "1/13/2020"], (None, None, [])),
    ([f"1/{day}/2020" for day in range(1, 22)] + ["soon"], ("%m/%d/%Y", None, ["soon"])),  # a placeholder
    ([f"1/{day}/2020" for day in range(1, 22)] + ["a", "b", "c"], (None, None, [])),  # too much text beside
])
def test_date_format_reads_the_order_of_day_and_month_off_the_values(texts, expected):
    assert date_format(texts) == expected


def test_dates_written_as_text_are_days_since_1970(tmp_path):
    """A column of dates a CSV reader leaves as text (01/31/2020) is one input, days since 1970-01-01,
    from CSV and Parquet; a later non-date is an error naming its row; new data may write the dates
    as dates; day-month doubt keeps the column text, with a warning; a placeholder is an error."""
    days = np.array([0, 400, 31, 15, 700, 59])
    dates = np.datetime64("2020-01-01") + days
    us = [f"{d.month}/{d.day}/{d.year}" for d in dates.astype(object)]
    pa_csv.write_csv(pa.table({"day": us, "y": np.arange(6.0)}), tmp_path / "us.csv")
    source = open_table(tmp_path / "us.csv", target="y")
    expected = (dates - np.datetime64("1970-01-01")).astype(float)
    np.testing.assert_array_equal(next(source.iter_chunks()).X[:, 0], expected)
    assert source.encoding.dates == {"day": "%m/%d/%Y"} and source.time_columns == {"day": "days since 1970-01-01"}
    assert ColumnEncoding.from_dict(json.loads(json.dumps(source.encoding.to_dict()))) == source.encoding
    iso = [str(d) for d in dates.astype("datetime64[D]")]
    pq.write_table(pa.table({"day": iso, "y": np.arange(6.0)}), tmp_path / "iso.parquet")  # text in Parquet
    from_parquet = next(open_table(tmp_path / "iso.parquet", target="y").iter_chunks()).X[:, 0]
    np.testing.assert_array_equal(from_parquet, expected)
    # new data: the dates as dates (a CSV reader's ISO), as text in the encoding's form or as ISO text (which a
    # Parquet file keeps as text); another form is an error
    for day in (pa.array(dates.astype("datetime64[D]")), pa.array(us), pa.array(iso), pa.array(us[:3] + iso[3:])):
        np.testing.assert_array_equal(source.encoding.transform({"day": day})[:, 0], expected)
    with pytest.raises(DataSourceError, match=r"column 'day' holds '31.01.2020' at row 1, where the encoding "
                                              r"expects a date written %m/%d/%Y"):
        source.encoding.transform({"day": ["1/31/2020", "31.01.2020"]})
    # a missing date: an error, or with missing='encode' the mean date and an indicator
    pa_csv.write_csv(pa.table({"day": us[:5] + [None], "y": np.arange(6.0)}), tmp_path / "gap.csv")
    with pytest.raises(MissingValueError, match="column 'day' holds a missing value"):
        list(open_table(tmp_path / "gap.csv", target="y").iter_chunks())
    encoded = open_table(tmp_path / "gap.csv", target="y", missing="encode")
    assert encoded.feature_names == ["day", "day=(missing)"]
    assert encoded.encoding.fill_values["day"] == expected[:5].mean()
    # a value past the first chunk that is no date: an error naming it and its row
    pa_csv.write_csv(pa.table({"day": us + ["2/3/2020", "when?"], "y": np.arange(8.0)}), tmp_path / "late.csv")
    with pytest.raises(DataSourceError, match=r"column 'day' holds 'when\?' at row 7, where the encoding expects"):
        list(open_table(tmp_path / "late.csv", target="y", chunk_rows=6).iter_chunks())
    # day and month in doubt: text, with a warning; many dates and a placeholder: an error that quotes it
    pa_csv.write_csv(pa.table({"day": ["1/2/2020", "3/4/2020"] * 3, "y": np.arange(6.0)}), tmp_path / "doubt.csv")
    with pytest.warns(UserWarning, match=r"column 'day' is read as text, a category per value: they are dates "
                                         r"whose day and month .* written '%d/%m/%Y' or '%m/%d/%Y'. Name the form to "
                                         r"read them as dates: dates=\{'day': FORM\} in Python, --dates 'day=FORM'"):
        assert open_table(tmp_path / "doubt.csv", target="y").feature_names == ["day=1/2/2020", "day=3/4/2020"]
    # day and month told apart only past the first chunk (a file of times that starts on the 1st): found there
    later = ["1/2/2020", "3/4/2020"] * 3 + ["1/13/2020"]
    pa_csv.write_csv(pa.table({"day": later, "y": np.arange(7.0)}), tmp_path / "later.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert open_table(tmp_path / "later.csv", target="y", chunk_rows=4).encoding.dates == {"day": "%m/%d/%Y"}
    # the form given: text, or numbers such as 20200131; only for feature columns that no other option names
    named = open_table(tmp_path / "doubt.csv", target="y", dates={"day": "%d/%m/%Y"})
    np.testing.assert_array_equal(next(named.iter_chunks()).X[:2, 0], [18293.0, 18355.0])  # 1 Feb and 3 Apr 2020
    pq.write_table(pa.table({"day": [20200201, 20200403], "y": [1.0, 2.0]}), tmp_path / "numbers.parquet")
    named = open_table(tmp_path / "numbers.parquet", target="y", dates={"day": "%Y%m%d"})
    assert named.encoding.dates == {"day": "%Y%m%d"} and named.time_columns == {"day": "days since 1970-01-01"}
    np.testing.assert_array_equal(next(named.iter_chunks()).X[:, 0], [18293.0, 18355.0])
    for dates, message in (({"day": "dd/mm/yyyy"}, "dates must map columns to strptime formats"),
                           ({"y": "%Y"}, r"dates names 'y', not a feature column"),
                           (["day"], "dates must map columns")):
        with pytest.raises(ValueError, match=message):
            open_table(tmp_path / "numbers.parquet", target="y", dates=dates)
    with pytest.raises(ValueError, match="dates names 'day', not a feature column, or one that categorical names too"):
        open_table(tmp_path / "numbers.parquet", target="y", dates={"day": "%Y%m%d"}, categorical=["day"])
    with pytest.raises(ValueError, match="give dates or an encoding, not both"):
        open_table(tmp_path / "numbers.parquet", target="y", dates={"day": "%Y%m%d"}, encoding=named.encoding)
    spoilt = [f"1/{day}/2020" for day in range(1, 31)] + ["?"]
    pa_csv.write_csv(pa.table({"day": spoilt, "y": np.arange(31.0)}), tmp_path / "spoilt.csv")
    with pytest.raises(DataSourceError, match=r"column 'day' holds dates written %m/%d/%Y and 1 other value: '\?' "
                                              r"\(row 30\)\. Is that a placeholder"):
        open_table(tmp_path / "spoilt.csv", target="y")


def test_dates_that_do_not_exist_and_other_edges_of_dates_written_as_text(tmp_path):
    """Arrow's strptime moves 02/30/2020 to 03/01/2020: such a day is an error naming it, in any form
    (a CSV reader leaves an impossible ISO date as text); a dictionary column is read as its text; a
    form given for a column the CSV reader parsed as dates is the one used (a Parquet date: an error);
    new data whose date column is empty in a CSV's first rows is read as text all the same."""
    for values, form in ((["1/31/2020", "2/30/2020", "12/31/2020"], "%m/%d/%Y"),
                         (["2020-01-31", "2020-02-30", "2020-12-31"], "%Y-%m-%d")):
        pa_csv.write_csv(pa.table({"d": values, "y": [1.0, 2.0, 3.0]}), tmp_path / "bad.csv")
        with pytest.raises(DataSourceError, match=rf"column 'd' holds '{values[1]}' at row 1, written {form} as the "
                                                  "column's dates are, but no day of the calendar"):
            list(open_table(tmp_path / "bad.csv", target="y").iter_chunks())
    pq.write_table(pa.table({"d": [20200131, 2020013], "y": [1.0, 2.0]}), tmp_path / "digits.parquet")
    with pytest.raises(DataSourceError, match="holds '2020013' at row 1, written %Y%m%d .* no day of the calendar"):
        list(open_table(tmp_path / "digits.parquet", target="y", dates={"d": "%Y%m%d"}).iter_chunks())
    # a count read as years: year 0 lies outside the nanosecond timestamps (1677-2262), and had raised inside
    # pyarrow ('Casting from timestamp[s] to timestamp[ns] would result in out of bounds'; helper-42)
    pq.write_table(pa.table({"days": [0, 1, 2, 3], "y": [1.0, 2.0, 3.0, 4.0]}), tmp_path / "days.parquet")
    with pytest.raises(DataSourceError, match="column 'days' holds '0' at row 0, where the encoding expects a date "
                                              "written %Y"):
        list(open_table(tmp_path / "days.parquet", target="y", dates={"days": "%Y"}).iter_chunks())
    # where the encoding is learned, the advice is the form (helper-42: it had said to refit the encoding)
    pa_csv.write_csv(pa.table({"date": ["2009", "2009.58"], "y": [1.0, 2.0]}), tmp_path / "years.csv")
    with pytest.raises(DataSourceError, match=r"holds '2009.58' at row 1, .* correct the value, or name the form its "
                                              r"dates are written in \(dates=\{column: format\} in Python"):
        open_table(tmp_path / "years.csv", target="y", dates={"date": "%Y"}, missing="encode")
    with pytest.raises(DataSourceError, match=r"holds '2009.58' at row 1, .* correct the value, or name the form"):
        open_table(tmp_path / "years.csv", target="y", dates={"date": "%Y"}, missing="error")  # read at the fit too
    pa_csv.write_csv(pa.table({"d": ["01/31/2020", " 2/3/2020 "], "y": [1.0, 2.0]}), tmp_path / "padded.csv")
    np.testing.assert_array_equal(next(open_table(tmp_path / "padded.csv", target="y").iter_chunks()).X[:, 0],
                                  [18292.0, 18295.0])  # a leading zero or not, spaces around: the same dates
    unpadded = ((["1/1/2020 0:30", "1/2/2020 9:05"], "%m/%d/%Y %H:%M", [18262 + 1 / 48, 18263 + 109 / 288]),
                (["5 1 2020"], "%d %m %Y", [18266.0]), (["1/31/2020 9:00 AM"], "%m/%d/%Y %I:%M %p", [18292.375]))
    for texts, form, days in unpadded:
        np.testing.assert_allclose(text_dates(pa.array(texts), form), days)  # a field unpadded after a space
    spoilt = [f"1/{day}/2020" for day in range(1, 30)] + ["?"]
    for name, values in (("spoilt", spoilt), ("dates", spoilt[:-1])):
        pq.write_table(pa.table({"d": pa.array(values).dictionary_encode(), "y": np.arange(len(values), dtype=float)}),
                       tmp_path / f"{name}.parquet")
    with pytest.raises(DataSourceError, match=r"column 'd' holds dates written %m/%d/%Y and 1 other value: '\?'"):
        open_table(tmp_path / "spoilt.parquet", target="y")
    np.testing.assert_array_equal(next(open_table(tmp_path / "dates.parquet", target="y").iter_chunks()).X[:2, 0],
                                  [18262.0, 18263.0])
    view = {"c": pa.array(["a", "b"] * 3, pa.string_view()), "d": pa.array(["1/31/2020", "2/13/2020"] * 3,
                                                                           pa.string_view())}
    pq.write_table(pa.table({**view, "y": np.arange(6.0)}), tmp_path / "view.parquet")  # Arrow's string views
    viewed = open_table(tmp_path / "view.parquet", target="y")
    assert viewed.feature_names == ["c=a", "c=b", "d"] and viewed.encoding.dates == {"d": "%m/%d/%Y"}
    pa_csv.write_csv(pa.table({"d": ["2020-01-02", "2020-03-04"], "y": [1.0, 2.0]}), tmp_path / "iso.csv")
    swapped = open_table(tmp_path / "iso.csv", target="y", dates={"d": "%Y-%d-%m"})
    np.testing.assert_array_equal(next(swapped.iter_chunks()).X[:, 0], [18293.0, 18355.0])  # 1 Feb and 3 Apr 2020
    pq.write_table(pa.table({"d": pa.array([datetime.date(2020, 1, 2)]), "y": [1.0]}), tmp_path / "date.parquet")
    with pytest.raises(ValueError, match="dates names 'd', which the file stores as dates or times already"):
        open_table(tmp_path / "date.parquet", target="y", dates={"d": "%Y-%d-%m"})
    train = open_table(tmp_path / "iso.csv", target="y", dates={"d": "%Y-%d-%m"}, missing="encode")
    with open(tmp_path / "late.csv", "w") as file:  # 100,000 empty dates, then dates: Arrow reads the first as nulls
        file.write("d,x\n" + ",0.123456789012345\n" * 100_000 + "2020-01-02,1\n")
    late = open_table(tmp_path / "late.csv", encoding=train.encoding, missing="encode")
    assert pa.types.is_null(late._layout.schemas[0].field("d").type)  # past the reader's first block
    with pytest.warns(UserWarning, match="column 'd' holds missing values"):
        column = np.concatenate([chunk.X[:, 0] for chunk in late.iter_chunks()])
    assert column.shape == (100_001,) and column[-1] == 18293.0 and column[0] == 18324.0  # the training dates' mean


def test_categorical_codes_of_booleans_and_dates_and_given_encodings(tmp_path):
    day = [datetime.date(2020, 1, 2), datetime.date(2020, 1, 1), datetime.date(2020, 1, 2)]
    half = pa.array(np.array([2.5, 2.5, 1.0], dtype=np.float16))  # no arithmetic kernels in Arrow
    pq.write_table(pa.table({"day": day, "ok": [True, False, True], "half": half, "y": [1.0, 2.0, 3.0]}),
                   tmp_path / "t.parquet")
    source = open_table(tmp_path / "t.parquet", target="y", categorical=["day", "ok", "half"])
    assert source.feature_names == ["day=2020-01-01", "day=2020-01-02", "ok=false", "ok=true", "half=1", "half=2.5"]
    assert source.time_columns == {}  # a date read as a code is no number of days
    # an encoding built by hand may list its categories as numbers, booleans or dates
    assert ColumnEncoding(["c"], {"c": [3, 10.0, True, day[0], None]}, missing="encode").categories == {
        "c": ("3", "10", "true", "2020-01-02", None)}
    with pytest.raises(ValueError, match=r"a category must be text, a number, a boolean or a date; got \[1\]"):
        ColumnEncoding(["c"], {"c": [[1]]})


def test_categorical_names_feature_columns_of_a_readable_type(tmp_path):
    pq.write_table(pa.table({"id": [1, 2], "tags": [[1], [2]], "x": [0.5, 1.5], "y": [1.0, 2.0]}),
                   tmp_path / "t.parquet")
    path = tmp_path / "t.parquet"
    with pytest.raises(ColumnNotFoundError, match="categorical column 'site' is not in"):
        open_table(path, target="y", categorical=["site"])
    for categorical, exclude in ((["y"], ["tags"]), (["id"], ["id", "tags"])):
        with pytest.raises(ValueError, match="categorical names .*, not a feature column"):
            open_table(path, target="y", categorical=categorical, exclude=exclude)
    with pytest.raises(DataSourceError, match=r"column 'tags' has type list<element: int64>, whose values cannot "
                                              r"be read as categories; leave it out"):
        open_table(path, target="y", categorical=["tags"])
    encoding = open_table(path, target="y", features=["id"], categorical="id").encoding
    assert encoding.categories == {"id": ("1", "2")}
    with pytest.raises(ValueError, match="give categorical or an encoding, not both"):
        open_table(path, target="y", encoding=encoding, categorical=["id"])


@pytest.mark.parametrize("delimiter, decimal", [(",", "."), (";", "."), (";", ","), ("\t", ","), ("|", ".")])
@pytest.mark.parametrize("compressed", [False, True])
def test_a_csv_file_s_delimiter_and_decimal_point_are_found(tmp_path, delimiter, decimal, compressed):
    """The CSV files of many European locales separate fields by ';' and write 0,5 for 0.5; a file
    without commas in its header is read by the delimiter it holds, with the decimal point its numbers use."""
    rng = np.random.default_rng(0)
    values = np.round(rng.normal(size=(40, 2)), 3)
    text = delimiter.join(["a", "color", "y"]) + "\n" + "".join(
        delimiter.join([f"{a:.3f}".replace(".", decimal), "red" if a > 0 else "blue", f"{y:.3f}".replace(".", decimal)])
        + "\n" for a, y in values)
    path = tmp_path / ("t.csv.gz" if compressed else "t.csv")
    if compressed:
        with pa.CompressedOutputStream(str(path), "gzip") as stream:
            stream.write(text.encode())
    else:
        path.write_text(text)
    source = open_table(path, target="y")
    assert source.dialect == (delimiter, decimal) and source.feature_names == ["a", "color=blue", "color=red"]
    chunk = next(source.iter_chunks())
    np.testing.assert_array_equal(chunk.X[:, 0], values[:, 0])
    np.testing.assert_array_equal(chunk.y, values[:, 1])
    colors = source.read_columns(["color"]).column(0).to_pylist()
    assert colors == ["red" if a > 0 else "blue" for a in values[:, 0]]


@pytest.mark.parametrize("decimals", [1, 2, 3])
def test_numbers_written_with_a_decimal_comma_read_as_text_name_the_decimal_point(rng, tmp_path, decimals):
    """A ';' file of numbers written 8,4 read with decimal='.': the column is text; its message says the
    numbers have a decimal comma and to give it, whether or not they look like thousands ('0,844')."""
    path = tmp_path / "comma.csv"
    rows = [f"{10 * a:.{decimals}f};{y:.3f}".replace(".", ",") for a, y in rng.uniform(size=(60, 2))]
    path.write_text("a;y\n" + "\n".join(rows) + "\n")
    assert open_table(path, target="y").dialect == (";", ",")
    with pytest.raises(DataSourceError, match=r"column 'a' holds numbers written with a decimal comma "
                                              r"\(such as '.*'\), read as text: give the decimal point "
                                              r"\(decimal=',' in Python, --decimal ',' on the command line\)"):
        open_table(path, target="y", decimal=".")


def test_the_advice_on_numbers_with_a_decimal_comma_fits_the_file(rng, tmp_path):
    """In Parquet text, or in a CSV file delimited by commas (pandas' to_csv(decimal=',') quotes them), a
    decimal point cannot be given: the message says what can be done there, and that codes written 3,7 can
    be named categorical, as which they are read."""
    values = [f"{v:.2f}".replace(".", ",") for v in rng.uniform(0, 10, 60)]
    pq.write_table(pa.table({"a": values, "y": rng.normal(size=60)}), tmp_path / "text.parquet")
    with pytest.raises(DataSourceError, match=r"holds numbers written with a decimal comma \(such as '.*'\), read as "
                                              r"text: store the column as numbers .*; or, if they are codes, name it "
                                              r"categorical"):
        open_table(tmp_path / "text.parquet", target="y")
    rows = "".join(f'"{value}",{k}\n' for k, value in enumerate(values))
    (tmp_path / "quoted.csv").write_text("a,y\n" + rows)
    with pytest.raises(DataSourceError, match=r"the file's fields are delimited by commas too, which quotes such "
                                              r"numbers as text; write the file with another delimiter"):
        open_table(tmp_path / "quoted.csv", target="y")
    codes = [f"{k % 5},{k % 6}" for k in range(120)]  # 30 pairs, 4 rows each
    pq.write_table(pa.table({"pair": codes, "y": rng.normal(size=120)}), tmp_path / "codes.parquet")
    with pytest.raises(DataSourceError, match=r"if they are codes, name it categorical"):
        open_table(tmp_path / "codes.parquet", target="y")
    source = open_table(tmp_path / "codes.parquet", target="y", categorical=["pair"])
    assert len(source.encoding.categories["pair"]) == len(set(codes))


def test_quoted_line_ends_are_read_past_the_first_block(tmp_path):
    """pandas quotes a note written over two lines: 60,000 such rows (2.7 MB, past the reader's first
    block) had been refused as a row with another number of fields."""
    rng = np.random.default_rng(0)
    n = 60_000
    frame = pd.DataFrame({"a": rng.normal(size=n), "note": rng.choice(["x", "line1\nline2", "z"], n),
                          "y": rng.normal(size=n)})
    frame.to_csv(tmp_path / "notes.csv", index=False)
    source = open_table(tmp_path / "notes.csv", target="y")
    assert source.n_rows == n and source.feature_names == ["a", "note=line1\nline2", "note=x", "note=z"]
    X = np.concatenate([chunk.X for chunk in source])
    np.testing.assert_allclose(X[:, 0], frame["a"].to_numpy(), rtol=1e-15)
    np.testing.assert_array_equal(X[:, 1], frame["note"].to_numpy() == "line1\nline2")


def test_a_csv_dialect_can_be_given_and_is_checked(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a;b;y\n1,5;1.5;2\n2,5;2.5;3\n")  # decimal points beside decimal commas: the point is kept
    assert open_table(path, target="y", features=["b"]).dialect == (";", ".")
    source = open_table(path, target="y", features=["a"], decimal=",")
    assert source.dialect == (";", ",") and next(source.iter_chunks()).X[:, 0].tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match=r"delimiter must be one character other than a quote or a line end; got ';;'"):
        open_table(path, target="y", delimiter=";;")
    with pytest.raises(ValueError, match="the delimiter and the decimal point are both ';'"):
        open_table(path, target="y", decimal=";")
    pq.write_table(pa.table({"a": [1.0], "y": [2.0]}), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match="delimiter and decimal are for CSV files"):
        open_table(tmp_path / "t.parquet", target="y", delimiter=";")
    with pytest.raises(ColumnNotFoundError, match="the column 'c' is not in"):
        source.read_columns(["c"])


def test_a_prediction_on_a_table_warns_of_categories_the_model_was_not_fitted_on(tmp_path):
    """The Python API says what the command line says: rows whose category the encoding does not
    know are none of the column's categories (handle_unknown='ignore'), with one warning per column
    after the pass, pointed at the caller; a table without such rows draws none."""
    from rffkit import RFFClassifier, RFFRidge

    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "blue"], 120)
    pa_csv.write_csv(pa.table({"colour": colour, "x": rng.normal(size=120), "y": (colour == "red") * 1.0}),
                     tmp_path / "train.csv")
    pa_csv.write_csv(pa.table({"colour": ["red", "green", "green", "blue"], "x": [0.1, 0.2, 0.3, 0.4],
                               "y": [1.0, 0.0, 0.0, 0.0]}), tmp_path / "new.csv")
    train = open_table(tmp_path / "train.csv", target="y")
    models = [RFFRidge(random_state=0).fit(train), RFFClassifier(random_state=0).fit(train)]
    expected = (r"column 'colour': 2 rows hold 1 category the model was not fitted on \('green'\); the model sees "
                r"those rows as none of the column's 2 categories \('blue', 'red'\)")
    for model, method in ((models[0], "predict"), (models[1], "predict_proba"), (models[1], "score")):
        new = open_table(tmp_path / "new.csv", target="y" if method == "score" else None, encoding=train.encoding)
        with pytest.warns(UserWarning, match=expected) as caught:
            getattr(model, method)(new)
        assert len(caught) == 1 and caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        models[0].predict(open_table(tmp_path / "train.csv", encoding=train.encoding))


def test_a_column_name_twice_text_not_in_utf8_and_shards_of_other_delimiters_are_named(tmp_path):
    """Each is a DataSourceError naming the file (and the column and line) when the table is opened: a name
    twice had been a KeyError, Latin-1 text 'a column of type binary', another delimiter a missing column."""
    pq.write_table(pa.Table.from_arrays([pa.array([1.0]), pa.array([2.0]), pa.array([3.0])], names=["a", "a", "y"]),
                   tmp_path / "twice.parquet")
    with pytest.raises(DataSourceError, match=r"column 'a' appears twice in .*twice.parquet'; columns are read"):
        open_table(tmp_path / "twice.parquet", target="y")
    (tmp_path / "twice.csv").write_text("a,b,a,y\n1,2,3,4\n")
    with pytest.raises(DataSourceError, match=r"column 'a' appears more than once in .*twice.csv'"):
        open_table(tmp_path / "twice.csv", target="y")
    (tmp_path / "unnamed.csv").write_text(",a,,y\n1,2,3,4\n")
    with pytest.raises(DataSourceError, match=r"unnamed.csv': its header has more than one column without a name"):
        open_table(tmp_path / "unnamed.csv", target="y")
    (tmp_path / "latin.csv").write_bytes("x,name,y\n1,tea,2\n2,caf\xe9,3\n".encode("latin-1"))
    with pytest.raises(DataSourceError, match=r"latin.csv' is not UTF-8 text: column 'name' holds b'caf\\xe9' on "
                                              r"line 3; convert the file to UTF-8"):
        open_table(tmp_path / "latin.csv", target="y")
    with pytest.raises(DataSourceError, match=r"latin.csv' is not UTF-8 text: column 'name'"):
        open_table(tmp_path / "latin.csv", target="name")
    (tmp_path / "header.csv").write_bytes("x,caf\xe9,y\n1,2,3\n".encode("latin-1"))
    with pytest.raises(DataSourceError, match=r"header.csv' is not UTF-8 text: its header holds the column name"):
        open_table(tmp_path / "header.csv", target="y")
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "0.csv").write_text("x,y\n1.5,2\n")
    (tmp_path / "shards" / "1.csv").write_text("x;y\n1,5;2\n2,5;3\n")  # its decimal commas split its rows
    with pytest.raises(DataSourceError, match=r"the header of .*1.csv' delimits its fields by ';', not by ','"):
        open_table(tmp_path / "shards", target="y")
    (tmp_path / "shards" / "1.csv").write_text("x;y\n1.5;2\n")
    with pytest.raises(DataSourceError, match=r"the header of .*1.csv' delimits its fields by ';', not by ','"):
        open_table(tmp_path / "shards", target="y")
    assert open_table(tmp_path / "shards" / "1.csv", target="y").n_rows == 1


def test_read_columns_names_the_shard_that_lacks_a_column_or_cannot_give_it_as_text(tmp_path):
    pq.write_table(pa.table({"key": [1, 2], "x": [1.0, 2.0]}), tmp_path / "0.parquet")
    pq.write_table(pa.table({"x": [1.0, 2.0]}), tmp_path / "1.parquet")
    source = open_table(tmp_path, features=["x"])
    with pytest.raises(SchemaMismatchError, match=r"column 'key' is in .*0.parquet' but not in .*1.parquet'"):
        source.read_columns(["key"], text=True)
    pq.write_table(pa.table({"key": [[1], [2]], "x": [1.0, 2.0]}), tmp_path / "1.parquet")
    with pytest.raises(SchemaMismatchError, match=r"disagree on column 'key', which is list<.*> in .*1.parquet'"):
        open_table(tmp_path, features=["x"]).read_columns(["key"], text=True)
