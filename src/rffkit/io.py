"""Streamed data sources: Parquet and CSV tables on disk, and arrays, read chunk by chunk.

A source yields :class:`Chunk` named tuples ``(X, y, rows)``: a numeric feature block, the
target (or None) and the global index of every row. Sources are re-iterable (each pass reads
the data again and holds about one chunk in memory) and split their rows over the ranks of a
distributed job. :func:`open_table` opens files, :class:`ArraySource` wraps arrays and memory
maps, :func:`as_source` accepts either.
"""

from __future__ import annotations

import glob
import numbers
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs

from ._streaming import rechunk

__all__ = [
    "open_table",
    "TableSource",
    "ArraySource",
    "as_source",
    "Chunk",
    "ColumnEncoding",
    "DataSourceError",
    "ColumnNotFoundError",
    "SchemaMismatchError",
    "MissingValueError",
    "UnknownCategoryError",
]

DEFAULT_CHUNK_ROWS = 65_536
_EXTENSIONS = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".csv.gz": "csv",
    ".tsv": "tsv", ".tsv.gz": "tsv",
}
_FILESYSTEM = pa_fs.LocalFileSystem()


class DataSourceError(ValueError):
    """The data behind a source cannot be used as it is; the message says what to change."""


class ColumnNotFoundError(DataSourceError):
    """A requested target or feature column is not in the data."""


class SchemaMismatchError(DataSourceError):
    """Two files of one table disagree on a column."""


class MissingValueError(DataSourceError):
    """A feature or target holds a null or NaN (the estimators reject NaN)."""


class UnknownCategoryError(DataSourceError):
    """A category absent when the encoding was fitted, under ``handle_unknown='error'``."""


