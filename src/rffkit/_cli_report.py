"""The report of ``rffkit fit`` and the description of a saved model (``rffkit info``).

``rffkit fit`` prints, by rank 0 only, what it read (files, rows, one-hot encoded columns),
the task and the model it chose, the hold-out, then the fit time, the held-out score and
the relevance of each original column; with ``--json`` the same facts go out as one JSON
object (:class:`Report`), and they are the ``meta`` of the saved model file, which
``rffkit info`` describes again (:func:`model_file_lines`). The formatting helpers of
these lines (sizes, one-line reprs, relevance rankings) are here too, and the hint that the
MODEL and DATA of a command were swapped (:func:`swapped_arguments`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex

import numpy as np

from ._cli_support import describe_score, unscaled_inputs
from ._rffnet_docs import LINEAR_ONLY_NOTE
from ._validation import final_estimator
from .cli import CommandLineError, one_line
from .persistence import ModelFileError, read_metadata

__all__ = ["Report", "readable_size", "describe_estimator", "relevance_lines", "report_inputs",
           "report_fit", "model_file_lines", "code_hints", "swapped_arguments"]

#: The relevances ``rffkit fit`` prints; ``rffkit relevances`` lists them all.
SHOWN_RELEVANCES = 20
#: The last word of a column's name that makes whole numbers in it look like codes (a subject, a site).
_CODE_WORDS = {"id", "ids", "code", "subject", "patient", "person", "individual", "household", "family", "site",
               "station", "plot", "school", "firm", "county", "district", "fips", "zip", "cluster", "group", "unit",
               "panel", "respondent"}
#: Words that make a name ending in a code's word a count or a measure (persons_in_household,
#: price_per_unit, years_school, n_site): no hint.
_MEASURE_WORDS = {"per", "in", "of", "by", "at", "n", "num", "number", "count", "counts", "size", "years", "price",
                  "total", "mean", "avg", "average", "share", "rate"}


class Report:
    """Lines for people (printed as they come, by rank 0 only) and a dict for ``--json``."""

    def __init__(self, as_json, quiet=False):
        self.as_json, self.quiet, self.data = as_json, quiet, {}

    def line(self, text=""):
        if not (self.as_json or self.quiet):
            print(text, flush=True)

    def finish(self):
        if self.as_json and not self.quiet:
            import json

            print(json.dumps(self.data, indent=2))


def code_hints(source, X):
    """Lines that point to ``--categorical`` for numeric columns of ``X`` (the encoded rows of
    ``source``) that look like codes: a name whose last word is one of :data:`_CODE_WORDS`
    (``subject``, ``county_fips``, ``patientID``; not after a word of :data:`_MEASURE_WORDS`, as in
    ``persons_in_household``), and between 5 and 1,000 whole numbers, each on
    three rows or more on average (a panel). Read as one number, such a code orders and spaces its
    subjects by their numbers; one-hot encoded, each is its own input."""
    hints, names = [], source.feature_names
    for column in source.encoding.columns:
        words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", column)
        if column in source.encoding.categories or not words or words[-1].lower() not in _CODE_WORDS \
                or _MEASURE_WORDS.intersection(word.lower() for word in words[:-1]):
            continue
        at = names.index(column)
        values = X[:, at] if column not in source.encoding.indicators else X[X[:, at + 1] == 0, at]  # not filled in
        distinct = np.unique(values)
        if 5 <= len(distinct) <= 1000 and len(values) >= 3 * len(distinct) and np.all(distinct == np.round(distinct)):
            hints.append(f"hint: {column} holds {len(distinct)} whole numbers, each on "
                         f"{len(values) / len(distinct):.0f} rows on average: if they are codes (a subject, a site), "
                         f"--categorical {column} makes each its own input")
    return hints


def readable_size(n_bytes):
    """``n_bytes`` for people: bytes, KB, MB or GB (powers of 1000)."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if n_bytes < 1000 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "bytes" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1000


def describe_estimator(estimator):
    """The estimator's repr on one line; a pipeline's steps joined by ', then '."""
    if hasattr(estimator, "steps"):
        return ", then ".join(one_line(repr(step)) for _, step in estimator.steps)
    return one_line(repr(estimator))


