"""Dates and times written as text (rffkit._text_dates): time zones, fractions of a second and
two-digit years, from open_table and from the command line (fit and predict)."""

import re
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

import rffkit
from rffkit import cli
from rffkit._text_dates import date_format, text_dates
from rffkit.io import DataSourceError, open_table


def _days(*instants):
    """Days since 1970-01-01 of ISO instants (UTC), as float64."""
    return (np.array(instants, dtype="datetime64[ns]") - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "D")


@pytest.mark.parametrize("texts, expected", [
    (["2020-01-02T03:04:05+02:00", "2020-01-03T03:04:05Z", "2020-01-04T03:04:05-0530"],
     ("%Y-%m-%dT%H:%M:%S%z", None, [])),  # Z and offsets: one form
    (["2020-01-02 03:04", "2020-01-03 13:04"], ("%Y-%m-%d %H:%M", None, [])),
    (["2020-01-02T03:04Z"], ("%Y-%m-%dT%H:%M%z", None, [])),
    (["2020-01-02 03:04:05.250", "2020-01-02 03:04:06"], ("%Y-%m-%d %H:%M:%S.%f", None, [])),  # a fraction or not
    (["31/01/2020 10:30:15.123456"], ("%d/%m/%Y %H:%M:%S.%f", None, [])),
    (["2020-01-02T03:04:05.5Z"], ("%Y-%m-%dT%H:%M:%S.%f%z", None, [])),
    (["2020-01-02T03:04:05Z", "2020-01-02T03:04:06"], (None, "they are dates written in more than one form (such as "
                                                             "'2020-01-02T03:04:05Z' and '2020-01-02T03:04:06')", [])),
    (["20-01-02", "20-01-13"], (None, "they look like dates with a two-digit year (such as '20-01-02'), which are "
                                      "read as dates only where their form is named, as the century and the order "
                                      "of the fields are guesses: written '%d-%m-%y' or '%y-%m-%d'", [])),
    (["01/02/20 10:30", "01/13/20 11:00"], (None, "they look like dates with a two-digit year (such as "
                                                  "'01/02/20 10:30'), which are read as dates only where their form is "
                                                  "named, as the century and the order of the fields are guesses: "
                                                  "written '%m/%d/%y %H:%M'", [])),
    (["1.2.3", "3.11.0"], (None, None, [])),  # version numbers: no dates
    (["1/2/20", "1-2-20"], (None, None, [])),  # two forms: no dates
])
def test_date_format_reads_time_zones_fractions_and_names_two_digit_years(texts, expected):
    assert date_format(texts) == expected


def test_text_dates_read_time_zones_as_utc_and_keep_fractions_of_a_second():
    zoned = ["2020-01-02T03:04:05+02:00", "2020-01-02T03:04:05Z", "2020-01-02T03:04:05.5-01:00", None]
    np.testing.assert_allclose(text_dates(pa.array(zoned), "%Y-%m-%dT%H:%M:%S%z"),
                               [*_days("2020-01-02T01:04:05", "2020-01-02T03:04:05", "2020-01-02T04:04:05.5"), np.nan],
                               rtol=0, atol=1e-10)
    fractions = pa.array(["2020-01-02 03:04:05.250", "2020-01-02 03:04:05", "2020-01-02 03:04:05,000001"])
    expected = _days("2020-01-02T03:04:05.25", "2020-01-02T03:04:05", "2020-01-02T03:04:05.000001")
    for form in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):  # named or not, the fraction is kept
        np.testing.assert_allclose(text_dates(fractions, form), expected, rtol=0, atol=1e-10)
    others = (["02/01/2020 03:04:05.5 PM"], "%d/%m/%Y %I:%M:%S.%f %p", _days("2020-01-02T15:04:05.5")), \
             (["02.01.2020 10.30.15"], "%d.%m.%Y %H.%M.%S", _days("2020-01-02T10:30:15")), \
             (["1/31/2020", "2020-01-31T10:00:00.5+02:00"], "%m/%d/%Y", _days("2020-01-31", "2020-01-31T08:00:00.5"))
    for texts, form, days in others:  # AM/PM after a fraction; dots between fields; ISO text with a zone beside
        np.testing.assert_allclose(text_dates(pa.array(texts), form), days, rtol=0, atol=1e-10)
    for texts, form in ((["2020-02-30T01:00:00Z"], "%Y-%m-%dT%H:%M:%S%z"),
                        (["2020-02-30 01:00:00.5"], "%Y-%m-%d %H:%M:%S.%f")):
        assert text_dates(pa.array(texts), form) is None  # no day of the calendar, zone or fraction after it


