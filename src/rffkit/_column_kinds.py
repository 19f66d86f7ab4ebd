"""The kinds of Arrow columns (what rffkit can do with each) and the number each kind becomes.

A file's column is numbers, booleans, text, a date or time, or unsupported
(:func:`column_kind`); the kinds of one column in several files must agree
(:func:`merge_kinds`); :func:`numbers` turns a numeric, boolean or time column into the
float64 values of the feature matrix (:func:`text_numbers` those written as text), and
:func:`as_text` any of them into the text of its values, for a column of codes to be one-hot
encoded (:func:`category_text` for one value; :func:`number_text` and :func:`codes_as_numbers`
for codes written as text).
Dates that a file writes as text (01/31/2020) are found and read by :mod:`rffkit._text_dates`. What a
chunk of a text column holds: :func:`text_values` (its distinct values and their rows), and
:func:`text_reads_as_numbers` whether they are all numbers. A target column's values are
:func:`target_values` (:func:`target_present` where rows without one are dropped).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._io_base import (
    DROP_TARGET, LEADING_ZERO, PLACEHOLDER_IN_FILE, TO_UTF8, DataSourceError, NumbersInText, at_row, check_finite,
    check_no_nulls, short,
)

__all__ = ["TIME_UNITS", "as_text", "category_text", "codes_as_numbers", "column_kind", "merge_kinds", "not_utf8",
           "number_text", "numbers", "target_present", "target_values", "text_numbers", "text_reads_as_numbers",
           "text_values"]


#: Each kind with the Arrow type tests that make a column of it, in the order they are tried.
_KINDS = (
    ("time", (pa.types.is_timestamp, pa.types.is_date)),
    ("time_of_day", (pa.types.is_time,)),
    ("duration", (pa.types.is_duration,)),
    ("integer", (pa.types.is_integer,)),
    ("float", (pa.types.is_floating, pa.types.is_decimal)),
    ("bool", (pa.types.is_boolean,)),
    ("null", (pa.types.is_null,)),
    ("categorical", (pa.types.is_string, pa.types.is_large_string, pa.types.is_dictionary,
                     getattr(pa.types, "is_string_view", lambda _: False))),
)


def column_kind(data_type):
    """Coarse kind of an Arrow type: what rffkit can do with the column.

    One of 'integer', 'float' (decimals too), 'bool', 'null', the kinds of
    :data:`TIME_UNITS` ('time': timestamps and dates; 'time_of_day'; 'duration'; each a
    number in its unit, :func:`numbers`), 'categorical' (strings and dictionaries) and
    'unsupported' (dictionaries of unsupported values too: binary).
    """
    if pa.types.is_dictionary(data_type) and column_kind(data_type.value_type) == "unsupported":
        return "unsupported"
    return next((kind for kind, tests in _KINDS if any(test(data_type) for test in tests)), "unsupported")


#: The number a column of each time kind becomes (:func:`numbers`).
TIME_UNITS = {"time": "days since 1970-01-01", "time_of_day": "hours since midnight", "duration": "seconds"}

#: A second in each unit of an Arrow timestamp, time of day or duration.
_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def numbers(array):
    """A numeric, boolean, null or time column as float64 values, NaN where one is missing.

    Timestamps and dates become days since 1970-01-01 (a timestamp with a time zone counts
    from midnight UTC), with the time of day as the fraction; times of day become hours
    since midnight, and durations seconds (:data:`TIME_UNITS`): one continuous input each
    for the kernel, which standardises it.
    """
    type_ = array.type

    def as_floats(values):
        return pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)

    if pa.types.is_timestamp(type_):
        return as_floats(pc.cast(array, pa.int64())) / (86_400 * _SECOND[type_.unit])
    if pa.types.is_time(type_):
        ticks = pc.cast(array, pa.int32() if pa.types.is_time32(type_) else pa.int64())
        return as_floats(ticks) / (3_600 * _SECOND[type_.unit])
    if pa.types.is_duration(type_):
        return as_floats(pc.cast(array, pa.int64())) / _SECOND[type_.unit]
    if pa.types.is_date64(type_):
        return as_floats(pc.cast(array, pa.int64())) / (86_400 * _SECOND["ms"])
    if pa.types.is_date32(type_):
        return as_floats(pc.cast(array, pa.int32()))
    return as_floats(array)


def as_text(array):
    """A column as plain Arrow strings, null where a value is missing: the categories of a column
    one-hot encoded by its values.

    Text passes through (a dictionary column as its values); numbers, booleans, dates and times
    become the text of each value (``4``, ``2.5``, ``true``, ``2020-01-31``), the same for an
    integer and a float of one number (``4.0`` is ``4``), with NaN a missing value and -0 read as 0,
    so that one code is one category whichever type a file stored it in.
    """
    type_ = array.type
    if pa.types.is_dictionary(type_):
        return as_text(pc.cast(array, type_.value_type))
    if column_kind(type_) == "categorical":
        return array if pa.types.is_string(type_) or pa.types.is_large_string(type_) else pc.cast(array, pa.string())
    if pa.types.is_floating(type_):
        if pa.types.is_float16(type_):  # no arithmetic on half floats; float32 holds each exactly
            array, type_ = pc.cast(array, pa.float32()), pa.float32()
        array = pc.add(pc.if_else(pc.is_nan(array), pa.scalar(None, type_), array), pa.scalar(0.0, type_))
    return pc.cast(array, pa.string())


def text_numbers(array):
    """The numbers a text column writes (``"1.5"``), as :func:`numbers` gives them, or None when
    some value is no number."""
    try:
        return numbers(pc.cast(as_text(array), pa.float64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


#: A number as a CSV reader takes one from text: "4", "-4.0", "4.5e1", ".5", with blanks around.
_NUMBER = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"


def number_text(array):
    """For each value of a text column that writes a number, the text :func:`as_text` gives that
    number ("4.0", " 4" and "4e0" are "4"); null for the others, for missing values, for codes with a
    leading zero ("007", "07": text, never a number; :data:`LEADING_ZERO`) and for runs of 16 digits or
    more, which a float64 would round (two long codes would become one)."""
    array = as_text(array)
    is_number = pc.fill_null(pc.and_(pc.match_substring_regex(array, _NUMBER), pc.invert(
        pc.match_substring_regex(array, f"[0-9]{{16}}|{LEADING_ZERO}"))), False)
    written = pc.utf8_trim_whitespace(pc.if_else(is_number, array, pa.scalar(None, array.type)))
    return as_text(pc.cast(written, pa.float64()))


def codes_as_numbers(value_set):
    """The categories ``value_set`` as :func:`number_text` writes the numbers among them ("4.0" as
    "4"), for new values that write a known code as another number; null for the other categories
    and for codes with a leading zero ("007"), which are text, never a number."""
    return number_text(pc.cast(value_set, pa.string()))


def target_present(array):
    """Whether each value of a target column is there: not null, and not NaN in a float column."""
    present = np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_floating(array.type):
        present &= ~np.isnan(array.to_numpy(zero_copy_only=False))
    return present


def target_values(array, column, rows):
    """The values of a chunk ``array`` of the target ``column`` (global ``rows``, for messages).

    float64 for float targets, int64 for integer ones, bool, or an object array of str for
    text and dictionary targets; a missing value raises :class:`MissingValueError`, which
    says to drop those rows.
    """
    check_no_nulls(array, column, rows, DROP_TARGET)
    if pa.types.is_dictionary(array.type):
        array = pc.cast(array, array.type.value_type)
    kind = column_kind(array.type)
    if kind == "categorical":
        return np.asarray(array.to_numpy(zero_copy_only=False), dtype=object)
    if kind in ("integer", "bool"):
        return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64 if kind == "integer" else bool)
    values = pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    check_finite(values, column, rows, DROP_TARGET)
    return values


def category_text(value):
    """A category as an encoding keeps it: text, or None for the missing value; a number, boolean
    or date as the text :func:`as_text` reads such a column's values as (raises ValueError for
    anything else)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return as_text(pa.array([value])).to_pylist()[0]
    except (pa.ArrowException, TypeError, ValueError):
        raise ValueError(f"a category must be text, a number, a boolean or a date; got {short(value)}.") from None


