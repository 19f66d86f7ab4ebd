"""How table columns become numbers: the kinds of Arrow columns, :class:`ColumnEncoding`, and
:func:`learn_categories`, the pass over the text columns that fits one.

Users import :class:`ColumnEncoding` from :mod:`rffkit.io`, which re-exports it (and which it
names as its module).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._io_base import (
    NUMBERS_IN_TEXT_MIN,
    PLACEHOLDER_IN_FILE,
    ColumnNotFoundError,
    DataSourceError,
    NumbersInText,
    UnknownCategoryError,
    at_row,
    check_finite,
    check_no_nulls,
    listing,
    public_in_io,
    short,
)

__all__ = ["ColumnEncoding", "column_kind", "merge_kinds", "learn_categories", "text_values", "LEAVE_OUT"]

#: A text column with more distinct values than this share of the rows is taken for an identifier.
IDENTIFIER_SHARE = 0.5
#: How the messages about a column say to do without it, in Python and on the command line.
LEAVE_OUT = "leave it out (features=[...] in Python, --features on the command line)"


def column_kind(data_type):
    """Coarse kind of an Arrow type: what rffkit can do with the column.

    One of 'integer', 'float' (decimals too), 'bool', 'null', 'categorical' (strings and
    dictionaries) and 'unsupported'.
    """
    if pa.types.is_integer(data_type):
        return "integer"
    if pa.types.is_floating(data_type) or pa.types.is_decimal(data_type):
        return "float"
    if pa.types.is_boolean(data_type):
        return "bool"
    if pa.types.is_null(data_type):
        return "null"
    string_view = getattr(pa.types, "is_string_view", lambda _: False)
    if (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)
            or string_view(data_type) or pa.types.is_dictionary(data_type)):
        return "categorical"
    return "unsupported"


def merge_kinds(first, second):
    """The kind of a column that is ``first`` in one file and ``second`` in another, or None."""
    if first == second or second == "null":
        return first
    if first == "null":
        return second
    if {first, second} == {"integer", "float"}:
        return "float"
    return None


@public_in_io
@dataclass(frozen=True)
class ColumnEncoding:
    """How table columns become the numeric feature block ``X``.

    Numeric and boolean columns pass through as one float column each (booleans as 0/1);
    each column named in ``categories`` is one-hot encoded into one output column per
    category, in the order given (sorted when learned by :meth:`TableSource.fit_encoding`).

    Parameters
    ----------
    columns : sequence of str
        Input columns, in output order.
    categories : mapping of str to sequence, default={}
        Categories of the one-hot encoded columns.
    handle_unknown : {'ignore', 'error'}, default='ignore'
        A category not listed gives an all-zero row of that column's block ('ignore') or
        raises :class:`UnknownCategoryError` naming the column, value and row ('error').

    Attributes
    ----------
    output_names : list of str
        One per output column: the column name, or ``"column=category"``.
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
    """

    columns: tuple
    categories: dict = field(default_factory=dict)
    handle_unknown: str = "ignore"

    def __post_init__(self):
        columns = tuple(str(column) for column in self.columns)
        if len(set(columns)) != len(columns):
            raise ValueError(f"ColumnEncoding: columns must be distinct; got {listing(columns)}.")
        categories = {str(name): tuple(values) for name, values in dict(self.categories).items()}
        stray = [name for name in categories if name not in columns]
        if stray:
            raise ValueError(
                f"ColumnEncoding: categories given for {listing(stray)}, not among the columns.")
        if self.handle_unknown not in ("ignore", "error"):
            raise ValueError("ColumnEncoding: handle_unknown must be 'ignore' or 'error'; "
                             f"got {self.handle_unknown!r}.")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "categories", categories)

    @property
    def output_names(self):
        """Names of the output columns: the column, or ``"column=category"`` (list of str)."""
        names = []
        for column in self.columns:
            if column in self.categories:
                names.extend(f"{column}={value}" for value in self.categories[column])
            else:
                names.append(column)
        return names

    @property
    def groups(self):
        """For every output column, the input column it comes from (list of str)."""
        return [column for column in self.columns for _ in self.categories.get(column, (None,))]

    def to_dict(self):
        """A JSON-ready description of the encoding; :meth:`from_dict` rebuilds it.

        Returns
        -------
        description : dict
            ``"columns"`` (list of str), ``"handle_unknown"`` (str) and ``"categories"``
            (dict of column to list of categories).
        """
        return {"columns": list(self.columns), "handle_unknown": self.handle_unknown,
                "categories": {name: list(values) for name, values in self.categories.items()}}

    @classmethod
    def from_dict(cls, description):
        """Rebuild an encoding from the output of :meth:`to_dict`.

        Parameters
        ----------
        description : dict
            ``"columns"``, and optionally ``"categories"`` (default none) and
            ``"handle_unknown"`` (default 'ignore').

        Returns
        -------
        encoding : ColumnEncoding
            Equal to the encoding that wrote ``description``.
        """
        return cls(description["columns"], description.get("categories", {}),
                   description.get("handle_unknown", "ignore"))

    def transform(self, table, *, dtype=np.float64, rows=None):
        """Encode a table into ``X`` of shape (m, len(output_names)).

        Parameters
        ----------
        table : pyarrow.Table, pyarrow.RecordBatch, dict of arrays or pandas.DataFrame
            Must hold every column of ``self.columns``; others are ignored.
        dtype : {numpy.float64, numpy.float32}, default=numpy.float64
            Dtype of ``X``.
        rows : ndarray of int, optional
            Global row indices, used only to name the row in error messages.

        Returns
        -------
        X : ndarray of shape (m, len(output_names))
            C-contiguous; a one-hot block holds a single 1 per row (none for an unknown
            category under ``handle_unknown='ignore'``).

        Raises
        ------
        ColumnNotFoundError
            A column of ``self.columns`` is not in ``table``.
        MissingValueError
            A null or NaN; the message names the column and row.
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
        for column in self.columns:
            array = table.column(column)
            check_no_nulls(array, column, rows)
            if column in self.categories:
                width = len(self.categories[column])
                self._one_hot(array, column, X_transposed[start:start + width], rows)
                start += width
                continue
            if column_kind(array.type) not in ("integer", "float", "bool", "null"):
                raise DataSourceError(
                    f"column {column!r} has type {array.type}, which is not numeric, and the "
                    "encoding lists no categories for it; fit an encoding that covers it "
                    "(TableSource.fit_encoding), or leave the column out of the features.")
            values = pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
            check_finite(values, column, rows)
            X_transposed[start] = values
            start += 1
        return np.ascontiguousarray(X_transposed.T)

    def _one_hot(self, array, column, block, rows):
        if pa.types.is_dictionary(array.type):
            array = pc.cast(array, array.type.value_type)
        try:
            value_set = pa.array(self.categories[column], type=array.type)
        except (pa.ArrowException, TypeError, ValueError):
            raise DataSourceError(
                f"column {column!r} has type {array.type}, which does not match the encoding's "
                "categories; refit the encoding on these data.") from None
        index = pc.fill_null(pc.index_in(array, value_set=value_set), -1)
        index = np.asarray(index.to_numpy(zero_copy_only=False), dtype=np.int64)
        known = index >= 0
        if self.handle_unknown == "error" and not known.all():
            position = int(np.flatnonzero(~known)[0])
            raise UnknownCategoryError(
                f"column {column!r} holds {short(array[position].as_py())} at row "
                f"{at_row(position, rows)}, a category the encoding was not fitted on (it knows "
                f"{len(value_set)}: {listing(self.categories[column], 5)}); refit the encoding or "
                "use handle_unknown='ignore'.")
        block[index[known], np.flatnonzero(known)] = 1.0


