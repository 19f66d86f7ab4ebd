"""RFFRidge's streamed fits: from sources, memory maps, chunks of arrays and ``partial_fit``.

The streamed side of :class:`rffkit.ridge.RFFRidge`: a fit that reads its rows chunk by
chunk (a :class:`rffkit.io.TableSource`, an :class:`rffkit.io.ArraySource` or a
``numpy.memmap``, split over the ranks of a process group), the chunked fit that replaces
an in-memory fit too large for memory, ``partial_fit``, and prediction on a source. Each
accumulates the sufficient statistics of :mod:`rffkit._sufficient` and scores the alphas
from them along the eigen-path of :mod:`rffkit._ridge_path`. The functions take the
estimator, whose methods call them.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils.validation import check_array, check_consistent_length

from ._default_map import default_features_from_moments, default_features_warned, map_width, width_parameter
from ._ridge_path import gcv_path, heldout_path, path_coefficients
from ._ridge_statistics import RidgeStatistics
from ._rffnet_stream import prediction_source
from ._scoring import streamed_r2
from ._streaming import numeric_target
from ._sufficient import (
    MemoryBudgetError,
    accumulate,
    add_rows,
    agree,
    block_rows_for,
    check_memory_budget,
    feature_blocks,
    fitted_on_first_chunk,
    statistics_bytes,
    streamed_loo,
    streamed_moments,
)
from ._source_checks import prediction_chunks, record_source_columns
from ._input_messages import regression_target
from ._validation import (
    check_input, check_magnitude, resolve_device, seed_from_random_state, warn_if_few_rows, warn_if_float32_offset,
)
from .distributed import broadcast_object, local
from .exceptions import ChunkedFitWarning
from .io import ArraySource, TableSource


def fit_in_chunks_instead(estimator, X, y=None, *, error):
    """The fit when the in-memory path would not fit (``error`` says why): stream the rows.

    Dense arrays go through :class:`~rffkit.io.ArraySource` and the sufficient
    statistics, which never hold the ``n x D`` feature matrix, in this process only;
    sparse inputs, sparse feature maps and a chunked fit that would not fit either
    raise ``error``.
    """
    from ._memory import available_memory

    width = map_width(estimator)
    if sp.issparse(X) or width is None or type(estimator.features).__name__ == "RandomBinningFeatures":
        raise error
    n_targets = 1 if y is None or np.ndim(y) < 2 else int(np.shape(y)[1])
    itemsize = 4 if getattr(X, "dtype", None) == np.float32 else 8
    needed = statistics_bytes(width, n_targets, n_statistics=1 + (estimator.alpha_selection == "holdout"),
                              itemsize=itemsize)
    if needed > available_memory():
        raise error
    warnings.warn(
        f"{type(estimator).__name__}.fit: {error.args[0].split(';')[0]}; fitting from chunks of the rows "
        f"instead (about {needed / 2**20:.3g} MiB: Z^T Z accumulated chunk by chunk, as rffkit.io's "
        "streamed fit does).", ChunkedFitWarning, stacklevel=4,
    )
    with local():
        return fit_stream(estimator, X, y)


# -- streamed fits ----------------------------------------------------------------------

def _training_source(estimator, X, y):
    """``(source, n_targets, one_target, validated)``; arrays are validated first."""
    owner = type(estimator).__name__
    validated = False
    if isinstance(X, (TableSource, ArraySource)):
        if y is not None:
            raise ValueError(f"{owner}.fit: {type(X).__name__} carries its own target; pass y=None.")
        source = X
    elif isinstance(X, np.memmap):
        if y is None:
            raise ValueError(f"{owner}.fit: a numpy.memmap X needs y (an array or another memmap).")
        source = ArraySource(X, y)
    else:  # arrays with alpha_selection='holdout': validated as a fit on arrays would be (sparse X densified,
        # as the default feature map's fit in memory does; the chunks are read from the dense copy)
        X, y = check_input(estimator, X, y, dtype=[np.float64, np.float32], y_numeric=True,
                           multi_output=True, ensure_min_samples=2, densify=True)
        source, validated = ArraySource(X, y), True
    if source.target is None:
        raise ValueError(f"{owner}.fit: the source has no target; open it with "
                         "open_table(..., target='column') or pass ArraySource(X, y).")
    y_values = getattr(source, "y", None)
    one_target = y_values is None or np.ndim(y_values) == 1
    return source, 1 if one_target else int(np.shape(y_values)[1]), one_target, validated


def _stream_features(estimator, source, names=None):
    """The fitted feature map, the same on every rank (fitted on rank 0, broadcast); ``names`` (else the
    source's own) name the columns in the scale warning."""
    from ._source_checks import source_names
    from .ridge import _feature_map  # ridge imports this module

    def default():  # var(X) of the default length scale: one pass, all ranks
        return default_features_from_moments(estimator, source.n_features, streamed_moments(source),
                                             source_names(source) if names is None else names)

    return fitted_on_first_chunk(_feature_map(estimator, default), source)


def transform_on(features, device):
    """The feature map computed where the statistics are summed.

    On a GPU, a map with a tensor form (:class:`~rffkit.RandomFourierFeatures`) runs there
    on each block of inputs, so only the inputs cross to the device; other maps, and every
    map on the CPU (where NumPy's single-threaded cosine beats torch's per thread), run on
    the host and their features are copied over.
    """
    if device.type == "cpu" or not hasattr(features, "_transform_tensor"):
        return features.transform
    return lambda X: features._transform_tensor(torch.as_tensor(X, device=device))


def fit_stream(estimator, X, y):
    """:meth:`RFFRidge.fit` on a source, a memory map or held-out arrays: one pass of statistics. Returns ``estimator``."""
    from .ridge import _dense  # ridge imports this module

    owner = type(estimator).__name__
    alphas = estimator._check_alphas()
    device = resolve_device(estimator.device, owner=owner)
    source, n_targets, one_target, validated = _training_source(estimator, X, y)
    # arrays validated here (holdout) have lost a DataFrame's names to the source, not to the estimator
    names = getattr(estimator, "feature_names_in_", None) if validated else None
    features = _stream_features(estimator, source, names)
    np_dtype = np.dtype(source.dtype).type
    width = _dense(features.transform(np.zeros((1, source.n_features), dtype=np_dtype))).shape[1]
    holdout = estimator.alpha_selection == "holdout"
    try:
        check_memory_budget(width, estimator.memory_budget, n_targets=n_targets, n_statistics=1 + holdout,
                            itemsize=np.dtype(np_dtype).itemsize, owner=owner,
                            parameter="memory_budget",
                            lower=width_parameter(estimator))
        error = None
    except MemoryBudgetError as exc:
        error = exc
    agree(error)  # a rank short of memory stops every rank
    train = RidgeStatistics(width, n_targets, fit_intercept=estimator.fit_intercept, device=device)
    heldout = RidgeStatistics(width, n_targets, fit_intercept=estimator.fit_intercept, device=device) if holdout else None
    seed = broadcast_object(seed_from_random_state(estimator.random_state)) if holdout else 0
    target = functools.partial(numeric_target, type(estimator).__name__, n_targets=n_targets)
    transform = transform_on(features, device)
    accumulate(source, transform, train, heldout, target=target,
               validation_fraction=estimator.validation_fraction, seed=seed)
    loo_pass = None
    if estimator.alpha_selection == "loo":
        loo_pass = functools.partial(streamed_loo, source, transform, alphas=alphas, target=target)
    _solve_statistics(estimator, features, alphas, train, heldout, loo_pass, one_target=one_target,
                      np_dtype=np_dtype)
    if not validated:  # validate_data set them for arrays
        record_source_columns(estimator, source)
    for name in ("_statistics", "_heldout_statistics", "_partial_fit_state"):
        estimator.__dict__.pop(name, None)
    return estimator


def _solve_statistics(estimator, features, alphas, train, heldout, loo_pass, *, one_target, np_dtype):
    """Score the alphas from the statistics, solve for the best, store the fit."""
    owner = type(estimator).__name__
    if train.count < 2:
        raise ValueError(f"{owner}: {train.count} training row(s); at least 2 are needed.")
    warn_if_few_rows(owner, train.count + (0 if heldout is None else heldout.count))
    if estimator.fit_intercept:  # the training rows' moments: the held-out ones are a sample of the same
        warn_if_float32_offset(owner, None, np_dtype, moments=train.target_moments())
    spectrum = train.spectrum()
    if estimator.alpha_selection is None:
        cv_values, best = None, np.zeros(train.n_targets, dtype=int)
    else:
        if estimator.alpha_selection == "holdout":
            if heldout.count == 0:
                raise ValueError(f"{owner}: validation_fraction={estimator.validation_fraction} held out no "
                                 f"row of {train.count}; raise validation_fraction or use 'gcv'.")
            gram, cross, y_norm2 = heldout.centred_at(spectrum.feature_mean, spectrum.target_mean)
            scores = heldout_path(spectrum, alphas, gram, cross, y_norm2, heldout.count)
            del gram
        elif estimator.alpha_selection == "loo" and loo_pass is not None:
            scores = loo_pass(spectrum)
        else:  # 'gcv', and 'loo' in partial_fit, which keeps no rows
            scores = gcv_path(spectrum, alphas)
        cv_values = scores.cpu().numpy().astype(np.float64)
        best = estimator._best(cv_values)
    if heldout is not None:  # the held-out rows chose alpha; the model uses every row
        del spectrum
        coef, intercept = train.copy().merge(heldout).solve(alphas[best])
        coef, intercept = coef.cpu().numpy(), intercept.cpu().numpy()  # (D, T), (T,), float64
    else:
        coef = path_coefficients(spectrum, alphas[best]).cpu().numpy()  # (D, T), float64
        if estimator.fit_intercept:
            intercept = spectrum.target_mean - spectrum.feature_mean @ coef
        else:
            intercept = np.zeros(coef.shape[1])
    estimator._set_fitted(features, alphas, coef.astype(np_dtype), intercept.astype(np_dtype), best,
                          cv_values, one_target, np_dtype)
    estimator.n_rows_seen_ = train.count + (0 if heldout is None else heldout.count)


def partial_fit(estimator, X, y):
    """:meth:`RFFRidge.partial_fit`: add a chunk of rows to the statistics, refit. Returns ``estimator``."""
    from .ridge import _dense, _feature_map  # ridge imports this module

    owner = type(estimator).__name__
    first = not hasattr(estimator, "_statistics")
    if first:
        X, y = check_input(estimator, X, y, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
                           y_numeric=True, multi_output=True)
    else:  # X against the first call's width and names; y on its own, by the first call's rules
        X = check_input(estimator, X, reset=False, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32])
        y = check_array(regression_target(owner, y), ensure_2d=False, dtype=np.float64, input_name="y")
        check_consistent_length(X, y)
        check_magnitude(owner, "y", y, X.dtype)
    n_targets = 1 if y.ndim == 1 else y.shape[1]
    alphas = estimator._check_alphas()
    holdout = estimator.alpha_selection == "holdout"
    np_dtype = np.float32 if X.dtype == np.float32 else np.float64
    if first:
        device = resolve_device(estimator.device, owner=owner)
        features = _feature_map(estimator, lambda: default_features_warned(estimator, X)).fit(X)
        width = _dense(features.transform(X[:1])).shape[1]
        check_memory_budget(width, estimator.memory_budget, n_targets=n_targets, n_statistics=1 + holdout,
                            itemsize=np.dtype(np_dtype).itemsize, owner=owner,
                            parameter="memory_budget",
                            lower=width_parameter(estimator))
        train = RidgeStatistics(width, n_targets, fit_intercept=estimator.fit_intercept, device=device)
        heldout = RidgeStatistics(width, n_targets, fit_intercept=estimator.fit_intercept, device=device)
        seed, one_target = seed_from_random_state(estimator.random_state), y.ndim == 1
    else:
        features, (seed, one_target) = estimator.features_, estimator._partial_fit_state
        if n_targets != estimator._statistics.n_targets:
            raise ValueError(f"{owner}.partial_fit: y has {n_targets} target(s), earlier chunks "
                             f"had {estimator._statistics.n_targets}.")
        # updated copies: a call that fails leaves the estimator as it was
        train, heldout = estimator._statistics.copy(), estimator._heldout_statistics.copy()
    rows = np.arange(train.count + heldout.count, train.count + heldout.count + X.shape[0])
    add_rows(features.transform, X, y.astype(np.float64, copy=False).reshape(X.shape[0], n_targets),
             rows, train, heldout if holdout else None, validation_fraction=estimator.validation_fraction,
             seed=seed)
    _solve_statistics(estimator, features, alphas, train, heldout if holdout else None, None,
                      one_target=one_target, np_dtype=np_dtype)
    estimator._statistics, estimator._heldout_statistics = train, heldout
    estimator._partial_fit_state = (seed, one_target)
    return estimator