class Chunk(NamedTuple):
    """Rows read together: ``X`` (m, p), ``y`` (m,) or None, ``rows`` (m,) int64 indices."""

    X: np.ndarray
    y: np.ndarray | None
    rows: np.ndarray


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _listing(names, limit=20):
    names = list(names)
    shown = ", ".join(repr(name) for name in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _at_row(position, rows):
    return int(position if rows is None else rows[position])


def _check_finite(values, column, rows):
    bad = ~np.isfinite(values)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        if np.isnan(values[position]):
            raise MissingValueError(
                f"column {column!r} holds NaN at row {_at_row(position, rows)}; "
                "drop or impute missing values before fitting.")
        raise DataSourceError(f"column {column!r} holds {values[position]} at row "
                              f"{_at_row(position, rows)}; the estimators need finite values.")


def _check_no_nulls(array, column, rows):
    if array.null_count:
        position = int(np.flatnonzero(pc.is_null(array).to_numpy(zero_copy_only=False))[0])
        raise MissingValueError(
            f"column {column!r} holds a missing value (null) at row {_at_row(position, rows)}; "
            "drop or impute missing values before fitting.")


def _kind(data_type):
    """Coarse kind of an Arrow type: what rffkit can do with the column."""
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


def _merge_kinds(first, second):
    if first == second or second == "null":
        return first
    if first == "null":
        return second
    if {first, second} == {"integer", "float"}:
        return "float"
    return None


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
            raise ValueError(f"ColumnEncoding: columns must be distinct; got {_listing(columns)}.")
        categories = {str(name): tuple(values) for name, values in dict(self.categories).items()}
        stray = [name for name in categories if name not in columns]
        if stray:
            raise ValueError(
                f"ColumnEncoding: categories given for {_listing(stray)}, not among the columns.")
        if self.handle_unknown not in ("ignore", "error"):
            raise ValueError("ColumnEncoding: handle_unknown must be 'ignore' or 'error'; "
                             f"got {self.handle_unknown!r}.")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "categories", categories)

    @property
    def output_names(self):
        names = []
        for column in self.columns:
            if column in self.categories:
                names.extend(f"{column}={value}" for value in self.categories[column])
            else:
                names.append(column)
        return names

    @property
    def groups(self):
        return [column for column in self.columns for _ in self.categories.get(column, (None,))]

    def to_dict(self):
        """A JSON-ready description; :meth:`from_dict` rebuilds the encoding."""
        return {"columns": list(self.columns), "handle_unknown": self.handle_unknown,
                "categories": {name: list(values) for name, values in self.categories.items()}}

    @classmethod
    def from_dict(cls, description):
        return cls(description["columns"], description.get("categories", {}),
                   description.get("handle_unknown", "ignore"))

    def transform(self, table, *, dtype=np.float64, rows=None):
        """Encode a table into ``X`` of shape (m, len(output_names)).

        Parameters
        ----------
        table : pyarrow.Table, pyarrow.RecordBatch, dict of arrays or pandas.DataFrame
            Must hold every column of ``self.columns``; others are ignored.
        dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        rows : ndarray of int, optional
            Global row indices, used only to name the row in error messages.

        Returns
        -------
        X : ndarray of shape (m, len(output_names))

        Raises
        ------
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
                                      f"{_listing(table.column_names)}.")
        # Filled one output column at a time as rows of X.T (contiguous writes), then copied
        # once into C order: about four times faster than writing strided columns of X.
        X_transposed = np.zeros((len(self.groups), table.num_rows), dtype=dtype)
        start = 0
        for column in self.columns:
            array = table.column(column)
            _check_no_nulls(array, column, rows)
            if column in self.categories:
                width = len(self.categories[column])
                self._one_hot(array, column, X_transposed[start:start + width], rows)
                start += width
                continue
            if _kind(array.type) not in ("integer", "float", "bool", "null"):
                raise DataSourceError(
                    f"column {column!r} has type {array.type}, which is not numeric, and the "
                    "encoding lists no categories for it; fit an encoding that covers it "
                    "(TableSource.fit_encoding), or leave the column out of the features.")
            values = pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
            _check_finite(values, column, rows)
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
                f"column {column!r} holds {_short(array[position].as_py())} at row "
                f"{_at_row(position, rows)}, a category the encoding was not fitted on (it knows "
                f"{len(value_set)}: {_listing(self.categories[column], 5)}); refit the encoding or "
                "use handle_unknown='ignore'.")
        block[index[known], np.flatnonzero(known)] = 1.0


def _expand_paths(paths):
    """Sorted absolute paths of every file named by a path, glob, directory, or list of them."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ValueError("open_table: paths is empty; give a file, a directory, a glob pattern "
                         "or a list of them.")
    files = set()
    for item in map(os.fspath, items):
        if os.path.isdir(item):
            found = _walk(item)
            if not found:
                raise FileNotFoundError(f"directory {item!r} holds no data files (names starting "
                                        "with '.' or '_' are skipped).")
        elif os.path.isfile(item):
            found = [item]
        elif any(character in item for character in "*?["):
            found = [name for name in glob.glob(item, recursive=True) if os.path.isfile(name)]
            if not found:
                raise FileNotFoundError(f"no file matches the pattern {item!r}.")
        else:
            raise FileNotFoundError(f"no such file or directory: {item!r}.")
        files.update(os.path.abspath(name) for name in found)
    return sorted(files)


def _walk(folder):
    """Every file below ``folder``, skipping names (files or folders) starting with '.' or '_'."""
    found = []
    for parent, subfolders, names in os.walk(folder):
        subfolders[:] = [name for name in subfolders if not name.startswith((".", "_"))]
        found += [os.path.join(parent, name) for name in names if not name.startswith((".", "_"))]
    return found


def _file_format(files, format):
    if format is not None:
        if format not in ("parquet", "csv", "tsv"):
            raise ValueError(
                f"open_table: format must be 'parquet', 'csv' or 'tsv'; got {format!r}.")
        return format
    formats = {}
    for path in files:
        name = os.path.basename(path).lower()
        found = [kind for extension, kind in _EXTENSIONS.items() if name.endswith(extension)]
        if not found:
            raise DataSourceError(
                f"{path!r} is not a CSV or Parquet file (known extensions: "
                f"{', '.join(_EXTENSIONS)}); remove it, or pass format= if it is one.")
        formats.setdefault(found[0], path)
    if len(formats) > 1:
        raise DataSourceError(f"the files mix formats ({_listing(formats.values())}); "
                              "open each format separately.")
    return next(iter(formats))


