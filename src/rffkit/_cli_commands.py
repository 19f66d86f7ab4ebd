"""The commands of the ``rffkit`` command line: what ``fit``, ``predict``, ``relevances`` and ``info`` do.

:mod:`rffkit.cli` parses the arguments and calls these; they live apart so that the
parser, ``--help`` and usage errors answer without importing torch and scikit-learn.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
import types

import numpy as np

from ._cli_demo import demo_command
from ._cli_report import (
    Report, code_hints, model_file_lines, readable_size, relevance_lines, report_fit, report_inputs, swapped_arguments,
)
from ._cli_support import (
    MODEL_FORMAT, MODEL_VERSION, HeldOutScore, RowSplit, check_output_folder, choose_task, column_relevances,
    configure, describe_score, estimators, leave_unscaled, load_model, parse_settings, predictions, proba_column,
    replaced_atomically, summarise_target, takes_sources, unscaled_inputs,
)
from ._encoding import warn_unknown_categories
from ._io_base import DROP_OR_ENCODE, LEAVE_OUT, PLACEHOLDER_IN_FILE, TooManyCategoriesError, listing
from ._source_scaling import fit_scaler
from ._streaming import validation_mask
from ._text_dates import REFIT_ENCODING
from ._validation import final_estimator
from .cli import CommandLineError
from .distributed import process_group
from .io import ColumnNotFoundError, DataSourceError, open_table
from .persistence import read_metadata, save

__all__ = ["fit_command", "predict_command", "relevances_command", "info_command", "demo_command"]

PREDICTION_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _read_into_memory(source, estimator, report, why, unknown=None):
    """Every row of ``source`` as arrays ``(X, y, rows)``, after checking that they fit (``unknown``:
    see :meth:`~rffkit.io.TableSource.iter_chunks`)."""
    from ._memory import available_memory

    need = source.n_rows * source.n_features * source.dtype.itemsize
    available = available_memory()
    if 2 * need > available:
        raise CommandLineError(
            f"{type(estimator).__name__} fits from memory and the table needs about {readable_size(need)} "
            f"there ({source.n_rows} rows x {source.n_features} columns), twice that while it is "
            f"read; {readable_size(available)} is available. Fit a sample of the rows.")
    report.line(f"in memory: {source.n_rows} x {source.n_features} values ({readable_size(need)}); {why}")
    chunks = list(source.iter_chunks(unknown=unknown))
    X, y, rows = (np.concatenate([chunk[k] for chunk in chunks]) for k in range(3))
    report.data.update(hints=code_hints(source, X))
    for line in report.data["hints"]:
        report.line(line)
    return X, y, rows


def _streams(mode, estimator, source, sample, world_size):
    """Whether ``rffkit fit`` streams the files to the estimator, and why (``--stream``).

    'auto' streams when the estimator fits from a source and either several processes
    share the work or the in-memory fit would need more than half the available memory
    (the table twice while it is read, plus the estimate of :mod:`rffkit._memory`): a
    streamed fit searches RFFNet's relevances on a sample, so on a table that fits in
    memory the in-memory fit is the better model.
    """
    from ._memory import available_memory, estimate_peak_bytes

    name = type(estimator).__name__
    can = takes_sources(estimator, sample)
    if not can:
        if world_size > 1:
            raise CommandLineError(f"{name} fits in one process only (it does not fit from a data "
                                   "source); run rffkit fit without torchrun.")
        if mode == "always":
            raise CommandLineError(f"--stream always: {name} does not fit from a data source; use "
                                   "--stream auto, which reads the table into memory for it.")
        return False, f"{name} fits from arrays, not from streamed files"
    if world_size > 1:
        if mode == "never":
            raise CommandLineError("--stream never reads the table into one process, but under "
                                   f"torchrun each of the {world_size} processes fits on its share of "
                                   "the rows; use --stream auto or always.")
        return True, f"on {world_size} processes"
    if mode != "auto":
        return mode == "always", f"--stream {mode}"
    table = source.n_rows * source.n_features * source.dtype.itemsize
    shape = types.SimpleNamespace(shape=(source.n_rows, source.n_features), dtype=np.dtype(np.float64))
    estimate = estimate_peak_bytes(estimator, shape)
    need = 2 * table + (estimate[0] if estimate else 0)
    available = available_memory()
    if 2 * need <= available:
        return False, (f"the in-memory fit needs about {readable_size(need)} of the {readable_size(available)} "
                       "available (--stream always would read the files chunk by chunk)")
    return True, (f"the in-memory fit would need about {readable_size(need)}, more than half of the "
                  f"{readable_size(available)} available")


def _fit_model(args, source, estimator, scale, world, report):
    """Fit on the training rows; return the fitted model, its held-out score and row counts."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    rank, world_size = world
    first = next(source.iter_chunks(chunk_rows=32))
    streamed, why = _streams(args.stream, estimator, source, (first.X, first.y), world_size)
    name = type(estimator).__name__
    scaler = StandardScaler()  # used when scale

    def leave_0s_and_1s(scaler):  # and say which columns it left as they are
        unscaled = unscaled_inputs(source, scaler)
        integers = [source.feature_names[j] for j in sorted(set(unscaled) - set(unscaled_inputs(source)))]
        if integers:
            report.line(f"left as they are too: {len(integers)} integer column(s) of 0s and 1s ({', '.join(integers)})")
        report.data.update(unscaled_inputs=[source.feature_names[j] for j in unscaled])
        return leave_unscaled(scaler, unscaled)

    def model_of(estimator):  # the scaler is fitted apart, as the streamed fit needs it first
        return Pipeline([("standardscaler", scaler), (name.lower(), estimator)]) if scale else estimator
    score, unknown = HeldOutScore(report.data["task"]), {}  # unknown: categories only held-out rows hold
    split = (args.test_size, args.random_state)
    if streamed:
        if args.dtype == "auto":
            source = source.with_dtype(np.float32)
        train, test = RowSplit(source, *split), RowSplit(source, *split, held_out=True)
        report.line(f"streamed: {name} reads the training rows from the files chunk by chunk in "
                    f"{np.dtype(source.dtype).name} ({why})")
        start = time.perf_counter()
        if scale:  # every rank reads all training rows, so all get the same scaler
            scaler = fit_scaler(train)
            train = RowSplit(source.standardized(leave_0s_and_1s(scaler)), *split)
        estimator.fit(train)
        seconds = time.perf_counter() - start
        if scale:  # its inputs were the scaler's unnamed outputs, as in the in-memory pipeline
            estimator.__dict__.pop("feature_names_in_", None)
        model = model_of(estimator)
        if rank == 0:  # rank 0 scores the held-out rows; the other ranks are done
            for chunk in test.iter_chunks(unknown=unknown):
                score.add(model, chunk.X, chunk.y)
        n_test = test.n_rows
        n_train = source.n_rows - n_test
    else:
        X, y, rows = _read_into_memory(source, estimator, report, why, unknown)
        held_out = validation_mask(rows, args.test_size, args.random_state)
        n_train, n_test = int((~held_out).sum()), int(held_out.sum())
        if n_train < 2:
            raise CommandLineError(f"only {n_train} training row(s) remain after holding out "
                                   f"{n_test}; lower --test-size or give more rows.")
        trained = np.unique(y[~held_out]) if report.data["task"] == "classification" else ()
        if len(trained) == 1:
            others = listing(np.setdiff1d(np.unique(y), trained).tolist())
            raise CommandLineError(f"the {n_train} training rows hold one class ({listing(trained.tolist())}); "
                                   f"the others ({others}) are only on held-out rows: give more rows of "
                                   "them, or lower --test-size.")
        start = time.perf_counter()
        if scale:
            leave_0s_and_1s(scaler.fit(X[~held_out]))
        estimator.fit(scaler.transform(X[~held_out]) if scale else X[~held_out], y[~held_out])
        seconds = time.perf_counter() - start
        model = model_of(estimator)
        if n_test:
            score.add(model, X[held_out], y[held_out])
    warn_unknown_categories(unknown, source.encoding, "held-out row", "the training rows do not have")
    return model, score.result(), seconds, n_train, n_test, streamed