def relevance_lines(relevances, top):
    """The ``top`` first columns of ``relevances`` (name to share, largest first), ranked."""
    width = max(len(name) for name in relevances)
    return [f"  {rank:3d}. {name:<{width}}  {share:.3f}"
            for rank, (name, share) in enumerate(list(relevances.items())[:top], start=1)]


def report_inputs(report, args, source, n_rows, *, task, why, estimator, scale):
    """Record and print what ``rffkit fit`` reads and fits, before the fit starts.

    The files, rows and columns of ``source``, the one-hot encoded columns, the task
    (``why``: the reason for it), the model (after a StandardScaler when ``scale``, which
    leaves the inputs of 0s and 1s as they are) and the hold-out of ``args.test_size`` with
    seed ``args.random_state``.
    """
    files = source.files
    report.data.update(target=args.target, task=task, task_reason=why, data=files, n_rows=n_rows,
                       columns=list(source.encoding.columns), feature_names=source.feature_names)
    shown = ", ".join(os.path.basename(path) for path in files[:3]) + (", ..." if len(files) > 3 else "")
    plural = "s" if len(files) > 1 else ""
    dialect = source.dialect
    report.data.update(csv_dialect=None if dialect is None else dialect._asdict())
    if dialect is not None and dialect != ("\t" if source.format == "tsv" else ",", "."):
        shown += f"; fields delimited by {dialect.delimiter!r}" + (
            "" if dialect.decimal == "." else f", decimal point {dialect.decimal!r}")
    report.line(f"data: {len(files)} {source.format.upper()} file{plural} ({shown}), {n_rows} rows, "
                f"{len(source.encoding.columns)} columns, target {args.target!r}")
    dropped = source.n_dropped
    report.data.update(n_rows_dropped=dropped)
    if dropped:
        report.line(f"left out: {dropped} row{'s' if dropped > 1 else ''} whose target is missing "
                    "(--missing error refuses them instead)")
    codes = source.categorical_codes
    report.data.update(categorical_codes=codes)
    if source.encoding.categories:
        report.line(f"one-hot encoded: {', '.join(source.encoding.categories)} "
                    + (f"({', '.join(codes)} as codes, --categorical; " if codes else "(")
                    + f"{source.n_features} model inputs in all)")
    times, written = source.time_columns, source.encoding.dates
    report.data.update(time_columns=list(times), dates_in_text=dict(written))
    if times:
        units = {unit: [column for column, its in times.items() if its == unit] for unit in times.values()}
        report.line("dates and times: " + "; ".join(f"{', '.join(columns)} as {unit}"
                                                    for unit, columns in units.items())
                    + (f" ({'; '.join(f'{column} written {how}' for column, how in written.items())})"
                       if written else ""))
    encoding = source.encoding
    filled = [column for column in encoding.columns
              if column in encoding.indicators or None in encoding.categories.get(column, ())]
    report.data.update(missing_encoded=filled)
    if filled:
        report.line(f"missing values: encoded in {', '.join(filled)} "
                    "(a (missing) category in a text column; in a numeric one the column's mean and a 0/1 "
                    "column that marks the rows)")
    report.line(f"task: {task} ({why})")
    kept = [source.feature_names[j] for j in unscaled_inputs(source)] if scale else []
    report.data.update(unscaled_inputs=kept)
    report.line(f"model: {describe_estimator(estimator)}" + (" on standardised columns" if scale else "")
                + (f" ({len(kept)} of 0s and 1s as they are: one-hot, missing-value indicators, booleans)"
                   if kept else ""))
    report.line(f"held out: about {100 * args.test_size:g}% of the rows (by a hash of each row number, "
                f"seed {args.random_state}); the model is fitted on the others"
                if args.test_size else "held out: none (--test-size 0); the model is fitted on every row")


