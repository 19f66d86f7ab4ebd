"""What ``rffkit fit`` and the other commands build on, apart from argument parsing.

The columns the StandardScaler of the ridge models leaves as they are, the task rule, ``--set``
parsing, the check whether an estimator fits from a data source,
the hold-out split as a source of its own (:class:`RowSplit`), the held-out score
accumulated chunk by chunk, relevances per original column, the torch.distributed group
under torchrun, model files of the command line and atomic output files.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import secrets
import warnings

import numpy as np

from ._source_scaling import leave_unscaled, unscaled_inputs
from ._io_base import PLACEHOLDER_IN_FILE, NumbersInText, at_row, listing, short
from ._streaming import validation_mask
from ._validation import final_estimator
from .cli import MAX_AUTO_CLASSES, CommandLineError, one_line
from .io import ArraySource, Chunk, ColumnEncoding, TableSource
from .persistence import ModelFileError, load

__all__ = ["MODEL_FORMAT", "MODEL_VERSION", "estimators", "unscaled_inputs", "leave_unscaled",
           "parse_settings", "configure", "summarise_target", "choose_task", "takes_sources",
           "RowSplit", "HeldOutScore", "proba_column", "predictions", "describe_score", "column_relevances",
           "load_model", "replaced_atomically", "check_output_folder"]

MODEL_FORMAT = "rffkit-command-line"
#: The newest command-line model file this rffkit reads and writes. Each file is written with the
#: oldest version whose readers know its encoding: 1; 2, an encoding that fills in missing values;
#: 3, one that one-hot encodes codes stored as numbers, booleans or dates (--categorical); 4, one
#: that reads dates written as text (01/31/2020).
MODEL_VERSION = 4


def estimators():
    """Estimator class and whether the command line standardises its inputs, by (model, task)."""
    from .logistic import RFFClassifier
    from .rffnet import RFFNetClassifier, RFFNetRegressor
    from .ridge import RFFRidge
    from .srff import SRFFRegressor

    # RFFNet and SRFF standardise their inputs themselves; the ridge models use one length
    # scale for every column, so a StandardScaler goes in front of them (of all but the 0/1
    # columns: unscaled_inputs).
    return {("rffnet", "regression"): (RFFNetRegressor, False),
            ("rffnet", "classification"): (RFFNetClassifier, False),
            ("ridge", "regression"): (RFFRidge, True),
            ("ridge", "classification"): (RFFClassifier, True),
            ("srff", "regression"): (SRFFRegressor, False)}


# -- the pieces of `rffkit fit` ---------------------------------------------------------------
def parse_settings(items):
    """``["alpha=0.1", "solver=adam"]`` -> ``{"alpha": 0.1, "solver": "adam"}``.

    Values are Python literals (``ast.literal_eval``: numbers, strings, tuples, lists, None,
    True) or, when they are not, the text itself; nothing is evaluated.

    >>> parse_settings(["max_iter=50", "hidden_layer_sizes=(32,)", "device=cuda"])
    {'max_iter': 50, 'hidden_layer_sizes': (32,), 'device': 'cuda'}
    """
    settings = {}
    for item in items:
        name, equals, text = item.partition("=")
        name = name.strip()
        if not equals or not name.isidentifier():
            raise CommandLineError(f"--set takes PARAMETER=VALUE (e.g. --set max_iter=50); got {item!r}.")
        try:
            settings[name] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            settings[name] = text.strip()
    return settings


def configure(estimator, settings, n_columns):
    """Set ``settings`` on ``estimator``, naming the valid parameters when one is unknown."""
    from .features import RandomFourierFeatures
    from ._default_map import _default_features

    params = estimator.get_params(deep=True)
    default_map = "features" in params and params["features"] is None
    valid = set(params)
    if default_map:  # features=None: features__... sets the default map's parameters
        valid |= {f"features__{name}" for name in RandomFourierFeatures().get_params()}
    unknown = [key for key in settings if key not in valid]
    if unknown:
        raise CommandLineError(f"--set {unknown[0]}: {type(estimator).__name__} has no parameter {unknown[0]!r}; its "
                               f"parameters are {', '.join(sorted(valid))}.")
    if settings.get("n_components") is not None and "features__n_components" in settings:
        raise CommandLineError(
            f"--set n_components={settings['n_components']!r} and features__n_components="
            f"{settings['features__n_components']!r} both set the width of the feature map (n_components wins "
            "over the map's own); give one of them.")
    if default_map and any(key.startswith("features__") for key in settings):
        # the map features=None builds, on standardised columns (variance 1); n_components still sets its width
        estimator.set_params(features=_default_features(n_columns, 1.0, None))
    return estimator.set_params(**settings)


#: Distinct values of a text target counted before :func:`summarise_target` stops counting.
MAX_COUNTED_CLASSES = 1_000_000
#: The most classes ``rffkit fit`` fits (as many as a feature column may have categories).
MAX_CLASSES = 1000


def summarise_target(source):
    """One pass over the target column: ``(kind, values, rows, numbers_in_text, n_distinct, fractional)``.

    ``kind`` is the numpy kind of its values, ``values`` the sorted distinct values (None
    if more than ``MAX_AUTO_CLASSES``), ``numbers_in_text`` what
    :meth:`NumbersInText.message` says of a text target that is a numeric column with a
    few other values in it (else None), ``n_distinct`` the number of distinct values (None
    when not known: a numeric target of more than ``MAX_CLASSES``, or a text target of
    more than ``MAX_COUNTED_CLASSES``), ``fractional`` whether a numeric target holds a
    number that is not whole.
    """
    kind, values, n_rows, fractional = None, set(), 0, False
    texts = set()  # a text target's distinct values, counted past MAX_AUTO_CLASSES
    numbers = set()  # a numeric target's, counted up to MAX_CLASSES
    check = NumbersInText(source.target)
    for chunk in source.with_encoding(ColumnEncoding([])).iter_chunks():
        kind, n_rows = chunk.y.dtype.kind, n_rows + chunk.y.shape[0]
        if kind == "f":
            fractional = fractional or bool(np.any(chunk.y != np.floor(chunk.y)))
        if values is None and kind not in "OUS" and numbers is None:
            continue  # a numeric target of many values: nothing left to learn from its chunks but the above
        distinct = np.unique(chunk.y).tolist()
        if kind in "OUS":
            check.update(distinct, lambda value: at_row(np.flatnonzero(chunk.y == value)[0], chunk.rows))
            if texts is not None:
                texts.update(distinct)
                texts = texts if len(texts) <= MAX_COUNTED_CLASSES else None
        elif numbers is not None:
            numbers.update(distinct)
            numbers = numbers if len(numbers) <= MAX_CLASSES else None
        if values is not None:
            values.update(distinct)
            values = values if len(values) <= MAX_AUTO_CLASSES else None
    counted = texts if kind is not None and kind in "OUS" else numbers
    n_distinct = len(values) if values is not None else len(counted) if counted is not None else None
    return (kind, None if values is None else sorted(values), n_rows, check.message(PLACEHOLDER_IN_FILE), n_distinct,
            fractional)


def choose_task(requested, kind, values, numbers_in_text=None, n_rows=None, n_distinct=None, fractional=None):
    """The task and why: text or booleans, or at most 20 whole numbers, make classes.

    Whole numbers make classes only where there are at least twice as many rows
    (``n_rows``) as values, as in scikit-learn's ``type_of_target``; a classification
    whose classes have fewer rows than that on average (``n_distinct`` values: names,
    addresses, one per row) is an error, as no class could be learned, and so is one of more
    than ``MAX_CLASSES`` classes, or one asked for a target of numbers that are not all whole
    (``fractional``; None: judged from ``values``). A text target of
    numbers with a few other values (``numbers_in_text``, the message of
    :func:`summarise_target`) is an error unless the classification is asked for.

    >>> choose_task("auto", "i", [0, 1, 2])
    ('classification', 'the target holds 3 distinct whole numbers (at most 20 make classes)')
    >>> choose_task("auto", "f", None)[0]
    'regression'
    >>> choose_task("auto", "i", list(range(15)), n_rows=20)[1]
    'the target holds 15 distinct whole numbers in 20 rows (classes need two rows each on average)'
    """
    n_distinct = len(values) if n_distinct is None and values is not None else n_distinct
    too_few = n_rows is not None and n_distinct is not None and n_distinct > 2 and 2 * n_distinct > n_rows
    if kind in "OUSb":
        why = "the target holds " + ("booleans" if kind == "b" else "text")
        if numbers_in_text is not None and requested != "classification":
            raise CommandLineError(f"{numbers_in_text}; or pass --task classification to make each value a class.")
        if requested == "regression":
            raise CommandLineError(f"{why}; regression needs numbers: use --task classification.")
        task = "classification"
    else:
        whole = values is not None and all(float(value).is_integer() for value in values)
        fractional = values is not None and not whole if fractional is None else fractional
        if requested == "classification" and fractional:
            count = f"{n_distinct:,}" if n_distinct is not None else f"more than {MAX_CLASSES:,}"
            raise CommandLineError(f"the target holds numbers that are not whole ({count} distinct values), and a "
                                   "classification needs labels: whole numbers, text or booleans; use --task "
                                   "regression, or make the target classes (round or bin it) in the data.")
        if whole:
            why = f"the target holds {len(values)} distinct whole numbers (at most {MAX_AUTO_CLASSES} make classes)"
            if too_few:
                why = (f"the target holds {len(values)} distinct whole numbers in {n_rows} rows (classes need two "
                       "rows each on average)")
        elif values is None:
            why = f"the target holds more than {MAX_AUTO_CLASSES} distinct numbers"
        else:
            why = "the target holds numbers that are not whole"
        task = requested if requested != "auto" else "classification" if whole and not too_few else "regression"
        why = "as asked" if requested != "auto" else why
    uncounted = n_distinct is None and values is None and kind not in "OUSb"  # more than MAX_CLASSES numbers
    if task == "classification" and (uncounted or n_distinct is not None and n_distinct > MAX_CLASSES):
        count = f"more than {MAX_CLASSES:,}" if uncounted else f"{n_distinct:,}"
        raise CommandLineError(
            f"the target holds {count} distinct values: a classification of more than {MAX_CLASSES:,} "
            "classes is refused, as its fit grows with the classes and each has few rows (an identifier?); "
            "choose another --target"
            + ("" if kind in "OUSb" else ", or --task regression") + ".")
    if task == "classification" and too_few:
        raise CommandLineError(
            f"the target holds {n_distinct} distinct values in {n_rows} rows: a class has fewer than two rows on "
            "average, too few to learn it from (a name or an identifier?); choose another --target"
            + ("" if kind in "OUSb" else ", or --task regression") + ".")
    return task, why


def takes_sources(estimator, sample):
    """Whether ``estimator.fit(source)`` works: ``y`` optional and a fit on a few rows succeeds.

    ``sample`` is ``(X, y)``, a few rows. When the fit on them as a source fails but the
    fit on them as arrays succeeds, the estimator does not take sources. When both fail,
    the sample's rows are at fault (the first rows of a file sorted by its label hold one
    class; a bad parameter value fails both as well), not the source: the answer is yes,
    and the fit on every row raises what is still wrong. Any exception of a trial fit counts
    as a failure: a numerical one on a few rows (a decomposition that does not converge)
    must not end the command before the real fit.
    """
    from sklearn.base import clone

    parameter = inspect.signature(type(estimator).fit).parameters.get("y")
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return False

    def trial():  # silent: --verbose reports the real fit, not these
        quiet = clone(estimator)
        return quiet.set_params(verbose=0) if "verbose" in quiet.get_params(deep=False) else quiet

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            trial().fit(ArraySource(*sample))
        except Exception:  # noqa: BLE001 -- any failure of the trial fit, see above
            try:
                trial().fit(*sample)
            except Exception:  # noqa: BLE001
                return True
            return False
    return True


class RowSplit(TableSource):
    """The training (or held-out) rows of a table source, as a source of its own.

    Row ``r`` is held out when ``validation_mask([r], test_size, seed)`` says so: the split
    depends on the row's index only, so every pass and every rank of a distributed fit agree
    on it without storing it. It shares the files, encoding, target and scaler of ``source``
    (the command line's standardisation: ``source.standardized(scaler)``).
    """

    def __init__(self, source, test_size, seed, *, held_out=False):
        vars(self).update(vars(source))
        self._split = (float(test_size), int(seed), bool(held_out))
        self._subset_rows = None

    @property
    def n_rows(self):
        if self._subset_rows is None:
            test_size, seed, held_out = self._split
            count, total = 0, super().n_rows  # with drop_missing_target, the rows that have a target
            if total < self._layout.count_rows(self._read_types):  # rows left out: read the kept ones' numbers
                blocks = (chunk.rows for chunk in TableSource.with_encoding(self, ColumnEncoding([])).iter_chunks())
            else:
                blocks = (np.arange(start, min(start + (1 << 20), total)) for start in range(0, total, 1 << 20))
            for rows in blocks:
                count += int(np.count_nonzero(validation_mask(rows, test_size, seed) == held_out))
            self._subset_rows = count
        return self._subset_rows

    def iter_chunks(self, chunk_rows=None, *, rank=0, world_size=1, unknown=None):
        """Yield the :class:`~rffkit.io.Chunk` tuples of this side of the split (rank's share)."""
        test_size, seed, held_out = self._split
        for chunk in super().iter_chunks(chunk_rows, rank=rank, world_size=world_size, unknown=unknown):
            keep = validation_mask(chunk.rows, test_size, seed) == held_out
            if keep.any():
                yield Chunk(chunk.X[keep], chunk.y[keep], chunk.rows[keep])


def proba_column(label):
    """The name of the ``--proba`` column of class ``label``: ``proba_`` and the label as the CSV output writes it
    (``proba_true`` and ``proba_false`` for a boolean target, whose predictions read ``true`` and ``false``;
    ``proba_2`` for a target of whole numbers stored as floats, whose predictions read ``2``)."""
    if isinstance(label, (bool, np.bool_)):
        text = "true" if label else "false"
    elif isinstance(label, (float, np.floating)) and float(label).is_integer() and abs(label) < 2**53:
        text = str(int(label))
    else:
        text = label
    return f"proba_{text}"


def predictions(model, X, method="predict"):
    """``model.predict(X)`` (or another method) on a chunk's encoded columns.

    A model fitted on a source knows its column names (``feature_names_in_``) and warns when
    given bare arrays; the command line encodes every chunk with the training encoding, so
    the columns are the right ones and that warning is left out.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        return np.asarray(getattr(model, method)(X))


class HeldOutScore:
    """R^2 and RMSE, or accuracy and log-loss, accumulated over chunks of held-out rows; ``unfitted``
    counts the rows of each label that is none of the model's classes (the first 20 such labels),
    ``n_unfitted`` the rows of all of them."""

    def __init__(self, task):
        self.task, self.n, self.sums = task, 0, np.zeros(4)
        self.shift, self.log_loss_defined, self.unfitted, self.n_unfitted = None, True, {}, 0

    def add(self, model, X, y):
        self.n += y.shape[0]
        if self.task == "regression":
            residual = predictions(model, X).astype(np.float64) - y
            self.shift = float(y.mean()) if self.shift is None else self.shift
            self.sums += [residual @ residual, (y - self.shift).sum(), ((y - self.shift) ** 2).sum(), 0.0]
            return
        position = {label: j for j, label in enumerate(np.asarray(model.classes_).tolist())}
        index = np.array([position.get(label, -1) for label in y.tolist()])
        self.log_loss_defined &= bool((index >= 0).all())
        self.n_unfitted += int(np.count_nonzero(index < 0))
        for label, count in zip(*np.unique(y[index < 0], return_counts=True)):
            label = label.item() if isinstance(label, np.generic) else label
            if label in self.unfitted or len(self.unfitted) < 20:
                self.unfitted[label] = self.unfitted.get(label, 0) + int(count)
        probability = predictions(model, X, "predict_proba")[np.arange(y.shape[0]), np.maximum(index, 0)]
        self.sums += [np.count_nonzero(predictions(model, X) == y),
                      -np.log(np.clip(probability, 1e-15, 1.0)).sum(), 0.0, 0.0]

    def unfitted_labels(self, classes):
        """What the rows whose label is none of ``classes`` (the model's) hold, or None without such rows."""
        if not self.unfitted:
            return None
        rows = self.n_unfitted
        labels = ", ".join(f"{label!r} ({count} row{'s' if count > 1 else ''})"
                           for label, count in self.unfitted.items())
        which = f"every one of the {self.n} rows holds" if rows == self.n else \
            f"{rows} of the {self.n} rows hold{'s' if rows == 1 else ''}"
        return (f"{which} a label the model was not fitted on: {labels}{', ...' if len(self.unfitted) == 20 else ''}; "
                f"its classes are {listing(classes)}")

    def result(self):
        if self.n == 0:
            return None
        if self.task == "regression":
            sse, total, squares = self.sums[:3]
            spread = squares - total**2 / self.n
            return {"r2": float(1 - sse / spread) if spread > 0 else None, "rmse": float(np.sqrt(sse / self.n))}
        return {"accuracy": float(self.sums[0] / self.n),
                "log_loss": float(self.sums[1] / self.n) if self.log_loss_defined else None}


def describe_score(score, unfitted=None):
    """``'R^2 0.452, RMSE 55.3'`` or ``'accuracy 0.950, log-loss 0.141'``. ``unfitted``, when given,
    says why a log-loss is undefined (:meth:`HeldOutScore.unfitted_labels`); by default, as of a fit,
    a held-out class that the training rows do not have."""
    if score is None:
        return "none (no held-out rows)"
    if "r2" in score:
        r2 = "undefined (constant target)" if score["r2"] is None else f"{score['r2']:.3f}"
        return f"R^2 {r2}, RMSE {score['rmse']:.4g}"
    why = unfitted or "a held-out class is not among the training classes"
    loss = f"undefined ({why})" if score["log_loss"] is None else f"{score['log_loss']:.3f}"
    return f"accuracy {score['accuracy']:.3f}, log-loss {loss}"


def column_relevances(estimator, groups):
    """Each original column's share of the total relevance, largest first; None without relevances.

    The final estimator's ``feature_importances_`` (one per encoded column) are made
    non-negative and divided by their sum; the shares of the one-hot columns of one
    original column are combined by their norm, as
    :func:`rffkit.inspection.grouped_importances` does for rffkit's estimators
    (:func:`rffkit.inspection.combine_shares`).
    """
    from .inspection import combine_shares

    importances = getattr(final_estimator(estimator), "feature_importances_", None)
    if importances is None:
        return None
    shares = np.abs(np.asarray(importances, dtype=np.float64))
    shares = shares / shares.sum() if shares.sum() > 0 else shares
    positions = {name: k for k, name in enumerate(dict.fromkeys(groups))}
    names = list(positions)
    grouped = combine_shares(shares, [positions[group] for group in groups], len(names), "norm")
    return dict(sorted(zip(names, grouped.tolist()), key=lambda item: -item[1]))


#: The entries of a model file's ``meta`` that the commands read, with the types they must have.
_META_TYPES = {"target": str, "task": str, "task_reason": str, "data": list, "n_rows": int, "columns": list,
               "feature_names": list, "estimator": str, "classes": (list, type(None)), "n_train": int, "n_test": int,
               "test_size": (int, float), "random_state": int, "score": (dict, type(None)),
               "fit_seconds": (int, float), "world_size": int, "command": str}


def load_model(path):
    """The dict ``rffkit fit`` saved at ``path``, checked, its ``encoding`` read into a :class:`ColumnEncoding`;
    errors say what else the file is or what it lacks."""
    if os.path.isdir(path):
        raise CommandLineError(f"{path!r} is a folder, not a model file; MODEL is the one file that rffkit fit "
                               "--output wrote.")
    if not os.path.isfile(path):
        raise CommandLineError(f"no model file at {path!r}.")
    bundle = load(path)
    if not (isinstance(bundle, dict) and bundle.get("format") == MODEL_FORMAT):
        kind = type(bundle).__name__
        raise ModelFileError(f"{path!r} holds a {kind} saved by rffkit.save, not a model written by "
                             "rffkit fit (which also stores the columns and their encoding); load "
                             "it in Python with rffkit.load, or fit one with rffkit fit.")
    version = bundle.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > MODEL_VERSION:
        raise ModelFileError(f"{path!r} was written by a newer rffkit (command-line model version "
                             f"{bundle['version']}; this one reads {MODEL_VERSION}); upgrade rffkit.")
    bundle["encoding"] = _check_model(path, bundle)
    return bundle


def _check_model(path, bundle):
    """The :class:`ColumnEncoding` of a model file's dict ``bundle``; raise naming what of it is missing,
    of the wrong type, or at odds with the rest: a file edited by hand (with its digest recomputed) or
    written by another program."""

    def invalid(what):
        return ModelFileError(f"{path!r} is not a valid rffkit model file: {what}; fit the model again with "
                              "rffkit fit.")

    lacking = [key for key in ("version", "estimator", "encoding", "meta") if key not in bundle]
    if lacking:
        raise invalid(f"it lacks {listing(lacking)}")
    version, meta, estimator = bundle["version"], bundle["meta"], bundle["estimator"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise invalid(f"its version is {short(version)}, not a positive integer")
    for key in ("meta", "encoding"):
        if not isinstance(bundle[key], dict):
            raise invalid(f"its {key} is a {type(bundle[key]).__name__}, not a dict")
    lacking = [key for key in _META_TYPES if key not in meta]
    if lacking:
        raise invalid(f"its meta lacks {listing(lacking)}")
    for key, kinds in _META_TYPES.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if not isinstance(meta[key], kinds) or isinstance(meta[key], bool):
            raise invalid(f"its meta's {key!r} is {short(meta[key])}, not of type "
                          + " or ".join(kind.__name__ for kind in kinds))
    if meta["task"] not in ("regression", "classification") \
            or (meta["task"] == "classification") != isinstance(meta["classes"], list):
        raise invalid(f"its meta's task is {short(meta['task'])}, with classes {short(meta['classes'])}")
    try:
        encoding = ColumnEncoding.from_dict(bundle["encoding"])
    except KeyError as error:
        raise invalid(f"its encoding lacks {error}") from None
    except (TypeError, ValueError) as error:
        raise invalid(f"its encoding cannot be read ({one_line(error).rstrip('.')})") from None
    names = encoding.output_names
    if names != meta["feature_names"] or list(encoding.columns) != meta["columns"]:
        raise invalid(f"its encoding makes the inputs {listing(names)}, but its meta says the model was fitted on "
                      f"{listing(meta['feature_names'])}")
    if not hasattr(estimator, "predict"):
        raise invalid(f"its estimator is a {type(estimator).__name__}, which does not predict")
    classes = np.asarray(getattr(estimator, "classes_", [])).tolist()
    if meta["task"] == "classification" and classes != meta["classes"]:
        raise invalid(f"its estimator's classes are {listing(classes)}, but its meta says {listing(meta['classes'])}")
    fitted = getattr(estimator, "feature_names_in_", None)
    if getattr(estimator, "n_features_in_", len(names)) != len(names) or (
            fitted is not None and list(fitted) != names):
        raise invalid(f"its estimator was fitted on {getattr(estimator, 'n_features_in_', '?')} inputs"
                      + ("" if fitted is None else f" ({listing(fitted)})")
                      + f", and its encoding makes {len(names)} ({listing(names)})")
    return encoding


@contextlib.contextmanager
def replaced_atomically(path):
    """Yield a temporary path beside ``path``, renamed onto ``path`` only if the block succeeds."""
    folder, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def check_output_folder(path, option="--output"):
    """Refuse, before any work, an output path that cannot be written: a folder, or in a missing folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CommandLineError(f"{option} {path!r}: the folder {folder!r} does not exist.")
    if os.path.isdir(path):
        raise CommandLineError(f"{option} {path!r} is a folder; give a file name.")