def _parse_options(file_format):
    return pa_csv.ParseOptions(delimiter="\t" if file_format == "tsv" else ",")


def _csv_format(file_format, column_types=None):
    convert = pa_csv.ConvertOptions(column_types=column_types or {}, strings_can_be_null=True)
    return ds.CsvFileFormat(parse_options=_parse_options(file_format), convert_options=convert)


def _fragment(path, file_format, column_types=None, row_groups=None):
    if file_format == "parquet":
        return ds.ParquetFileFormat().make_fragment(
            path, filesystem=_FILESYSTEM, row_groups=row_groups)
    return _csv_format(file_format, column_types).make_fragment(path, filesystem=_FILESYSTEM)


def _read_error(path, exc, names=None):
    message = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    column = re.search(r"CSV column #(\d+)", message)
    if column and names and int(column.group(1)) < len(names):
        message += f" (column #{column.group(1)} is {names[int(column.group(1))]!r})"
    return DataSourceError(f"cannot read {path!r}: {message}")


def _inspect(path, file_format):
    """Schema and Parquet row-group sizes of one file, with readable errors."""
    if os.path.getsize(path) == 0:
        raise DataSourceError(f"{path!r} is empty (0 bytes); remove it or write data into it.")
    try:
        fragment = _fragment(path, file_format)
        schema = fragment.physical_schema
        if file_format != "parquet":
            return schema, None
        metadata = fragment.metadata
        return schema, tuple(metadata.row_group(g).num_rows for g in range(metadata.num_row_groups))
    except (pa.ArrowException, OSError) as exc:
        raise _read_error(path, exc) from None


@dataclass
class _Layout:
    """The files of a table, their schemas, and (Parquet) their row-group sizes."""

    files: list
    format: str
    schemas: list
    row_groups: list
    n_rows: int | None = None

    def kinds(self, columns):
        """Kind of each column over all files; errors name the file and column that disagree."""
        kinds = {}
        for column in columns:
            if column not in self.schemas[0].names:
                raise ColumnNotFoundError(
                    f"column {column!r} is not in {self.files[0]!r}; its columns are "
                    f"{_listing(self.schemas[0].names)}.")
            witness = self.files[0], self.schemas[0].field(column).type
            merged = _kind(witness[1])
            for path, schema in zip(self.files[1:], self.schemas[1:]):
                if column not in schema.names:
                    raise SchemaMismatchError(
                        f"column {column!r} is in {self.files[0]!r} but not in {path!r}; "
                        "the shards of one table need the same columns.")
                type_ = schema.field(column).type
                kind = _merge_kinds(merged, _kind(type_))
                if kind is None:
                    raise SchemaMismatchError(
                        f"shards disagree on column {column!r}: {witness[1]} in {witness[0]!r} "
                        f"but {type_} in {path!r}.")
                if kind != merged:
                    merged, witness = kind, (path, type_)
            kinds[column] = merged
        return kinds


