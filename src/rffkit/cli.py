"""The ``rffkit`` command line (also ``python -m rffkit``): fit, predict, score, relevances, info, demo.

``rffkit fit DATA... --target COL`` reads CSV or Parquet files with :func:`rffkit.io.open_table`,
one-hot encodes their text columns, holds out a share of the rows, fits an estimator, reports
its held-out score and the relevance of each original column, and saves a model file with
:func:`rffkit.save`. The file holds a dict, so ``rffkit.load(path)`` in Python gives::

    {"format": "rffkit-command-line", "version": 1,
     "estimator": <the fitted estimator, or Pipeline(StandardScaler, estimator)>,
     "encoding": <rffkit.io.ColumnEncoding.to_dict() of the training columns>,
     "meta": {"target": ..., "task": ..., "classes": ..., "score": ..., ...}}

and ``rffkit predict`` applies the same encoding to raw files. Errors a user can act on print
one line, ``rffkit: error: ...``, and exit with status 2; no output file is left half-written.
The commands themselves are in :mod:`rffkit._cli_commands`: this module imports neither torch
nor scikit-learn, so ``--help``, ``--version`` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import warnings

from . import __version__

__all__ = ["main", "build_parser", "demo", "write_diabetes_csv", "CommandLineError"]

#: ``--task auto`` calls a target of whole numbers a class label when it has at most this many values.
MAX_AUTO_CLASSES = 20


class CommandLineError(Exception):
    """A problem with what the user asked for; its message says what to change."""


def one_line(text):
    """``text`` (any object) as one line, runs of white space made one space."""
    return " ".join(str(text).split())


def __getattr__(name):
    # the demo's functions import torch: loaded when asked for (``from rffkit.cli import demo``)
    if name in ("demo", "write_diabetes_csv"):
        from . import _cli_demo

        return getattr(_cli_demo, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        option = re.fullmatch(r"argument (--[\w-]+).*: expected one argument", message)
        if option:  # such as --target -a, whose value argparse takes for an option
            message += f"; a value that starts with '-' is written {option.group(1)}=VALUE"
        raise CommandLineError(f"{message} (see {self.prog} --help)")


def _csv_options(parser):
    """--delimiter and --decimal, for the commands that read CSV files."""
    parser.add_argument("--delimiter", metavar="CHAR",
                        help="CSV only: the character between fields (default: a comma, or the ';', tab or '|' "
                             "of a header without commas)")
    parser.add_argument("--decimal", metavar="CHAR",
                        help="CSV only: the decimal point of numbers (default '.', or ',' in a file not delimited "
                             "by commas whose numbers are written 0,5)")


FIT_EPILOG = f"""\
task: --task auto makes a classification of a target that holds text or booleans, or at
  most {MAX_AUTO_CLASSES} distinct whole numbers on at least twice as many rows; any other numeric
  target is a regression. Classes of fewer than two rows on average (names) are an error, and
  so is --task classification of numbers that are not whole.
models: --model rffnet is RFFNetRegressor or RFFNetClassifier; ridge is RFFRidge (regression)
  or RFFClassifier, both after a StandardScaler of every input but those of 0s and 1s (one-hot
  columns, missing-value indicators, booleans); srff is SRFFRegressor (regression only).
  Text columns are one-hot encoded, and so are the columns named by --categorical: codes
  stored as numbers (a subject, site or ZIP code) whose order and distances mean nothing.
  Relevances are reported per original column, the shares of its one-hot columns combined
  by their norm (their weight in the kernel's distance; a sum would grow with the number
  of levels, noise or not).
missing values: --missing encode (the default) makes a null (an empty field, NA, NaN...) in
  a text column a category of its own, and fills one in a numeric column with the
  column's mean, beside a 0/1 column that marks those rows (part of the column's
  relevance); rffkit predict treats new data the same way. --missing error refuses them,
  naming the column and row. Rows whose target is missing are left out, and the report
  counts them (--missing error: an error).
hold-out: the rows whose row-number hash (seed --random-state) falls below --test-size are
  held out and scored (R^2 and RMSE, or accuracy and log-loss); the saved model is the one
  fitted on the other rows, and rffkit info shows its held-out score.
memory: --stream auto (the default) reads the table into memory when the fit needs less
  than half the available memory, and otherwise streams the files chunk by chunk to an
  estimator that fits from an rffkit.io source (rffnet and ridge, classifiers and
  solver=adam too; not srff); --stream always|never forces the choice. The report says
  which, and why. A streamed fit reads float32 (--dtype auto; its sums stay float64).