def test_iso_times_with_a_time_zone_are_utc_instants_from_text_and_from_the_csv_reader(tmp_path):
    """A CSV reader parses ISO times with a zone (timestamp, tz=UTC); the same text in a Parquet file, or
    in a CSV column read as text, was a category per value: it is the same UTC instants, and an encoding
    learned on either reads the other."""
    texts = ["2020-01-02T03:04:05+02:00", "2020-03-04T05:06:07Z", "2020-05-06T07:08:09.250-05:30"] * 2
    expected = _days("2020-01-02T01:04:05", "2020-03-04T05:06:07", "2020-05-06T12:38:09.25") * np.ones((2, 1))
    pq.write_table(pa.table({"t": texts, "y": np.arange(6.0)}), tmp_path / "text.parquet")
    pa_csv.write_csv(pa.table({"t": texts, "y": np.arange(6.0)}), tmp_path / "t.csv")
    from_text, from_csv = open_table(tmp_path / "text.parquet", target="y"), open_table(tmp_path / "t.csv", target="y")
    assert from_text.encoding.dates == {"t": "%Y-%m-%dT%H:%M:%S.%f%z"}
    assert from_text.time_columns == from_csv.time_columns == {"t": "days since 1970-01-01"}
    for source in (from_text, from_csv, open_table(tmp_path / "t.csv", encoding=from_text.encoding),
                   open_table(tmp_path / "text.parquet", encoding=from_text.encoding)):
        np.testing.assert_allclose(next(source.iter_chunks()).X[:, 0], expected.ravel(), rtol=0, atol=1e-10)
    with pytest.raises(DataSourceError, match=r"column 't' holds '2020-01-02T03:04:05' at row 1, where the encoding "
                                              r"expects a date written %Y-%m-%dT%H:%M:%S.%f%z, as the column's"):
        from_text.encoding.transform({"t": ["2020-01-02T03:04:05Z", "2020-01-02T03:04:05"]})


@pytest.mark.parametrize("zoned_first", [True, False])
def test_csv_shards_of_times_with_and_without_a_zone_are_refused_by_name(tmp_path, zoned_first):
    """The first shard's times fix the column's type: a later shard that writes them the other way (a zone
    offset or none) is named, with its first such time, not reported as text in a column of numbers."""
    zoned = [f"2024-01-{day:02d}T10:00:00+02:00" for day in range(1, 21)]
    local = [f"2024-02-{day:02d} 10:00:00" for day in range(1, 21)]
    first, second = (zoned, local) if zoned_first else (local, zoned)
    for name, times in (("part-0.csv", first), ("part-1.csv", second)):
        pa_csv.write_csv(pa.table({"t": times, "y": np.arange(20.0)}), tmp_path / name)
    later, earlier = ("without", "with") if zoned_first else ("with", "without")
    value = re.escape(second[0])
    with pytest.raises(DataSourceError, match=rf"cannot read '.*part-1.csv': column 't' holds times {later} a zone "
                                              rf"offset \('{value}', line 2\), where the first rows read held "
                                              rf"them {earlier} one .*: write every time of the column alike"):
        next(open_table(str(tmp_path / "*.csv"), target="y").iter_chunks())


def test_times_with_fractions_in_large_string_text_are_read(tmp_path):
    """pandas writes a Parquet text column as large_string: a model's encoding reads its times, fractions of
    a second included, as from a string column (Arrow's kernels behind the fractions had refused it)."""
    texts = ["2020-01-02 03:04:05.250", "2020-03-04 05:06:07.500", "2020-05-06 07:08:09"] * 7
    pq.write_table(pa.table({"t": pa.array(texts, pa.large_string()), "y": np.arange(21.0)}), tmp_path / "big.parquet")
    pq.write_table(pa.table({"t": texts, "y": np.arange(21.0)}), tmp_path / "text.parquet")
    train = open_table(tmp_path / "text.parquet", target="y")
    X = [next(open_table(tmp_path / name, encoding=train.encoding).iter_chunks()).X[:, 0]
         for name in ("text.parquet", "big.parquet")]
    np.testing.assert_array_equal(X[1], X[0])
    expected = _days("2020-01-02T03:04:05.25", "2020-03-04T05:06:07.5", "2020-05-06T07:08:09")
    np.testing.assert_allclose(X[0][:3], expected, rtol=0, atol=1e-10)