class TableSource:
    """Rows of one or more Parquet or CSV files, streamed in chunks.

    Create one with :func:`open_table`; :meth:`with_encoding` derives another. Iterating over
    a source is ``iter_chunks()`` with its defaults.

    Attributes
    ----------
    files : list of str
        Absolute paths in reading order (sorted).
    format : {'parquet', 'csv', 'tsv'}
    target : str or None
    encoding : ColumnEncoding
        Turns the feature columns into ``X``.
    feature_names : list of str
        Names of the columns of ``X`` (``encoding.output_names``).
    n_features : int
    n_rows : int
        From Parquet metadata; for CSV counted in one pass on first access, then cached.
    """

    def __init__(self, layout, target, encoding, *, chunk_rows, dtype):
        self._layout = layout
        self.target = target
        self.encoding = encoding
        self.chunk_rows = _check_chunk_rows(chunk_rows)
        self.dtype = _check_dtype(dtype)
        self._kinds = layout.kinds(list(encoding.columns) + ([target] if target else []))
        if target in encoding.columns:
            raise ValueError(f"open_table: the target {target!r} cannot also be a feature.")
        for column in encoding.columns:
            kind = self._kinds[column]
            uncovered = kind == "categorical" and column not in encoding.categories
            if kind == "unsupported" or uncovered:
                type_ = layout.schemas[0].field(column).type
                raise DataSourceError(
                    f"feature column {column!r} has type {type_}, which the encoding does not "
                    "turn into numbers; " + ("fit an encoding that covers it, or " if uncovered
                                             else "") + "leave it out with features=[...].")
        if target and self._kinds[target] == "unsupported":
            raise DataSourceError(f"target column {target!r} has an unsupported type; expected "
                                  "numbers, booleans or strings.")

    files = property(lambda self: list(self._layout.files))
    format = property(lambda self: self._layout.format)
    feature_names = property(lambda self: self.encoding.output_names)
    n_features = property(lambda self: len(self.encoding.output_names))

    @property
    def n_rows(self):
        if self._layout.n_rows is None:
            total = 0
            for path in self._layout.files:
                try:
                    total += _fragment(path, self.format, self._column_types()).count_rows()
                except (pa.ArrowException, OSError) as exc:
                    raise _read_error(path, exc) from None
            self._layout.n_rows = total
        return self._layout.n_rows

    def __repr__(self):
        return (f"TableSource({len(self._layout.files)} {self.format} file(s), "
                f"target={self.target!r}, n_features={self.n_features})")

    def __iter__(self):
        return self.iter_chunks()

    def with_encoding(self, encoding):
        """A source over the same files whose features are ``encoding.columns``, encoded by it."""
        return TableSource(self._layout, self.target, encoding, chunk_rows=self.chunk_rows,
                           dtype=self.dtype)

    def fit_encoding(self, *, max_categories=1000, handle_unknown="ignore"):
        """Learn a :class:`ColumnEncoding` of the feature columns in one streamed pass.

        Reads only the string and categorical columns; their categories are every value
        seen, sorted.

        Parameters
        ----------
        max_categories : int, default=1000
            More distinct values than this in one column is an error that names the column
            (an identifier, most likely, to leave out with ``features=``).
        handle_unknown : {'ignore', 'error'}, default='ignore'
            See :class:`ColumnEncoding`.

        Returns
        -------
        encoding : ColumnEncoding
        """
        categorical = [name for name in self.encoding.columns if self._kinds[name] == "categorical"]
        seen = {column: set() for column in categorical}
        if categorical:
            for batch, rows in self._raw_batches(categorical, self.chunk_rows, 0, 1):
                for column in categorical:
                    array = batch.column(column)
                    _check_no_nulls(array, column, rows)
                    if pa.types.is_dictionary(array.type):
                        array = pc.cast(array, array.type.value_type)
                    seen[column].update(pc.unique(array).to_pylist())
                    if len(seen[column]) > max_categories:
                        raise DataSourceError(
                            f"column {column!r} has more than max_categories={max_categories} "
                            "distinct values; leave it out with features=[...] or raise "
                            "max_categories.")
        categories = {column: sorted(values) for column, values in seen.items()}
        return ColumnEncoding(self.encoding.columns, categories, handle_unknown)

    def iter_chunks(self, chunk_rows=None, *, rank=0, world_size=1):
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

        Yields
        ------
        chunk : Chunk
            ``X`` (m, n_features), C-contiguous, of ``self.dtype``; ``y`` (m,) or None: float64
            for float
            targets, int64 for integer ones, bool, or an object array of str for string and
            categorical targets (classification encodes them); ``rows`` (m,) int64.
        """
        chunk_rows = self.chunk_rows if chunk_rows is None else _check_chunk_rows(chunk_rows)
        rank, world_size = _check_rank(rank, world_size)
        columns = list(self.encoding.columns) + ([self.target] if self.target else [])
        pieces = ((self.encoding.transform(batch, dtype=self.dtype, rows=rows),
                   self._target_values(batch, rows), rows)
                  for batch, rows in self._raw_batches(columns, chunk_rows, rank, world_size))
        for X, y, rows in rechunk(pieces, chunk_rows):
            yield Chunk(X, y, rows)

    def _target_values(self, batch, rows):
        if self.target is None:
            return None
        array = batch.column(self.target)
        _check_no_nulls(array, self.target, rows)
        if pa.types.is_dictionary(array.type):
            array = pc.cast(array, array.type.value_type)
        kind = _kind(array.type)
        if kind == "categorical":
            return np.asarray(array.to_numpy(zero_copy_only=False), dtype=object)
        if kind in ("integer", "bool"):
            dtype = np.int64 if kind == "integer" else bool
            return np.asarray(array.to_numpy(zero_copy_only=False), dtype=dtype)
        values = pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        _check_finite(values, self.target, rows)
        return values

    def _column_types(self):
        """CSV only: fixed read types, so a later block cannot contradict the inferred ones."""
        if self.format == "parquet":
            return None
        types = {"bool": pa.bool_(), "categorical": pa.string()}
        types_ = {column: types.get(kind, pa.float64()) for column, kind in self._kinds.items()}
        if self.target and self._kinds[self.target] == "integer":
            types_[self.target] = pa.int64()
        return types_

    def _raw_batches(self, columns, batch_rows, rank, world_size):
        """Yield ``(record batch of columns, global rows)`` for this rank's share."""
        layout, offset, group_number = self._layout, 0, 0
        for path, schema, row_groups in zip(layout.files, layout.schemas, layout.row_groups):
            if layout.format == "parquet":
                mine = [g for g in range(len(row_groups))
                        if (group_number + g) % world_size == rank]
                starts = offset + np.cumsum((0,) + row_groups[:-1], dtype=np.int64)
                group_number, offset = group_number + len(row_groups), offset + sum(row_groups)
                if not mine:
                    continue
                segments = (starts[mine], np.asarray(row_groups, dtype=np.int64)[mine])
                position = 0
                fragment = _fragment(path, "parquet", row_groups=mine)
                for batch in _batches(fragment, columns, batch_rows, path):
                    yield batch, _segment_rows(position, batch.num_rows, *segments)
                    position += batch.num_rows
            else:
                fragment = _fragment(path, layout.format, self._column_types())
                for batch in _batches(fragment, columns, batch_rows, path, schema.names):
                    rows = np.arange(offset, offset + batch.num_rows, dtype=np.int64)
                    offset += batch.num_rows
                    if world_size > 1:
                        keep = rows % world_size == rank
                        batch, rows = batch.filter(pa.array(keep)), rows[keep]
                    if rows.size:
                        yield batch, rows
        if layout.n_rows is None:
            layout.n_rows = offset