several processes: torchrun --standalone --nproc_per_node=2 -m rffkit fit ... joins a
  torch.distributed group (gloo on CPU) for estimators that fit from a source; each process
  reads its share of the rows and only rank 0 prints and writes the model.
example: rffkit fit "shards/*.parquet" --target y --model ridge \\
           --set features__n_components=2000 --output m.rffkit"""


def _add_fit(commands):
    """The ``fit`` command's parser, under ``commands``."""
    fit = commands.add_parser(
        "fit", help="fit a model on CSV/Parquet files and save it", epilog=FIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fit a model on one or several CSV or Parquet files (globs work), report its "
                    "held-out score and relevances, and save it.")
    fit.add_argument("data", nargs="+", metavar="DATA", help="files, globs or directories")
    fit.add_argument("--target", required=True, metavar="COL", help="the column to predict")
    fit.add_argument("--task", choices=["auto", "regression", "classification"], default="auto",
                     help="default auto: classes for text, booleans or at most 20 whole numbers, else regression")
    fit.add_argument("--model", choices=["rffnet", "ridge", "srff"], default="rffnet",
                     help="default rffnet (relevances learned); ridge: RFFRidge or RFFClassifier; srff: SRFFRegressor")
    columns = fit.add_mutually_exclusive_group()
    columns.add_argument("--features", nargs="+", metavar="COL",
                         help="the input columns (default: every column but the target)")
    columns.add_argument("--exclude", nargs="+", metavar="COL",
                         help="columns to leave out of the inputs, such as an identifier")
    _csv_options(fit)
    fit.add_argument("--categorical", nargs="+", metavar="COL",
                     help="numeric columns to one-hot encode as categories, such as a subject or site code")
    fit.add_argument("--dates", nargs="+", metavar="COL=FORM", default=[],
                     help="columns of dates and their strptime form, such as 'day=%%d/%%m/%%Y' or "
                          "'day=%%d/%%m/%%y' (a two-digit year, never read unnamed); %%S.%%f: seconds with a "
                          "fraction, %%z: a time zone (default: a text column of dates whose form is clear is read "
                          "as dates)")
    fit.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                     help="an estimator parameter, nested ones too (features__n_components=2000); "
                          "repeat for more; values are Python literals or text")
    fit.add_argument("--missing", choices=["encode", "error"], default="encode",
                     help="what to do with missing values in the feature columns (default encode)")
    fit.add_argument("--test-size", type=float, default=0.2, metavar="F",
                     help="share of the rows held out for the score (default 0.2; 0: none)")
    fit.add_argument("--random-state", type=int, default=0, metavar="N",
                     help="seed of the hold-out and of the estimator (default 0)")
    fit.add_argument("--stream", choices=["auto", "always", "never"], default="auto",
                     help="read the files chunk by chunk instead of into memory (default auto: "
                          "only when the table would not fit, or under torchrun)")
    fit.add_argument("--dtype", choices=["auto", "float64", "float32"], default="auto",
                     help="precision of the inputs and the random features (default auto: float32 when the "
                          "files are streamed, float64 in memory); float32 halves their memory and cuts the "
                          "time of their products, and a streamed fit's sums stay float64")
    fit.add_argument("--output", default="model.rffkit", metavar="MODEL",
                     help="model file to write (default model.rffkit)")
    fit.add_argument("--verbose", action="store_true", help="the estimator's progress (verbose=1)")
    fit.add_argument("--json", action="store_true", help="print the report as JSON")
    fit.set_defaults(run="fit_command")


