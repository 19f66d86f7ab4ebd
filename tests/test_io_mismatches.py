"""Data that rffkit must not misread, and whose errors must name the cause: shards of one table written
with other decimal points, target columns of types that are no target, and codes with leading zeros."""

import decimal
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

import rffkit
from rffkit import cli
from rffkit.io import ColumnEncoding, DataSourceError, open_table


def _shard(path, values, delimiter, decimal_point):
    rows = "".join(delimiter.join(f"{value:.3f}".replace(".", decimal_point) for value in row) + "\n"
                   for row in values)
    path.write_text(delimiter.join(["a", "b", "y"]) + "\n" + rows)


@pytest.mark.parametrize("first, second", [
    ((";", "."), (";", ",")), ((";", ","), (";", ".")), ((",", "."), (";", ",")), ((";", ","), (",", "."))])
def test_shards_of_other_decimal_points_are_named_with_both_files(tmp_path, first, second):
    """Each file's numbers are read with the table's decimal point: a shard written with the other one
    would be text. The error names that shard, its decimal point, the first file's, and decimal=."""
    values = np.random.default_rng(0).normal(size=(50, 3))
    _shard(tmp_path / "a.csv", values, *first)
    _shard(tmp_path / "b.csv", values, *second)
    with pytest.raises(DataSourceError) as caught:
        open_table(tmp_path, target="y")
    message = str(caught.value)
    example = f"{values[0, 0]:.3f}"
    assert (f"writes its numbers with the decimal point {second[1]!r} ({example.replace('.', second[1])!r}), "
            f"not {first[1]!r} (as the table's first file") in message
    assert f"writes them: {example.replace('.', first[1])!r}" in message
    assert f"{str(tmp_path / 'b.csv')!r}" in message and str(tmp_path / "a.csv") in message
    assert "give the" in message and "decimal= in Python" in message and "--decimal on the command line" in message
    assert ("--delimiter" in message) == (first[0] != second[0])


def test_a_shard_of_decimal_commas_beside_one_of_whole_numbers_points_at_decimal(tmp_path, capsys):
    rng = np.random.default_rng(0)
    _shard(tmp_path / "a.csv", rng.integers(0, 9, size=(50, 3)).astype(float), ";", ".")
    (tmp_path / "a.csv").write_text((tmp_path / "a.csv").read_text().replace(".000", ""))  # whole numbers only
    _shard(tmp_path / "b.csv", rng.normal(size=(50, 3)), ";", ",")
    assert cli.main(["fit", str(tmp_path), "--target", "y", "--output", str(tmp_path / "m.rffkit")]) == 2
    err = capsys.readouterr().err
    assert f"{str(tmp_path / 'b.csv')!r} writes its numbers with the decimal point ','" in err
    assert f"not '.' (given, or the default: the table's first file, {str(tmp_path / 'a.csv')!r}, writes no" in err
    assert "--decimal on the command line" in err
    source = open_table(tmp_path, target="y", decimal=",")  # the decimal point both files agree with
    assert source.n_rows == 100 and np.isfinite(np.concatenate([chunk.X for chunk in source.iter_chunks()])).all()


@pytest.mark.parametrize("values, named", [
    (pa.array([b"a", b"b"] * 10, pa.binary()), "binary"),
    (pa.array([b"a", b"b"] * 10, pa.large_binary()), "large_binary"),
    (pa.array([[1.0], [2.0]] * 10), "list<element: double>"),
    (pa.array([{"a": 1.0}, {"a": 2.0}] * 10), "struct<a: double>"),
    (pa.array([b"\xff", b"\xfe"] * 10, pa.binary()).dictionary_encode(),
     "dictionary<values=binary, indices=int32, ordered=0>"),
    (pa.array([1_000, 2_000] * 10, pa.duration("ms")), "duration[ms]"),
])
def test_a_target_of_a_type_that_is_no_target_is_named_with_its_type(tmp_path, values, named):
    pq.write_table(pa.table({"x": np.arange(20.0), "y": values}), tmp_path / "t.parquet")
    with pytest.raises(DataSourceError) as caught:
        open_table(tmp_path / "t.parquet", target="y")
    assert str(caught.value) == (f"target column 'y' has an unsupported type, {named}; expected numbers, booleans "
                                 "or strings.")
    if named.startswith("duration"):  # an input, in seconds
        return
    pq.write_table(pa.table({"f": values, "y": np.arange(20.0)}), tmp_path / "t.parquet")
    with pytest.raises(DataSourceError, match=rf"feature column 'f' has type {named.replace('[', '.')}, which"):
        open_table(tmp_path / "t.parquet", target="y")


