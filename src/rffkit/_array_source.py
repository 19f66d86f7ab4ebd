"""The source interface of :mod:`rffkit.io` over in-memory arrays and memory maps.

Users import :class:`ArraySource` and :func:`as_source` from :mod:`rffkit.io`, which
re-exports them (and which they name as their module).
"""

from __future__ import annotations

import os

import numpy as np

from ._encoding import ColumnEncoding
from ._io_base import (
    DEFAULT_CHUNK_ROWS,
    Chunk,
    DataSourceError,
    check_chunk_rows,
    check_dtype,
    check_finite,
    check_rank,
    public_in_io,
)

__all__ = ["ArraySource", "as_source"]


@public_in_io
class ArraySource:
    """The source interface over in-memory arrays or a ``numpy.memmap``.

    Chunks are slices of ``X`` read one at a time: views when ``X`` already has ``dtype``,
    otherwise one chunk-sized copy each; ``X`` is never copied whole.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Numeric; a ``numpy.memmap`` stays on disk.
    y : array-like of shape (n,), optional
        The target; None (the default) for a source without one.
    chunk_rows : int, default=65536
        Default rows per chunk of :meth:`iter_chunks`.
    feature_names : list of str, optional
        Default ``["x0", "x1", ...]`` (or the columns of a pandas DataFrame).
    dtype : {numpy.float64, numpy.float32}, optional
        Default the dtype of ``X`` when it is float32 or float64, else float64.

    Attributes
    ----------
    X : ndarray of shape (n, p)
        The features as given (not copied when already an ndarray).
    y : ndarray of shape (n,) or None
        The target.
    target : {'y', None}
        ``'y'`` when there is a target.
    encoding : ColumnEncoding
        The identity encoding of the feature names.
    feature_names : list of str
        Names of the columns of ``X``.
    named : bool
        Whether they were given or are a DataFrame's string column names (not the default
        ``x0, x1, ...`` nor a DataFrame's integers): a model fitted on the source records them
        (``feature_names_in_``) and refuses new rows whose columns differ.
    n_features, n_rows : int
        The shape of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit.io import ArraySource
    >>> source = ArraySource(np.arange(10.0).reshape(5, 2), np.arange(5.0), chunk_rows=2)
    >>> [chunk.rows.tolist() for chunk in source.iter_chunks(rank=1, world_size=2)]
    [[2, 3], [4]]
    """

    def __init__(self, X, y=None, *, chunk_rows=DEFAULT_CHUNK_ROWS, feature_names=None,
                 dtype=None):
        if isinstance(X, (str, os.PathLike)):
            raise TypeError("ArraySource takes arrays; open files with "
                            "rffkit.io.open_table(paths, target=...).")
        # names of the columns' own: given, or a DataFrame's when all are strings (scikit-learn's rule)
        named = feature_names is not None or (hasattr(X, "columns") and all(isinstance(c, str) for c in X.columns))
        if feature_names is None and hasattr(X, "columns"):
            feature_names = [str(name) for name in X.columns]
        X = X if isinstance(X, np.ndarray) else np.asarray(X)
        if X.ndim != 2:
            raise ValueError(
                f"ArraySource: X must be 2-D (n_rows, n_features); got shape {X.shape}.")
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
            raise DataSourceError(
                f"ArraySource: X has dtype {X.dtype}, not numeric; encode categorical columns "
                "first (or write a table and use open_table).")
        if y is not None:
            y = y if isinstance(y, np.ndarray) else np.asarray(y)
            if y.shape[:1] != X.shape[:1]:
                raise ValueError(
                    f"ArraySource: X has {X.shape[0]} rows but y has shape {y.shape}.")
        self.named = named
        if feature_names is None:
            feature_names = [f"x{j}" for j in range(X.shape[1])]
        names = [str(name) for name in feature_names]
        if len(names) != X.shape[1]:
            raise ValueError(f"ArraySource: {len(names)} feature_names for {X.shape[1]} columns.")
        self.X, self.y = X, y
        self.chunk_rows = check_chunk_rows(chunk_rows)
        if dtype is None:
            dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        self.dtype = check_dtype(dtype)
        self.encoding = ColumnEncoding(names)
        self.target = None if y is None else "y"

    feature_names = property(lambda self: self.encoding.output_names)
    n_features = property(lambda self: self.X.shape[1])
    n_rows = property(lambda self: self.X.shape[0])

    def __repr__(self):
        return (f"ArraySource(n_rows={self.n_rows}, n_features={self.n_features}, "
                f"target={self.target!r})")

    def __iter__(self):
        return self.iter_chunks()

    def iter_chunks(self, chunk_rows=None, *, rank=0, world_size=1):
        """Yield :class:`Chunk` tuples, as :meth:`TableSource.iter_chunks` does.

        Parameters
        ----------
        chunk_rows : int, optional
            Rows per chunk (the last may be shorter); default ``self.chunk_rows``.
        rank, world_size : int, default=0, 1
            Rank ``r`` gets the contiguous rows
            ``[r * n // world_size, (r + 1) * n // world_size)``.

        Yields
        ------
        chunk : Chunk
            ``X`` (m, n_features) of ``self.dtype``, a view of ``self.X`` when its dtype is
            ``self.dtype``; ``y`` (m,) or None; ``rows`` (m,) int64.

        Raises
        ------
        MissingValueError
            NaN in a chunk (of ``X``, or of a float ``y``); the message names the column
            and row. Infinity raises :class:`DataSourceError` likewise.
        """
        chunk_rows = self.chunk_rows if chunk_rows is None else check_chunk_rows(chunk_rows)
        rank, world_size = check_rank(rank, world_size)
        begin, end = rank * self.n_rows // world_size, (rank + 1) * self.n_rows // world_size
        for start in range(begin, end, chunk_rows):
            stop = min(start + chunk_rows, end)
            rows = np.arange(start, stop, dtype=np.int64)
            X = np.asarray(self.X[start:stop]).astype(self.dtype, copy=False)
            for j in np.flatnonzero(~np.isfinite(X).all(axis=0)):
                check_finite(X[:, j], self.feature_names[j], rows)
            y = None if self.y is None else self.y[start:stop]
            if y is not None and np.issubdtype(y.dtype, np.floating):
                check_finite(y, "y", rows)
            yield Chunk(X, y, rows)


@public_in_io
def as_source(X, y=None):
    """Return ``X`` unchanged if it is a source, else wrap arrays in an :class:`ArraySource`.

    Parameters
    ----------
    X : TableSource, ArraySource or array-like of shape (n, p)
        A source, or the features (a ``numpy.memmap`` stays on disk).
    y : array-like of shape (n,), optional
        The target of array ``X``; must be None when ``X`` is a source, which carries its
        own.

    Returns
    -------
    source : TableSource or ArraySource
        ``X`` itself, or ``ArraySource(X, y)`` with its defaults.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit.io import as_source
    >>> source = as_source(np.zeros((4, 2)))
    >>> as_source(source) is source
    True
    """
    from .io import TableSource

    if isinstance(X, (TableSource, ArraySource)):
        if y is not None:
            raise ValueError(
                f"as_source: {type(X).__name__} already carries its target; pass y=None.")
        return X
    return ArraySource(X, y)