def report_fit(report, estimator, *, seconds, n_train, n_test, score, relevances, model_path=None):
    """Print the fit time, the held-out score and the relevances per original column, the 20 largest and
    how many more ``rffkit relevances model_path`` lists (the task and whether the model is linear-only
    are read from ``report.data``, where the fit's facts are kept)."""
    report.line(f"fit: {seconds:.{1 if seconds >= 1 else 2}f} s on {n_train} rows")
    report.line(f"held-out score on {n_test} rows: {describe_score(score)}")
    if report.data.get("linear_only"):
        linear = "logistic regression" if report.data["task"] == "classification" else "ridge regression"
        report.line(f"model: {linear} (RFFNet's kernel model did not beat it on the same inputs; relevances are "
                    "the sizes of its weights)")
    if relevances is None:
        report.line(f"relevances: none ({type(estimator).__name__} learns no relevance per "
                    "column; --model rffnet or srff does)")
    else:
        report.line("relevances (share of the total relevance; one-hot columns combined by their norm):")
        for line in relevance_lines(relevances, SHOWN_RELEVANCES):
            report.line(line)
        if len(relevances) > SHOWN_RELEVANCES:
            where = f"rffkit relevances {shlex.quote(model_path)}" if model_path else "rffkit relevances MODEL"
            report.line(f"  ({len(relevances) - SHOWN_RELEVANCES} more: {where} lists them)")


def model_file_lines(path, header, meta, model):
    """The lines of ``rffkit info``: a model file's header, estimator, parameters and fit report.

    ``header`` is the file's :func:`rffkit.persistence.read_metadata` with the bundle's
    ``command_line_version`` added, ``meta`` the report ``rffkit fit`` saved with ``model``.
    """
    final = final_estimator(model)
    lines = [
        f"model file: {path} ({header['format']} format version {header['format_version']}, command-line model "
        f"version {header['command_line_version']}, "
        f"written by rffkit {header['rffkit_version']} with scikit-learn {header['sklearn_version']}, "
        f"torch {header['torch_version']})",
        f"estimator: {describe_estimator(model)}",
        "parameters: " + ", ".join(f"{k}={v!r}" for k, v in final.get_params(deep=False).items()),
        f"task: {meta['task']} ({meta['task_reason']}), target {meta['target']!r}"
        + (f", classes {meta['classes']}" if meta["classes"] is not None else ""),
        f"data: {', '.join(meta['data'])}: {meta['n_rows']} rows",
        f"trained on {meta['n_train']} rows x {len(meta['feature_names'])} inputs; "
        f"{meta['n_test']} held out (--test-size {meta['test_size']:g}, seed {meta['random_state']})",
        f"columns ({len(meta['columns'])}): {', '.join(meta['columns'])}",
        f"held-out score: {describe_score(meta['score'])}"
        + (LINEAR_ONLY_NOTE if meta.get("linear_only") else ""),
        f"fit time: {meta['fit_seconds']:.{1 if meta['fit_seconds'] >= 1 else 2}f} s" + (f" on {meta['world_size']} processes"
                                                      if meta["world_size"] > 1 else ""),
        f"command: {meta['command']}",
    ]
    if meta.get("dates_in_text"):
        lines.insert(7, "dates written as text: " + ", ".join(f"{column} ({form})"
                                                           for column, form in meta["dates_in_text"].items()))
    names = meta["feature_names"]
    if len(names) != len(meta["columns"]):  # the first 30 (--json lists all)
        shown = ", ".join(names[:30]) + (f", ... ({len(names) - 30} more; --json lists all)" if len(names) > 30 else "")
        lines.insert(7, f"model inputs ({len(names)}): {shown}")
    return lines


@contextlib.contextmanager
def swapped_arguments(args):
    """Add to an error reading the MODEL of ``rffkit predict`` or ``score`` (``args.model``) that the arguments
    look swapped, when one of its DATA is a model file."""
    try:
        yield
    except (ModelFileError, CommandLineError) as error:  # not a model file, a folder, or nothing at that path
        model = next((path for path in args.data if path != args.model and _is_model_file(path)), None)
        if model is None:
            raise
        raise type(error)(f"{one_line(error)} {model!r} is a model file: were the arguments swapped? "
                          f"rffkit {args.command} takes MODEL first, then DATA.") from None


def _is_model_file(path):
    try:
        return os.path.isfile(path) and bool(read_metadata(path))
    except (ModelFileError, OSError):
        return False
