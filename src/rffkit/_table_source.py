"""The table of Parquet or CSV files that :func:`rffkit.io.open_table` opens: :class:`TableSource`.

It yields the files' rows in chunks, encoded by its :class:`~rffkit.io.ColumnEncoding`, and
learns one (:meth:`TableSource.fit_encoding`); the reading of the files themselves is
:class:`rffkit._table_files.TableLayout`'s. Users import it from :mod:`rffkit.io`.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa

from ._column_kinds import TIME_UNITS, target_present, target_values
from ._encoding import ColumnEncoding
from ._io_base import (
    Chunk, DataSourceError, check_chunk_rows, check_dtype, check_missing, check_rank, public_in_io, row_mask,
)
from ._learn_encoding import learn_encoding
from ._streaming import rechunk

__all__ = ["TableSource"]


@public_in_io
class TableSource:
    """Rows of one or more Parquet or CSV files, streamed in chunks.

    Create one with :func:`open_table`; :meth:`with_encoding` derives another. Iterating over
    a source is ``iter_chunks()`` with its defaults. The columns keep their units: before
    RFFRidge or RFFClassifier, whose default feature map has one length scale for all columns,
    standardise them with :meth:`standardized`.

    Parameters
    ----------
    layout : rffkit._table_files.TableLayout
        The files, their schemas and Parquet row groups, as :func:`open_table` finds them.
    target : str or None
        Column holding the target; None for a source without one.
    encoding : ColumnEncoding
        Turns the feature columns (``encoding.columns``) into ``X``.
    chunk_rows : int
        Default rows per chunk of :meth:`iter_chunks`.
    dtype : {numpy.float64, numpy.float32}
        Dtype of ``X``.
    drop_missing_target : bool, default=False
        Leave out the rows whose target is missing (null, or NaN in a float column) instead
        of raising :class:`MissingValueError` on them.
    scaler : sklearn.preprocessing.StandardScaler or None, default=None
        Fitted; applied to each chunk's ``X`` (see :meth:`standardized`).

    Attributes
    ----------
    files : list of str
        Absolute paths in reading order (as given; a glob's or directory's sorted).
    format : {'parquet', 'csv', 'tsv'}
        Format of the files.
    target : str or None
        Column holding the target.
    encoding : ColumnEncoding
        Turns the feature columns into ``X``.
    chunk_rows : int
        Default rows per chunk.
    dtype : numpy.dtype
        Dtype of ``X``.
    feature_names : list of str
        Names of the columns of ``X`` (``encoding.output_names``).
    n_features : int
        Number of columns of ``X``.
    n_rows : int
        From Parquet metadata; for CSV counted in one pass on first access, then cached.
        With ``drop_missing_target``, the rows that have a target (one pass over it).
    n_dropped : int
        Rows left out for a missing target (0 without ``drop_missing_target``).
    scaler : sklearn.preprocessing.StandardScaler or None
        What standardises ``X`` (:meth:`standardized`); None when ``X`` keeps the columns' units.

    Examples
    --------
    >>> import tempfile
    >>> from rffkit.io import open_table
    >>> folder = tempfile.TemporaryDirectory()
    >>> with open(f"{folder.name}/data.csv", "w") as file:
    ...     _ = file.write("x,color,y\\n1.5,red,0.5\\n2.5,blue,1.0\\n3.5,red,0.0\\n")
    >>> source = open_table(f"{folder.name}/data.csv", target="y")
    >>> source
    TableSource(1 csv file(s), target='y', n_features=3)
    >>> source.n_rows, source.feature_names
    (3, ['x', 'color=blue', 'color=red'])
    >>> [chunk.rows.tolist() for chunk in source.iter_chunks(rank=0, world_size=2)]
    [[0, 2]]
    >>> folder.cleanup()
    """

    def __init__(self, layout, target, encoding, *, chunk_rows, dtype, drop_missing_target=False, scaler=None):
        self._layout = layout
        self.scaler = scaler
        self.target = target
        self.encoding = encoding
        self.drop_missing_target = bool(drop_missing_target) and target is not None
        self._present = None  # rows with a target, counted once
        self.chunk_rows = check_chunk_rows(chunk_rows)
        self.dtype = check_dtype(dtype)
        if target in encoding.columns:
            raise ValueError(f"open_table: the target {target!r} cannot also be a feature.")
        self._kinds = layout.checked_kinds(encoding, target, self.chunk_rows)
        self._read_types = layout.read_types(self._kinds, target)  # CSV: fixed types of every read

    @property
    def time_columns(self):
        """The feature columns of dates, times of day or durations, each with the number ``X`` holds
        for it, such as 'days since 1970-01-01' (dict of str to str; see :func:`rffkit._column_kinds.numbers`)."""
        return {column: TIME_UNITS["time" if column in self.encoding.dates else self._kinds[column]]
                for column in self.encoding.columns if column in self.encoding.dates
                or (self._kinds[column] in TIME_UNITS and column not in self.encoding.categories)}

    @property
    def categorical_codes(self):
        """The feature columns of numbers, booleans or dates that the encoding one-hot encodes by
        the text of their values (``open_table(categorical=...)``; list of str)."""
        return [column for column in self.encoding.columns
                if column in self.encoding.categories and self._kinds[column] != "categorical"]

    files = property(lambda self: list(self._layout.files))
    format = property(lambda self: self._layout.format)
    #: how the CSV files write their fields, :class:`CSVDialect` (delimiter, decimal); None for Parquet
    dialect = property(lambda self: self._layout.dialect)
    feature_names = property(lambda self: self.encoding.output_names)
    n_features = property(lambda self: len(self.encoding.output_names))

    @property
    def n_rows(self):
        """Rows in all files (int); CSV files are counted in one pass on first access. With
        ``drop_missing_target``, the rows that have a target, counted in one pass over it."""
        if not self.drop_missing_target:
            return self._layout.count_rows(self._read_types)
        if self._present is None:
            self._present = sum(int(target_present(batch.column(self.target)).sum())
                                for batch, _ in self._raw_batches([self.target], self.chunk_rows, 0, 1))
        return self._present

    @property
    def n_dropped(self):
        """Rows left out because their target is missing (int)."""
        return self._layout.count_rows(self._read_types) - self.n_rows if self.drop_missing_target else 0

    def __repr__(self):
        return (f"TableSource({len(self._layout.files)} {self.format} file(s), "
                f"target={self.target!r}, n_features={self.n_features}"
                f"{', standardized' if self.scaler is not None else ''})")

    def __iter__(self):
        return self.iter_chunks()

    def read_columns(self, columns, text=False):
        """Read some columns of every file, features or not, in row order.

        Parameters
        ----------
        columns : list of str
            Columns of the files.
        text : bool, default=False
            Read a CSV file's fields as the text written there, so identifiers keep their
            leading zeros and every digit, and only an empty field is missing ('NA' and
            'null' are text); Parquet columns keep their types.

        Returns
        -------
        table : pyarrow.Table
            Those columns, all rows: as pyarrow reads them (a CSV column's type inferred from
            its first rows), as text with ``text``, and as text where the files disagree on a
            column's type.

        Raises
        ------
        ColumnNotFoundError
            A column is not in the first file.
        SchemaMismatchError
            Another file lacks a column, or holds one that cannot be read as text where the
            files disagree on its type; the message names that file.
        DataSourceError
            A file cannot be read (a CSV column read as numbers holds text further down).
        """
        return self._layout.read_columns(list(columns), text=text)

    def with_encoding(self, encoding):
        """A source over the same files whose features are ``encoding.columns``, encoded by it.

        Parameters
        ----------
        encoding : ColumnEncoding
            Its columns must be in the files (any order, any subset but the target), and it
            must list categories for every string or categorical column among them.

        Returns
        -------
        source : TableSource
            Same files, target, ``chunk_rows`` and ``dtype``, not standardised (its columns
            are others); this source is unchanged.
        """
        return self._replace(encoding=encoding, scaler=None)

    def with_dtype(self, dtype):
        """A source over the same files whose chunks' ``X`` has ``dtype``.

        Parameters
        ----------
        dtype : {numpy.float64, numpy.float32}
            Dtype of ``X``.

        Returns
        -------
        source : TableSource
            Same files, target, encoding and ``chunk_rows``; this source is unchanged.
        """
        return self._replace(dtype=dtype)

    def standardized(self, scaler=None):
        """A source over the same rows whose ``X`` columns are standardised: mean 0, variance 1.

        As ``rffkit fit`` does before RFFRidge and RFFClassifier: their default feature map has
        one length scale for all columns, so columns in other units (grams beside millimetres)
        would weigh unequally in its distances. The columns of 0s and 1s (one-hot columns,
        missing-value indicators, booleans, and integer columns of only 0s and 1s) are left as
        they are. Scale new data by the training source's scaler, so that a model sees its
        inputs as in fit: ``open_table(new, encoding=train.encoding).standardized(train.scaler)``;
        a model fitted on a standardised source refuses, at ``predict`` and ``score``, a source
        standardised by another scaler or not at all.

        Parameters
        ----------
        scaler : sklearn.preprocessing.StandardScaler, optional
            A fitted scaler of ``n_features`` columns, such as another source's ``scaler``.
            Default: one learned from every row of this source in one pass.

        Returns
        -------
        source : TableSource
            Same files, target, encoding, ``chunk_rows`` and ``dtype``, with ``scaler`` set;
            this source is unchanged.

        Examples
        --------
        >>> import tempfile
        >>> from rffkit.io import open_table
        >>> folder = tempfile.TemporaryDirectory()
        >>> with open(f"{folder.name}/data.csv", "w") as file:
        ...     _ = file.write("grams,color,y\\n1500,red,0.5\\n2500,blue,1.0\\n3500,red,0.0\\n")
        >>> train = open_table(f"{folder.name}/data.csv", target="y").standardized()
        >>> next(iter(train)).X.round(3).tolist()
        [[-1.225, 0.0, 1.0], [0.0, 1.0, 0.0], [1.225, 0.0, 1.0]]
        >>> folder.cleanup()
        """
        from ._source_scaling import source_scaler

        if scaler is None:
            scaler = source_scaler(self._replace(scaler=None))
        elif getattr(scaler, "n_features_in_", None) != self.n_features:
            raise ValueError(f"standardized: the scaler has {getattr(scaler, 'n_features_in_', 'no')} fitted "
                             f"columns, this source {self.n_features}; give the scaler of a source opened "
                             "with the same encoding.")
        return self._replace(scaler=scaler)

    def _replace(self, **changes):
        settings = {"encoding": self.encoding, "chunk_rows": self.chunk_rows, "dtype": self.dtype,
                    "drop_missing_target": self.drop_missing_target, "scaler": self.scaler, **changes}
        return TableSource(self._layout, self.target, settings.pop("encoding"), **settings)

    def fit_encoding(self, *, max_categories=1000, handle_unknown="ignore", missing="error", learn_rows=None,
                     categorical=()):
        """Learn a :class:`ColumnEncoding` of the feature columns in one streamed pass.

        Reads the string and categorical columns, and the columns of codes this source's
        encoding one-hot encodes (``open_table(categorical=...)``), and with
        ``missing='encode'`` the numeric ones (:func:`rffkit._learn_encoding.learn_encoding`).
        The categories are every value seen, sorted (codes of numbers by their value). A
        text column of more than 20 distinct numbers and at least nine of them for each
        other value is refused (:class:`DataSourceError` naming the
        other values and their first rows): a numeric column that a placeholder such as
        ``'?'`` made text, whose one-hot encoding would give each number a column. A column
        with a distinct value on more than half of the rows (and more than 20 of them)
        draws a warning: an identifier, most likely, and so does a numeric column that holds
        the row numbers (a row label), with ``missing='encode'``.

        Parameters
        ----------
        max_categories : int, default=1000
            More distinct values than this in one column is an error that names the column
            (an identifier, most likely, to leave out with ``features=``).
        handle_unknown : {'ignore', 'error'}, default='ignore'
            See :class:`ColumnEncoding`.
        missing : {'error', 'encode'}, default='error'
            'error': a missing value (null, or NaN in a numeric column) raises
            :class:`MissingValueError` naming its column and row. 'encode': a null in a text
            column becomes a category of its own; a numeric column is filled with its mean
            where a value is missing, and one that has a missing value gets a 0/1 indicator
            column (see :class:`ColumnEncoding`).
        learn_rows : callable or None, default=None
            ``learn_rows(rows)``, the boolean mask of the rows (an array of global row
            indices) to learn the categories and means from, such as the training rows of a
            hold-out split, so that the held-out rows are encoded as new data would be;
            every row is still checked. Default: every row. With ``drop_missing_target``
            the rows whose target is missing are never learned from.
        categorical : sequence of str, default=()
            Text columns the caller names categorical (``open_table(categorical=...)``): their
            values are categories even when all of them are numbers written as text (codes
            such as product numbers), so the check for numbers in text passes them.

        Returns
        -------
        encoding : ColumnEncoding
            Over ``self.encoding.columns``, in that order, one-hot encoding each string or
            categorical column and each column of codes.
        """
        check_missing(missing, "fit_encoding")
        categorical_ = [categorical] if isinstance(categorical, str) else list(categorical)
        columns = self.encoding.columns
        dates = self.encoding.dates
        categorical = [name for name in columns if name not in dates
                       and (self._kinds[name] == "categorical" or name in self.encoding.categories)]
        # the numeric columns' means under 'encode'; under 'error' only dates written as text, to read them at the fit
        numeric = [name for name in columns if name not in categorical and (missing == "encode" or name in dates)]
        read = categorical + numeric
        drop = self.drop_missing_target and self.target is not None
        batches = self._raw_batches(read + ([self.target] if drop else []), self.chunk_rows, 0, 1) if read else ()

        def learn(batch, rows):  # the rows learned from: asked for, and with a target when it is needed
            mask = np.ones(len(rows), dtype=bool) if learn_rows is None else row_mask(learn_rows, rows)
            return mask & target_present(batch.column(self.target)) if drop else mask

        learned = learn_encoding(batches, categorical, numeric, max_categories, missing,
                                 learn if learn_rows is not None or drop else None, dates, declared=set(categorical_),
                                 decimal=self._decimal_advice())
        times = [name for name in columns
                 if self._kinds[name] == "time" and name not in categorical and name not in dates]
        return ColumnEncoding(columns, handle_unknown=handle_unknown, dates=dates, times=times, **learned)

    def _decimal_advice(self):
        """What to do about a text column of numbers written 0,5 in these files."""
        from ._io_base import DECIMAL_IN_COMMA_CSV, DECIMAL_IN_FILE, DECIMAL_IN_PARQUET

        if self._layout.format == "parquet":
            return DECIMAL_IN_PARQUET
        dialect = self._layout.dialect
        return DECIMAL_IN_COMMA_CSV if dialect is None or dialect.delimiter == "," else DECIMAL_IN_FILE

    def iter_chunks(self, chunk_rows=None, *, rank=0, world_size=1, unknown=None):
        """Yield :class:`Chunk` tuples over this rank's share of the rows, in file order.

        Parameters
        ----------
        chunk_rows : int, optional
            Rows per chunk (the last may be shorter); default ``self.chunk_rows``. It changes
            neither the rows, their order nor their indices.
        rank, world_size : int, default=0, 1
            With ``world_size > 1`` rank ``r`` gets a disjoint share, and the shares of ranks
            ``0 .. world_size-1`` hold every row once. Parquet: row groups, numbered over all
            files, go round-robin (row group ``g`` to rank ``g % world_size``), so each rank
            reads only its row groups; a table with fewer row groups than ranks leaves some
            ranks empty. CSV: every rank parses all files and keeps the rows ``i`` with
            ``i % world_size == rank``.
        unknown : dict, optional
            Filled with the categories met that the encoding does not know, per column, with
            their rows: ``{column: {value: rows}}`` (see :meth:`ColumnEncoding.transform`).

        Yields
        ------
        chunk : Chunk
            ``X`` (m, n_features), C-contiguous, of ``self.dtype``; ``y`` (m,) or None: float64
            for float targets, int64 for integer ones, bool, or an object array of str for
            string and categorical targets (classification encodes them); ``rows`` (m,) int64.
        """
        chunk_rows = self.chunk_rows if chunk_rows is None else check_chunk_rows(chunk_rows)
        rank, world_size = check_rank(rank, world_size)
        columns = list(self.encoding.columns) + ([self.target] if self.target else [])
        pieces = ((self.encoding.transform(batch, dtype=self.dtype, rows=rows, unknown=unknown),
                   None if self.target is None else target_values(batch.column(self.target), self.target, rows),
                   rows)
                  for batch, rows in self._kept_batches(columns, chunk_rows, rank, world_size))
        for X, y, rows in self._naming_files(rechunk(pieces, chunk_rows)):
            if self.scaler is not None:
                X = np.ascontiguousarray(self.scaler.transform(X), dtype=self.dtype)
            yield Chunk(X, y, rows)

    def _naming_files(self, chunks):
        """``chunks``, with the file and its own row added to an error that names a global row of a table of
        several files ("row 250 is row 0 of 'feb.csv'")."""
        try:
            yield from chunks
        except DataSourceError as error:
            found = re.search(r"\brow (\d+)", str(error)) if len(self._layout.files) > 1 else None
            where = found and self._layout.locate(int(found.group(1)))
            if not where or len(error.args) != 1:
                raise
            error.args = (f"{error.args[0].rstrip('.')} (row {found.group(1)} is row {where[1]} of "
                          f"{os.path.basename(where[0])!r}).",)
            raise

    def _kept_batches(self, columns, batch_rows, rank, world_size):
        """:meth:`_raw_batches` without the rows whose target is missing, with ``drop_missing_target``."""
        for batch, rows in self._raw_batches(columns, batch_rows, rank, world_size):
            if self.drop_missing_target:
                present = target_present(batch.column(self.target))
                if not present.all():
                    batch, rows = batch.filter(pa.array(present)), rows[present]
            if batch.num_rows:
                yield batch, rows

    def _raw_batches(self, columns, batch_rows, rank, world_size):
        """Yield ``(record batch of columns, global rows)`` for this rank's share."""
        return self._layout.batches(columns, batch_rows, rank, world_size, self._read_types)