def text_values(array, column, rows):
    """``(distinct, locate)`` of a chunk ``array`` of the text ``column``: its distinct values, and
    ``locate(value)``, the global row where a value first appears in the chunk (``rows``, the
    chunk's global rows, or None). A null raises :class:`MissingValueError`."""
    check_no_nulls(array, column, rows)
    if pa.types.is_dictionary(array.type):
        array = pc.cast(array, array.type.value_type)
    return pc.unique(array).to_pylist(), lambda value: at_row(pc.index(array, value).as_py(), rows)


def learn_categories(batches, columns, max_categories):
    """The categories of the text ``columns``: every value seen in ``batches``, sorted.

    ``batches`` yields ``(batch, rows)``: an Arrow record batch holding ``columns`` and its
    global rows. A column of more than ``max_categories`` values raises, and so does one
    that :class:`NumbersInText` finds to be numbers spoilt by text (past
    ``max_categories``, a column that still looks numeric is read to the end, so that the
    error names the text of a later chunk); a column with a distinct value on more than
    ``IDENTIFIER_SHARE`` of the rows (and more than ``NUMBERS_IN_TEXT_MIN``) draws a
    warning, as an identifier.
    """
    seen = {column: set() for column in columns}
    checks = {column: NumbersInText(column) for column in columns}
    too_many = []  # past max_categories, but numbers so far: read on, to name the text among them

    def too_many_categories(column):
        return DataSourceError(f"column {column!r} has more than max_categories={max_categories} distinct "
                               f"values; {LEAVE_OUT}, or raise max_categories.")

    n_rows = 0
    for batch, rows in batches:
        n_rows += batch.num_rows
        for column in columns:
            distinct, locate = text_values(batch.column(column), column, rows)
            checks[column].update(distinct, locate)
            if column in too_many:
                continue
            seen[column].update(distinct)
            if len(seen[column]) > max_categories:
                if checks[column].message() is None:
                    raise too_many_categories(column)
                too_many.append(column)
    for column in columns:
        message = checks[column].message(PLACEHOLDER_IN_FILE)
        if message is not None:
            raise DataSourceError(f"{message}; or {LEAVE_OUT}.")
    if too_many:
        raise too_many_categories(too_many[0])
    for column, values in seen.items():
        if len(values) > NUMBERS_IN_TEXT_MIN and len(values) > IDENTIFIER_SHARE * n_rows:
            warnings.warn(f"column {column!r} has {len(values):,} distinct values in {n_rows:,} rows: an identifier? "
                          f"Its one-hot columns, about one per row, can only memorise the training rows; {LEAVE_OUT}.",
                          UserWarning, stacklevel=4)
    return {column: sorted(values) for column, values in seen.items()}