def _date_forms(dates):
    """``--dates COL=FORM ...`` as a dict of column to form, or None."""
    wrong = [text for text in dates if "=" not in text or "%" not in text.partition("=")[2]]
    if wrong:
        raise CommandLineError(f"--dates {wrong[0]!r}: give COL=FORM, a column and its strptime form such as "
                               "day=%d/%m/%Y.")
    return dict(text.partition("=")[::2] for text in dates) or None


def _refuse_overwriting(path, inputs, option="--output"):
    """Refuse an output path that names one of the command's input files, which it would replace."""
    for name in inputs:
        if os.path.exists(path) and os.path.samefile(path, name):
            raise CommandLineError(f"{option} {path!r} is the input file {name!r}, which the output would "
                                   "replace; give another file name.")


def _backend(device):
    """The torch.distributed backend of a job whose estimator runs on ``device``: gloo, and NCCL for CUDA."""
    import torch

    return "cpu:gloo,cuda:nccl" if str(device).startswith("cuda") and torch.cuda.is_available() else "gloo"


def task_of_target(source, requested="auto"):
    """``(task, why, n_rows)`` of ``rffkit fit`` for the target of ``source`` (one pass over it).

    ``requested`` is ``--task``; the rule is :func:`~rffkit._cli_support.choose_task`'s. A
    target missing on every row, or holding one value, is a :class:`CommandLineError`.
    """
    kind, values, n_rows, numbers_in_text, n_distinct, fractional = summarise_target(source)
    if n_rows == 0:
        raise CommandLineError(f"every row's target {source.target!r} is missing: there is nothing to fit.")
    if values is not None and len(values) == 1:
        raise CommandLineError(f"the target {source.target!r} holds one value ({listing(values)}) on all "
                               f"{n_rows} rows: there is nothing to predict.")
    return (*choose_task(requested, kind, values, numbers_in_text, n_rows, n_distinct, fractional), n_rows)


