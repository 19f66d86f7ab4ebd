"""The one boundary between users' arrays and the tensor numerics.

Everything that turns user input into tensors lives here: input validation
(:func:`check_input`, scikit-learn's ``validate_data`` with rffkit's minimum-data rules;
the messages that name a bad column or row are in :mod:`rffkit._input_messages`), device
resolution, dtype choice, random-state plumbing (never touching global NumPy or torch
state) and numpy <-> torch conversion.
"""

from __future__ import annotations

import numbers
import threading
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import is_classifier, is_regressor
from sklearn.pipeline import Pipeline
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ._input_messages import check_text_columns, locate_nan, regression_target
from ._input_messages import short_value as _short
from ._labels import check_label_types, classifier_labels
from .exceptions import SmallSampleWarning

__all__ = [
    "MIN_FIT_SAMPLES",
    "RELIABLE_SAMPLES",
    "RELIABLE_SAMPLES_PER_CLASS",
    "LARGEST_VALUE",
    "SMALLEST_LENGTH_SCALE",
    "FLOAT32_MAX",
    "LARGEST_LEARNING_RATE",
    "SMALLEST_PENALTY",
    "check_input",
    "one_class_error",
    "final_estimator",
    "standard_scale",
    "constant_columns",
    "takes_sparse",
    "check_finite_features",
    "check_grid_range",
    "deferred_warnings",
    "fit_warning",
    "warn_if_few_rows",
    "SEED_BOUND",
    "draw_seeds",
    "standardisation",
    "resolve_device",
    "inference_device",
    "CPUPicklingMixin",
    "torch_dtype_for",
    "seed_from_random_state",
    "torch_generator",
    "as_tensor",
    "to_numpy",
]

#: Seeds drawn for local generators lie in [0, SEED_BOUND).
SEED_BOUND = 2**31 - 1

#: Regressors and classifiers refuse to fit on fewer rows (see :mod:`rffkit.exceptions`).
MIN_FIT_SAMPLES = 2
#: Below these, a fit warns with :class:`~rffkit.exceptions.SmallSampleWarning`.
RELIABLE_SAMPLES = 20
RELIABLE_SAMPLES_PER_CLASS = 10
#: Largest magnitude accepted in X (and a regressor's y), by the dtype computed in: squares
#: (variances, Gram matrices, squared errors) of larger values overflow.
LARGEST_VALUE = {np.dtype(np.float64): 1e150, np.dtype(np.float32): 1e18}
#: Largest float32 value: the bound of parameters that float32 training must represent.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Largest Adam step size: its first step is 10 x learning_rate (bias correction), in float32.
LARGEST_LEARNING_RATE = 1e30
#: Smallest ridge penalty: the smallest normal float32. Below it alpha is 0 (or subnormal) in
#: float32 and 1 / (s + alpha) is infinite along the null directions of the Gram matrix.
SMALLEST_PENALTY = float(np.finfo(np.float32).tiny)
#: Smallest length scale accepted: the random frequencies are divided by it, and below
#: this they can overflow (then cos(X W) is NaN).
SMALLEST_LENGTH_SCALE = 1e-100
#: Error messages print at most this many values of an array (NumPy's threshold).
_MESSAGE_VALUES = 10


_deferred = threading.local()


@contextmanager
def deferred_warnings():
    """Hold back the data warnings of :func:`check_input` during a fit; yields their list.

    The fit's decorator (:func:`rffkit._guards.atomic_fit`) issues them once the fit has
    succeeded, so a fit that fails raises its error alone.
    """
    outer = getattr(_deferred, "pending", None)
    _deferred.pending = []
    try:
        yield _deferred.pending
    finally:
        _deferred.pending = outer


