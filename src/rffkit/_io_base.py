"""What the sources of :mod:`rffkit.io` share: :class:`Chunk`, the errors and the checks.

The checks of arguments and values raise the error classes; the message helpers shorten
what the messages quote. Users import :class:`Chunk` and the error classes from
:mod:`rffkit.io`, which re-exports them; they also carry that module's name
(:func:`public_in_io`), so their repr, tracebacks, pickles and model files read
``rffkit.io.MissingValueError`` as they did before the classes moved here.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import sys
import warnings
from typing import NamedTuple

import numpy as np
import pyarrow.compute as pc

__all__ = [
    "Chunk",
    "DataSourceError",
    "ColumnNotFoundError",
    "SchemaMismatchError",
    "MissingValueError",
    "UnknownCategoryError",
]

#: Default rows per chunk of every source.
DEFAULT_CHUNK_ROWS = 65_536


def public_in_io(cls):
    """Give ``cls`` the module name ``rffkit.io``, where users import it; return ``cls``.

    Its repr, pickles, model files (:mod:`rffkit.persistence` records a class by module
    and name) and doctests then refer to ``rffkit.io``, whichever private module defines it.
    """
    cls.__module__ = "rffkit.io"
    return cls


@public_in_io
class Chunk(NamedTuple):
    """Rows read together: ``X`` (m, p), ``y`` (m,) or None, ``rows`` (m,) int64 indices.

    Parameters
    ----------
    X : ndarray of shape (m, p)
        The feature block, float64 or float32.
    y : ndarray of shape (m,) or None
        The target of these rows; None for a source without a target.
    rows : ndarray of shape (m,), dtype int64
        The global index of each row in the source, whatever the chunking and rank.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit.io import ArraySource
    >>> X, y, rows = next(ArraySource(np.ones((3, 2)), [1.0, 2.0, 3.0]).iter_chunks())
    >>> X.shape, y.tolist(), rows.tolist()
    ((3, 2), [1.0, 2.0, 3.0], [0, 1, 2])
    """

    X: np.ndarray
    y: np.ndarray | None
    rows: np.ndarray


@public_in_io
class DataSourceError(ValueError):
    """The data behind a source cannot be used as it is; the message says what to change."""


@public_in_io
class ColumnNotFoundError(DataSourceError):
    """A requested target or feature column is not in the data."""


@public_in_io
class SchemaMismatchError(DataSourceError):
    """Two files of one table disagree on a column."""


@public_in_io
class MissingValueError(DataSourceError):
    """A feature or target holds a null or NaN (the estimators reject NaN)."""


@public_in_io
class UnknownCategoryError(DataSourceError):
    """A category absent when the encoding was fitted, under ``handle_unknown='error'``."""


class TooManyCategoriesError(DataSourceError):
    """A text (or categorical) ``column`` with more than ``max_categories`` distinct values, which the
    encoding does not one-hot encode; ``rffkit fit`` says what its options can do instead."""

    def __init__(self, message, column, max_categories):
        super().__init__(message)
        self.column, self.max_categories = column, max_categories


class LateTextError(DataSourceError):
    """A CSV column that held only numbers or empty fields in the file's first rows, where pyarrow
    infers its type, holds text further down: ``column`` of the file ``path``, the first such
    text ``value``."""

    def __init__(self, message, path, column, value):
        super().__init__(message)
        self.path, self.column, self.value = path, column, value


#: What the messages about a file that is not UTF-8 text advise.
TO_UTF8 = ("convert the file to UTF-8, the encoding rffkit reads (from Latin-1, for instance: "
           "iconv -f latin1 -t utf-8 FILE > NEW)")


def read_error(path, exc, names=None):
    """The :class:`DataSourceError` (:class:`LateTextError` for text in a column of numbers) of Arrow's
    read error ``exc`` on the file ``path``; ``names``, the file's columns, name the column of a CSV error."""
    message = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    value = re.search(r"conversion error.*invalid value '(.*)'$", message)
    column = re.search(r"CSV column #(\d+)", message)
    name = names[int(column.group(1))] if column and names and int(column.group(1)) < len(names) else None
    repeated = re.search(r"multiple columns named ?(.*)$", message)
    if repeated and not repeated.group(1):  # a CSV header of empty names (',a,,y')
        return DataSourceError(f"cannot read {path!r}: its header has more than one column without a name; columns "
                               "are read by their names: give each its own name.")
    if repeated:  # a CSV header
        return _repeated(path, repeated.group(1), "more than once")
    if "invalid UTF8" in message:  # a CSV block after the first that holds bytes of another encoding
        line = re.search(r"Row #(\d+)", message)
        return DataSourceError(f"cannot read {path!r}: it is not UTF-8 text"
                               + (f": column {name!r}" if name is not None else "")
                               + (f" holds bytes of another encoding on line {line.group(1)}" if line else "")
                               + f"; {TO_UTF8}.")
    if name is not None:
        message += f" (column #{column.group(1)} is {name!r})"
    if re.search(r"CSV parse error: .*Expected \d+ columns, got \d+", message):
        message += ("; a row with another number of fields than the header: a stray delimiter or quote, or the "
                    "fields are delimited by another character than the one guessed from the header (give it: "
                    "delimiter= in Python, --delimiter on the command line)")
    zone = re.search(r"conversion error to timestamp[^:]*: expected (a|no) zone offset in '([^']*)'", message)
    if zone:  # times with a zone offset in the first rows or file, without one further on, or the other way
        line = re.search(r"Row #(\d+)", message)
        where = f"column {name!r}" if name is not None else "a column"
        first, later = ("with", "without") if zone.group(1) == "a" else ("without", "with")
        return DataSourceError(
            f"cannot read {path!r}: {where} holds times {later} a zone offset ({short(zone.group(2))}"
            + (f", line {line.group(1)}" if line else "") + f"), where the first rows read held them {first} one "
            "(the table's first file, or this file's first rows): write every time of the column alike, all "
            f"with an offset (such as +02:00 or Z) or all in one local time without, or {LEAVE_OUT}.")
    if "conversion error" in message:  # a later row contradicts the type inferred from the first ones
        message += ("; a CSV column's type is inferred from the file's first rows, and there this column held "
                    f"only numbers or empty fields: {LEAVE_OUT}, or write the table to Parquet with the column as "
                    "text")
        if name is not None and value:
            return LateTextError(f"cannot read {path!r}: {message}", path, name, value.group(1))
    return DataSourceError(f"cannot read {path!r}: {message}")


