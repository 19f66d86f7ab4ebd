"""The kinds of Arrow columns (what rffkit can do with each) and the number each kind becomes.

A file's column is numbers, booleans, text, a date or time, or unsupported
(:func:`column_kind`); the kinds of one column in several files must agree
(:func:`merge_kinds`); :func:`numbers` turns a numeric, boolean or time column into the
float64 values of the feature matrix (:func:`text_numbers` those written as text), and
:func:`as_text` any of them into the text of its values, for a column of codes to be one-hot
encoded (:func:`category_text` for one value; :func:`number_text` and :func:`codes_as_numbers`
for codes written as text).
Dates that a file writes as text in another form than ISO 8601's (which CSV readers parse), such
as 01/31/2020, are found by :func:`date_format` and read by :func:`text_dates`. What a chunk of a
text column holds: :func:`text_values` (its distinct values and their rows), and
:func:`text_reads_as_numbers` whether they are all numbers. A target column's values are
:func:`target_values` (:func:`target_present` where rows without one are dropped).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._io_base import (
    DROP_TARGET, LEAVE_OUT, NUMBERS_IN_TEXT_MIN, PLACEHOLDER_IN_FILE, TO_UTF8, DataSourceError, NumbersInText,
    at_row, check_finite, check_no_nulls, short, warn_user,
)

__all__ = ["TIME_UNITS", "as_text", "category_text", "codes_as_numbers", "column_kind", "date_columns", "date_format",
           "merge_kinds", "not_utf8", "number_text", "numbers", "target_present", "target_values",
           "text_column_numbers", "text_dates", "text_numbers", "text_reads_as_numbers", "text_values",
           "warn_date_doubt"]


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
    'unsupported'.
    """
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
    number ("4.0", " 4" and "4e0" are "4"); null for the others, for missing values and for runs of
    16 digits or more, which a float64 would round (two long codes would become one)."""
    array = as_text(array)
    is_number = pc.fill_null(pc.and_(pc.match_substring_regex(array, _NUMBER),
                                     pc.invert(pc.match_substring_regex(array, r"[0-9]{16}"))), False)
    written = pc.utf8_trim_whitespace(pc.if_else(is_number, array, pa.scalar(None, array.type)))
    return as_text(pc.cast(written, pa.float64()))


def codes_as_numbers(value_set):
    """The categories ``value_set`` as :func:`number_text` writes the numbers among them ("4.0" as
    "4"), for new values that write a known code as another number; null for the other categories
    and for codes with a leading zero ("007"), which are text, never a number."""
    text = pc.cast(value_set, pa.string())
    padded = pc.fill_null(pc.match_substring_regex(pc.utf8_trim_whitespace(text), r"^[+-]?0[0-9]"), False)
    return pc.if_else(padded, pa.scalar(None, pa.string()), number_text(text))


#: A date written as text: year first (2020-1-31, 2020/01/31) or last (31/01/2020, 01/31/2020,
#: 31.01.2020, 31-01-2020), with one separator, and maybe a time (10:30 or 10:30:15) after a space or T.
_DATE = re.compile(r"(\d{1,4})([-/.])(\d{1,2})\2(\d{1,4})(?:([ T])(\d{1,2}:\d{2})(:\d{2})?)?")


def date_format(texts):
    """``(format, doubt, others)``: the ``strptime`` format of the dates and times that ``texts``
    (the distinct non-empty values of a text column) write, or None; ``doubt`` is None, or, where
    they are dates whose day and month no value tells apart (01/02/2020), or dates in more than one
    form (1/31/2020 beside 13/1/2020, or 2020-01-31), why they are not read;
    ``others``, the texts that are no dates (at most one in ten, beside more than 20 dates: a
    column of dates spoilt by a placeholder, as :class:`rffkit._io_base.NumbersInText` finds one
    of numbers), or an empty list.

    The year comes first (four digits, then month and day) or last (four digits): then the day
    comes first where a first field is over 12, the month where a second one is; with neither, a
    date written with dots is day first (31.01.2020, as in Germany), others are in doubt.
    """
    found = [(_DATE.fullmatch(text.strip()), text) for text in texts]
    matches = [match for match, _ in found if match]
    others = [text for match, text in found if not match]
    if not matches or (others and (len(matches) <= NUMBERS_IN_TEXT_MIN or len(matches) < 9 * len(others))):
        return None, None, []
    if not all(len(m.group(1)) == 4 or len(m.group(4)) == 4 for m in matches):  # 1-2-3: no year, no date
        return None, None, []
    first = matches[0]

    def form(match):  # separator, clock, seconds, year first
        return match.group(2), match.group(5), match.group(7) is None, len(match.group(1)) == 4

    other = next((match for match in matches if form(match) != form(first)), None)
    if other is not None:
        return None, f"they are dates written in more than one form (such as {first.group(0)!r} and " \
                     f"{other.group(0)!r})", []
    separator, clock = first.group(2), "" if first.group(5) is None else first.group(5) + "%H:%M"
    clock += "" if first.group(7) is None else ":%S"
    if all(len(m.group(1)) == 4 and len(m.group(4)) <= 2 for m in matches):
        return separator.join(("%Y", "%m", "%d")) + clock, None, others
    if not all(len(m.group(1)) <= 2 and len(m.group(4)) == 4 for m in matches):
        return None, None, []
    if any(int(m.group(1)) > 12 and int(m.group(3)) > 12 for m in matches):  # 13/13/2020: no date
        return None, None, []
    day_first = next((m.group(0) for m in matches if int(m.group(1)) > 12), None)
    month_first = next((m.group(0) for m in matches if int(m.group(3)) > 12), None)
    if day_first and month_first:
        return None, (f"they are dates written day first (such as {day_first!r}) and month first (such as "
                      f"{month_first!r})"), []
    if not (day_first or month_first or separator == "."):
        forms = " or ".join(repr(separator.join((*order, "%Y")) + clock) for order in (("%d", "%m"), ("%m", "%d")))
        return None, (f"they are dates whose day and month no value tells apart (such as {first.group(0)!r}: "
                      f"every field 12 or less), written {forms}"), []
    order = ("%m", "%d") if month_first else ("%d", "%m")
    return separator.join((*order, "%Y")) + clock, None, others


def date_columns(batch, rows, columns, seen):
    """``(formats, doubts)``: the text ``columns`` of a chunk (``batch``, its global ``rows``) that
    write dates only, with their formats (:func:`date_format`), and those whose dates leave day and
    month, or their form, in doubt, with why. ``seen`` maps a column to the distinct texts of the
    chunks looked at before, which join this chunk's (it is updated). A column of dates and a few
    other values is a :class:`DataSourceError` that quotes them."""
    formats, doubts = {}, {}
    for column in columns if batch.num_rows else ():
        values = as_text(batch.column(column))  # a dictionary column as its values
        texts = seen.setdefault(column, {})
        texts.update(dict.fromkeys(text for text in pc.unique(values).to_pylist() if text and text.strip()))
        format_, doubt, others = date_format(texts)
        if others:
            quoted = ", ".join(f"{short(text)} (row {rows[pc.index(values, text).as_py()]})" for text in others[:5])
            raise DataSourceError(f"column {column!r} holds dates written {format_} and {len(others)} other "
                                  f"value{'s' if len(others) > 1 else ''}: {quoted}{PLACEHOLDER_IN_FILE}; "
                                  f"or {LEAVE_OUT}.")
        if format_ is not None:
            formats[column] = format_
        elif doubt is not None:
            doubts[column] = doubt
    return formats, doubts


def warn_date_doubt(column, doubt):
    """The warning of a text column of dates left as text: why (:func:`date_format`), and the way out."""
    warn_user(f"column {column!r} is read as text, a category per value: {doubt}. Name the form to read them as "
              f"dates: dates={{{column!r}: FORM}} in Python, --dates '{column}=FORM' on the command line.")


#: The forms of ISO 8601 that a CSV reader parses as dates, which new data may also give as text
#: for a column whose dates the encoding reads in another form (a CSV file would hold them as dates).
_ISO_FORMS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M")


def text_dates(array, format):
    """The days since 1970-01-01 (as :func:`numbers` gives a date) of the dates a text column writes
    in ``format`` (:func:`date_format`), or as ISO 8601 text where ``format`` is no form of
    ISO's year-month-day order; NaN where a value is missing or empty; None where a value is no
    date in those forms, or no day of the calendar (:func:`_dates_exist`)."""
    text = pc.utf8_trim_whitespace(as_text(array))
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    parsed, rest = None, text
    for form in (format,) if format.startswith("%Y-") else (format, *_ISO_FORMS):
        read = pc.strptime(rest, format=form, unit="s", error_is_null=True)
        if not _dates_exist(rest, read, form):
            return None
        parsed = read if parsed is None else pc.coalesce(parsed, read)
        rest = pc.if_else(pc.is_null(parsed), text, pa.scalar(None, pa.string()))
        if rest.null_count == len(rest):
            break
    return None if parsed.null_count != text.null_count else numbers(parsed)


def _dates_exist(text, parsed, format):
    """Whether each date of ``text`` that ``parsed`` (its ``strptime`` in ``format``) reads writes
    back as itself in ``format``: Arrow's ``strptime`` moves a day past the month's end on
    (02/30/2020 is read as 03/01/2020, 2020013 with ``%Y%m%d`` as 2020-01-03), where such a value
    is no date. Such a date lands on the 1st to 3rd of a month, so only those are written back
    (all of them for a day of the year, ``%j``); texts are compared without case, leading zeros
    and spaces; a format with a time zone is not checked."""
    if "%z" in format or "%Z" in format:
        return True
    suspect = pc.less_equal(pc.day(parsed), 3) if "%j" not in format else pc.is_valid(parsed)
    distinct = pc.unique(text.filter(pc.fill_null(suspect, False)))
    if len(distinct) == 0:
        return True
    written = pc.strftime(pc.strptime(distinct, format=format, unit="s"), format=format, locale="C")

    def canonical(values):  # leading zeros first: '2020 09:30' is '2020 9:30', not '202009:30'
        values = pc.replace_substring_regex(pc.utf8_lower(values), r"(^|[^0-9])0+([0-9])", r"\1\2")
        return pc.replace_substring_regex(values, r"\s+", "")

    return pc.all(pc.equal(canonical(distinct), canonical(written))).as_py() is not False


def text_column_numbers(array, column, rows, date_format=None):
    """The numbers a text ``column`` writes, or with ``date_format`` the days since 1970-01-01 of
    the dates it writes so (:func:`text_numbers`, :func:`text_dates`): new data whose numbers or
    dates are text. A value that is neither is a :class:`DataSourceError` naming it and its row
    (``rows``, the chunk's global rows, or None)."""
    read = text_numbers if date_format is None else lambda values: text_dates(values, date_format)
    values = read(array)
    if values is None:
        texts = as_text(array).to_pylist()
        position = next(k for k, text in enumerate(texts) if text is not None and (date_format is None or text.strip())
                        and read(pa.array([text])) is None)
        if date_format is not None and pc.strptime(pa.array([texts[position].strip()]), format=date_format, unit="s",
                                                   error_is_null=True)[0].is_valid:  # read, but no such day
            raise DataSourceError(f"column {column!r} holds {short(texts[position])} at row {at_row(position, rows)}, "
                                  f"written {date_format} as the column's dates are, but no day of the calendar; "
                                  f"correct the value, or {LEAVE_OUT}.")
        expected = ("a number" if date_format is None else f"a date written {date_format}, as the column's dates are"
                    + ("" if date_format.startswith("%Y-") else ", or in ISO 8601's 2020-01-31"))
        raise DataSourceError(f"column {column!r} holds {short(texts[position])} at row {at_row(position, rows)}, "
                              f"where the encoding expects {expected}; correct the value, or refit the encoding on "
                              "these data.")
    return values


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