def fit_warning(message, category=UserWarning):
    """Warn about a fit at the user's line that called ``fit``.

    Inside a fit decorated by :func:`rffkit._guards.atomic_fit` the warning is held back
    (:func:`deferred_warnings`) and issued once the fit has succeeded, at the caller of
    ``fit``; elsewhere it points at the first frame outside rffkit
    (:func:`rffkit._io_base.warn_user`).
    """
    pending = getattr(_deferred, "pending", None)
    if pending is None:
        from ._io_base import warn_user

        warn_user(message, category)
    else:
        pending.append((message, category))


def warn_if_float32_offset(owner, y, X_dtype, *, moments=None):
    """Warn when predictions in float32 (those of float32 inputs) cannot resolve ``y`` around its mean.

    The fit centres ``y`` in float64, but predictions come back in the dtype of ``X``,
    whose rounding at ``|mean|`` is ``2^-24 |mean|``: past 1% of ``y``'s spread they lose
    a visible part of the signal (a mean of 1e8 and a spread of 1 round to steps of 8).
    A streamed fit, which keeps no ``y``, passes ``y=None`` and ``moments``: the means and
    standard deviations of its targets.
    """
    if np.dtype(X_dtype) != np.float32:
        return
    if moments is None:
        y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        # in units of each target's largest magnitude: the squares of values near 1e-300 underflow to a
        # spread of 0, against which any mean warned
        peak = np.max(np.abs(y), axis=0)
        peak = np.where(np.isfinite(peak) & (peak > 0), peak, 1.0)
        moments = np.mean(y / peak, axis=0) * peak, np.std(y / peak, axis=0) * peak
    means, spreads = np.abs(np.asarray(moments[0], dtype=np.float64)), np.asarray(moments[1], dtype=np.float64)
    ratios = means / np.maximum(spreads, 1e-300)  # per target: one target's mean against its own spread
    worst = int(np.argmax(ratios))
    mean, spread = means[worst], spreads[worst]
    if np.isfinite(mean) and mean * np.finfo(np.float32).eps / 2 > 0.01 * spread:
        fit_warning(
            f"{owner}: y's mean ({mean:.3g}) is {ratios[worst]:.3g} times its spread; predictions come "
            "back in float32, the dtype of X, whose rounding at that size is over 1% of the spread. Pass X as "
            "float64, or subtract a constant from y before the fit.", RuntimeWarning)


def _warn_row_label_columns(owner, X):
    """A fit on a DataFrame: the row-label check that files get (:class:`rffkit._row_labels.RowNumbers`) on
    its numeric columns named as row labels are (R's ``rownames`` read with ``pd.read_csv``, an ``id``)."""
    from ._row_labels import ROW_LABEL_NAMES, RowNumbers

    columns = getattr(X, "columns", None)
    if columns is None:
        return
    for column in columns:
        if not isinstance(column, str) or column.strip().lower() not in ROW_LABEL_NAMES:
            continue
        try:
            values = np.asarray(X[column], dtype=np.float64)
        except (TypeError, ValueError):
            continue
        check = RowNumbers(column)
        check.update(values, np.arange(values.shape[0]))
        message = check.message(leave_out="drop it from X")
        if message is not None:
            fit_warning(f"{owner}: {message}")


def check_magnitude(owner, name, values, computed_in=None):
    """Refuse values whose squares would overflow the dtype they are computed in."""
    data = values.data if hasattr(values, "tocsr") else values
    data = np.asarray(data)
    if data.size == 0 or data.dtype.kind != "f":
        return
    dtype = np.dtype(computed_in or data.dtype)
    limit = LARGEST_VALUE.get(dtype, LARGEST_VALUE[np.dtype(np.float64)])
    largest = max(abs(float(np.max(data))), abs(float(np.min(data))))
    if largest > limit:
        raise ValueError(
            f"{owner}: {name} holds values as large as {largest:.3g} in magnitude; rffkit squares them "
            f"(variances, Gram matrices) and accepts at most {limit:.0e} in {dtype}. Rescale {name} first "
            "(e.g. with sklearn.preprocessing.StandardScaler)"
            + (", or pass X as float64." if dtype == np.float32 else ".")
        )