def check_names(path, schema):
    """Raise when the column names of the file ``path`` (its Arrow ``schema``) are not UTF-8 text, or
    name one column more than once."""
    try:
        names = schema.names
    except UnicodeDecodeError as exc:
        raise DataSourceError(f"{path!r} is not UTF-8 text: its header holds the column name {short(exc.object)}; "
                              f"{TO_UTF8}.") from None
    counts = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    repeated = [name for name, count in counts.items() if count > 1]
    if repeated:
        raise _repeated(path, repeated[0], "twice" if counts[repeated[0]] == 2 else f"{counts[repeated[0]]} times",
                        repeated[1:])


def _repeated(path, name, times, others=()):
    """The error of a file whose column ``name`` appears ``times`` (and the names ``others`` too)."""
    return DataSourceError(f"column {name!r} appears {times} in {path!r}"
                           + (f" (and {listing(others)} more than once too)" if others else "")
                           + "; columns are read by their names: give each its own name.")


def short(value, limit=60):
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def listing(names, limit=20):
    """The reprs of ``names`` joined by commas, the first ``limit`` of them and a count."""
    names = list(names)
    shown = ", ".join(repr(name) for name in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def at_row(position, rows):
    """The global index of the row at ``position`` of a chunk (``rows`` None: the position)."""
    return int(position if rows is None else rows[position])


#: What a missing-value error advises.
DROP_OR_ENCODE = ("drop or impute missing values before fitting, or encode them (open_table(..., missing='encode') "
                  "in Python, --missing encode on the command line)")
#: What a missing target value advises.
DROP_TARGET = "drop the rows whose target is missing before fitting"


def check_finite(values, column, rows, advice=DROP_OR_ENCODE):
    """Raise naming ``column`` and the global row of the first NaN or infinity in ``values`` (``advice``
    ends the message about a NaN)."""
    bad = ~np.isfinite(values)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        if np.isnan(values[position]):
            raise MissingValueError(
                f"column {column!r} holds NaN at row {at_row(position, rows)}; {advice}.")
        raise DataSourceError(f"column {column!r} holds {values[position]} at row "
                              f"{at_row(position, rows)}; the estimators need finite values.")


def check_no_nulls(array, column, rows, advice=DROP_OR_ENCODE):
    """Raise naming ``column`` and the global row of the first null of an Arrow array; ``advice`` ends the message."""
    if array.null_count:
        position = int(np.flatnonzero(pc.is_null(array).to_numpy(zero_copy_only=False))[0])
        raise MissingValueError(
            f"column {column!r} holds a missing value (null) at row {at_row(position, rows)}; {advice}.")


#: A text column of more distinct numbers than this, with at least nine numbers for each other
#: value, is a numeric column that some rows spoil (:class:`NumbersInText`).
NUMBERS_IN_TEXT_MIN = 20
#: The values other than numbers that a :class:`NumbersInText` message quotes, with their rows.
_QUOTED = 5
#: :class:`NumbersInText` keeps at most this many distinct numbers (a bound on its memory).
_NUMBERS_KEPT = 100_000


#: A number written with a leading zero ('007', '-01', ' 0042'): a code, which is text and never a number.
LEADING_ZERO = r"^\s*[+-]?0[0-9]"

#: A number written with commas between groups of three digits (``'12,345.6'``), which ``float`` refuses.
_GROUPED_DIGITS = re.compile(r"\s*[+-]?\d{1,3}(,\d{3})+(\.\d*)?\s*")


#: A number written with a decimal comma ('0,5', '-12,25'); with three digits after the comma and a leading
#: digit other than 0 ('3,141') it may be a number with a thousands separator instead.
_DECIMAL_COMMA = re.compile(r"\s*[+-]?(\d+),(\d+)\s*")

#: What a :class:`NumbersInText` message about a file's column of numbers written 0,5 advises: for a CSV file
#: delimited by another character, a Parquet file, and a CSV file delimited by commas (whose such numbers are
#: quoted text).
DECIMAL_IN_FILE = ": give the decimal point (decimal=',' in Python, --decimal ',' on the command line)"
DECIMAL_IN_PARQUET = (": store the column as numbers (for a pandas column: pandas.to_numeric(column.str.replace(',', "
                      "'.')) before writing the file)")
DECIMAL_IN_COMMA_CSV = (": the file's fields are delimited by commas too, which quotes such numbers as text; write "
                        "the file with another delimiter (such as ';', then give decimal=',' in Python, --decimal ',' "
                        "on the command line) or with decimal points")


def _reads_as_number(value):
    if isinstance(value, str) and _GROUPED_DIGITS.fullmatch(value):
        return True
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


class NumbersInText:
    """The distinct values of a text column that read as finite numbers, and the others.

    Fed chunk by chunk (:meth:`update`). A CSV column of numbers with one ``'?'`` or
    ``'n/a'`` in it is read as text; one-hot encoded, every number would be a column of its
    own (and in a target a class of its own), its relevance the sum of theirs, and the
    model would look fine. :meth:`message` says so when the column holds more than
    ``NUMBERS_IN_TEXT_MIN`` distinct numbers and at least nine for each other value, and
    names the other values and the rows where they first appear; a column of few codes
    (``'K'``, ``'1'``, ..., ``'12'``) is a categorical column and passes, and so is one that writes
    a code with a leading zero (``'007'``, zip codes; :data:`LEADING_ZERO`).

    ``label`` names the column in the message (default ``column 'name'``); ``advice``, what
    to do about the other values (``PLACEHOLDER_IN_FILE`` for a file), follows it when there
    are any.

    >>> check = NumbersInText("dose")
    >>> check.update([str(k / 10) for k in range(30)] + ["?"], lambda value: 7)
    >>> check.message()
    "column 'dose' holds numbers and text: 30 of its distinct values are numbers and 1 is not: '?' (row 7)"
    """

    def __init__(self, column, label=None):
        self.column = column
        self.label = f"column {column!r}" if label is None else label
        self.numbers = set()
        self.others = {}  # value -> the row where it first appears (None after the first few)
        self.codes = False  # whether a value is a code with a leading zero
        self.n_distinct = 0
        self.decimal_commas = [0, 0, None]  # values written 0,5; those that may be 3,141 (thousands); an example

    def update(self, distinct, locate):
        """Add a chunk's distinct values (a missing value, None, is neither kind); ``locate(value)`` is
        the row of its first appearance in the chunk."""
        for value in distinct:
            if value is None or value in self.numbers or value in self.others:
                continue
            self.codes = self.codes or bool(isinstance(value, str) and re.match(LEADING_ZERO, value))
            self.n_distinct += 1
            comma = _DECIMAL_COMMA.fullmatch(value) if isinstance(value, str) else None
            if comma:
                ambiguous = len(comma.group(2)) == 3 and comma.group(1)[0] != "0"
                self.decimal_commas[1 if ambiguous else 0] += 1
                self.decimal_commas[2] = self.decimal_commas[2] or value
            if not _reads_as_number(value):
                self.others[value] = locate(value) if len(self.others) < _QUOTED else None
            elif len(self.numbers) < _NUMBERS_KEPT:
                self.numbers.add(value)

    def message(self, advice="", codes="", decimal=DECIMAL_IN_FILE):
        """What is wrong with the column, or None when it is not a numeric column spoilt by text;
        ``codes`` follows the advice to store a column of numbers only as numbers (``NAME_CATEGORICAL``
        where the user can name the column categorical instead), ``decimal`` the finding that its
        numbers are written with a decimal comma (nine in ten of its distinct values, at least one of
        them not a number with a thousands separator such as '3,141')."""
        n_numbers, n_others = len(self.numbers), len(self.others)
        plain, ambiguous, example = self.decimal_commas
        if (plain and self.n_distinct > NUMBERS_IN_TEXT_MIN and plain + ambiguous >= 0.9 * self.n_distinct
                and not self.codes):
            return (f"{self.label} holds numbers written with a decimal comma (such as {short(example)}), read as "
                    f"text{decimal}{codes.replace('its numbers are codes', 'they are codes')}")
        if self.codes or n_numbers <= NUMBERS_IN_TEXT_MIN or n_numbers < 9 * n_others:
            return None
        count = f"{n_numbers:,}" if n_numbers < _NUMBERS_KEPT else f"more than {_NUMBERS_KEPT - 1:,}"
        if not n_others:
            return (f"{self.label} holds numbers written as text ({count} distinct values, each a number): "
                    f"store it as a numeric column{codes}")
        return (f"{self.label} holds numbers and text: {count} of its distinct values are numbers and "
                f"{n_others} {'is' if n_others == 1 else 'are'} not: {self.quoted()}{advice}")

    def quoted(self):
        """The first few values other than numbers, each with its row, and how many more there are."""
        quoted = ", ".join(f"{short(value)} (row {row})" for value, row in list(self.others.items())[:_QUOTED])
        more = len(self.others) - _QUOTED
        return quoted + (f" and {more} more" if more > 0 else "")


#: How the messages about a column say to do without it, in Python and on the command line.
LEAVE_OUT = "leave it out (exclude=[...] in Python, --exclude on the command line)"

#: How the messages about a file's text column of numbers say to keep it as categories.
NAME_CATEGORICAL = ("; or, if its numbers are codes, name it categorical (categorical=[...] in Python, --categorical "
                    "on the command line)")

#: What a :class:`NumbersInText` message about a file's column goes on to say when text spoils the numbers.
PLACEHOLDER_IN_FILE = (". Is that a placeholder for missing values? Write them as empty cells (which the command line "
                       "and missing='encode' encode; else drop or impute their rows), or correct the values")


def check_missing(missing, owner):
    """``missing`` ('error' or 'encode', how a table's missing values are treated), or a ValueError naming ``owner``."""
    if missing not in ("error", "encode"):
        raise ValueError(f"{owner}: missing must be 'error' or 'encode'; got {short(missing)}.")
    return missing


def row_mask(learn_rows, rows):
    """``learn_rows(rows)`` as a boolean mask of ``len(rows)``, or a TypeError saying what it gave."""
    mask = np.asarray(learn_rows(rows))
    if mask.dtype != bool or mask.shape != rows.shape:
        raise TypeError(f"learn_rows must return a boolean mask of the {len(rows)} rows it is given; "
                        f"it returned {mask.dtype} of shape {mask.shape}.")
    return mask


def check_chunk_rows(chunk_rows):
    """``chunk_rows`` as an int, or a ValueError if it is not a positive integer."""
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, numbers.Integral) \
            or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer; got {chunk_rows!r}.")
    return int(chunk_rows)


def check_dtype(dtype):
    """``dtype`` as a numpy dtype, float64 or float32, or a ValueError."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"dtype must be float64 or float32; got {dtype}.")
    return dtype


def check_rank(rank, world_size):
    """``(rank, world_size)`` as ints, or a ValueError unless ``0 <= rank < world_size``."""
    if not isinstance(world_size, numbers.Integral) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer; got {world_size!r}.")
    if not isinstance(rank, numbers.Integral) or not 0 <= rank < world_size:
        raise ValueError(
            f"rank must be an integer in [0, world_size={world_size}); got {rank!r}.")
    return int(rank), int(world_size)


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def warn_user(message, category=UserWarning):
    """``warnings.warn`` pointed at the first frame outside rffkit, the user's call, however deep
    inside the package (``open_table``, ``TableSource.fit_encoding``, the command line) it arises."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)
