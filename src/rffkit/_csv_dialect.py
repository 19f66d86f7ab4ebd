"""How a CSV file writes its fields: :class:`CSVDialect`, found by :func:`csv_dialect` from the
file's first lines and checked against each further file of a table by :func:`check_header`."""

from __future__ import annotations

import re
from typing import NamedTuple

import pyarrow as pa

from ._io_base import DataSourceError, public_in_io, read_error

__all__ = ["CSVDialect", "check_header", "csv_dialect", "first_lines"]


@public_in_io
class CSVDialect(NamedTuple):
    """How a CSV file writes its fields (:func:`csv_dialect` finds it; ``TableSource.dialect``).

    Parameters
    ----------
    delimiter : str, default=','
        The character between fields (``';'`` in the CSV files of many European locales).
    decimal : str, default='.'
        The decimal point of numbers (``','`` in those files: ``0,5``).

    Examples
    --------
    >>> from rffkit.io import CSVDialect
    >>> CSVDialect(";", ",")
    CSVDialect(delimiter=';', decimal=',')
    """

    delimiter: str = ","
    decimal: str = "."


#: The delimiters a CSV file's header is searched for, after the comma.
_DELIMITERS = (";", "\t", "|")


def csv_dialect(path, file_format, delimiter=None, decimal=None):
    """The :class:`CSVDialect` of a CSV or TSV file (None for Parquet): ``delimiter`` and ``decimal``
    where given, else guessed from the file's first 64 KiB. The delimiter: a tab for TSV; for CSV a
    comma when the header holds one, else the one of ``;``, tab and ``|`` it holds most of. The
    decimal point: a comma when the delimiter is not, some field of the first 200 rows is a number
    written with a decimal comma (``0,5``) and none with a decimal point."""
    if file_format == "parquet":
        return None
    lines = [] if delimiter is not None and decimal is not None else first_lines(path)
    if delimiter is None:
        header = lines[0] if lines else ""
        counts = {candidate: header.count(candidate) for candidate in _DELIMITERS}
        delimiter = "\t" if file_format == "tsv" else "," if "," in header or not max(counts.values()) else max(
            counts, key=counts.get)
    if decimal is None:
        decimal = "," if _decimal_written(lines, delimiter)[0] == "," else "."
    for name, value in (("delimiter", delimiter), ("decimal", decimal)):
        if not isinstance(value, str) or len(value) != 1 or value in "\r\n\"":
            raise ValueError(f"open_table: {name} must be one character other than a quote or a line end; "
                             f"got {value!r}.")
    if delimiter == decimal:
        raise ValueError(f"open_table: the delimiter and the decimal point are both {delimiter!r}.")
    return CSVDialect(delimiter, decimal)


def _decimal_written(lines, delimiter):
    """``(decimal point, example)``: the decimal point of the numbers the rows ``lines[1:201]`` of a CSV
    file delimited by ``delimiter`` write, and a field that writes one, when some write one (a comma
    only where it is not the delimiter) and none the other; else ``(None, None)``."""
    fields = [field.strip().strip('"') for line in lines[1:201] for field in line.split(delimiter)]
    commas = [field for field in fields if delimiter != "," and re.fullmatch(r"[+-]?\d*,\d+", field)]
    points = [field for field in fields if re.fullmatch(r"[+-]?\d*\.\d+", field)]
    return ((",", commas[0]) if commas and not points else (".", points[0]) if points and not commas
            else (None, None))


def first_lines(path):
    """The complete lines of a CSV file's first 64 KiB (decompressed), without a byte-order mark."""
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            head = stream.read(65536)
    except (pa.ArrowException, OSError) as exc:
        raise read_error(path, exc) from None
    if b"\x00" in head:  # text in UTF-8 holds no NUL byte; binary data and UTF-16 text do
        raise DataSourceError(f"{str(path)!r} is not a CSV text file: its first bytes hold NUL bytes, as binary data "
                              "(a Parquet, Excel or compressed file under another name) or UTF-16 text do; give "
                              "the file its format's name (.parquet), or save the table as CSV in UTF-8.")
    lines = head.decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines()
    return lines[:-1] if len(head) == 65536 and len(lines) > 1 else lines


def check_header(path, dialect, first=None):
    """Raise when the CSV file ``path`` is written in another dialect than ``dialect`` (the table's: given, or
    that of its first file, ``first``): its header holds no ``dialect.delimiter`` but another of the
    delimiters, or its first rows write decimal numbers with the other decimal point only."""
    lines = first_lines(path)
    header = (lines or [""])[0]
    counts = {candidate: header.count(candidate) for candidate in (",", *_DELIMITERS) if candidate != dialect.delimiter}
    other = max(counts, key=counts.get)
    delimiter = other if counts[other] and dialect.delimiter not in header else dialect.delimiter
    decimal, example = _decimal_written(lines, delimiter)
    if delimiter == dialect.delimiter and decimal in (None, dialect.decimal):
        return
    table = "the table's first file" + ("" if first is None else f", {first!r},")
    differ = []  # (what differs, the setting's name, its keyword)
    if delimiter != dialect.delimiter:
        differ.append((f"the header of {path!r} delimits its fields by {delimiter!r}, not by {dialect.delimiter!r} "
                       f"(the delimiter given, or that of {table.rstrip(',')})", "delimiter", "delimiter"))
    if decimal not in (None, dialect.decimal):
        known, shown = _decimal_written(first_lines(first), dialect.delimiter) if first else (None, None)
        table = "the table's first file" if differ else table  # named already
        how = (f"as {table} writes them: {shown!r}" if known == dialect.decimal
               else "the decimal point given" if known or dialect.decimal != "."
               else f"given, or the default: {table} writes no decimal number in its first rows")
        differ.append((("it" if differ else repr(path)) + f" writes its numbers with the decimal point {decimal!r} "
                       f"({example!r}), not {dialect.decimal!r} ({how})", "decimal point", "decimal"))
    whats, names, keys = zip(*differ)
    raise DataSourceError(
        f"{', and '.join(whats)}: the files of one table share one delimiter and decimal point; rewrite the files "
        f"that differ, or give the {' and '.join(names)} the files use ({' and '.join(k + '=' for k in keys)} in "
        f"Python, {' and '.join('--' + k for k in keys)} on the command line).")