def one_class_error(owner, label):
    """The error for a classification target whose every row is the class ``label``."""
    return ValueError(f"{owner}: the target holds only one class ({_short(label)}); classification needs at "
                      "least two.")


def _warn_if_small(owner, classifier, y, n_samples):
    labels = counts = None
    if classifier:
        check_label_types(owner, y)
        check_classification_targets(y)
        labels, counts = np.unique(np.asarray(y), return_counts=True)
    warn_if_few_rows(owner, n_samples, labels, counts)


def warn_if_few_rows(owner, n_rows, classes=None, counts=None):
    """:class:`~rffkit.exceptions.SmallSampleWarning` (by :func:`fit_warning`) for a fit on ``n_rows`` rows.

    Under :data:`RELIABLE_SAMPLES` rows it warns; else, for a classifier (its ``classes`` and
    their ``counts`` of rows given), when a class has fewer than :data:`RELIABLE_SAMPLES_PER_CLASS`.
    Fits on arrays call it from :func:`check_input`, streamed fits after their first pass.
    """
    if n_rows < RELIABLE_SAMPLES:
        fit_warning(
            f"{owner}: fitted on {n_rows} rows; under {RELIABLE_SAMPLES} the fitted model (its relevances, "
            "its alpha, any validation split) rests on too few points to be reliable.",
            SmallSampleWarning,
        )
    elif counts is not None and np.min(counts) < RELIABLE_SAMPLES_PER_CLASS:
        fit_warning(
            f"{owner}: class {_short(classes[np.argmin(counts)])} has only {np.min(counts)} rows; under "
            f"{RELIABLE_SAMPLES_PER_CLASS} per class the fitted classifier is unreliable.",
            SmallSampleWarning,
        )


def check_finite_features(owner, features, *, inputs="X"):
    """Raise ``ValueError`` when a feature map's output is not finite.

    Random Fourier features are cosines, finite for every finite argument: a NaN means
    that ``X`` times the frequencies overflowed (huge ``X``, or a tiny ``length_scale``).
    """
    values = features.data if hasattr(features, "tocsr") else features
    finite = bool(torch.isfinite(values).all()) if isinstance(values, torch.Tensor) else np.isfinite(values).all()
    if not finite:
        raise ValueError(
            f"{owner}: the features of {inputs} are not finite: {inputs} times the random frequencies "
            "overflowed. Rescale X (e.g. with sklearn.preprocessing.StandardScaler) or raise length_scale."
        )
    return features


def check_grid_range(owner, X, pitches, shifts):
    """Raise ``ValueError`` when a cell index of ``X`` in a random grid would overflow int64.

    Random binning numbers the cells of each grid by ``floor((x - shift) / pitch)``.
    """
    if X.size == 0:
        return
    largest = max(abs(float(np.max(X))), abs(float(np.min(X)))) + float(np.max(np.abs(shifts)))
    with np.errstate(over="ignore", divide="ignore"):
        cells = largest / float(np.min(pitches))
    if not cells < 2.0**62:
        raise ValueError(
            f"{owner}: X holds values as large as {largest:.3g}, {cells:.3g} cells of the finest grid "
            f"(pitch {float(np.min(pitches)):.3g}) from the origin, beyond the 2^62 cells a grid numbers. "
            "Rescale X or raise length_scale."
        )


def final_estimator(model):
    """The estimator that predicts for ``model``: a fitted search object's best estimator, a pipeline's last step."""
    model = getattr(model, "best_estimator_", model)
    return model.steps[-1][1] if isinstance(model, Pipeline) else model