def not_utf8(path, column, batches):
    """The :class:`DataSourceError` of a CSV ``column`` of the file ``path`` that the reader found not to be
    UTF-8 text, naming its first such value and line; ``batches`` are the column's, read as binary."""
    line = 2  # the header is line 1
    for batch in batches:
        for value in batch.column(0).to_pylist():
            try:
                _ = value is None or value.decode("utf-8")
            except UnicodeDecodeError:
                return DataSourceError(f"{path!r} is not UTF-8 text: column {column!r} holds {short(value)} on line "
                                       f"{line}; {TO_UTF8}.")
            line += 1
    return DataSourceError(f"{path!r} is not UTF-8 text: column {column!r} holds bytes of another encoding; {TO_UTF8}.")


def merge_kinds(first, second):
    """The kind of a column that is ``first`` in one file and ``second`` in another, or None."""
    if first == second or second == "null":
        return first
    if first == "null":
        return second
    if {first, second} == {"integer", "float"}:
        return "float"
    return None


def text_values(array, column, rows, *, nulls=False):
    """``(distinct, locate)`` of a chunk ``array`` of the text ``column``: its distinct values, and
    ``locate(value)``, the global row where a value first appears in the chunk (``rows``, the
    chunk's global rows, or None). A null raises :class:`MissingValueError`, unless ``nulls``:
    then ``None`` is among the values when the chunk has one."""
    if not nulls:
        check_no_nulls(array, column, rows)
    if pa.types.is_dictionary(array.type):
        array = pc.cast(array, array.type.value_type)
    return pc.unique(array).to_pylist(), lambda value: at_row(pc.index(array, value).as_py(), rows)


def text_reads_as_numbers(batches, column, *, nulls=False):
    """Whether every value of the text ``column`` (``batches`` of ``(batch, rows)``) is a number, which
    an encoding that reads the column as numbers then parses (new data whose numbers were written
    as text). Raises naming the other values when most values are numbers: numbers a placeholder
    made text. ``nulls``: missing values are allowed."""
    check, parsed = NumbersInText(column), True
    for batch, rows in batches:
        array = as_text(batch.column(column))
        check.update(*text_values(array, column, rows, nulls=nulls))
        parsed = parsed and text_numbers(array) is not None
    if check.others and len(check.numbers) >= len(check.others):
        raise DataSourceError(f"feature column {column!r} holds text where the encoding expects numbers: "
                              f"{check.quoted()}{PLACEHOLDER_IN_FILE}.")
    return parsed
