"""Dates written as text: found in a text column and read as days since 1970-01-01.

A CSV reader parses ISO 8601's dates and times (2020-01-31, 2020-01-31T10:30:00Z) itself; dates
written otherwise (01/31/2020, 31.01.2020; ISO text in a Parquet file or in a CSV column read as
text) are found by :func:`date_format` (a column's distinct texts) and :func:`date_columns` (the
text columns of a chunk), with :func:`warn_date_doubt` for a column whose form is in doubt, and
read by :func:`text_dates` (:func:`text_column_numbers` for new data, whose numbers or dates may be
text). Seconds may have a fraction (``10:30:15.250``) and a time a time zone (``Z``, ``+02:00``;
the UTC instant is read), in ISO 8601 text and in any form given.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from ._column_kinds import as_text, numbers, text_numbers
from ._io_base import (
    LEAVE_OUT, NUMBERS_IN_TEXT_MIN, PLACEHOLDER_IN_FILE, DataSourceError, at_row, short, warn_user,
)

__all__ = ["ISO_8601", "date_columns", "date_format", "text_column_numbers", "text_dates", "warn_date_doubt"]


#: A time zone as ISO 8601 writes one after a time: Z (UTC), or the offset from UTC (+02:00, +0200, +02).
_ZONE = r"(?:Z|[+-]\d{2}(?::?\d{2})?)"

#: A date written as text: year first (2020-1-31, 2020/01/31) or last (31/01/2020, 01/31/2020,
#: 31.01.2020, 31-01-2020), with one separator, and maybe a time (10:30, 10:30:15 or 10:30:15.250) after
#: a space or T, and after the time a time zone (:data:`_ZONE`).
_DATE = re.compile(r"(\d{1,4})([-/.])(\d{1,2})\2(\d{1,4})(?:([ T])(\d{1,2}:\d{2})(:\d{2}([.,]\d{1,9})?)?("
                   + _ZONE + r")?)?")


def _form(match):
    """The form of the date a match of :data:`_DATE` writes: separator, clock, seconds, year first, time zone."""
    return match.group(2), match.group(5), match.group(7) is None, len(match.group(1)) == 4, match.group(9) is None


def _clock(matches):
    """The ``strptime`` form of the time the first of ``matches`` (of :data:`_DATE`) writes after its
    date, with ``.%f`` after the seconds where a match writes a fraction of a second."""
    first = matches[0]
    if first.group(5) is None:
        return ""
    fraction = next((match.group(8)[0] for match in matches if match.group(8)), None)
    seconds = "" if first.group(7) is None else ":%S" + ("" if fraction is None else fraction + "%f")
    return first.group(5) + "%H:%M" + seconds + ("" if first.group(9) is None else "%z")


def _two_digit_years(matches, clock):
    """Why ``matches`` (of :data:`_DATE`, some without a four-digit year) are not read as dates, where they
    look like dates with a two-digit year written in one form (``clock``, :func:`_clock`), or None."""
    first = matches[0]
    if any(_form(match)[:3] + _form(match)[4:] != _form(first)[:3] + _form(first)[4:]  # year first or not: either
           or max(len(match.group(k)) for k in (1, 3, 4)) > 2 for match in matches):
        return None

    def fits(order, match):  # a year of two digits, a month of 1 to 12, a day of 1 to 31
        field = dict(zip(order, (match.group(1), match.group(3), match.group(4))))
        return len(field["%y"]) == 2 and 1 <= int(field["%m"]) <= 12 and 1 <= int(field["%d"]) <= 31

    orders = [order for order in (("%d", "%m", "%y"), ("%m", "%d", "%y"), ("%y", "%m", "%d"))
              if all(fits(order, match) for match in matches)]
    if not orders:
        return None
    forms = " or ".join(repr(first.group(2).join(order) + clock) for order in orders)
    return (f"they look like dates with a two-digit year (such as {first.group(0)!r}), which are read as dates only "
            f"where their form is named, as the century and the order of the fields are guesses: written {forms}")


def date_format(texts):
    """``(format, doubt, others)``: the ``strptime`` format of the dates and times that ``texts``
    (the distinct non-empty values of a text column) write, or None; ``doubt`` is None, or, where
    they are dates whose day and month no value tells apart (01/02/2020), dates in more than one
    form (1/31/2020 beside 13/1/2020, or 2020-01-31, or times with a time zone beside times without),
    or dates with a two-digit year (01/02/20, 20-01-02), why they are not read;
    ``others``, the texts that are no dates (at most one in ten, beside more than 20 dates: a
    column of dates spoilt by a placeholder, as :class:`rffkit._io_base.NumbersInText` finds one
    of numbers), or an empty list.

    The year comes first (four digits, then month and day) or last (four digits): then the day
    comes first where a first field is over 12, the month where a second one is; with neither, a
    date written with dots is day first (31.01.2020, as in Germany), others are in doubt. A
    two-digit year is never read unless the form is given (``%y``, which reads 00 to 68 as 2000 to
    2068 and 69 to 99 as 1969 to 1999): its century, and in 01/02/03 the order of the fields, are
    guesses. A time may have seconds with a fraction (``10:30:15.250``: ``%S.%f``, kept) and a time
    zone after it (``Z``, ``+02:00``: ``%z``; the time is then the UTC instant).
    """
    found = [(_DATE.fullmatch(text.strip()), text) for text in texts]
    matches = [match for match, _ in found if match]
    others = [text for match, text in found if not match]
    if not matches or (others and (len(matches) <= NUMBERS_IN_TEXT_MIN or len(matches) < 9 * len(others))):
        return None, None, []
    first, clock = matches[0], _clock(matches)
    if not all(len(m.group(1)) == 4 or len(m.group(4)) == 4 for m in matches):  # 1-2-3: no year, no date
        return None, _two_digit_years(matches, clock), []
    other = next((match for match in matches if _form(match) != _form(first)), None)
    if other is not None:
        return None, f"they are dates written in more than one form (such as {first.group(0)!r} and " \
                     f"{other.group(0)!r})", []
    separator = first.group(2)
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
_ISO_FORMS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
              "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%dT%H:%M%z", "%Y-%m-%d %H:%M%z")


#: The format of a column that files gave as dates or timestamps (``ColumnEncoding.times``), which new
#: data may write as text: every form of ISO 8601 above, the text a CSV reader would have read as dates.
ISO_8601 = "ISO 8601"


def text_dates(array, format):
    """The days since 1970-01-01 (as :func:`numbers` gives a date) of the dates a text column writes
    in ``format`` (:func:`date_format`), or as ISO 8601 text where ``format`` is no form of
    ISO's year-month-day order (:data:`ISO_8601`: ISO 8601 text alone); NaN where a value is missing
    or empty; None where a value is no date in those forms, or no day of the calendar (:func:`_read_dates`: seconds may have a
    fraction, and a time with a time zone counts from midnight UTC)."""
    text = pc.utf8_trim_whitespace(as_text(array))
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    parsed, rest = None, text
    forms = _ISO_FORMS if format == ISO_8601 else (format,) if format.startswith("%Y-") else (format, *_ISO_FORMS)
    for form in forms:
        read = _read_dates(rest, form)
        if read is None:
            return None
        parsed = read if parsed is None else pc.coalesce(parsed, read)
        rest = pc.if_else(pc.is_null(parsed), text, pa.scalar(None, pa.string()))
        if rest.null_count == len(rest):
            break
    return None if parsed.null_count != text.null_count else numbers(parsed)


#: What a form may write after its seconds, as a regular expression (:func:`_fraction`).
_AFTER_SECONDS = {"%z": _ZONE, "%p": "[AaPp][Mm]", "%%": "%"}


def _fraction(form):
    """The regular expression of a text written in ``form`` whose seconds (``%S``) have a fraction after
    them (``10:30:15.250``): its groups are the text before the fraction, the fraction's digits and the
    rest. None where ``form`` has no seconds, or writes other fields than a time zone or AM/PM after them."""
    _, seconds, after = form.partition("%S")
    if not seconds:
        return None
    pattern = ""
    for piece in re.split(r"(%.)", after):
        if len(piece) == 2 and piece.startswith("%"):
            if piece not in _AFTER_SECONDS:
                return None
            pattern += _AFTER_SECONDS[piece]
        else:
            pattern += "".join(r"\s*" if c.isspace() else c if c.isalnum() else "\\" + c for c in piece)
    return r"^(?P<before>.*\d)[.,](?P<digits>\d{1,9})(?P<after>" + pattern + ")$"


#: Seconds from 1970 that a timestamp in nanoseconds holds (int64): 1677-09-21 to 2262-04-11.
_NANOSECOND_SECONDS = 9_223_372_036


def _within_nanoseconds(read):
    """``read`` (timestamps in seconds) with the instants that nanoseconds cannot hold made null, as
    values that are no date of the range read: a count read as years (``'0'`` as ``%Y``) had raised
    inside pyarrow."""
    limit = _NANOSECOND_SECONDS
    outside = pc.or_(pc.less(read, pa.scalar(-limit, type=read.type)),
                     pc.greater(read, pa.scalar(limit, type=read.type)))
    return pc.if_else(outside, pa.scalar(None, type=read.type), read)


def _read_dates(text, form):
    """The instants (timestamps in ns, UTC where a time zone is written) of the dates that the text
    ``text`` writes in the ``strptime`` form ``form``, null where a value is none; None where one is no
    day of the calendar (:func:`_dates_exist`). Arrow's ``strptime`` has no fraction of a second: one
    after the seconds (``10:30:15.250``, whether ``form`` writes ``%S.%f`` or ``%S``) is read apart
    (:func:`_fraction`) and kept."""
    if pa.types.is_large_string(text.type):  # pandas writes Parquet text so; the kernels below take string
        text = pc.cast(text, pa.string())
    form = re.sub(r"%S[.,]%f", "%S", form)
    read = _within_nanoseconds(pc.strptime(text, format=form, unit="s", error_is_null=True))
    if not _dates_exist(text, read, form):
        return None
    read, fraction = pc.cast(read, pa.timestamp("ns")), _fraction(form)
    if fraction is None or read.null_count == text.null_count:
        return read
    parts = pc.extract_regex(pc.if_else(pc.is_null(read), text, pa.scalar(None, pa.string())), fraction)
    whole = pc.binary_join_element_wise(pc.struct_field(parts, [0]), pc.struct_field(parts, [2]), "")
    seconds = _within_nanoseconds(pc.strptime(whole, format=form, unit="s", error_is_null=True))
    if not _dates_exist(whole, seconds, form):
        return None
    digits = pc.utf8_rpad(pc.struct_field(parts, [1]), width=9, padding="0")
    return pc.coalesce(read, pc.add(pc.cast(seconds, pa.timestamp("ns")),
                                    pc.cast(pc.cast(digits, pa.int64()), pa.duration("ns"))))


def _dates_exist(text, parsed, format):
    """Whether each date of ``text`` that ``parsed`` (its ``strptime`` in ``format``) reads writes
    back as itself in ``format``: Arrow's ``strptime`` moves a day past the month's end on
    (02/30/2020 is read as 03/01/2020, 2020013 with ``%Y%m%d`` as 2020-01-03), where such a value
    is no date. Such a date lands on the 1st to 3rd of a month, so only those are written back
    (all of them for a day of the year, ``%j``); texts are compared without case, leading zeros
    and spaces; a time zone at the end (``%z``) is left out, as the date is checked as written; a
    format with a time zone elsewhere or named (``%Z``) is not checked."""
    if "%Z" in format or "%z" in format.removesuffix("%z"):
        return True
    if format.endswith("%z"):
        text = pc.replace_substring_regex(text, r"\s*" + _ZONE + "$", "")
        format = format.removesuffix("%z").rstrip()
        parsed = pc.strptime(text, format=format, unit="s", error_is_null=True)
    suspect = pc.less_equal(pc.day(parsed), 3) if "%j" not in format else pc.is_valid(parsed)
    distinct = pc.unique(text.filter(pc.fill_null(suspect, False)))
    if len(distinct) == 0:
        return True
    written = pc.strftime(pc.strptime(distinct, format=format, unit="s"), format=format, locale="C")

    def canonical(values):  # leading zeros first: '2020 09:30' is '2020 9:30', not '202009:30'
        values = pc.replace_substring_regex(pc.utf8_lower(values), r"(^|[^0-9])0+([0-9])", r"\1\2")
        return pc.replace_substring_regex(values, r"\s+", "")

    return pc.all(pc.equal(canonical(distinct), canonical(written))).as_py() is not False


#: What a value that is no number or date of its column advises: on new data, and where the encoding is learned.
REFIT_ENCODING = "refit the encoding on these data"
NAME_ANOTHER_FORM = ("name the form its dates are written in (dates={column: format} in Python, --dates COL=FORMAT on "
                     "the command line), or leave the column out of dates to read it as it is")


def text_column_numbers(array, column, rows, date_format=None, advice=REFIT_ENCODING):
    """The numbers a text ``column`` writes, or with ``date_format`` the days since 1970-01-01 of
    the dates it writes so (:func:`text_numbers`, :func:`text_dates`): new data whose numbers or
    dates are text. A value that is neither is a :class:`DataSourceError` naming it and its row
    (``rows``, the chunk's global rows, or None), which ends with ``advice`` after "correct the
    value, or" (:data:`NAME_ANOTHER_FORM` where the encoding is being learned)."""
    read = text_numbers if date_format is None else lambda values: text_dates(values, date_format)
    values = read(array)
    if values is None:
        texts = as_text(array).to_pylist()
        position = next(k for k, text in enumerate(texts) if text is not None and (date_format is None or text.strip())
                        and read(pa.array([text])) is None)
        forms = _ISO_FORMS if date_format == ISO_8601 else (date_format,)
        if date_format is not None and any(_read_dates(pa.array([texts[position].strip()]), form) is None
                                           for form in forms):  # read, but no such day
            written = "in ISO 8601" if date_format == ISO_8601 else f"{date_format} as the column's dates are"
            raise DataSourceError(f"column {column!r} holds {short(texts[position])} at row {at_row(position, rows)}, "
                                  f"written {written}, but no day of the calendar; "
                                  f"correct the value, or {LEAVE_OUT}.")
        expected = ("a number" if date_format is None else
                    "a date, as the column held when the encoding was learned (as text, in ISO 8601: 2020-01-31 or "
                    "2020-01-31T10:30:00)" if date_format == ISO_8601 else
                    f"a date written {date_format}, as the column's dates are"
                    + ("" if date_format.startswith("%Y-") else ", or in ISO 8601's 2020-01-31"))
        raise DataSourceError(f"column {column!r} holds {short(texts[position])} at row {at_row(position, rows)}, "
                              f"where the encoding expects {expected}; correct the value, or {advice}.")
    return values