def _segment_rows(position, count, starts, lengths):
    """Global rows of stream positions ``position .. position+count`` over row segments."""
    ends = np.cumsum(lengths)
    positions = np.arange(position, position + count, dtype=np.int64)
    segment = np.searchsorted(ends, positions, side="right")
    return positions - (ends[segment] - lengths[segment]) + starts[segment]


def _batches(fragment, columns, batch_rows, path, names=None):
    """Record batches of a fragment; Arrow read errors become :class:`DataSourceError`."""
    try:
        yield from fragment.to_batches(columns=columns, batch_size=batch_rows,
                                       batch_readahead=1, fragment_readahead=1)
    except (pa.ArrowException, OSError) as exc:
        raise _read_error(path, exc, names) from None


def _check_chunk_rows(chunk_rows):
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, numbers.Integral) \
            or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer; got {chunk_rows!r}.")
    return int(chunk_rows)


def _check_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"dtype must be float64 or float32; got {dtype}.")
    return dtype


def _check_rank(rank, world_size):
    if not isinstance(world_size, numbers.Integral) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer; got {world_size!r}.")
    if not isinstance(rank, numbers.Integral) or not 0 <= rank < world_size:
        raise ValueError(
            f"rank must be an integer in [0, world_size={world_size}); got {rank!r}.")
    return int(rank), int(world_size)


