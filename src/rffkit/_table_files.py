"""The files under a :class:`rffkit.io.TableSource`: found, checked, and read batch by batch.

:func:`expand_paths` turns paths, globs and directories into a list of files (in the order given),
:func:`file_format` names their format (a CSV file's dialect: :mod:`rffkit._csv_dialect`), and
:func:`inspect_file` reads one file's schema (and Parquet row groups). A
:class:`TableLayout` holds what was found; it merges the kinds of each column over the files,
counts rows and yields each rank's record batches with their global row indices;
:func:`target_values` and :func:`target_present` read a target column. Arrow's read errors
become :class:`~rffkit.io.DataSourceError` naming the file (and, for CSV, the column):
:func:`~rffkit._io_base.read_error`.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs

from ._column_kinds import (
    TIME_UNITS, as_text, codes_as_numbers, column_kind, merge_kinds, not_utf8, text_reads_as_numbers,
)
from ._csv_dialect import CSVDialect, check_header
from ._io_base import (
    LEADING_ZERO, LEAVE_OUT, ColumnNotFoundError, DataSourceError, SchemaMismatchError, check_names, listing,
    read_error, short,
)
from ._text_dates import date_columns, warn_date_doubt

__all__ = ["TableLayout", "expand_paths", "file_format", "inspect_file"]

_EXTENSIONS = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".csv.gz": "csv",
    ".tsv": "tsv", ".tsv.gz": "tsv",
}
_FILESYSTEM = pa_fs.LocalFileSystem()


def expand_paths(paths):
    """Absolute paths of every file named by a path, glob, directory, or list of them: in the order
    given, the files of a glob or a directory in sorted order, each file once (where first named)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ValueError("open_table: paths is empty; give a file, a directory, a glob pattern "
                         "or a list of them.")
    files = {}  # insertion-ordered: a file named twice is read once, where first named
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
        files.update(dict.fromkeys(sorted(os.path.abspath(name) for name in found)))
    return list(files)


def _walk(folder):
    """Every file below ``folder``, skipping names (files or folders) starting with '.' or '_'."""
    found = []
    for parent, subfolders, names in os.walk(folder):
        subfolders[:] = [name for name in subfolders if not name.startswith((".", "_"))]
        found += [os.path.join(parent, name) for name in names if not name.startswith((".", "_"))]
    return found


def file_format(files, format):
    """``format`` checked, or the one format all ``files`` have by their extensions."""
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
                f"{', '.join(_EXTENSIONS)}); remove it, name the data files (a glob such as 'folder/*.parquet'), "
                "or, if it is one, pass format= (Python).")
        formats.setdefault(found[0], path)
    if len(formats) > 1:
        raise DataSourceError(f"the files mix formats ({listing(formats.values())}); "
                              "open each format separately.")
    return next(iter(formats))


def _parse_options(dialect):
    # a quoted field may hold line ends (pandas writes a note "line1\nline2" so): without the option the
    # reader splits blocks inside such a field once a file outgrows its first block (measured: no slower)
    return pa_csv.ParseOptions(delimiter=dialect.delimiter, newlines_in_values=True)


def _csv_format(dialect, column_types=None, null_values=None):
    convert = pa_csv.ConvertOptions(column_types=column_types or {}, strings_can_be_null=True,
                                    decimal_point=dialect.decimal, null_values=null_values)
    return ds.CsvFileFormat(parse_options=_parse_options(dialect), convert_options=convert)


def _fragment(path, dialect, column_types=None, row_groups=None, null_values=None):
    """A dataset fragment of one file: Parquet when ``dialect`` is None, else CSV in that dialect."""
    if dialect is None:
        return ds.ParquetFileFormat().make_fragment(
            path, filesystem=_FILESYSTEM, row_groups=row_groups)
    return _csv_format(dialect, column_types, null_values).make_fragment(path, filesystem=_FILESYSTEM)


