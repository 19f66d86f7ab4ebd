"""How table columns become numbers: :class:`ColumnEncoding` (the pass over the columns that fits
one is :func:`rffkit._learn_encoding.learn_encoding`; the kinds of Arrow columns and the number
each kind becomes are in :mod:`rffkit._column_kinds`).

Users import :class:`ColumnEncoding` from :mod:`rffkit.io`, which re-exports it (and which it
names as its module).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._column_kinds import (
    TIME_UNITS, as_text, category_text, codes_as_numbers, column_kind, number_text, numbers,
)
from ._io_base import (
    ColumnNotFoundError,
    DataSourceError,
    MissingValueError,
    UnknownCategoryError,
    at_row,
    check_finite,
    check_missing,
    check_no_nulls,
    listing,
    public_in_io,
    short,
    warn_user,
)
from ._text_dates import ISO_8601, text_column_numbers

__all__ = ["ColumnEncoding", "warn_unknown_categories", "MISSING"]

#: The name of the output column of a missing value: a text column's category, a numeric column's indicator.
MISSING = "(missing)"


@public_in_io
@dataclass(frozen=True)
class ColumnEncoding:
    """How table columns become the numeric feature block ``X``.

    Numeric and boolean columns pass through as one float column each (booleans as 0/1,
    timestamps and dates as days since 1970-01-01, times of day as hours, durations as
    seconds; a text column not in ``categories`` is parsed as numbers, as in new data whose
    numbers were written as text, and a value that is no number is an error);
    each column named in ``categories`` is one-hot encoded into one output column per
    category, in the order given (sorted when learned by :meth:`TableSource.fit_encoding`).
    A column of codes (numbers, booleans or dates named in ``categories``: a subject or
    site identifier, a ZIP code) is matched by the text of its values, so its categories are
    strings (``"4"``, ``"2.5"``, ``"true"``, ``"2020-01-31"``; NaN is a missing value). A text
    column in ``dates`` (or one of numbers such as 20200131) is read as dates in its ``strptime``
    format, as days since 1970-01-01, and a text column in ``times`` as ISO 8601 dates.

    Missing values (nulls, and NaN in numeric columns) are an error by default. With
    ``missing='encode'`` they become inputs the model can use: mean imputation with a
    missing-value indicator, which is consistent for prediction (Josse et al., 2019): in a text
    column a null is a category of its own (``None`` among ``categories``, output
    ``"column=(missing)"``); in a numeric or boolean column it is replaced by the
    column's value in ``fill_values`` (the training mean, when learned), and each column
    of ``indicators`` gets a second output, ``"column=(missing)"``, which is 1 on those
    rows. A column's outputs, indicator included, form one group of :attr:`groups`.

    Parameters
    ----------
    columns : sequence of str
        Input columns, in output order.
    categories : mapping of str to sequence, default={}
        Categories of the one-hot encoded columns (``None``: the missing value, with
        ``missing='encode'``).
    handle_unknown : {'ignore', 'error'}, default='ignore'
        A category not listed gives an all-zero row of that column's block ('ignore') or
        raises :class:`UnknownCategoryError` naming the column, value and row ('error').
    missing : {'error', 'encode'}, default='error'
        'error': a missing value raises :class:`MissingValueError` naming the column and
        row. 'encode': as above.
    fill_values : mapping of str to float, default={}
        With ``missing='encode'``, the value of a missing entry of each numeric column; a
        missing value in a numeric column without one raises :class:`MissingValueError`.
    indicators : sequence of str, default=()
        With ``missing='encode'``, the numeric columns (among ``fill_values``) that get a
        missing-value indicator output.
    dates : mapping of str to str, default={}
        Text columns of dates and their ``strptime`` formats, such as ``"%m/%d/%Y"`` (found
        by :func:`rffkit._text_dates.date_format` when learned); a value that is no such
        date is an error naming it and its row.
    times : sequence of str, default=()
        Columns the files gave as timestamps or dates (recorded when learned), which new
        data may write as ISO 8601 text (2020-01-31, 2020-01-31T10:30:00) instead.

    Attributes
    ----------
    output_names : list of str
        One per output column: the column name, ``"column=category"``, or
        ``"column=(missing)"``.
    groups : list of str
        For every output column, the input column it comes from.

    Examples
    --------
    >>> from rffkit.io import ColumnEncoding
    >>> encoding = ColumnEncoding(["age", "color"], {"color": ["blue", "red"]})
    >>> encoding.output_names
    ['age', 'color=blue', 'color=red']
    >>> encoding.transform({"age": [30, 41], "color": ["red", "green"]}).tolist()
    [[30.0, 0.0, 1.0], [41.0, 0.0, 0.0]]
    >>> encoding = ColumnEncoding(["age", "color"], {"color": ["red", None]}, missing="encode",
    ...                           fill_values={"age": 35.5}, indicators=["age"])
    >>> encoding.output_names
    ['age', 'age=(missing)', 'color=red', 'color=(missing)']
    >>> encoding.transform({"age": [30, None], "color": [None, "red"]}).tolist()
    [[30.0, 0.0, 0.0, 1.0], [35.5, 1.0, 1.0, 0.0]]
    """

    columns: tuple
    categories: dict = field(default_factory=dict)
    handle_unknown: str = "ignore"
    missing: str = "error"
    fill_values: dict = field(default_factory=dict)
    indicators: tuple = ()
    dates: dict = field(default_factory=dict)
    times: tuple = ()

    def __post_init__(self):
        columns = tuple(str(column) for column in self.columns)
        if len(set(columns)) != len(columns):
            raise ValueError(f"ColumnEncoding: columns must be distinct; got {listing(columns)}.")
        try:
            categories = {str(name): tuple(map(category_text, values))
                          for name, values in dict(self.categories).items()}
        except ValueError as error:
            raise ValueError(f"ColumnEncoding: {error}") from None
        stray = [name for name in categories if name not in columns]
        if stray:
            raise ValueError(
                f"ColumnEncoding: categories given for {listing(stray)}, not among the columns.")
        if self.handle_unknown not in ("ignore", "error"):
            raise ValueError("ColumnEncoding: handle_unknown must be 'ignore' or 'error'; "
                             f"got {self.handle_unknown!r}.")
        check_missing(self.missing, "ColumnEncoding")
        fill_values = {str(name): float(value) for name, value in dict(self.fill_values).items()}
        indicators = tuple(str(name) for name in self.indicators)
        if self.missing == "error":
            if fill_values or indicators or any(None in values for values in categories.values()):
                raise ValueError("ColumnEncoding: fill_values, indicators and a None category need "
                                 "missing='encode'.")
        stray = [name for name in fill_values if name not in columns or name in categories]
        if stray:
            raise ValueError(f"ColumnEncoding: fill_values given for {listing(stray)}, not among the "
                             "numeric columns.")
        if not all(np.isfinite(value) for value in fill_values.values()):
            raise ValueError("ColumnEncoding: every fill value must be finite.")
        stray = [name for name in indicators if name not in fill_values]
        if stray or len(set(indicators)) != len(indicators):
            raise ValueError(f"ColumnEncoding: indicators must be distinct columns of fill_values; got "
                             f"{listing(indicators)}.")
        dates = {str(name): str(format) for name, format in dict(self.dates).items()}
        times = tuple(str(name) for name in self.times)
        stray = [name for name in (*dates, *times) if name not in columns or name in categories or name in times
                 and name in dates]
        if stray:
            raise ValueError(f"ColumnEncoding: dates or times given for {listing(stray)}: not among the columns, "
                             "one-hot encoded, or in both.")
        object.__setattr__(self, "times", tuple(name for name in columns if name in times))
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "dates", dates)
        object.__setattr__(self, "fill_values", fill_values)
        object.__setattr__(self, "indicators", tuple(name for name in columns if name in indicators))

    @property
    def output_names(self):
        """Names of the output columns: the column, or ``"column=category"`` (list of str)."""
        names = []
        for column in self.columns:
            if column in self.categories:
                names.extend(f"{column}={MISSING if value is None else value}" for value in self.categories[column])
            else:
                names.append(column)
                if column in self.indicators:
                    names.append(f"{column}={MISSING}")
        return names

    @property
    def groups(self):
        """For every output column, the input column it comes from (list of str)."""
        return [column for column in self.columns for _ in range(self._width(column))]

    def _width(self, column):
        """The number of output columns of ``column``."""
        if column in self.categories:
            return len(self.categories[column])
        return 2 if column in self.indicators else 1

    def to_dict(self):
        """A JSON-ready description of the encoding; :meth:`from_dict` rebuilds it.

        Returns
        -------
        description : dict
            ``"columns"`` (list of str), ``"handle_unknown"`` (str), ``"categories"``
            (dict of column to list of categories, ``None`` for the missing value) and,
            with ``missing='encode'``, ``"missing"``, ``"fill_values"`` (dict of column to
            float) and ``"indicators"`` (list of str); with text columns of dates, ``"dates"``
            (dict of column to format); with columns of timestamps or dates, ``"times"``.
        """
        description = {"columns": list(self.columns), "handle_unknown": self.handle_unknown,
                       "categories": {name: list(values) for name, values in self.categories.items()}}
        if self.missing != "error":
            description.update(missing=self.missing, fill_values=dict(self.fill_values),
                               indicators=list(self.indicators))
        if self.dates:
            description.update(dates=dict(self.dates))
        if self.times:  # readers that know no "times" read such columns as the files type them
            description.update(times=list(self.times))
        return description

    @classmethod
    def from_dict(cls, description):
        """Rebuild an encoding from the output of :meth:`to_dict`.

        Parameters
        ----------
        description : dict
            ``"columns"``, and optionally ``"categories"`` (default none),
            ``"handle_unknown"`` (default 'ignore'), ``"missing"`` (default 'error'),
            ``"fill_values"``, ``"indicators"``, ``"dates"`` and ``"times"`` (default none).

        Returns
        -------
        encoding : ColumnEncoding
            Equal to the encoding that wrote ``description``.
        """
        return cls(description["columns"], description.get("categories", {}),
                   description.get("handle_unknown", "ignore"), description.get("missing", "error"),
                   description.get("fill_values", {}), description.get("indicators", ()), description.get("dates", {}),
                   description.get("times", ()))

    def transform(self, table, *, dtype=np.float64, rows=None, unknown=None):
        """Encode a table into ``X`` of shape (m, len(output_names)).

        Parameters
        ----------
        table : pyarrow.Table, pyarrow.RecordBatch, dict of arrays or pandas.DataFrame
            Must hold every column of ``self.columns``; others are ignored.
        dtype : {numpy.float64, numpy.float32}, default=numpy.float64
            Dtype of ``X``.
        rows : ndarray of int, optional
            Global row indices, used only to name the row in error messages.
        unknown : dict, optional
            Filled, under ``handle_unknown='ignore'``, with the values of one-hot encoded
            columns that are none of their categories: ``{column: {value: rows}}`` (value None
            for a missing one), added to what it holds, so that one dict can tally many tables.

        Returns
        -------
        X : ndarray of shape (m, len(output_names))
            C-contiguous; a one-hot block holds a single 1 per row (none for an unknown
            category under ``handle_unknown='ignore'``). In a column of codes, text that writes
            a known code as another number ("4.0", " 4") is that code.

        Raises
        ------
        ColumnNotFoundError
            A column of ``self.columns`` is not in ``table``.
        MissingValueError
            A null or NaN (with ``missing='error'``, or in a numeric column without a fill
            value); the message names the column and row.
        UnknownCategoryError
            An unseen category with ``handle_unknown='error'``.
        """
        if not isinstance(table, (pa.Table, pa.RecordBatch)):
            table = pa.table(table)
        missing = [column for column in self.columns if column not in table.column_names]
        if missing:
            raise ColumnNotFoundError(f"column {missing[0]!r} is not in the table; it has "
                                      f"{listing(table.column_names)}.")
        # Filled one output column at a time as rows of X.T (contiguous writes), then copied
        # once into C order: about four times faster than writing strided columns of X.
        X_transposed = np.zeros((len(self.groups), table.num_rows), dtype=dtype)
        start = 0
        encode = self.missing == "encode"
        for column in self.columns:
            array = as_text(table.column(column)) if column in self.categories else table.column(column)
            if not encode:
                check_no_nulls(array, column, rows)
            if column in self.categories:
                width = len(self.categories[column])
                self._one_hot(array, column, X_transposed[start:start + width], rows, unknown)
                start += width
                continue
            kind = column_kind(array.type)
            if kind not in ("integer", "float", "bool", "null", "categorical", *TIME_UNITS):
                raise DataSourceError(
                    f"column {column!r} has type {array.type}, which is not numeric, and the "
                    "encoding lists no categories for it; fit an encoding that covers it "
                    "(TableSource.fit_encoding), or leave the column out of the features.")
            if kind == "categorical" or (column in self.dates and kind not in TIME_UNITS):  # 20200131 too
                form = ISO_8601 if column in self.times else self.dates.get(column)
                values = text_column_numbers(array, column, rows, form)
            else:
                values = numbers(array)
            if encode:
                absent = np.isnan(values)
                if absent.any():
                    if column not in self.fill_values:
                        position = int(np.flatnonzero(absent)[0])
                        raise MissingValueError(
                            f"column {column!r} holds a missing value at row {at_row(position, rows)} and the "
                            "encoding has no value to fill in for it; refit the encoding on data that "
                            "cover this column (TableSource.fit_encoding(missing='encode')).")
                    values[absent] = self.fill_values[column]
                    if column not in self.indicators:
                        warnings.warn(
                            f"column {column!r} holds missing values, which the data the encoding was fitted on "
                            "did not have in it: they are filled in with its mean there, without an indicator "
                            "column for the model to tell them apart.", UserWarning, stacklevel=2)
                if column in self.indicators:
                    X_transposed[start + 1] = absent
            check_finite(values, column, rows)
            X_transposed[start] = values
            start += self._width(column)
        return np.ascontiguousarray(X_transposed.T)

    def _one_hot(self, array, column, block, rows, unknown=None):
        if array.null_count and self.missing == "encode" and None not in self.categories[column]:
            # a null the training data did not have in this column: an unknown category
            if self.handle_unknown == "error":
                position = int(np.flatnonzero(pc.is_null(array).to_numpy(zero_copy_only=False))[0])
                raise UnknownCategoryError(
                    f"column {column!r} holds a missing value at row {at_row(position, rows)}, which the "
                    "encoding's categories do not include (the training data had none in this column); "
                    "use handle_unknown='ignore'.")
        try:
            value_set = pa.array(self.categories[column], type=array.type)
        except (pa.ArrowException, TypeError, ValueError):
            raise DataSourceError(
                f"column {column!r} has type {array.type}, which does not match the encoding's "
                "categories; refit the encoding on these data.") from None
        index = pc.fill_null(pc.index_in(array, value_set=value_set, skip_nulls=False), -1)
        index = np.asarray(index.to_numpy(zero_copy_only=False), dtype=np.int64)
        known = index >= 0
        if not known.all() and column_kind(array.type) == "categorical":  # "4.0" or " 4" for the code 4, "4" for "4.0"
            written = pc.index_in(number_text(array), value_set=codes_as_numbers(value_set), skip_nulls=True)
            index[~known] = np.asarray(pc.fill_null(written, -1).to_numpy(zero_copy_only=False))[~known]
            known = index >= 0
        if unknown is not None and not known.all():
            tally = unknown.setdefault(column, {})
            for count in pc.value_counts(array.filter(pa.array(~known))).to_pylist():
                tally[count["values"]] = tally.get(count["values"], 0) + count["counts"]
        if self.handle_unknown == "error" and not known.all():
            position = int(np.flatnonzero(~known)[0])
            raise UnknownCategoryError(
                f"column {column!r} holds {short(array[position].as_py())} at row "
                f"{at_row(position, rows)}, a category the encoding was not fitted on (it knows "
                f"{len(value_set)}: {listing(self.categories[column], 5)}); refit the encoding or "
                "use handle_unknown='ignore'.")
        block[index[known], np.flatnonzero(known)] = 1.0


def warn_unknown_categories(unknown, encoding, rows_word="row", lacking="the model was not fitted on"):
    """One warning per one-hot encoded column whose data held categories ``encoding`` does not know
    (``unknown``, as :meth:`ColumnEncoding.transform` fills it): how many rows, the values, and the
    column's categories, which those rows are none of."""
    def named(values):
        return [MISSING if value is None else value for value in values]

    for column, counts in unknown.items():
        rows, known = sum(counts.values()), encoding.categories[column]
        values = named(sorted(counts, key=counts.get, reverse=True))
        warn_user(f"column {column!r}: {rows:,} {rows_word}{'s hold' if rows > 1 else ' holds'} {len(values)} "
                  f"categor{'ies' if len(values) > 1 else 'y'} {lacking} ({listing(values, 5)}); the model sees "
                  f"{'those rows' if rows > 1 else 'that row'} as none of the column's {len(known)} categories "
                  f"({listing(named(known), 5)}).")
