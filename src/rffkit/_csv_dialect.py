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
        fields = [field.strip().strip('"') for line in lines[1:201] for field in line.split(delimiter)]
        commas = delimiter != "," and any(re.fullmatch(r"[+-]?\d*,\d+", field) for field in fields)
        decimal = "," if commas and not any(re.fullmatch(r"[+-]?\d*\.\d+", field) for field in fields) else "."
    for name, value in (("delimiter", delimiter), ("decimal", decimal)):
        if not isinstance(value, str) or len(value) != 1 or value in "\r\n\"":
            raise ValueError(f"open_table: {name} must be one character other than a quote or a line end; "
                             f"got {value!r}.")
    if delimiter == decimal:
        raise ValueError(f"open_table: the delimiter and the decimal point are both {delimiter!r}.")
    return CSVDialect(delimiter, decimal)


def first_lines(path):
    """The complete lines of a CSV file's first 64 KiB (decompressed), without a byte-order mark."""
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            head = stream.read(65536)
    except (pa.ArrowException, OSError) as exc:
        raise read_error(path, exc) from None
    lines = head.decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines()
    return lines[:-1] if len(head) == 65536 and len(lines) > 1 else lines


def check_header(path, dialect):
    """Raise when the header of the CSV file ``path`` holds no ``dialect.delimiter`` (the table's) but
    another of the delimiters: a file of the table written in another dialect."""
    header = (first_lines(path) or [""])[0]
    counts = {candidate: header.count(candidate) for candidate in (",", *_DELIMITERS) if candidate != dialect.delimiter}
    other = max(counts, key=counts.get)
    if counts[other] and dialect.delimiter not in header:
        raise DataSourceError(
            f"the header of {path!r} delimits its fields by {other!r}, not by {dialect.delimiter!r} (the delimiter "
            "given, or that of the table's first file): the files of one table share one delimiter and decimal "
            "point; rewrite the files that differ, or give the delimiter the files use (delimiter= in Python, "
            "--delimiter on the command line).")