def fit_command(args):
    """``rffkit fit``: see ``rffkit fit --help``."""
    check_output_folder(args.output)
    settings = parse_settings(args.set)
    if not 0 <= args.test_size < 1:
        raise CommandLineError(f"--test-size must be at least 0 and below 1; got {args.test_size}.")
    if args.task != "auto" and (args.model, args.task) not in estimators():
        raise CommandLineError(f"--model {args.model} fits regression only and --task {args.task} was asked for; "
                               "use --model rffnet or --model ridge.")
    with process_group(_backend(settings.get("device", "cpu"))) as (rank, world_size):
        report = Report(args.json, quiet=rank != 0)
        dtype = np.float32 if args.dtype == "float32" else np.float64  # 'auto': float32 once the fit streams
        # the categories and fill means come from the training rows: the held-out ones are new data
        with _many_categories():
            source = open_table(args.data, target=args.target, features=args.features, exclude=args.exclude,
                                categorical=args.categorical, dates=_date_forms(args.dates),
                                delimiter=args.delimiter, decimal=args.decimal,
                                dtype=dtype, missing=args.missing,
                                drop_missing_target=args.missing == "encode",
                                learn_rows=lambda rows: ~validation_mask(rows, args.test_size, args.random_state))
        _refuse_overwriting(args.output, source.files)
        task, why, n_rows = task_of_target(source, args.task)
        if (args.model, task) not in estimators():
            raise CommandLineError(f"--model {args.model} fits regression only and the task is "
                                   f"{task} ({why}); use --model rffnet or --model ridge.")
        cls, scale = estimators()[args.model, task]
        estimator = cls()
        defaults = {"random_state": args.random_state, "verbose": int(args.verbose)}
        estimator.set_params(**{k: v for k, v in defaults.items() if k in estimator.get_params()})
        configure(estimator, settings, source.n_features)
        report_inputs(report, args, source, n_rows, task=task, why=why, estimator=estimator, scale=scale)
        model, score, seconds, n_train, n_test, streamed = _fit_model(
            args, source, estimator, scale, (rank, world_size), report)
        relevances = column_relevances(model, source.encoding.groups)
        classes = np.asarray(model.classes_).tolist() if task == "classification" else None
        report.data.update(
            estimator=type(estimator).__name__, standardised=scale, classes=classes,
            n_train=n_train, n_test=n_test, test_size=args.test_size, random_state=args.random_state,
            score=score, fit_seconds=round(seconds, 3), streamed=streamed, world_size=world_size,
            relevances=relevances, linear_only=bool(getattr(estimator, "linear_only_", False)),
            command=shlex.join(["rffkit", *args.argv]))
        report_fit(report, estimator, seconds=seconds, n_train=n_train, n_test=n_test, score=score,
                   relevances=relevances, model_path=args.output)
        if rank == 0:
            encoding = source.encoding
            version = (MODEL_VERSION if encoding.dates else 3 if source.categorical_codes
                       else 2 if encoding.missing == "encode" else 1)
            save({"format": MODEL_FORMAT, "version": version, "estimator": model,
                  "encoding": encoding.to_dict(), "meta": dict(report.data)}, args.output)
            report.data["model_file"] = args.output
            report.line(f"saved to {args.output} (rffkit info {shlex.quote(args.output)} describes it)")
        report.finish()
    return 0