def test_the_type_named_is_that_of_the_shard_that_has_it(tmp_path):
    pq.write_table(pa.table({"x": [1.0, 2.0], "y": pa.nulls(2)}), tmp_path / "0.parquet")  # no value: null type
    pq.write_table(pa.table({"x": [1.0, 2.0], "y": pa.array([b"a", b"b"])}), tmp_path / "1.parquet")
    with pytest.raises(DataSourceError, match=r"target column 'y' has an unsupported type, binary; expected"):
        open_table(tmp_path, target="y")


def test_decimal_columns_are_numbers(tmp_path):
    amounts = pa.array([decimal.Decimal(f"{k}.25") for k in range(30)], pa.decimal128(10, 2))
    pq.write_table(pa.table({"amount": amounts, "y": amounts}), tmp_path / "t.parquet")
    source = open_table(tmp_path / "t.parquet", target="y")
    chunk = next(source.iter_chunks())
    np.testing.assert_array_equal(chunk.X[:, 0], np.arange(30) + 0.25)
    np.testing.assert_array_equal(chunk.y, np.arange(30) + 0.25)


def test_a_code_with_a_leading_zero_is_never_a_known_number_code():
    """'07' is text, as '007' is: new data's '07' is not the code '7' (nor '0007' or '007' the code '7'),
    while '7.0' and ' 7' still write the code 7."""
    encoding = ColumnEncoding(["code"], {"code": ["007", "07030", "7", "abc"]})
    unknown = {}
    X = encoding.transform({"code": ["007", "7", "07", "0007", "07030", "7030", "7.0", " 7", "-07"]}, unknown=unknown)
    np.testing.assert_array_equal(X.argmax(axis=1)[X.any(axis=1)], [0, 2, 1, 2, 2])
    np.testing.assert_array_equal(X.any(axis=1), [1, 1, 0, 0, 1, 0, 1, 1, 0])
    assert unknown == {"code": {"07": 1, "0007": 1, "7030": 1, "-07": 1}}


def test_codes_with_leading_zeros_stay_apart_at_fit_and_predict(tmp_path, capsys):
    """A CSV column of codes ('007', '7', '07030') named by --categorical is read as written: the
    reader's numbers would make '007' and '7' one code. New data's '07' is no known code."""
    rng = np.random.default_rng(0)
    codes = rng.choice(["007", "7", "07030"], 300)
    x = rng.normal(size=300)
    effect = {"007": 0.0, "7": 5.0, "07030": -5.0}
    pa_csv.write_csv(pa.table({"code": codes, "x": x, "y": x + [effect[c] for c in codes]}), tmp_path / "t.csv")
    source = open_table(tmp_path / "t.csv", target="y", categorical=["code"])
    assert source.feature_names == ["code=007", "code=07030", "code=7", "x"]
    model = tmp_path / "m.rffkit"
    assert cli.main(["fit", str(tmp_path / "t.csv"), "--target", "y", "--categorical", "code", "--model", "ridge",
                     "--output", str(model)]) == 0
    assert rffkit.load(model)["encoding"]["categories"]["code"] == ["007", "07030", "7"]
    pa_csv.write_csv(pa.table({"code": ["007", "7", "07", "07030"], "x": [0.0] * 4}), tmp_path / "new.csv")
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # the command line prints them
        assert cli.main(["predict", str(model), str(tmp_path / "new.csv"), "--output", str(tmp_path / "p.csv")]) == 0
    assert "1 row holds 1 category the model was not fitted on ('07')" in capsys.readouterr().err
    predicted = pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy()
    np.testing.assert_allclose(predicted[[0, 1, 3]], [0.0, 5.0, -5.0], atol=0.3)
    assert abs(predicted[2] - 5.0) > 1.0  # none of the codes, not the code 7


def test_a_text_column_of_codes_with_leading_zeros_is_categorical(tmp_path):
    """Zip codes stored as text ('07030', '10001') are codes, not numbers written as text."""
    rng = np.random.default_rng(0)
    zips = np.array([f"{value:05d}" for value in rng.integers(0, 20_000, 40)])
    pq.write_table(pa.table({"zip": rng.choice(zips, 400), "y": rng.normal(size=400)}), tmp_path / "t.parquet")
    source = open_table(tmp_path / "t.parquet", target="y")
    assert len(source.feature_names) == len(set(zips)) and source.feature_names[0].startswith("zip=0")
    # a CSV's column of numbers, categorical by the text it holds, is read as text at predict time too
    pa_csv.write_csv(pa.table({"zip": ["07030", "7030"]}), tmp_path / "new.csv")
    encoding = ColumnEncoding(["zip"], {"zip": ["07030", "abc"]})
    unknown = {}
    X = next(open_table(tmp_path / "new.csv", encoding=encoding).iter_chunks(unknown=unknown)).X
    np.testing.assert_array_equal(X, [[1, 0], [0, 0]])
    assert unknown == {"zip": {"7030": 1}}