def check_input(estimator, X, y="no_validation", *, reset=True, densify=False, **check_params):
    """scikit-learn's ``validate_data`` with rffkit's rules; returns what it returns.

    With ``densify`` a SciPy sparse ``X`` (a ``OneHotEncoder``'s default output) is accepted
    and returned as a dense array, for estimators whose computations need one (the memory
    check, :func:`rffkit._memory.check_memory`, counts the dense copy).

    On top of ``validate_data``: a column of strings is an error naming it (and the
    encoders that fix it); a regressor's non-numeric ``y`` is an error naming ``y``;
    values beyond :data:`LARGEST_VALUE` in ``X`` or a regressor's ``y`` are an error;
    arrays in error messages are cut to a few values. When fitting a regressor or
    classifier (``reset=True`` and a ``y``) fewer than :data:`MIN_FIT_SAMPLES` rows are an
    error and fewer than :data:`RELIABLE_SAMPLES` rows (or :data:`RELIABLE_SAMPLES_PER_CLASS`
    in a class) a :class:`~rffkit.exceptions.SmallSampleWarning`, issued once the fit
    succeeds (see :func:`deferred_warnings`); a classifier's ``y`` must be class labels, none
    missing, and comes back as NumPy labels of their own kind (:func:`rffkit._labels.classifier_labels`).
    """
    owner = type(estimator).__name__
    supervised = reset and not (isinstance(y, str) and y == "no_validation") and y is not None
    check_text_columns(owner, X)
    if supervised:
        check_params.setdefault("ensure_min_samples", MIN_FIT_SAMPLES)
        if is_regressor(estimator):
            y = regression_target(owner, y)
        elif is_classifier(estimator):
            y = classifier_labels(owner, y)
    if densify:
        check_params.setdefault("accept_sparse", ("csr", "csc", "coo"))
    # validate_data's finiteness test sums X, which warns on inf - inf before its own error
    with np.printoptions(threshold=_MESSAGE_VALUES, edgeitems=3), np.errstate(over="ignore", invalid="ignore"):
        try:
            validated = validate_data(estimator, X, y, reset=reset, **check_params)
        except ValueError as error:
            located = locate_nan(owner, X, y, str(error))
            if located is None:
                raise
            raise ValueError(located) from None
    X_checked, y_checked = validated if supervised else (validated, None)
    if supervised:
        _warn_row_label_columns(owner, X)
    if densify and sp.issparse(X_checked):
        X_checked = X_checked.toarray(order="C")  # a CSC matrix's natural order is Fortran's
        validated = (X_checked, y_checked) if supervised else X_checked
    check_magnitude(owner, "X", X_checked)
    if supervised:
        if is_regressor(estimator):
            check_magnitude(owner, "y", np.asarray(y_checked, dtype=np.float64), X_checked.dtype)
        _warn_if_small(owner, is_classifier(estimator), y_checked, X_checked.shape[0])
    return validated