def _read_ids(source, columns, outputs, to_csv):
    """The ``--id`` columns of every file of ``source``, in its row order, as one Arrow table: each
    as written (a CSV's as text), and as integers where every text is an integer's own (no leading
    zero or sign, within int64), so that identifiers are copied exactly. A nested column (a list,
    a struct) is refused for a CSV output (``to_csv``), which cannot hold it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    taken = sorted(set(columns) & set(outputs))
    if taken:
        raise CommandLineError(f"--id {listing(taken)}: the output has a column of that name already "
                               f"({listing(outputs)}); rename the column in the data.")
    try:
        table = source.read_columns(columns, text=True)
    except DataSourceError as error:
        raise CommandLineError(f"--id: {error}") from None
    nested = [field for field in table.schema if pa.types.is_nested(field.type)]
    if nested and to_csv:
        raise CommandLineError(f"--id {nested[0].name!r} is a column of type {nested[0].type}, which a CSV file "
                               "cannot hold; write the predictions to a .parquet file.")
    for j, column in enumerate(table.columns):
        if pa.types.is_string(column.type) and pc.all(pc.match_substring_regex(
                column, r"^(0|[1-9][0-9]{0,17})$")).as_py() is not False:
            table = table.set_column(j, table.field(j).name, pc.cast(column, pa.int64()))
    return table


@contextlib.contextmanager
def _many_categories():
    """Re-raise the refusal of a column of too many categories with what ``rffkit fit`` can do (it has
    no max_categories option)."""
    try:
        yield
    except TooManyCategoriesError as error:
        raise CommandLineError(f"column {error.column!r} has more than {error.max_categories} distinct values, the "
                               "most rffkit fit one-hot encodes in a column; leave it out (--exclude "
                               f"{shlex.quote(error.column)}), or derive a column of fewer values from it.") from None


#: The advice of the data layer's messages that only ``rffkit fit`` (or Python) can follow, and what
#: ``rffkit predict`` and ``score`` say instead: the model's columns and encoding are fixed.
_REFIT_WITHOUT = "the model needs the column: correct it in the data, or refit the model without it (rffkit fit ... " \
    "--exclude COL)"
#: A text column the model read as numbers may hold codes (Cars93's Cylinders: 3 to 8, or 'rotary').
_REFIT_AS_CATEGORIES = ("the model read the column as numbers: correct it in the data; if its values are categories "
                        "(codes), refit the model naming it (rffkit fit ... --categorical COL); or refit the model "
                        "without it (rffkit fit ... --exclude COL)")
_NEW_DATA_ADVICE = (
    (f"fit an encoding that covers it, or {LEAVE_OUT}", _REFIT_AS_CATEGORIES),
    (PLACEHOLDER_IN_FILE, PLACEHOLDER_IN_FILE + "; if the column's values are categories (codes), refit the model "
     "naming it (rffkit fit ... --categorical COL)"),
    (LEAVE_OUT, _REFIT_WITHOUT),
    (DROP_OR_ENCODE, "the model was fitted with --missing error, so it has no encoding for missing values: fill them "
     "in or drop their rows, or refit the model with rffkit fit ... --missing encode (the default)"),
    (REFIT_ENCODING, "refit the model on data that hold such values (rffkit fit)"),
)


@contextlib.contextmanager
def _new_data_errors():
    """Re-raise a :class:`DataSourceError` of reading new data for a model (predict, score) with
    advice that applies there (:data:`_NEW_DATA_ADVICE`)."""
    try:
        yield
    except ColumnNotFoundError:
        raise  # the commands say which columns the data lack
    except DataSourceError as error:
        message = str(error)
        for advice, instead in _NEW_DATA_ADVICE:
            message = message.replace(advice, instead)
        raise CommandLineError(message) from None


def predict_command(args):
    """``rffkit predict``: see ``rffkit predict --help``."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    extension = os.path.splitext(args.output)[1].lower()
    if extension not in PREDICTION_FORMATS:
        raise CommandLineError(f"--output {args.output!r}: give a .csv or .parquet file name.")
    check_output_folder(args.output)
    with swapped_arguments(args):
        bundle = load_model(args.model)
    meta, model = bundle["meta"], bundle["estimator"]
    if args.proba and meta["task"] != "classification":
        raise CommandLineError(f"--proba needs a classifier; {args.model!r} is a regression model.")
    encoding = bundle["encoding"]
    try:
        with _new_data_errors():
            source = open_table(args.data, encoding=encoding, delimiter=args.delimiter, decimal=args.decimal)
    except ColumnNotFoundError as error:
        raise CommandLineError(f"the data do not hold every column the model was trained on: {error}") from None
    _refuse_overwriting(args.output, [args.model, *source.files])
    name = f"predicted_{meta['target']}"
    outputs = [name, *(proba_column(label) for label in meta["classes"])] if args.proba else [name]
    ids = _read_ids(source, args.id, outputs, PREDICTION_FORMATS[extension] == "csv") if args.id else None
    written, writer, unknown = 0, None, {}
    with replaced_atomically(args.output) as temporary, _new_data_errors():
        try:
            for chunk in source.iter_chunks(unknown=unknown):
                columns = {} if ids is None else dict(zip(args.id, ids.take(chunk.rows).columns))
                columns[name] = pa.array(predictions(model, chunk.X))
                if args.proba:
                    proba = predictions(model, chunk.X, "predict_proba").astype(np.float64)
                    columns.update({proba_column(label): proba[:, j] for j, label in enumerate(meta["classes"])})
                table = pa.table(columns)
                if writer is None:
                    schema = table.schema
                    writer = (pq.ParquetWriter(temporary, schema) if PREDICTION_FORMATS[extension]
                              == "parquet" else pa_csv.CSVWriter(temporary, schema))
                writer.write_table(table.cast(schema))
                written += table.num_rows
        finally:
            if writer is not None:
                writer.close()
    warn_unknown_categories(unknown, encoding)
    what = "predictions" + (" and class probabilities" if args.proba else "")
    print(f"wrote {written} {what} to {args.output}")
    return 0