def test_a_form_given_reads_fractions_of_a_second(tmp_path):
    """dates= with fractional seconds: '%S.%f' (as in Python) or '%S' keeps the fraction; %f elsewhere is refused,
    and a value in another form is an error naming the column, its row and the form."""
    texts = ["2020-01-02 03:04:05.250", "2020-01-02 03:04:06.5", "2020-01-02 03:04:07.000"]
    pa_csv.write_csv(pa.table({"t": texts, "y": [1.0, 2.0, 3.0]}), tmp_path / "t.csv")
    expected = _days("2020-01-02T03:04:05.25", "2020-01-02T03:04:06.5", "2020-01-02T03:04:07")
    for form in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        source = open_table(tmp_path / "t.csv", target="y", dates={"t": form})
        np.testing.assert_allclose(next(source.iter_chunks()).X[:, 0], expected, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match=r"dates gives 't' the form '%H:%M:%f', whose %f, a fraction of a second, "
                                         r"does not come right after the seconds"):
        open_table(tmp_path / "t.csv", target="y", dates={"t": "%H:%M:%f"})
    pa_csv.write_csv(pa.table({"t": texts[:2] + ["2020-01-02 03:04"], "y": [1.0, 2.0, 3.0]}), tmp_path / "bad.csv")
    with pytest.raises(DataSourceError, match=r"column 't' holds '2020-01-02 03:04' at row 2, where the encoding "
                                              r"expects a date written %Y-%m-%d %H:%M:%S.%f, as the column's dates"):
        list(open_table(tmp_path / "bad.csv", target="y", dates={"t": "%Y-%m-%d %H:%M:%S.%f"}).iter_chunks())
    day_first = ["31/01/2020 10:30:15.5", "01/02/2020 10:30:15.25"]  # not ISO: found, fraction and all
    pq.write_table(pa.table({"t": day_first, "y": [1.0, 2.0]}), tmp_path / "eu.parquet")
    source = open_table(tmp_path / "eu.parquet", target="y")
    assert source.encoding.dates == {"t": "%d/%m/%Y %H:%M:%S.%f"}
    np.testing.assert_allclose(next(source.iter_chunks()).X[:, 0],
                               _days("2020-01-31T10:30:15.5", "2020-02-01T10:30:15.25"), rtol=0, atol=1e-10)


def test_two_digit_years_are_read_where_the_form_is_given_and_named_in_a_warning_where_not(tmp_path):
    texts = ["31/01/20", "01/02/20", "15/03/69", "01/12/68"]
    pa_csv.write_csv(pa.table({"t": texts, "y": [1.0, 2.0, 3.0, 4.0]}), tmp_path / "t.csv")
    with pytest.warns(UserWarning, match=r"column 't' is read as text, a category per value: they look like dates "
                                         r"with a two-digit year \(such as '31/01/20'\), .* written '%d/%m/%y'\. "
                                         r"Name the form to read them as dates: dates=\{'t': FORM\} in "
                                         r"Python, --dates 't=FORM' on the command line."):
        assert open_table(tmp_path / "t.csv", target="y").encoding.dates == {}
    source = open_table(tmp_path / "t.csv", target="y", dates={"t": "%d/%m/%y"})
    np.testing.assert_array_equal(next(source.iter_chunks()).X[:, 0],  # 69 is 1969, 68 is 2068
                                  _days("2020-01-31", "2020-02-01", "1969-03-15", "2068-12-01"))


def _run(capsys, *argv):
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # the command line prints them
        status = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out, err


def test_fit_and_predict_read_zoned_fractional_and_two_digit_year_times(tmp_path, capsys):
    """ISO times with a zone written as text in a Parquet file were one-hot categories (R^2 below 0, one
    input per time): they are days since 1970, and predict reads the CSV reader's timestamps the same;
    --dates reads fractions of a second and two-digit years; without it the latter are named in a warning."""
    rng = np.random.default_rng(0)
    seconds = np.sort(rng.integers(0, 365 * 86_400, 300))
    instants = np.datetime64("2020-01-01T00:00:00", "s") + seconds
    y = seconds / 86_400 / 365
    zoned = [f"{(t + np.timedelta64(2, 'h')).astype(object):%Y-%m-%dT%H:%M:%S}+02:00" for t in instants]
    table = pa.table({"t": zoned, "y": y}).take(rng.permutation(300))
    pq.write_table(table, tmp_path / "zoned.parquet")
    pa_csv.write_csv(table, tmp_path / "zoned.csv")
    out, _ = _run(capsys, "fit", tmp_path / "zoned.parquet", "--target", "y", "--model", "ridge", "--output",
                  tmp_path / "m.rffkit")
    assert "dates and times: t as days since 1970-01-01 (t written %Y-%m-%dT%H:%M:%S%z)" in out
    assert rffkit.load(tmp_path / "m.rffkit")["encoding"]["dates"] == {"t": "%Y-%m-%dT%H:%M:%S%z"}
    predicted = []
    for name in ("zoned.parquet", "zoned.csv"):
        _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / name, "--output", tmp_path / "p.csv")
        predicted.append(pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy())
    np.testing.assert_allclose(predicted[0], predicted[1], rtol=1e-12)
    np.testing.assert_allclose(predicted[0], table.column("y").to_numpy(), atol=0.05)
    fractions = [f"{t.astype(object):%Y-%m-%d %H:%M:%S}.{k % 1000:03d}" for k, t in enumerate(instants)]
    pa_csv.write_csv(pa.table({"t": fractions, "y": y}), tmp_path / "fractions.csv")
    out, _ = _run(capsys, "fit", tmp_path / "fractions.csv", "--target", "y", "--model", "ridge", "--dates",
                  "t=%Y-%m-%d %H:%M:%S.%f", "--output", tmp_path / "f.rffkit")
    assert "(t written %Y-%m-%d %H:%M:%S.%f)" in out
    short = [f"{t.astype(object):%d/%m/%y}" for t in instants]
    pa_csv.write_csv(pa.table({"t": short, "y": y}), tmp_path / "short.csv")
    out, err = _run(capsys, "fit", tmp_path / "short.csv", "--target", "y", "--model", "ridge", "--output",
                    tmp_path / "s.rffkit")
    assert "they look like dates with a two-digit year (such as '01/01/20')" in err and "--dates 't=FORM'" in err
    out, err = _run(capsys, "fit", tmp_path / "short.csv", "--target", "y", "--model", "ridge", "--dates",
                    "t=%d/%m/%y", "--output", tmp_path / "s.rffkit")
    assert "(t written %d/%m/%y)" in out and "two-digit" not in err


