"""Peak memory of the in-memory paths, estimated before anything is allocated.

Each estimator's fit (and the transformers' transform) holds a few ``n x D`` feature
matrices and, for the ridge heads, a ``D x D`` (or ``n x n``) Gram matrix with its
eigendecomposition. :func:`check_memory` sums them from the shape of ``X`` and the
parameters, compares with ``psutil.virtual_memory().available`` and raises
:class:`InsufficientMemoryError` before the fit starts, naming what lowers the need.

The factors below were measured (the peak RSS of a process, after a warm-up fit, for
n up to 20,000 and D up to 3,000; ``tests/test_memory.py`` holds each estimate within a
factor of two of the measured peak under ``-m slow``). They count what the fit allocates,
not the input itself, which is already in memory.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import psutil
import scipy.sparse as sp

from .exceptions import InsufficientMemoryError

__all__ = ["InsufficientMemoryError", "available_memory", "estimate_peak_bytes", "check_memory"]

_GIB = 2.0**30


def available_memory():
    """Bytes the operating system can give this process without swapping."""
    return int(psutil.virtual_memory().available)


def _shape(X):
    """``(n_samples, n_features)`` of an array-like that has a 2-D shape, else None."""
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        return None
    if not all(isinstance(size, numbers.Integral) for size in shape):
        return None
    return int(shape[0]), int(shape[1])


def _itemsize(X):
    """Bytes per value of the computation: float32 input stays float32, the rest float64."""
    return 4 if getattr(X, "dtype", None) == np.float32 else 8


def _is_sparse_map(features):
    return type(features).__name__ == "RandomBinningFeatures"


# -- one estimate per estimator: (bytes, what grows, what lowers it) ------------------------------


def _fourier_transform(estimator, n, p, itemsize):
    D = int(estimator.n_components)
    factor = 2.5 if getattr(estimator, "variant", "cos") == "cos_sin" else 1.2
    return factor * n * D * itemsize, f"an n x D feature matrix (D={D})", (
        "lower n_components, or transform the rows in chunks"
    )


def _binning_transform(estimator, n, p, itemsize):
    return _binning_bytes(int(estimator.n_components), n, itemsize, "n_components")


def _binning_bytes(P, n, itemsize, lower):
    return (48.0 + itemsize) * n * P, f"the cell keys and sparse features of {P} grids", (
        f"lower {lower}, or transform the rows in chunks"
    )


def _ridge_fit(estimator, n, p, itemsize):
    from ._default_map import map_width, width_parameter

    features = estimator.features
    D = map_width(estimator)
    if D is None:
        return None
    if _is_sparse_map(features):
        # the output width (cells seen) is known only after the transform; D grids (n_components, if set)
        return _binning_bytes(D, n, itemsize, width_parameter(estimator))
    if D <= n:  # the D x D Gram matrix and its eigendecomposition
        needed = (2.5 * n * D + 3.0 * D * D) * itemsize
    else:  # the n x n one, and Z^T U to map back
        needed = (3.5 * n * D + 4.0 * n * n) * itemsize
    rank = min(n, D)
    return needed, f"n x D feature matrices and a {rank} x {rank} Gram matrix (D={D})", (
        f"lower {width_parameter(estimator)}, pass X as float32 (half the memory), or stream the rows from a "
        "file or array with rffkit.io (RFFRidge().fit(rffkit.io.open_table(...)) or "
        "rffkit.io.ArraySource(X, y)), which accumulates Z^T Z chunk by chunk and never holds the n x D matrix"
    )


def _classifier_fit(estimator, n, p, itemsize):
    from ._default_map import map_width, width_parameter

    features = estimator.features
    D = map_width(estimator)
    if D is None:
        return None
    if _is_sparse_map(features):
        return _binning_bytes(D, n, itemsize, width_parameter(estimator))
    return 1.5 * n * D * itemsize, f"the n x D feature matrix (D={D})", (
        f"lower {width_parameter(estimator)}, pass X as float32 (half the memory), or fit on a subsample of the rows"
    )


def _srff_fit(estimator, n, p, itemsize):
    D = int(estimator.n_components)
    needed = (6.5 * n * D + 3.0 * D * D + 2.0 * n * p) * itemsize
    return needed, f"n x D feature matrices and their gradients (D={D})", (
        "lower n_components, or pass X as float32 (half the memory)"
    )


def _rffnet_fit(estimator, n, p, itemsize):
    """Measured peaks of the process (its high-water mark, which also counts memory the
    allocator keeps): 'varpro' holds about 18 bytes per n x D entry in its search and head
    (24 for the classifier's heads), plus a little per n x p x D product of the relevance
    gradient, and its refinement moves about 50 bytes per D x D entry (Gram matrices and
    factors of candidate heads; 120 for the classifier); the peak is the larger. Adam holds
    the features of the validation rows and of a few batches, about three copies each."""
    from ._search import default_n_components, varpro_n_components

    n_train = n
    if estimator.early_stopping:
        n_train = n - int(math.floor(estimator.validation_fraction * n))
    settings = estimator._settings
    D = estimator.n_components
    hidden = tuple(np.atleast_1d(np.asarray(estimator.hidden_layer_sizes, dtype=object)))
    varpro = estimator.solver != "adam" and not hidden and estimator._supports_varpro
    if D is None:
        D = (varpro_n_components if varpro else default_n_components)(n_train, settings)
    D = int(D)
    if varpro:
        classifier = not estimator._supports_varpro or type(estimator).__name__.endswith("Classifier")
        moves = estimator.rescale_groups or estimator.align_frequencies or estimator.prune_relevances
        search = (24.0 if classifier else 18.0) * n * D + 0.1 * n * p * D
        refine = (120.0 if classifier else 50.0 if moves else 30.0) * D * D
        return max(search, refine), f"n x D feature matrices and D x D Gram matrices (D={D})", "lower n_components"
    batch = min(int(estimator.batch_size), n)
    needed = 2.0 * n * p * 8 + 3.0 * (n - n_train + 3 * batch) * D * 4
    return needed, f"feature matrices of the validation rows and the batches (D={D})", (
        "lower n_components or batch_size"
    )


def _srff_predict(estimator, n, p, itemsize):
    D = int(estimator.n_components)
    return 2.0 * n * D * itemsize, f"an n x D feature matrix (D={D})", "predict the rows in chunks"


_FIT_ESTIMATES = {
    "RandomFourierFeatures": None,
    "RandomBinningFeatures": _binning_transform,
    "RFFRidge": _ridge_fit,
    "RFFClassifier": _classifier_fit,
    "SRFFRegressor": _srff_fit,
    "BaseRFFNet": _rffnet_fit,
}
#: Estimators that turn a sparse X into a dense array (:func:`rffkit._validation.check_input`, ``densify``).
_DENSIFY_SPARSE = {"BaseRFFNet", "SRFFRegressor"}
#: Estimators that do so unless their feature map reads sparse input (:func:`rffkit._validation.takes_sparse`).
_DENSIFY_UNLESS_FEATURES_READ_SPARSE = {"RFFRidge", "RFFClassifier"}
#: Estimators whose fit streams a memory map instead of loading it.
_STREAMS_MEMORY_MAPS = {"RFFRidge", "RFFNetRegressor"}
_TRANSFORM_ESTIMATES = {
    "RandomFourierFeatures": _fourier_transform,
    "RandomBinningFeatures": _binning_transform,
    "SRFFRegressor": _srff_predict,
}


def _streams(estimator, X):
    """Whether the estimator's fit streams the memory map ``X`` (RFFNet: with 'varpro' only)."""
    if not hasattr(estimator, "hidden_layer_sizes"):
        return True
    from ._rffnet_stream import fits_streamed

    return fits_streamed(estimator, X)


def estimate_peak_bytes(estimator, X, method="fit"):
    """``(bytes, what, remedy)`` for ``estimator.<method>(X)``, or None when not estimated.

    ``method`` is 'fit' or any other method name (predict-like methods share one
    estimate). Inputs without a 2-D integer ``shape`` (lists, streamed sources of
    :mod:`rffkit.io`) and memory maps that the estimator streams are not estimated here.
    """
    shape = _shape(X)
    if shape is None:
        return None
    table = _FIT_ESTIMATES if method == "fit" else _TRANSFORM_ESTIMATES
    names = [klass.__name__ for klass in type(estimator).__mro__]
    found = None
    for name in names:
        if isinstance(X, np.memmap) and name in _STREAMS_MEMORY_MAPS and _streams(estimator, X):
            return None  # read chunk by chunk, checked against its memory budget
        if name in table:
            estimate = table[name]
            try:
                found = None if estimate is None else estimate(estimator, *shape, _itemsize(X))
            except (TypeError, ValueError, AttributeError, OverflowError):
                # parameters the validation that follows will refuse with its own message
                return None
            break
    from ._validation import takes_sparse

    features = getattr(estimator, "features", None)
    densified = _DENSIFY_SPARSE.intersection(names) or (
        _DENSIFY_UNLESS_FEATURES_READ_SPARSE.intersection(names) and not takes_sparse(features))
    if sp.issparse(X) and densified:
        dense = 8.0 * shape[0] * shape[1]
        what = f"a dense copy of the sparse {shape[0]:,} x {shape[1]} X"
        remedy = ("give fewer columns (OneHotEncoder(max_categories=...)), or use RFFRidge or RFFClassifier with "
                  "a feature map that reads sparse X (such as scikit-learn's RBFSampler)")
        found = (dense, what, remedy) if found is None else (found[0] + dense, f"{found[1]} and {what}", found[2])
    return found


def _gib(value):
    return f"{value / _GIB:.3g} GiB" if value >= 0.1 * _GIB else f"{value / 2**20:.3g} MiB"


def check_memory(estimator, X, method="fit"):
    """Raise :class:`InsufficientMemoryError` when ``method`` on ``X`` would not fit in memory."""
    estimate = estimate_peak_bytes(estimator, X, method)
    if estimate is None:
        return
    needed, what, remedy = estimate
    available = available_memory()
    if needed <= available:
        return
    n, p = _shape(X)
    raise InsufficientMemoryError(
        f"{type(estimator).__name__}.{method} on {n:,} x {p} inputs needs about {_gib(needed)} for "
        f"{what}, but only {_gib(available)} of memory is available; {remedy}. To try anyway, use "
        "rffkit.config_context(check_memory=False)."
    )