def score_command(args):
    """``rffkit score``: see ``rffkit score --help``."""
    import json

    with swapped_arguments(args):
        bundle = load_model(args.model)
    meta, model = bundle["meta"], bundle["estimator"]
    target = meta["target"]
    try:
        with _new_data_errors():
            source = open_table(args.data, target=target, encoding=bundle["encoding"],
                                delimiter=args.delimiter, decimal=args.decimal, drop_missing_target=True)
    except ColumnNotFoundError as error:
        what = "the target" if f"target column {target!r}" in str(error) else "every column the model was trained on"
        raise CommandLineError(f"the data do not hold {what}: {error} rffkit score needs labelled rows; rffkit "
                               "predict predicts unlabelled ones.") from None
    if source.n_rows == 0:  # one pass over the target, before the predictions
        raise CommandLineError(f"no row of the data has a target: {target!r} is missing on all {source.n_dropped} "
                               "rows, and rffkit score needs labelled rows; rffkit predict predicts unlabelled ones.")
    score, unknown = HeldOutScore(meta["task"]), {}
    with _new_data_errors():
        for chunk in source.iter_chunks(unknown=unknown):
            y = chunk.y
            if meta["task"] == "regression" and y.dtype.kind not in "fiub":
                raise CommandLineError(f"the target {target!r} of the data holds text; the model is a regression.")
            score.add(model, chunk.X, y)
    warn_unknown_categories(unknown, source.encoding)
    unfitted = score.unfitted_labels(meta["classes"]) if meta["task"] == "classification" else None
    result = {"model_file": args.model, "data": source.files, "target": target, "task": meta["task"],
              "n_rows": score.n, "n_rows_dropped": source.n_dropped, "score": score.result(),
              "labels_not_fitted": {str(label): count for label, count in score.unfitted.items()} or None,
              "held_out_score_at_fit": meta.get("score")}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    shown = ", ".join(os.path.basename(path) for path in source.files[:3]) + (", ..." if len(source.files) > 3 else "")
    print(f"score on {score.n} rows of {shown}: {describe_score(result['score'], unfitted)}")
    if source.n_dropped:
        print(f"left out: {source.n_dropped} row{'s' if source.n_dropped > 1 else ''} whose target is missing")
    if meta.get("n_test"):
        print(f"held-out score at fit, on {meta['n_test']} rows: {describe_score(meta.get('score'))}")
    return 0