def resolve_device(device, *, owner="estimator"):
    """Return a ``torch.device`` for ``device``, with an actionable error if absent.

    ``device`` may be ``'cpu'``, ``'cuda'``, ``'cuda:N'``, ``'auto'`` (CUDA when one is
    present, otherwise the CPU) or a ``torch.device``.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"{owner}: device={device!r} is not a valid torch device; "
            "expected 'cpu', 'cuda', 'cuda:N' or 'auto'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{owner}: device={device!r} was requested but no CUDA GPU is available "
            "to this torch build; use device='cpu' or device='auto'."
        )
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(
            f"{owner}: device type {resolved.type!r} is not supported; "
            "expected 'cpu' or 'cuda'."
        )
    return resolved


def inference_device(fitted_device):
    """The device a fitted model predicts on: where it was fitted, or the CPU without CUDA.

    A model fitted on a GPU and moved to a machine without one predicts on the CPU
    instead of failing.
    """
    fitted_device = torch.device(fitted_device)
    if fitted_device.type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu")
    return fitted_device


class CPUPicklingMixin:
    """Pickle a fitted estimator with its fitted device (``_device``) set to the CPU.

    A pickled model then always reloads and predicts on a CPU-only machine; the
    ``device`` parameter is kept as the user passed it.
    """

    def __getstate__(self):
        state = super().__getstate__()
        if "_device" in state:
            state["_device"] = torch.device("cpu")
        return state


def torch_dtype_for(array):
    """float32 input stays float32; every other dtype computes in float64."""
    if getattr(array, "dtype", None) == np.float32:
        return torch.float32
    return torch.float64


def seed_from_random_state(random_state):
    """Draw one integer seed from ``random_state`` (None, int or RandomState).

    The draw comes from a local ``RandomState``; the global NumPy state is only read
    when ``random_state`` is None, exactly as scikit-learn does.
    """
    if isinstance(random_state, numbers.Integral):
        # Use the integer itself so the seed is stable and readable.
        return int(random_state) % SEED_BOUND
    return int(check_random_state(random_state).randint(SEED_BOUND))


def draw_seeds(random_state, n_seeds):
    """``n_seeds`` integer seeds drawn from ``random_state`` (None, int or RandomState).

    The draws come from ``check_random_state``'s local ``RandomState``, so an integer
    ``random_state`` gives the same seeds every time and the global state is untouched.
    """
    return [int(seed) for seed in check_random_state(random_state).randint(SEED_BOUND, size=n_seeds)]


def standardisation(X):
    """Column means and scales that standardise ``X``: ``(X - mean) / scale``, and which columns are constant.

    A column whose standard deviation is within rounding of zero (:func:`constant_columns`)
    is constant: its scale is 1, so it stays a column of (nearly) zeros instead of amplifying
    rounding noise. Returns ``(mean, scale, constant)``: two arrays of shape (n_features,) in
    the dtype of ``X`` and a boolean mask.
    """
    mean = X.mean(axis=0)
    return (mean, *standard_scale(mean, X.std(axis=0), X.dtype))


def constant_columns(mean, std, dtype):
    """Which columns are constant: a standard deviation of at most ``64 eps |mean|``, ``eps`` of ``dtype``.

    The rounding of a constant column's mean leaves a standard deviation of a few ``eps |mean|``;
    the bound is relative, so a column of tiny values (1e-12 and below) or of small changes on a
    large offset (1e7 + 1e-6 x in float64) keeps its variation.
    """
    std = np.asarray(std)
    return ~(std > 64.0 * float(np.finfo(dtype).eps) * np.abs(mean))


def standard_scale(mean, std, dtype):
    """The scales of :func:`standardisation` from column means and standard deviations, and which
    columns are constant (:func:`constant_columns`): ``(scale, constant)``, the scale the standard
    deviation or 1 for a constant column. Used as well by fits that stream their moments."""
    constant = constant_columns(mean, std, dtype)
    scale = np.array(std, copy=True)
    scale[constant] = 1.0
    return scale, constant


def takes_sparse(features):
    """Whether the feature map ``features`` reads sparse input (None, the default random Fourier features, does not)."""
    try:
        return features is not None and bool(features.__sklearn_tags__().input_tags.sparse)
    except AttributeError:  # a transformer without scikit-learn's tags
        return False


def torch_generator(seed, device="cpu"):
    """A local torch generator seeded with ``seed`` (global torch state untouched)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator


def as_tensor(array, *, dtype, device):
    """Convert a NumPy array (or tensor) into a contiguous tensor on ``device``.

    A read-only array (pandas' copy-on-write hands them out, as does a memory map opened
    for reading) is copied: a tensor sharing its memory could be written to.
    """
    if isinstance(array, torch.Tensor):
        return array.to(device=device, dtype=dtype)
    array = np.ascontiguousarray(array)
    if not array.flags.writeable:
        array = array.copy()
    return torch.as_tensor(array, dtype=dtype, device=device)


def to_numpy(tensor):
    """Detach a tensor and return it as a NumPy array on the CPU."""
    return tensor.detach().cpu().numpy()
