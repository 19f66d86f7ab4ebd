"""Streamed data sources: Parquet and CSV tables on disk, and arrays, read chunk by chunk.

A source yields :class:`Chunk` named tuples ``(X, y, rows)``: a numeric feature block, the
target (or None) and the global index of every row. Sources are re-iterable (each pass reads
the data again and holds about one chunk in memory) and split their rows over the ranks of a
distributed job. :func:`open_table` opens files, :class:`ArraySource` wraps arrays and memory
maps, :func:`as_source` accepts either.

Import every public name from here. :class:`ArraySource` and :func:`as_source` are defined in
``rffkit._array_source``, :class:`TableSource` in ``rffkit._table_source``, :class:`ColumnEncoding`
in ``rffkit._encoding``, :class:`Chunk` and the error classes in ``rffkit._io_base``, and the
reading of files under a :class:`TableSource` in ``rffkit._table_files`` (their :class:`CSVDialect` in
``rffkit._csv_dialect``).
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from ._array_source import ArraySource, as_source
from ._encoding import ColumnEncoding
from ._io_base import (
    DEFAULT_CHUNK_ROWS,
    Chunk,
    ColumnNotFoundError,
    DataSourceError,
    LateTextError,
    MissingValueError,
    SchemaMismatchError,
    UnknownCategoryError,
    check_missing,
    listing,
    short,
)
from ._csv_dialect import CSVDialect, csv_dialect
from ._row_labels import warn_row_numbers
from ._table_files import TableLayout, expand_paths, file_format, inspect_file
from ._table_source import TableSource

__all__ = [
    "open_table",
    "TableSource",
    "ArraySource",
    "as_source",
    "Chunk",
    "ColumnEncoding",
    "CSVDialect",
    "DataSourceError",
    "ColumnNotFoundError",
    "SchemaMismatchError",
    "MissingValueError",
    "UnknownCategoryError",
]


def open_table(paths, target=None, *, features=None, exclude=None, categorical=None, dates=None, format=None,
               delimiter=None, decimal=None, chunk_rows=DEFAULT_CHUNK_ROWS, dtype=np.float64, encoding="auto",
               missing="error", drop_missing_target=False, learn_rows=None):
    """Open Parquet or CSV files as one streamed table.

    Parameters
    ----------
    paths : str, path-like or list of them
        A file, a glob pattern (``"data/*.parquet"``, ``**`` recurses), a directory (every
        file below it, skipping names that start with '.' or '_'), or a list of these. The
        files are read in the order given, those of a glob or a directory in sorted order of
        their paths (a file named twice is read once, where first named).
    target : str, optional
        Column holding the target; None for unsupervised use (``Chunk.y`` is None).
    features : list of str, optional
        Feature columns, in this order; default every column but the target (and pandas'
        ``__index_level_N__`` columns), in the order of the first file.
    exclude : list of str, optional
        Columns left out of the default features (an identifier, a row label); only
        without ``features``. With an ``encoding``, which fixes the columns, it may repeat the
        training call's (it must not name a column the encoding reads).
    categorical : list of str, optional
        Feature columns of numbers, booleans or dates to one-hot encode like text, one input
        per value, instead of reading each as one number: codes such as a subject, site or
        ZIP code, whose order and distances mean nothing (see :class:`ColumnEncoding`). Text
        columns are categorical without being named. Only with ``encoding='auto'``.
    dates : dict of str to str, optional
        Columns of dates and their ``strptime`` form, such as ``{"day": "%d/%m/%Y"}``, read as days
        since 1970-01-01 (``%S.%f``: seconds with a fraction; ``%z``: a time zone, the UTC instant;
        ``%y``: a two-digit year, never found unnamed); unnamed, a text column whose first chunk holds
        dates of a clear form (:func:`rffkit._text_dates.date_format`). Only with ``encoding='auto'``.
    format : {'parquet', 'csv', 'tsv'}, optional
        Default inferred from the extensions .parquet/.pq, .csv/.csv.gz, .tsv/.tsv.gz.
    delimiter, decimal : str, optional
        CSV only: the character between fields and the decimal point of numbers. Default
        guessed from the first file (:func:`rffkit._csv_dialect.csv_dialect`): a comma, or
        the ``;``, tab or ``|`` of a header without commas, and a decimal comma where such a
        file's numbers are written ``0,5``; ``source.dialect`` says what was used.
    chunk_rows : int, default=65536
        Default rows per chunk of :meth:`TableSource.iter_chunks`.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Dtype of ``X``.
    encoding : 'auto', ColumnEncoding or dict, default='auto'
        'auto' passes numbers and booleans through and, when some feature is a string or
        categorical column, learns a one-hot encoding in one streamed pass
        (:meth:`TableSource.fit_encoding` with its defaults and ``missing``). Pass the
        encoding of the training data when opening test data, so both get the same columns
        and the same treatment of missing values. A dict is read by
        :meth:`ColumnEncoding.from_dict`: the ``"encoding"`` of a model file that
        ``rffkit fit`` wrote (``rffkit.load(path)["encoding"]``).
    missing : {'error', 'encode'}, default='error'
        With ``encoding='auto'``: 'error' makes a missing value (null, or NaN in a numeric
        column) an error naming its column and row; 'encode' makes it an input (a category
        of its own in a text column; in a numeric column the column's mean, and a 0/1
        indicator column beside it), learned in one streamed pass over every feature column
        (:meth:`TableSource.fit_encoding`). A given encoding carries its own.
    drop_missing_target : bool, default=False
        Leave out the rows whose target is missing (null, or NaN in a float column): they
        cannot be trained on. Default False: such a row is an error naming it.
    learn_rows : callable or None, default=None
        With ``encoding='auto'``, the rows the encoding is learned from
        (:meth:`TableSource.fit_encoding`): ``learn_rows(rows)`` maps global row indices to
        a boolean mask, such as the training rows of a hold-out split. Default every row.

    Returns
    -------
    source : TableSource
        The table, checked: every file readable, the columns present with usable types in
        every file, at least one row.

    Raises
    ------
    FileNotFoundError
        Nothing matches ``paths``.
    DataSourceError
        (a ValueError) A file is not CSV/Parquet or cannot be read, the table has no rows, a
        column is missing (:class:`ColumnNotFoundError`) or the shards disagree
        (:class:`SchemaMismatchError`), a feature has an unusable type, or a text feature
        holds numbers (see :meth:`TableSource.fit_encoding`).

    Examples
    --------
    >>> import tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from rffkit.io import open_table
    >>> folder = tempfile.TemporaryDirectory()
    >>> table = pa.table({"size": [1.0, 2.0, 3.0], "color": ["red", "blue", "red"],
    ...                   "y": [0.5, 1.5, 2.5]})
    >>> pq.write_table(table, f"{folder.name}/part-0.parquet")
    >>> source = open_table(f"{folder.name}/*.parquet", target="y")
    >>> source.feature_names, source.n_rows
    (['size', 'color=blue', 'color=red'], 3)
    >>> X, y, rows = next(source.iter_chunks(chunk_rows=2))
    >>> X.tolist(), y.tolist(), rows.tolist()
    ([[1.0, 0.0, 1.0], [2.0, 1.0, 0.0]], [0.5, 1.5], [0, 1])
    >>> folder.cleanup()
    """
    files = expand_paths(paths)
    format_ = file_format(files, format)
    if format_ == "parquet" and (delimiter, decimal) != (None, None):
        raise ValueError("open_table: delimiter and decimal are for CSV files; these are Parquet.")
    dialect = csv_dialect(files[0], format_, delimiter, decimal)
    inspected = [inspect_file(path, dialect, files[0]) for path in files]
    layout = TableLayout(files, format_, [schema for schema, _ in inspected],
                         [groups for _, groups in inspected], dialect=dialect)
    available = layout.schemas[0].names
    if target is not None and target not in available:
        raise ColumnNotFoundError(f"target column {target!r} is not in {files[0]!r}; its columns "
                                  f"are {listing(available)}.")
    if isinstance(encoding, dict):
        try:
            encoding = ColumnEncoding.from_dict(encoding)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"open_table: the encoding dict is not one of ColumnEncoding.to_dict() "
                             f"({type(error).__name__}: {error}).") from None
    if isinstance(encoding, ColumnEncoding):
        if features is not None and list(features) != list(encoding.columns):
            raise ValueError("open_table: features and encoding.columns differ; give one of "
                             "them.")
        if exclude is not None:  # as at training: agreed with the encoding, it has nothing left to do
            excluded = [exclude] if isinstance(exclude, str) else list(exclude)
            read = [name for name in excluded if name in encoding.columns]
            if read:
                raise ValueError(f"open_table: exclude names {listing(read)}, which the encoding reads; the encoding "
                                 "fixes the columns: leave exclude out.")
            exclude = None
        features = list(encoding.columns)
    elif encoding != "auto":
        raise ValueError("open_table: encoding must be 'auto', a ColumnEncoding or its to_dict(); "
                         f"got {short(encoding)}.")
    check_missing(missing, "open_table")
    features = layout.feature_columns(target, features, exclude)
    if format_ == "parquet":
        layout.n_rows = sum(sum(groups) for groups in layout.row_groups)
    given = isinstance(encoding, ColumnEncoding)
    codes = layout.categorical_columns(features, categorical, given)
    named = (codes, layout.date_formats(features, dates, codes, given))
    late = []  # (column, file, value) of features of numbers or empty fields in a CSV's first rows, text later
    while True:
        try:
            source = _open_layout(layout, target, features, named, encoding, missing, learn_rows,
                                  chunk_rows=chunk_rows, dtype=dtype, drop_missing_target=drop_missing_target)
            break
        except LateTextError as error:
            if error.column not in features or error.column in layout.text_columns:
                raise
            layout.text_columns.add(error.column)
            if error.column not in named[1]:  # no form given for its dates
                late.append((error.column, error.path, error.value))
    for column, path, value in late:
        read = "dates" if column in source.encoding.dates else "text, a category per value"
        warnings.warn(f"CSV column {column!r} holds only numbers or empty fields in the first rows of {path!r}, "
                      f"where its type is inferred, and text further down ({short(value)}): it is read as {read}.",
                      UserWarning, stacklevel=2)
    return source


def _open_layout(layout, target, features, named, encoding, missing, learn_rows, **options):
    """``open_table``'s source over ``layout``, its encoding ``encoding`` or learned; ``named``, the
    columns that ``categorical`` names and the formats that ``dates`` gives, checked."""
    (codes, formats), kinds = named, layout.kinds(features)
    given = isinstance(encoding, ColumnEncoding)
    text = [name for name in features if kinds[name] == "categorical" and name not in codes and name not in formats]
    dates = dict(formats)
    if text and not given:  # dates written as text, found in the first chunk
        dates.update(layout.text_dates(text, options["chunk_rows"]))
    categorical = {name: () for name in features
                   if (kinds[name] == "categorical" or name in codes) and name not in dates}
    # Until the categories are learned, an empty one-hot block stands in for each string column.
    times = [name for name in features if kinds[name] == "time" and name not in categorical and name not in dates]
    first = encoding if given else ColumnEncoding(features, categorical, dates=dates, times=times)
    source = TableSource(layout, target, first, **options)
    if layout.n_rows == 0 or (layout.n_rows is None and not layout.has_rows(first.columns[0])):
        raise DataSourceError(f"the table has no rows ({len(layout.files)} file(s), first {layout.files[0]!r}).")
    if (categorical or dates or missing == "encode") and not given:
        source = source.with_encoding(source.fit_encoding(missing=missing, learn_rows=learn_rows, categorical=codes))
    numeric = [name for name in features if kinds[name] in ("integer", "float") and name not in codes]
    if missing != "encode" and numeric and not given:  # not read to learn: a look for a row label (warn_row_numbers)
        with contextlib.suppress(LateTextError):  # text in a number column: the read of the chunks names it
            warn_row_numbers(lambda names: source._raw_batches(names, source.chunk_rows, 0, 1), numeric,
                             source.chunk_rows)
    return source
