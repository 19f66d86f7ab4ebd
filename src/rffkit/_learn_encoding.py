"""The pass over a table's columns that learns a :class:`~rffkit._encoding.ColumnEncoding`: the
categories of the text columns, checked for numbers written as text and for identifiers, and with
``missing='encode'`` the fill values and indicators of the numeric ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._column_kinds import as_text, column_kind, numbers, text_values
from ._io_base import (
    DECIMAL_IN_FILE, LEAVE_OUT, NAME_CATEGORICAL, NUMBERS_IN_TEXT_MIN, PLACEHOLDER_IN_FILE, DataSourceError,
    NumbersInText, TooManyCategoriesError, check_finite, warn_user,
)
from ._row_labels import RowNumbers
from ._text_dates import NAME_ANOTHER_FORM, text_column_numbers

__all__ = ["learn_encoding"]

#: A text column with more distinct values than this share of the rows is taken for an identifier.
IDENTIFIER_SHARE = 0.5
#: On fewer rows than ``NUMBERS_IN_TEXT_MIN``, a text column with a different value on each of at least
#: this many rows is taken for an identifier.
IDENTIFIER_MIN_ROWS = 8


def learn_encoding(batches, categorical, numeric, max_categories, missing="error", learn_rows=None, dates=None,
                   declared=(), decimal=DECIMAL_IN_FILE):
    """What :class:`ColumnEncoding` learns from data, in one pass: its keyword arguments.

    ``batches`` yields ``(batch, rows)``: an Arrow record batch holding the ``categorical``
    columns (text, or codes of any kind :func:`rffkit._column_kinds.as_text` reads) and the
    ``numeric`` ones (numbers and booleans, or text columns of dates in ``dates``, column to
    format, which are read as :class:`ColumnEncoding` reads them), and its global rows.
    ``learn_rows(batch, rows)``, when given, is the boolean mask of the batch's rows learned
    from (the training rows of a split): the categories, means and indicators come from those rows
    only, while every row is checked (nulls under ``missing='error'``, numbers in text,
    infinite values), so that a row left out of the learning still fails here and not
    after a fit.

    * The categories of the text columns: every value seen, sorted (a column of numeric
      codes by number; ``None`` last, for a null, with ``missing='encode'``). A column of
      more than ``max_categories`` values raises, and so does one that
      :class:`NumbersInText` finds to be numbers spoilt by text (past ``max_categories``, a
      column that still looks numeric is read to the end, so that the error names the text
      of a later chunk; a column in ``declared``, named categorical by the user, is not checked;
      ``decimal`` advises on numbers written with a decimal comma, as the file's format allows);
      a column with a distinct
      value on more than ``IDENTIFIER_SHARE`` of the rows (and more than
      ``NUMBERS_IN_TEXT_MIN`` values, or a different one on each of at least
      ``IDENTIFIER_MIN_ROWS`` rows) draws a warning, as an identifier.
    * With ``missing='encode'``, the mean of each numeric column over its values (its fill
      value; 0 for a column with none) and which of them have a missing value (null or
      NaN; they get an indicator). A numeric column that holds the row numbers draws a
      warning (:class:`RowNumbers`). With ``missing='error'`` only the dates among the numeric
      columns are read (a value that is no date of its form raises here, with the advice of a
      fit rather than of new data), and a null in a text column raises :class:`MissingValueError`.

    Returns
    -------
    dict
        ``categories`` and, with ``missing='encode'``, ``missing``, ``fill_values`` and
        ``indicators``.
    """
    encode = missing == "encode"
    seen = {column: set() for column in categorical}
    checks = {column: NumbersInText(column) for column in categorical}
    too_many = []  # past max_categories, but numbers so far: read on, to name the text among them
    sums = {column: [0.0, 0] for column in (numeric if encode else ())}  # sum and count of the values
    labels = [RowNumbers(column) for column in sums]

    def too_many_categories(column):
        return TooManyCategoriesError(f"column {column!r} has more than max_categories={max_categories} "
                                      f"distinct values; {LEAVE_OUT}, or raise max_categories.", column, max_categories)

    dates = dates or {}
    date_checks = [] if encode else [column for column in numeric if column in dates]  # read, but not summed

    def read(array, column, rows):
        if column not in dates:
            return numbers(array)
        return text_column_numbers(array, column, rows, dates[column], advice=NAME_ANOTHER_FORM)

    n_rows = 0
    numeric_codes = set()  # columns of numbers read as codes: their categories sort as numbers
    for batch, rows in batches:
        mask = None if learn_rows is None else learn_rows(batch, rows)
        sample = batch if mask is None else batch.filter(pa.array(mask))
        n_rows += sample.num_rows
        for column in categorical:
            kind = column_kind(batch.column(column).type)
            if kind in ("integer", "float"):
                numeric_codes.add(column)
            distinct, locate = text_values(as_text(batch.column(column)), column, rows, nulls=encode)
            if kind == "categorical" and column not in declared:  # codes are numbers by design
                checks[column].update(distinct, locate)
            if column in too_many:
                continue
            if sample is not batch:
                distinct = pc.unique(as_text(sample.column(column))).to_pylist() if sample.num_rows else []
            seen[column].update(distinct)
            if len(seen[column]) > max_categories:
                if checks[column].message() is None:
                    raise too_many_categories(column)
                too_many.append(column)
        for (column, totals), label in zip(sums.items(), labels):
            values = read(batch.column(column), column, rows)
            present = ~np.isnan(values)
            check_finite(values[present], column, None if rows is None else rows[present])
            label.update(values, rows)
            if mask is not None:  # the learned rows' values
                values, present = values[mask], present[mask]
            totals[0] += float(values[present].sum())
            totals[1] += int(present.sum())
        for column in date_checks:
            read(batch.column(column), column, rows)
    for column in categorical:
        message = checks[column].message(PLACEHOLDER_IN_FILE, NAME_CATEGORICAL, decimal)
        if message is not None:
            raise DataSourceError(f"{message}; or {LEAVE_OUT}.")
    if too_many:
        raise too_many_categories(too_many[0])
    _warn_identifiers(seen, n_rows)

    def order(column):
        if column in numeric_codes:
            return lambda value: (value is None, 0.0 if value is None else float(value), value or "")
        return lambda value: (value is None, value or "")

    learned = {"categories": {column: sorted(values, key=order(column)) for column, values in seen.items()}}
    if encode:
        for label in labels:
            label.warn()
        for column, (_, count) in sums.items():
            if count == 0 and n_rows:
                warn_user(f"column {column!r} has no value in {n_rows:,} rows: it carries nothing for the model; "
                          f"{LEAVE_OUT}.")
        learned.update(missing="encode",
                       fill_values={column: total / count if count else 0.0 for column, (total, count) in sums.items()},
                       indicators=[column for column, (_, count) in sums.items() if count < n_rows])
    return learned


def _warn_identifiers(seen, n_rows):
    """Warn of each text column whose distinct values (``seen``: column to the set of them, over ``n_rows``
    rows) make it an identifier: more than ``IDENTIFIER_SHARE`` of the rows, and more than
    ``NUMBERS_IN_TEXT_MIN`` values or a different one on each of at least ``IDENTIFIER_MIN_ROWS`` rows."""
    for column, values in seen.items():
        # on a small table a name in every row (R's row names: car, canton, player) is one too
        unique = len(values) == n_rows >= IDENTIFIER_MIN_ROWS
        if (len(values) > NUMBERS_IN_TEXT_MIN or unique) and len(values) > IDENTIFIER_SHARE * n_rows:
            warn_user(f"column {column!r} has {len(values):,} distinct values in {n_rows:,} rows: an identifier? "
                      f"Its one-hot columns, about one per row, can only memorise the training rows; {LEAVE_OUT}.")