def relevances_command(args):
    """``rffkit relevances``: see ``rffkit relevances --help``."""
    if args.top is not None and args.top < 1:
        raise CommandLineError(f"--top must be a positive number; got {args.top}.")
    if args.plot:
        check_output_folder(args.plot, "--plot")
        _refuse_overwriting(args.plot, [args.model], "--plot")
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise CommandLineError('--plot needs matplotlib: pip install "rffkit[plot]" '
                                   "(or pip install matplotlib).") from None
    bundle = load_model(args.model)
    name = bundle["meta"]["estimator"]
    relevances = column_relevances(bundle["estimator"], bundle["encoding"].groups)
    if relevances is None:
        raise CommandLineError(f"{args.model!r} holds a {name}, which learns no relevance per column; "
                               "fit with --model rffnet or --model srff to rank the columns.")
    shown = dict(list(relevances.items())[:args.top])
    if args.plot:
        figure = Figure(figsize=(5.0, 0.3 * len(shown) + 1.2), layout="constrained")
        ax = figure.subplots()
        ax.barh(np.arange(len(shown))[::-1], list(shown.values()), color="tab:blue")
        ax.set_yticks(np.arange(len(shown))[::-1], list(shown), fontsize=8)
        ax.set_xlabel("share of the total relevance")
        ax.set_title(f"{name} relevances, target {bundle['meta']['target']!r}", fontsize=9)
        extension = os.path.splitext(args.plot)[1].lstrip(".").lower() or "png"
        with replaced_atomically(args.plot) as temporary:
            figure.savefig(temporary, format=extension, dpi=120)
    linear_only = bool(bundle["meta"].get("linear_only"))
    if args.json:
        import json

        print(json.dumps({"model": args.model, "estimator": name, "linear_only": linear_only, "relevances": shown},
                         indent=2))
        return 0
    kind = "its linear-only model's weight sizes as shares" if linear_only else "share of the total relevance"
    print(f"{name} relevances in {args.model} ({kind}; one-hot columns combined by their norm):")
    print("\n".join(relevance_lines(shown, len(shown))))
    if args.plot:
        print(f"bar chart saved to {args.plot}")
    return 0


def info_command(args):
    """``rffkit info``: see ``rffkit info --help``."""
    bundle = load_model(args.model)
    meta, model = bundle["meta"], bundle["estimator"]
    header = read_metadata(args.model)
    if args.json:
        import json

        params = {key: repr(value) for key, value in final_estimator(model).get_params(deep=False).items()}
        print(json.dumps({**meta, "parameters": params, "file": header, "command_line_version": bundle["version"]},
                         indent=2, default=repr))
        return 0
    lines = model_file_lines(args.model, {**header, "command_line_version": bundle["version"]}, meta, model)
    print("\n".join(lines))
    return 0