def open_table(paths, target=None, *, features=None, format=None,
               chunk_rows=DEFAULT_CHUNK_ROWS, dtype=np.float64, encoding="auto"):
    """Open Parquet or CSV files as one streamed table.

    Parameters
    ----------
    paths : str, path-like or list of them
        A file, a glob pattern (``"data/*.parquet"``, ``**`` recurses), a directory (every
        file below it, skipping names that start with '.' or '_'), or a list of these. The
        files are read in sorted order of their absolute paths.
    target : str, optional
        Column holding the target; None for unsupervised use (``Chunk.y`` is None).
    features : list of str, optional
        Feature columns, in this order; default every column but the target (and pandas'
        ``__index_level_N__`` columns), in the order of the first file.
    format : {'parquet', 'csv', 'tsv'}, optional
        Default inferred from the extensions .parquet/.pq, .csv/.csv.gz, .tsv/.tsv.gz.
    chunk_rows : int, default=65536
        Default rows per chunk of :meth:`TableSource.iter_chunks`.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Dtype of ``X``.
    encoding : 'auto' or ColumnEncoding, default='auto'
        'auto' passes numbers and booleans through and, when some feature is a string or
        categorical column, learns a one-hot encoding in one streamed pass
        (:meth:`TableSource.fit_encoding` with its defaults). Pass the encoding of the
        training data when opening test data, so both get the same columns.

    Returns
    -------
    source : TableSource

    Raises
    ------
    FileNotFoundError
        Nothing matches ``paths``.
    DataSourceError
        (a ValueError) A file is not CSV/Parquet or cannot be read, the table has no rows, a
        column is missing (:class:`ColumnNotFoundError`) or the shards disagree
        (:class:`SchemaMismatchError`), a feature has an unusable type.

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
    files = _expand_paths(paths)
    file_format = _file_format(files, format)
    inspected = [_inspect(path, file_format) for path in files]
    layout = _Layout(files, file_format, [schema for schema, _ in inspected],
                     [groups for _, groups in inspected])
    available = layout.schemas[0].names
    if target is not None and target not in available:
        raise ColumnNotFoundError(f"target column {target!r} is not in {files[0]!r}; its columns "
                                  f"are {_listing(available)}.")
    if isinstance(encoding, ColumnEncoding):
        if features is not None and list(features) != list(encoding.columns):
            raise ValueError("open_table: features and encoding.columns differ; give one of "
                             "them.")
        features = list(encoding.columns)
    elif encoding != "auto":
        raise ValueError("open_table: encoding must be 'auto' or a ColumnEncoding; "
                         f"got {_short(encoding)}.")
    if features is None:
        features = [name for name in available
                    if name != target and not re.fullmatch(r"__index_level_\d+__", name)]
        for path, schema in zip(files, layout.schemas):
            extra = [name for name in schema.names if name not in available]
            if extra:
                raise SchemaMismatchError(
                    f"column {extra[0]!r} is in {path!r} but not in {files[0]!r}; pass "
                    "features=[...] to use only common columns.")
    else:
        features = [features] if isinstance(features, str) else list(features)
        for name in features:
            if name not in available:
                raise ColumnNotFoundError(
                    f"feature column {name!r} is not in {files[0]!r}; its columns are "
                    f"{_listing(available)}.")
        if len(set(features)) != len(features):
            raise ValueError(f"open_table: features lists a column twice: {_listing(features)}.")
        if target in features:
            raise ValueError(f"open_table: the target {target!r} cannot also be a feature.")
    if not features:
        raise DataSourceError(f"no feature columns: {files[0]!r} has only {_listing(available)}.")
    if file_format == "parquet":
        layout.n_rows = sum(sum(groups) for groups in layout.row_groups)
    kinds = layout.kinds(features)
    categorical = {name: () for name in features if kinds[name] == "categorical"}
    given = isinstance(encoding, ColumnEncoding)
    # Until the categories are learned, an empty one-hot block stands in for each string column.
    first = encoding if given else ColumnEncoding(features, categorical)
    source = TableSource(layout, target, first, chunk_rows=chunk_rows, dtype=dtype)
    if layout.n_rows == 0 or (layout.n_rows is None and not _has_rows(source)):
        raise DataSourceError(f"the table has no rows ({len(files)} file(s), first {files[0]!r}).")
    if categorical and not given:
        source = source.with_encoding(source.fit_encoding())
    return source


def _has_rows(source):
    """CSV: whether any file holds a row, parsing at most one block of each file."""
    options = pa_csv.ConvertOptions(include_columns=[source.encoding.columns[0]],
                                    column_types={source.encoding.columns[0]: pa.string()})
    for path in source.files:
        try:
            with pa_csv.open_csv(path, parse_options=_parse_options(source.format),
                                 convert_options=options) as reader:
                if any(batch.num_rows for batch in reader):
                    return True
        except (pa.ArrowException, OSError) as exc:
            raise _read_error(path, exc) from None
    return False


class ArraySource:
    """The source interface over in-memory arrays or a ``numpy.memmap``.

    Chunks are slices of ``X`` read one at a time: views when ``X`` already has ``dtype``,
    otherwise one chunk-sized copy each; ``X`` is never copied whole.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Numeric; a ``numpy.memmap`` stays on disk.
    y : array-like of shape (n,), optional
    chunk_rows : int, default=65536
    feature_names : list of str, optional
        Default ``["x0", "x1", ...]`` (or the columns of a pandas DataFrame).
    dtype : {numpy.float64, numpy.float32}, optional
        Default the dtype of ``X`` when it is float32 or float64, else float64.

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
        if feature_names is None:
            feature_names = [f"x{j}" for j in range(X.shape[1])]
        names = [str(name) for name in feature_names]
        if len(names) != X.shape[1]:
            raise ValueError(f"ArraySource: {len(names)} feature_names for {X.shape[1]} columns.")
        self.X, self.y = X, y
        self.chunk_rows = _check_chunk_rows(chunk_rows)
        if dtype is None:
            dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        self.dtype = _check_dtype(dtype)
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

        Rank ``r`` gets the contiguous rows ``[r * n // world_size, (r + 1) * n // world_size)``.
        NaN or infinity in a chunk raises an error naming the column and row.
        """
        chunk_rows = self.chunk_rows if chunk_rows is None else _check_chunk_rows(chunk_rows)
        rank, world_size = _check_rank(rank, world_size)
        begin, end = rank * self.n_rows // world_size, (rank + 1) * self.n_rows // world_size
        for start in range(begin, end, chunk_rows):
            stop = min(start + chunk_rows, end)
            rows = np.arange(start, stop, dtype=np.int64)
            X = np.asarray(self.X[start:stop]).astype(self.dtype, copy=False)
            for j in np.flatnonzero(~np.isfinite(X).all(axis=0)):
                _check_finite(X[:, j], self.feature_names[j], rows)
            y = None if self.y is None else self.y[start:stop]
            if y is not None and np.issubdtype(y.dtype, np.floating):
                _check_finite(y, "y", rows)
            yield Chunk(X, y, rows)


def as_source(X, y=None):
    """Return ``X`` unchanged if it is a source, else wrap arrays in an :class:`ArraySource`.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit.io import as_source
    >>> source = as_source(np.zeros((4, 2)))
    >>> as_source(source) is source
    True
    """
    if isinstance(X, (TableSource, ArraySource)):
        if y is not None:
            raise ValueError(
                f"as_source: {type(X).__name__} already carries its target; pass y=None.")
        return X
    return ArraySource(X, y)
