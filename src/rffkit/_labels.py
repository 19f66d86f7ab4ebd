"""A classifier's labels as NumPy arrays of their own kind, with the errors that name bad ones.

:func:`classifier_labels` reads the target of a classifier's fit, in memory
(:func:`rffkit._validation.check_input`) or chunk by chunk from a source
(:mod:`rffkit._classifier_stream`): a missing label (None, NaN, pandas' ``NA`` or ``NaT``)
is an error that counts them and names the first row; pandas' nullable columns (``Int64``,
``boolean``, ``string``, ``category``) become NumPy labels of their values' kind, which
``predict`` then returns; an object array of numbers becomes their NumPy type (scikit-learn
reads one as of unknown type). :func:`check_label_types` refuses strings mixed with other
labels, which NumPy cannot sort.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np
import scipy.sparse as sp

from ._input_messages import short_value

__all__ = ["classifier_labels", "check_label_types"]


def _missing(array):
    """Which entries of ``array`` are missing: None, NaN, pandas' NA or NaT."""
    if array.dtype.kind == "f":
        return np.isnan(array)
    if array.dtype.kind in "mM":
        return np.isnat(array)
    if array.dtype.kind != "O":
        return np.zeros(array.shape, dtype=bool)
    pandas = sys.modules.get("pandas")  # pandas' NA and NaT exist only once pandas is imported
    if pandas is not None:
        return np.asarray(pandas.isna(array), dtype=bool)
    return np.array([value is None or (isinstance(value, (float, np.floating)) and value != value)
                     for value in array.ravel()], dtype=bool).reshape(array.shape)


def classifier_labels(owner, y, rows=None):
    """A classifier's labels ``y`` as a NumPy array of their own kind; missing labels are an error.

    Parameters
    ----------
    owner : str
        The estimator named in messages.
    y : array-like
        The labels: a list, an array, or a pandas column of any dtype.
    rows : ndarray of int or None, default=None
        The row numbers of ``y``'s entries (a chunk of a source), which messages name
        with the range they span; their positions when None.

    Returns
    -------
    labels : array-like
        ``y`` itself, unless it is a pandas column of an extension dtype (then its values
        as NumPy labels: int, bool or float for the nullable numbers, objects otherwise) or
        an object array of numbers or booleans (then the NumPy array of them).

    Raises
    ------
    ValueError
        When some labels are missing: how many, and the row of the first.
    """
    if y is None or sp.issparse(y):
        return y
    dtype = getattr(y, "dtype", None)
    extension = dtype is not None and not isinstance(dtype, np.dtype)  # pandas' nullable and categorical dtypes
    array = np.asarray(y, dtype=object) if extension else np.asarray(y)
    missing = _missing(array)
    if missing.any():
        first = int(np.flatnonzero(missing.ravel())[0])
        count = int(np.count_nonzero(missing))
        where = "" if rows is None else f" in rows {np.min(rows)} to {np.max(rows)}"  # a chunk of a source
        rows = np.arange(missing.size) if rows is None else np.asarray(rows).ravel()
        raise ValueError(
            f"{owner}: y holds {count} missing label{'s' if count > 1 else ''}{where} ("
            f"{'the first, ' if count > 1 else ''}{short_value(array.ravel()[first])}, at row {rows[first]}, "
            "counting from 0); drop those rows, or fill them in with a label of their own (pandas: y.fillna(label)).")
    if array.dtype.kind != "O":
        return y
    numpy_dtype = getattr(dtype, "numpy_dtype", None)  # Int64 -> int64, boolean -> bool, Float64 -> float64
    if extension and isinstance(numpy_dtype, np.dtype):
        return array.astype(numpy_dtype)
    values = array.ravel()
    if values.size and all(isinstance(value, (numbers.Real, np.bool_)) for value in values):
        numbers_array = np.array(values.tolist())  # int64, float64 or bool, as NumPy reads the numbers
        if numbers_array.dtype.kind in "biuf":
            return numbers_array.reshape(array.shape)
    return array if extension else y


def check_label_types(owner, y):
    """Class labels of one kind: all strings or all numbers (NumPy cannot sort a mix)."""
    array = np.asarray(y)
    if array.dtype.kind != "O":
        return
    text = [isinstance(value, str) for value in array.ravel()]
    if any(text) and not all(text):
        example_text = array.ravel()[text.index(True)]
        example_other = array.ravel()[text.index(False)]
        raise ValueError(
            f"{owner}: y mixes strings and other labels (e.g. {short_value(example_text)} and "
            f"{short_value(example_other)}); class labels must be all strings or all numbers."
        )