def inspect_file(path, dialect, first=None):
    """Schema and Parquet row-group sizes of one file (Parquet when ``dialect`` is None, else CSV in
    that :class:`CSVDialect`, the table's: given, or that of its first file ``first``), with readable
    errors: a column name twice, a CSV header that is not UTF-8 or is delimited otherwise than
    ``dialect`` says (a shard written in another dialect)."""
    if os.path.getsize(path) == 0:
        raise DataSourceError(f"{path!r} is empty (0 bytes); remove it or write data into it.")
    try:
        fragment = _fragment(path, dialect)
        schema = fragment.physical_schema
        groups = None if dialect is not None else tuple(
            fragment.metadata.row_group(g).num_rows for g in range(fragment.metadata.num_row_groups))
    except (pa.ArrowException, OSError) as exc:
        if dialect is not None:
            check_header(path, dialect, first)
        raise read_error(path, exc) from None
    check_names(path, schema)
    if dialect is not None and len(schema.names) == 1:
        check_header(path, dialect, first)
    return schema, groups


def _batches(fragment, columns, batch_rows, path, names=None):
    """Record batches of a fragment; Arrow read errors become :class:`DataSourceError`."""
    try:
        yield from fragment.to_batches(columns=columns, batch_size=batch_rows,
                                       batch_readahead=1, fragment_readahead=1)
    except (pa.ArrowException, OSError) as exc:
        raise read_error(path, exc, names) from None


def _segment_rows(position, count, starts, lengths):
    """Global rows of stream positions ``position .. position+count`` over row segments."""
    ends = np.cumsum(lengths)
    positions = np.arange(position, position + count, dtype=np.int64)
    segment = np.searchsorted(ends, positions, side="right")
    return positions - (ends[segment] - lengths[segment]) + starts[segment]


#: The distinct values of a column of dates in doubt that the finding of dates looks at, at most.
_DOUBT_TEXTS = 100_000