def test_dates_the_files_typed_as_dates_are_read_from_iso_text_in_new_data(tmp_path, capsys):
    """A model fitted on a column that files give as timestamps or dates (an ISO-dated CSV, a Parquet date or
    timestamp) refused the same dates as ISO text (a Parquet string column, as pandas writes one from strings):
    the encoding records such columns (times) and reads text in them as ISO 8601; older model files still load."""
    rng = np.random.default_rng(0)
    days = np.datetime64("2021-01-01") + rng.integers(0, 365, 300).astype("timedelta64[D]")
    x = rng.normal(size=300)
    y = x + (days - days.min()).astype(float) / 50
    iso = [str(day) for day in days]
    pa_csv.write_csv(pa.table({"day": iso, "x": x, "y": y}), tmp_path / "iso.csv")
    pq.write_table(pa.table({"day": pa.array(days.astype("datetime64[us]")), "x": x, "y": y}), tmp_path / "ts.parquet")
    pq.write_table(pa.table({"day": pa.array(iso, pa.large_string()), "x": x, "y": y}), tmp_path / "text.parquet")
    pa_csv.write_csv(pa.table({"day": [f"{day.astype(object):%m/%d/%Y}" for day in days], "x": x, "y": y}),
                     tmp_path / "us.csv")
    source = open_table(str(tmp_path / "ts.parquet"), target="y")
    assert source.encoding.times == ("day",) and source.encoding.to_dict()["times"] == ["day"]
    assert rffkit.io.ColumnEncoding.from_dict(source.encoding.to_dict()) == source.encoding
    new = next(open_table(str(tmp_path / "text.parquet"), target="y", encoding=source.encoding).iter_chunks())
    np.testing.assert_array_equal(new.X, next(source.iter_chunks()).X)
    stamped = [f"{day}T06:00:00" for day in iso]
    X = source.encoding.transform({"day": stamped, "x": x})
    np.testing.assert_allclose(X[:, 0] - 0.25, next(source.iter_chunks()).X[:, 0])
    with pytest.raises(DataSourceError, match=r"column 'day' holds '2021-02-30' at row 1, written in ISO 8601, "
                       "but no day of the calendar"):
        source.encoding.transform({"day": [iso[0], "2021-02-30"], "x": x[:2]})
    for train in ("iso.csv", "ts.parquet"):
        _run(capsys, "fit", tmp_path / train, "--target", "y", "--model", "ridge", "--output", tmp_path / "m.rffkit")
        predicted = []
        for name in ("iso.csv", "ts.parquet", "text.parquet"):
            _run(capsys, "predict", tmp_path / "m.rffkit", tmp_path / name, "--output", tmp_path / "p.csv")
            predicted.append(pa_csv.read_csv(tmp_path / "p.csv").column("predicted_y").to_numpy())
        np.testing.assert_array_equal(predicted[2], predicted[0])
        np.testing.assert_array_equal(predicted[1], predicted[0])
        status = cli.main(["predict", str(tmp_path / "m.rffkit"), str(tmp_path / "us.csv"), "--output",
                           str(tmp_path / "p.csv")])
        assert status == 2
        assert "column 'day' holds '" in capsys.readouterr().err  # the dates in another form: named, not guessed
    older = {key: value for key, value in source.encoding.to_dict().items() if key != "times"}
    assert rffkit.io.ColumnEncoding.from_dict(older).times == ()  # a file written before: read as it was
