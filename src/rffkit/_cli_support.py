"""What ``rffkit fit`` and the other commands build on, apart from argument parsing.

The task rule, ``--set`` parsing, the check whether an estimator fits from a data source,
the hold-out split as a source of its own (:class:`RowSplit`), the held-out score
accumulated chunk by chunk, relevances per original column, the torch.distributed group
under torchrun, model files of the command line and atomic output files.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
import os
import secrets
import warnings

import numpy as np

from ._io_base import PLACEHOLDER_IN_FILE, NumbersInText, at_row
from ._streaming import validation_mask
from ._validation import final_estimator
from .cli import MAX_AUTO_CLASSES, CommandLineError
from .io import ArraySource, Chunk, ColumnEncoding, TableSource
from .persistence import ModelFileError, load

__all__ = ["MODEL_FORMAT", "MODEL_VERSION", "estimators",
           "parse_settings", "configure", "summarise_target", "choose_task", "takes_sources",
           "RowSplit", "HeldOutScore", "predictions", "describe_score", "column_relevances",
           "load_model", "replaced_atomically"]

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
    # scale for every column, so a StandardScaler goes in front of them.
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
    from .ridge import DEFAULT_N_COMPONENTS

    params = estimator.get_params(deep=True)
    default_map = "features" in params and params["features"] is None
    valid = set(params)
    if default_map:  # features=None: features__... sets the default map's parameters
        valid |= {f"features__{name}" for name in RandomFourierFeatures().get_params()}
    name = type(estimator).__name__
    unknown = [key for key in settings if key not in valid]
    if unknown:
        raise CommandLineError(f"--set {unknown[0]}: {name} has no parameter {unknown[0]!r}; its "
                               f"parameters are {', '.join(sorted(valid))}.")
    if default_map and any(key.startswith("features__") for key in settings):
        # the map RFFRidge/RFFClassifier build for features=None, on standardised columns
        estimator.set_params(features=RandomFourierFeatures(
            n_components=DEFAULT_N_COMPONENTS, length_scale=math.sqrt(n_columns / 2)))
    return estimator.set_params(**settings)


#: Distinct values of a text target counted before :func:`summarise_target` stops counting.
MAX_COUNTED_CLASSES = 1_000_000
#: The most classes ``rffkit fit`` fits (as many as a feature column may have categories).
MAX_CLASSES = 1000


def summarise_target(source):
    """One pass over the target column: ``(kind, values, rows, numbers_in_text, n_distinct)``.

    ``kind`` is the numpy kind of its values, ``values`` the sorted distinct values (None
    if more than ``MAX_AUTO_CLASSES``), ``numbers_in_text`` what
    :meth:`NumbersInText.message` says of a text target that is a numeric column with a
    few other values in it (else None), ``n_distinct`` the number of distinct values (None
    when not known: a numeric target of more than ``MAX_AUTO_CLASSES``, or a text target of
    more than ``MAX_COUNTED_CLASSES``).
    """
    kind, values, n_rows = None, set(), 0
    texts = set()  # a text target's distinct values, counted past MAX_AUTO_CLASSES
    check = NumbersInText(source.target)
    for chunk in source.with_encoding(ColumnEncoding([])).iter_chunks():
        kind, n_rows = chunk.y.dtype.kind, n_rows + chunk.y.shape[0]
        if values is None and kind not in "OUS":
            continue  # a numeric target of many values: nothing left to learn from its chunks
        distinct = np.unique(chunk.y).tolist()
        if kind in "OUS":
            check.update(distinct, lambda value: at_row(np.flatnonzero(chunk.y == value)[0], chunk.rows))
            if texts is not None:
                texts.update(distinct)
                texts = texts if len(texts) <= MAX_COUNTED_CLASSES else None
        if values is not None:
            values.update(distinct)
            values = values if len(values) <= MAX_AUTO_CLASSES else None
    n_distinct = len(values) if values is not None else len(texts) if kind in "OUS" and texts is not None else None
    return kind, None if values is None else sorted(values), n_rows, check.message(PLACEHOLDER_IN_FILE), n_distinct


def choose_task(requested, kind, values, numbers_in_text=None, n_rows=None, n_distinct=None):
    """The task and why: text or booleans, or at most 20 whole numbers, make classes.

    Whole numbers make classes only where there are at least twice as many rows
    (``n_rows``) as values, as in scikit-learn's ``type_of_target``; a classification
    whose classes have fewer rows than that on average (``n_distinct`` values: names,
    addresses, one per row) is an error, as no class could be learned, and so is one of more
    than ``MAX_CLASSES`` classes. A text target of
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
    if task == "classification" and n_distinct is not None and n_distinct > MAX_CLASSES:
        raise CommandLineError(
            f"the target holds {n_distinct:,} distinct values: a classification of more than {MAX_CLASSES:,} "
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            clone(estimator).fit(ArraySource(*sample))
        except Exception:  # noqa: BLE001 -- any failure of the trial fit, see above
            try:
                clone(estimator).fit(*sample)
            except Exception:  # noqa: BLE001
                return True
            return False
    return True


class RowSplit(TableSource):
    """The training (or held-out) rows of a table source, as a source of its own.

    Row ``r`` is held out when ``validation_mask([r], test_size, seed)`` says so: the split
    depends on the row's index only, so every pass and every rank of a distributed fit agree
    on it without storing it. ``transform``, when given, maps each chunk's ``X`` (the
    command line's standardisation). It shares the files, encoding and target of ``source``.
    """

    def __init__(self, source, test_size, seed, *, held_out=False, transform=None):
        vars(self).update(vars(source))
        self._split = (float(test_size), int(seed), bool(held_out))
        self._transform = transform
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
                X = chunk.X[keep] if self._transform is None else self._transform(chunk.X[keep])
                yield Chunk(X, chunk.y[keep], chunk.rows[keep])


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
    """R^2 and RMSE, or accuracy and log-loss, accumulated over chunks of held-out rows."""

    def __init__(self, task):
        self.task, self.n, self.sums = task, 0, np.zeros(4)
        self.shift, self.log_loss_defined = None, True

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
        probability = predictions(model, X, "predict_proba")[np.arange(y.shape[0]), np.maximum(index, 0)]
        self.sums += [np.count_nonzero(predictions(model, X) == y),
                      -np.log(np.clip(probability, 1e-15, 1.0)).sum(), 0.0, 0.0]

    def result(self):
        if self.n == 0:
            return None
        if self.task == "regression":
            sse, total, squares = self.sums[:3]
            spread = squares - total**2 / self.n
            return {"r2": float(1 - sse / spread) if spread > 0 else None, "rmse": float(np.sqrt(sse / self.n))}
        return {"accuracy": float(self.sums[0] / self.n),
                "log_loss": float(self.sums[1] / self.n) if self.log_loss_defined else None}


def describe_score(score):
    """``'R^2 0.452, RMSE 55.3'`` or ``'accuracy 0.950, log-loss 0.141'``."""
    if score is None:
        return "none (no held-out rows)"
    if "r2" in score:
        r2 = "undefined (constant target)" if score["r2"] is None else f"{score['r2']:.3f}"
        return f"R^2 {r2}, RMSE {score['rmse']:.4g}"
    loss = "undefined (a held-out class is not among the training classes)" \
        if score["log_loss"] is None else f"{score['log_loss']:.3f}"
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


def load_model(path):
    """The dict ``rffkit fit`` saved at ``path``; errors say what else the file is."""
    if not os.path.isfile(path):
        raise CommandLineError(f"no model file at {path!r}.")
    bundle = load(path)
    if not (isinstance(bundle, dict) and bundle.get("format") == MODEL_FORMAT):
        kind = type(bundle).__name__
        raise ModelFileError(f"{path!r} holds a {kind} saved by rffkit.save, not a model written by "
                             "rffkit fit (which also stores the columns and their encoding); load "
                             "it in Python with rffkit.load, or fit one with rffkit fit.")
    if bundle.get("version", 0) > MODEL_VERSION:
        raise ModelFileError(f"{path!r} was written by a newer rffkit (command-line model version "
                             f"{bundle['version']}; this one reads {MODEL_VERSION}); upgrade rffkit.")
    return bundle


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