def build_parser():
    """The ``rffkit`` argument parser."""
    parser = _Parser(prog="rffkit", description="Random-feature kernel methods on CSV and Parquet files.")
    parser.add_argument("--version", action="version", version=f"rffkit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_fit(commands)

    predict = commands.add_parser(
        "predict", help="predict with a saved model on CSV/Parquet files",
        description="Predict with a model saved by rffkit fit. The data need every column the model "
                    "was trained on (others are ignored); rows come in the order the files are "
                    "given (a glob's or directory's files sorted by path).")
    predict.add_argument("model", metavar="MODEL")
    predict.add_argument("data", nargs="+", metavar="DATA")
    predict.add_argument("--output", required=True, metavar="FILE", help=".csv or .parquet")
    predict.add_argument("--proba", action="store_true", help="add one probability column per class")
    predict.add_argument("--id", nargs="+", metavar="COL",
                         help="columns copied to the output as written")
    _csv_options(predict)
    predict.set_defaults(run="predict_command")

    score = commands.add_parser(
        "score", help="score a saved model on labelled CSV/Parquet files",
        description="The score of a model saved by rffkit fit on data that hold its target column: R^2 "
                    "and RMSE, or accuracy and log-loss. Rows whose target is missing are left out (all of "
                    "them is an error).")
    score.add_argument("model", metavar="MODEL")
    score.add_argument("data", nargs="+", metavar="DATA")
    score.add_argument("--json", action="store_true", help="print the result as JSON")
    _csv_options(score)
    score.set_defaults(run="score_command")

    relevances = commands.add_parser(
        "relevances", help="rank the original columns of a saved model by relevance",
        description="Each original column's share of the model's total relevance (one-hot columns "
                    "combined by their norm), largest first.")
    relevances.add_argument("model", metavar="MODEL")
    relevances.add_argument("--top", type=int, metavar="K", help="show the K most relevant columns")
    relevances.add_argument("--plot", metavar="FILE.png", help="save a bar chart (needs matplotlib)")
    relevances.add_argument("--json", action="store_true")
    relevances.set_defaults(run="relevances_command")

    info = commands.add_parser("info", help="describe a saved model",
                               description="Estimator, parameters, data, task, score and versions "
                                           "of a model saved by rffkit fit.")
    info.add_argument("model", metavar="MODEL")
    info.add_argument("--json", action="store_true")
    info.set_defaults(run="info_command")

    run = commands.add_parser("demo", help="fit RFFNet on SE1, then run the command line on a file",
                              description="Fit RFFNet on the synthetic SE1 problem, then run rffkit "
                                          "fit, relevances and predict on the diabetes data.")
    run.add_argument("--n-samples", type=int, default=10_000, metavar="N",
                     help="SE1's training rows (default 10000)")
    run.add_argument("--random-state", type=int, default=0, metavar="SEED",
                     help="seed of SE1's draw and of the fit (default 0)")
    run.add_argument("--plot", metavar="FILE.png",
                     help="bar chart of the SE1 relevances (default rffnet_relevances.png, in --dir when given)")
    run.add_argument("--no-plot", action="store_const", const="", dest="plot", help="no bar chart")
    run.add_argument("--dir", metavar="DIR", help="keep the demo's files here (made if missing)")
    run.set_defaults(run="demo_command")
    return parser


def _warning_printer(rank="0"):
    """A ``warnings.showwarning`` that prints each message once, as one line (scikit-learn
    raises some, such as its warning on a target of many classes, from two places of a fit),
    and only on rank 0 of a torchrun job: every process reads the same files and would print
    the same warnings about them."""
    shown = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = one_line(message)
        if rank == "0" and text not in shown:
            shown.add(text)
            print(f"rffkit: warning: {text}", file=sys.stderr)

    return show


class _ReaderMayLeave:
    """Standard output whose reader may stop reading (``rffkit fit ... | head -5``): from the first write that
    finds the pipe closed, the output goes to the null device and the command finishes its work (a fit still
    writes its model file) instead of stopping with ``BrokenPipeError`` wherever it was."""

    def __init__(self, stream):
        self._stream, self._left = stream, False

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _leave(self):
        self._left = True
        try:  # the stream's own buffer is flushed at exit, into the null device rather than the closed pipe
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no file descriptor (output captured in memory)
            pass

    def write(self, text):
        if not self._left:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self):
        if not self._left:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()


@contextlib.contextmanager
def _output_to_a_reader_that_may_leave():
    """``sys.stdout`` as :class:`_ReaderMayLeave` within the block (once: a command run by the demo shares
    it), restored after it."""
    saved = sys.stdout
    if not isinstance(saved, _ReaderMayLeave):
        sys.stdout = _ReaderMayLeave(saved)
    try:
        yield
    finally:
        sys.stdout = saved


def main(argv=None):
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success, 2 on an error the user can act on (one line on standard error starting
    ``rffkit: error:``), 130 when interrupted. A reader of its output that stops early
    (``rffkit info MODEL | head -1``) does not stop the command: the rest of the output is
    dropped. ``--help`` and ``--version`` exit by ``SystemExit(0)``.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    rank = os.environ.get("RANK", "0")
    try:
        with warnings.catch_warnings(), _output_to_a_reader_that_may_leave():
            warnings.showwarning = _warning_printer(rank)
            args = build_parser().parse_args(argv)
            args.argv = argv
            from . import _cli_commands  # torch and scikit-learn: only once a command runs

            return getattr(_cli_commands, args.run)(args)
    except (CommandLineError, ValueError, OSError, MemoryError) as error:
        where = "" if rank == "0" else f"(rank {rank}) "
        print(f"rffkit: error: {where}{one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rffkit: interrupted; no file was written", file=sys.stderr)
        return 130