@dataclass
class TableLayout:
    """The files of a table, their schemas, and (Parquet) their row-group sizes."""

    files: list
    format: str
    schemas: list
    row_groups: list
    n_rows: int | None = None
    #: how the CSV files write their fields (None for Parquet)
    dialect: CSVDialect | None = None
    #: CSV columns read as text whatever the first rows suggested (:class:`LateTextError`)
    text_columns: set = field(default_factory=set)
    #: The global index of each file's first row, as far as a pass has read (Parquet: from its metadata)
    first_rows: dict = field(default_factory=dict)

    def locate(self, row):
        """``(file, its row)`` of the global ``row``, or None where no pass has yet read so far."""
        starts = sorted((start, path) for path, start in self.first_rows.items() if start <= row)
        if not starts:
            return None
        start, path = starts[-1]
        return path, row - start

    def _refuse_absent(self, names, role):
        absent = [name for name in names if name not in self.schemas[0].names]
        if absent:
            raise ColumnNotFoundError(
                f"{role} column{'s' if len(absent) > 1 else ''} {listing(absent)} "
                f"{'are' if len(absent) > 1 else 'is'} not in {self.files[0]!r}; its columns are "
                f"{listing(self.schemas[0].names)}.")

    def feature_columns(self, target, features=None, exclude=None):
        """The feature columns of ``open_table``: ``features`` checked, or every column of the
        first file but the target, ``exclude`` and pandas' ``__index_level_N__`` columns (then
        every file must have no other column)."""
        exclude = [] if exclude is None else [exclude] if isinstance(exclude, str) else list(exclude)
        if exclude and features is not None:
            raise ValueError("open_table: give features or exclude, not both.")
        self._refuse_absent(exclude, "excluded")
        available = self.schemas[0].names
        if features is None:
            features = [name for name in available
                        if name != target and name not in exclude and not re.fullmatch(r"__index_level_\d+__", name)]
            for path, schema in zip(self.files, self.schemas):
                extra = [name for name in schema.names if name not in available]
                if extra:
                    raise SchemaMismatchError(
                        f"column {extra[0]!r} is in {path!r} but not in {self.files[0]!r}; give the common "
                        "columns as features (features=[...] in Python, --features on the command line).")
        else:
            features = [features] if isinstance(features, str) else list(features)
            self._refuse_absent(features, "feature")
            if len(set(features)) != len(features):
                raise ValueError(f"open_table: features lists a column twice: {listing(features)}.")
            if target in features:
                raise ValueError(f"open_table: the target {target!r} cannot also be a feature.")
        if not features:
            raise DataSourceError(f"no feature columns: {self.files[0]!r} has only {listing(available)}.")
        return features

    def categorical_columns(self, features, categorical, given):
        """``open_table``'s ``categorical``, checked: a list of feature columns (empty for None). A CSV
        column of them that writes a code with a leading zero ('007' beside '7') is read as text, as
        written: the reader's numbers would make two codes one."""
        if categorical is None:
            return []
        categorical = [categorical] if isinstance(categorical, str) else list(categorical)
        if given and categorical:
            raise ValueError("open_table: give categorical or an encoding, not both (an encoding lists "
                             "its own categories).")
        self._refuse_absent(categorical, "categorical")
        others = [name for name in categorical if name not in features]
        if others:
            raise ValueError(f"open_table: categorical names {listing(others)}, not a feature column (the target, "
                             f"or a column left out of the features); the features are {listing(features)}.")
        if self.format != "parquet":
            numeric = [name for name, kind in self.kinds(categorical).items() if kind in ("integer", "float")]
            self.text_columns.update(name for name in numeric if any(
                pc.any(pc.match_substring_regex(batch.column(0), LEADING_ZERO)).as_py()
                for batch, _ in self.batches([name], 65_536, 0, 1, {name: pa.string()})))
        return categorical

    def date_formats(self, features, dates, codes, given):
        """``open_table``'s ``dates``, checked: a dict of feature columns, none of them among
        ``codes`` (categorical), to ``strptime`` formats (empty for None). A CSV column the reader
        parses as dates is read as text for its given form; a Parquet column of dates is an error."""
        if dates is None:
            return {}
        if given and dates:
            raise ValueError("open_table: give dates or an encoding, not both (an encoding lists its own dates).")
        if not isinstance(dates, dict) or not all(isinstance(format_, str) and "%" in format_
                                                  for format_ in dates.values()):
            raise ValueError(f"open_table: dates must map columns to strptime formats such as '%d/%m/%Y'; got "
                             f"{short(dates)}.")
        for name, format_ in dates.items():  # Arrow's strptime has no %f: the reader takes it after the seconds
            if "%f" in re.sub(r"%S[.,]%f", "", format_):
                raise ValueError(f"open_table: dates gives {name!r} the form {format_!r}, whose %f, a fraction of a "
                                 "second, does not come right after the seconds, as in '%H:%M:%S.%f'.")
        self._refuse_absent(list(dates), "dates")
        others = [name for name in dates if name not in features or name in codes]
        if others:
            raise ValueError(f"open_table: dates names {listing(others)}, not a feature column, or one that "
                             f"categorical names too; the features are {listing(features)}.")
        stored = [name for name, kind in self.kinds(list(dates)).items() if kind in TIME_UNITS]
        if stored and self.format == "parquet":
            raise ValueError(f"open_table: dates names {listing(stored)}, which the file stores as dates or times "
                             "already; leave it out of dates.")
        self.text_columns.update(stored)  # a CSV reader's reading of them (ISO 8601) gives way to the form given
        return {str(name): format_ for name, format_ in dates.items()}

    def text_dates(self, columns, chunk_rows):
        """:func:`rffkit._text_dates.date_columns` of the text ``columns``, each from the first chunk
        where it holds a value (a CSV column empty in the reader's first block may be dates); one in
        doubt is looked at with the next chunks too (a file of times may start with a month's first
        days), until a value tells day and month apart, ``_DOUBT_TEXTS`` or the file's end."""
        formats, doubts, seen, waiting = {}, {}, {}, list(columns)
        types = self.read_types(dict.fromkeys(columns, "categorical"))
        for batch, rows in self.batches(columns, chunk_rows, 0, 1, types):
            ready = [column for column in waiting if pc.max(pc.utf8_length(pc.utf8_trim_whitespace(
                as_text(batch.column(column))))).as_py()]
            found, doubted = date_columns(batch, rows, ready + list(doubts), seen)
            formats.update(found)
            doubts = doubted  # a column that was in doubt and is not now: dates found, or no dates
            waiting = [column for column in waiting if column not in ready]
            for column in [column for column in doubts if len(seen[column]) > _DOUBT_TEXTS]:
                warn_date_doubt(column, doubts.pop(column))
            if not waiting and not doubts:
                break
        for column, doubt in doubts.items():
            warn_date_doubt(column, doubt)
        return formats

    def checked_kinds(self, encoding, target, chunk_rows):
        """The kinds of ``encoding``'s columns and of ``target``, each checked: a feature must be a
        kind ``encoding`` turns into numbers (text it has no categories or date format for only when
        every value is a number, which it then parses), and the target numbers, booleans or text."""
        kinds = self.kinds(list(encoding.columns) + ([target] if target else []))
        # a column the encoding one-hot encodes or reads dates from, empty in a CSV's first rows: text all the same
        kinds.update({column: "categorical" for column in (*encoding.categories, *encoding.dates)
                      if kinds[column] == "null"})
        if self.format != "parquet":  # codes learned as text ('abc', '007'): the fields as written, not as numbers
            kinds.update({column: "categorical" for column, values in encoding.categories.items()
                          if kinds[column] in ("integer", "float")
                          and codes_as_numbers(pa.array([v for v in values if v is not None], pa.string())).null_count})
        if self.format != "parquet":  # dates in a form the CSV reader takes for ISO 8601's (%Y-%d-%m): the form holds
            kinds.update({column: "categorical" for column, form in encoding.dates.items()
                          if kinds[column] in TIME_UNITS and form.startswith("%Y-")})
        for column in encoding.columns:
            kind, type_ = kinds[column], self._type_of(column, kinds[column])
            if kind == "unsupported" and column in encoding.categories:
                raise DataSourceError(f"feature column {column!r} has type {type_}, whose values cannot be read "
                                      f"as categories; {LEAVE_OUT}.")
            uncovered = (kind == "categorical"
                         and column not in (*encoding.categories, *encoding.dates, *encoding.times)
                         and not text_reads_as_numbers(self.batches([column], chunk_rows, 0, 1,
                                                                    self.read_types({column: kind})),
                                                       column, nulls=encoding.missing == "encode"))
            if kind == "unsupported" or uncovered:
                raise DataSourceError(
                    f"feature column {column!r} has type {type_}, which the encoding does not "
                    "turn into numbers; " + ("fit an encoding that covers it, or " if uncovered
                                             else "") + f"{LEAVE_OUT}.")
        if target and (kinds[target] == "unsupported" or kinds[target] in TIME_UNITS):
            raise DataSourceError(f"target column {target!r} has an unsupported type, "
                                  f"{self._type_of(target, kinds[target])}; expected numbers, booleans or strings.")
        return kinds

    def _type_of(self, column, kind):
        """The type of ``column`` in the first file where it is of ``kind`` (the merged kind of :meth:`kinds`), or
        in the first file: the type a message names (a first file's column of nulls would say nothing)."""
        types = [schema.field(column).type for schema in self.schemas]
        return next((type_ for type_ in types if column_kind(type_) == kind), types[0])

    def read_types(self, kinds, target=None):
        """CSV only (None for Parquet): the type each column of ``kinds`` is read as, so a later
        block cannot contradict the types inferred from the first: text as string, booleans as
        bool, times in the first file's type, an integer target as int64, other numbers as float64."""
        if self.format == "parquet":
            return None
        fixed = {"bool": pa.bool_(), "categorical": pa.string()}
        types = {column: self.schemas[0].field(column).type if kind in TIME_UNITS else fixed.get(kind, pa.float64())
                 for column, kind in kinds.items()}
        if target and kinds[target] == "integer":
            types[target] = pa.int64()
        return types

    def kinds(self, columns):
        """Kind of each column over all files; errors name the file and column that disagree."""
        kinds = {}
        for column in columns:
            if column not in self.schemas[0].names:
                raise ColumnNotFoundError(
                    f"column {column!r} is not in {self.files[0]!r}; its columns are "
                    f"{listing(self.schemas[0].names)}.")
            if column in self.text_columns:
                kinds[column] = "categorical"
                continue
            witness = self.files[0], self.schemas[0].field(column).type
            merged = column_kind(witness[1])
            for path, schema in zip(self.files, self.schemas):
                if column not in schema.names:
                    raise self._not_in(column, path)
                type_ = schema.field(column).type
                if self.format != "parquet" and (pa.types.is_binary(type_) or pa.types.is_large_binary(type_)):
                    # what a CSV reader makes of text in another encoding than UTF-8
                    raise not_utf8(path, column, _batches(_fragment(path, self.dialect, {column: pa.binary()}),
                                                          [column], 65_536, path))
                kind = merge_kinds(merged, column_kind(type_))
                if kind is None:
                    if self.dialect is not None:  # numbers written with another decimal point read as text
                        for odd in (path, witness[0]):
                            check_header(odd, self.dialect, self.files[0])
                    raise SchemaMismatchError(
                        f"shards disagree on column {column!r}: {witness[1]} in {witness[0]!r} "
                        f"but {type_} in {path!r}.")
                if kind != merged:
                    merged, witness = kind, (path, type_)
            kinds[column] = merged
        return kinds

    def _not_in(self, column, path):
        return SchemaMismatchError(f"column {column!r} is in {self.files[0]!r} but not in {path!r}; the shards of "
                                   "one table need the same columns.")

    def count_rows(self, column_types):
        """Rows in all files (CSV: one parsing pass, read with ``column_types``), cached."""
        if self.n_rows is None:
            total = 0
            for path in self.files:
                try:
                    total += _fragment(path, self.dialect, column_types).count_rows()
                except (pa.ArrowException, OSError) as exc:
                    raise read_error(path, exc) from None
            self.n_rows = total
        return self.n_rows

    def read_columns(self, columns, text=False):
        """``columns`` of every file, in row order, as one Arrow table: as their types infer, or with
        ``text`` a CSV's fields as written (only an empty field is missing: 'NA' is a code); shards that
        disagree on a type give text."""
        self._refuse_absent(columns, "the")
        tables = []
        for path, schema in zip(self.files, self.schemas):
            absent = [column for column in columns if column not in schema.names]
            if absent:
                raise self._not_in(absent[0], path)
            try:
                types = dict.fromkeys(columns, pa.string()) if text else None
                nulls = [""] if text else None
                tables.append(_fragment(path, self.dialect, types, null_values=nulls).to_table(columns=columns))
            except (pa.ArrowException, OSError) as exc:
                raise read_error(path, exc, schema.names) from None
        if len({table.schema for table in tables}) > 1:
            for k, path in enumerate(self.files):
                for j, column in enumerate(columns):
                    try:
                        tables[k] = tables[k].set_column(j, column, pc.cast(tables[k].column(j), pa.string()))
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        raise SchemaMismatchError(
                            f"shards disagree on column {column!r}, which is {tables[k].field(j).type} in {path!r}: "
                            "it cannot be read as text, as the others are.") from None
        return pa.concat_tables(tables)

    def has_rows(self, column):
        """CSV: whether any file holds a row, parsing ``column`` of at most one block a file."""
        options = pa_csv.ConvertOptions(include_columns=[column],
                                        column_types={column: pa.string()})
        for path in self.files:
            try:
                with pa_csv.open_csv(path, parse_options=_parse_options(self.dialect),
                                     convert_options=options) as reader:
                    if any(batch.num_rows for batch in reader):
                        return True
            except (pa.ArrowException, OSError) as exc:
                raise read_error(path, exc) from None
        return False

    def batches(self, columns, batch_rows, rank, world_size, column_types):
        """Yield ``(record batch of columns, global rows)`` for this rank's share.

        Parquet: row groups, numbered over all files, go round-robin to the ranks. CSV
        (read with ``column_types``): each rank parses every file and keeps the rows
        ``i % world_size == rank``. A full pass of a CSV table caches its row count.
        """
        offset, group_number = 0, 0
        for path, schema, row_groups in zip(self.files, self.schemas, self.row_groups):
            self.first_rows[path] = offset
            if self.format == "parquet":
                mine = [g for g in range(len(row_groups))
                        if (group_number + g) % world_size == rank]
                starts = offset + np.cumsum((0,) + row_groups[:-1], dtype=np.int64)
                group_number, offset = group_number + len(row_groups), offset + sum(row_groups)
                if not mine:
                    continue
                segments = (starts[mine], np.asarray(row_groups, dtype=np.int64)[mine])
                position = 0
                fragment = _fragment(path, None, row_groups=mine)
                for batch in _batches(fragment, columns, batch_rows, path):
                    yield batch, _segment_rows(position, batch.num_rows, *segments)
                    position += batch.num_rows
            else:
                fragment = _fragment(path, self.dialect, column_types)
                for batch in _batches(fragment, columns, batch_rows, path, schema.names):
                    rows = np.arange(offset, offset + batch.num_rows, dtype=np.int64)
                    offset += batch.num_rows
                    if world_size > 1:
                        keep = rows % world_size == rank
                        batch, rows = batch.filter(pa.array(keep)), rows[keep]
                    if rows.size:
                        yield batch, rows
        if self.n_rows is None:
            self.n_rows = offset
