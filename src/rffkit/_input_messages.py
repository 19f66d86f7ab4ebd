"""Error messages that explain a bad array or DataFrame: text among the numbers, a missing value.

:func:`rffkit._validation.check_input` calls these before, or instead of, scikit-learn's
own messages ("could not convert string to float", "Input X contains NaN"), which name
neither the column nor the row nor the way out.
"""

from __future__ import annotations

import datetime
import math

import numpy as np
import scipy.sparse as sp

__all__ = ["short_value", "check_text_columns", "regression_target", "locate_nan"]

_ENCODERS = (
    "encode it first, e.g. with sklearn.preprocessing.OneHotEncoder (categories) or OrdinalEncoder "
    "(ordered levels) inside a ColumnTransformer"
)

#: What a message about numbers spoilt by text in an array or DataFrame goes on to say.
_DECIMAL_IN_ARRAY = ": make them numbers first (for a pandas column: pandas.to_numeric(column.str.replace(',', '.')))"
_PLACEHOLDER_IN_ARRAY = (". Is that a placeholder for missing values? Make those entries NaN (for a pandas column: "
                         "pandas.to_numeric(column, errors='coerce')) and drop or impute their rows, or correct them")


def short_value(value, limit=40):
    """``repr`` of a value for a message, cut to ``limit`` characters (20, not np.int64(20))."""
    value = value.item() if isinstance(value, np.generic) else value
    text = repr(str(value) if isinstance(value, str) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_text_value(values):
    """The first entry of ``values`` that ``float()`` refuses, or None."""
    for value in values:
        try:
            float(value)
        except (TypeError, ValueError):
            if isinstance(value, (str, bytes)):
                return value
    return None


def _first_time_value(values):
    """The first date, time, duration or period (pandas' ``Period``) among the first 100 entries
    of a column that are not missing (of datetime64 or timedelta64 dtype, or of Python or pandas
    dates and times), or None."""
    entries = np.asarray(values, dtype=object).ravel()
    looked = 0
    for value in entries:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, np.datetime64, np.timedelta64)) \
                or hasattr(value, "to_timestamp"):
            return value
        looked += 1
        if looked == 100:
            break
    timed = getattr(getattr(values, "dtype", None), "kind", "O") in "Mm"
    return entries[0] if timed and len(entries) else None  # a column of NaT


def _numbers_in_text(label, values):
    """:class:`rffkit._io_base.NumbersInText`'s message on a column of ``values`` (rows by position), or None."""
    from ._io_base import NumbersInText

    first = {}
    try:
        for row, value in enumerate(np.asarray(values, dtype=object).ravel().tolist()):
            first.setdefault(value, row)
    except TypeError:  # unhashable entries: not a column of numbers and text
        return None
    check = NumbersInText(None, label=label)
    check.update(first, first.__getitem__)
    return check.message(_PLACEHOLDER_IN_ARRAY, decimal=_DECIMAL_IN_ARRAY)


def _non_numeric_columns(X):
    """``(label, values)`` of each column of ``X`` that may hold text or dates: a DataFrame's
    non-numeric columns, every column of a 2-D array of object, string, bytes, datetime64 or
    timedelta64 dtype; nothing otherwise."""
    columns, dtypes = getattr(X, "columns", None), getattr(X, "dtypes", None)
    if columns is not None and dtypes is not None and getattr(X, "ndim", 2) == 2:
        for position, (name, dtype) in enumerate(zip(columns, dtypes)):
            if getattr(dtype, "kind", "O") not in "biufc":
                yield f"column {name!r} (position {position})", X.iloc[:, position]
        return
    dtype = getattr(X, "dtype", None)
    if dtype is not None and dtype.kind in "OUSMm" and getattr(X, "ndim", 0) == 2:  # text, dates, durations
        for column in range(X.shape[1]):
            yield f"column {column}", X[:, column]


def check_text_columns(owner, X):
    """Name the first column of ``X`` that holds strings, before NumPy's bare message can.

    Only DataFrames with non-numeric columns and arrays of object, string or bytes dtype
    are looked at, so numeric input pays one dtype check.
    """
    for label, values in _non_numeric_columns(X):
        when = _first_time_value(values)
        if when is not None:
            raise ValueError(f"{owner}: {label} of X holds dates or times such as {short_value(str(when))}; make "
                             "them numbers first, such as the days since a start, (when - start) / "
                             "numpy.timedelta64(1, 'D') (pandas: .dt.days of the difference), or read the file "
                             "with rffkit.io.open_table, which makes dates days since 1970-01-01.")
        value = _first_text_value(values)
        if value is None:
            continue
        spoilt = _numbers_in_text(f"{owner}: {label} of X", values)
        if spoilt is not None:
            raise ValueError(spoilt + ".")
        raise ValueError(f"{owner}: {label} of X holds strings such as {short_value(value)} (could not convert "
                         f"string to float); {_ENCODERS}.")


def regression_target(owner, y):
    """A regressor's target as numbers, or an error that names ``y``."""
    array = np.asarray(y)
    if array.dtype.kind not in "OUS":
        return y
    try:
        return array.astype(np.float64)
    except (TypeError, ValueError):
        spoilt = _numbers_in_text(f"{owner}: y", array) if array.ndim == 1 else None
        if spoilt is not None:
            raise ValueError(spoilt + ".") from None
        value = _first_text_value(array.ravel())
        raise ValueError(
            f"{owner}: y must be numeric for a regressor; it holds {short_value(value)}. For class labels use "
            "a classifier (RFFClassifier, RFFNetClassifier)."
        ) from None


def _rows_with_one(count):
    return "1 row has one" if count == 1 else f"{count:,} rows have one"


def _floats(values):
    """``values`` as a float64 array, pandas' ``<NA>`` (of a nullable Int64, boolean or Float64 column) as NaN."""
    if type(values).__module__.startswith("pandas"):
        return values.to_numpy(dtype=np.float64, na_value=np.nan)
    return np.asarray(values, dtype=np.float64)


def locate_nan(owner, X, y, message):
    """For scikit-learn's "Input X (or y) contains NaN": the same error naming the first NaN's
    column and row and the way out; None for any other error, or input it cannot read as numbers."""
    try:
        if message.startswith("Input X contains NaN") and not sp.issparse(X):
            rows, columns = np.nonzero(np.isnan(_floats(X)))
            if rows.size == 0:
                return None
            names = getattr(X, "columns", None)
            column = repr(names[columns[0]]) if names is not None else str(columns[0])
            count = np.unique(rows).size
            value = X.iloc[rows[0], columns[0]] if hasattr(X, "iloc") else np.nan
            shown = "NaN" if isinstance(value, float) else str(value)  # pandas' <NA> of a nullable column
            return (f"{owner}: X holds a missing value ({shown}) in column {column} at row {rows[0]} (counting from 0; "
                    f"{_rows_with_one(count)}), and {owner} needs complete inputs. Fill them in, e.g. "
                    f"make_pipeline(SimpleImputer(add_indicator=True), {owner}()): each column's mean beside a 0/1 "
                    "column that marks the rows, as rffkit fit does with files; or drop those rows.")
        if message.startswith("Input y contains NaN"):
            rows = np.flatnonzero(np.isnan(_floats(y).ravel()))
            if rows.size == 0:
                return None
            return (f"{owner}: y holds a missing value (NaN) at row {rows[0]} (counting from 0; "
                    f"{_rows_with_one(rows.size)}); drop the rows whose target is missing.")
    except (TypeError, ValueError):
        return None
    return None