def _predict_chunk(estimator, X):
    block_rows = block_rows_for(estimator.coef_.shape[-1], X.dtype.itemsize)
    coef = estimator.coef_.astype(X.dtype, copy=False)
    intercept = np.asarray(estimator.intercept_, dtype=X.dtype)
    parts = [Z @ coef.T + intercept for _, _, Z in feature_blocks(estimator.features_.transform, X, block_rows)]
    return np.concatenate(parts) if parts else np.zeros((0,) + coef.shape[:-1], dtype=X.dtype)


def predict_stream(estimator, X):
    """:meth:`RFFRidge.predict` on a source or a memory map, chunk by chunk."""
    source = prediction_source(estimator, X)
    predictions = [_predict_chunk(estimator, chunk.X) for chunk in prediction_chunks(source)]
    return np.concatenate(predictions)


def score_stream(estimator, X, y=None):
    """:meth:`RFFRidge.score` on a source with a target, or a memory map with ``y``: R^2, the
    mean over targets, from one pass over the chunks."""
    owner = type(estimator).__name__
    source = prediction_source(estimator, X, y, "score")
    if source.target is None:
        raise ValueError(f"{owner}.score: the source has no target to score against; pass y "
                         "or open the table with target=...")
    n_targets = 1 if np.ndim(estimator.coef_) == 1 else estimator.coef_.shape[0]
    return streamed_r2(owner, prediction_chunks(source), lambda X: _predict_chunk(estimator, X), n_targets)
