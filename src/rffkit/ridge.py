"""Kernel ridge regression on random features, with a one-eigendecomposition path.

:class:`RFFRidge` fits ridge regression on any feature map of this library and chooses
``alpha`` by generalised cross-validation, exact leave-one-out or held-out rows from one
eigendecomposition (:mod:`rffkit._ridge_path` holds the numerics). It fits from arrays in
memory, or streams its rows from files or a memory map (:mod:`rffkit.io`) through the
sufficient statistics of :mod:`rffkit._sufficient`, in one process or on every rank of a
``torchrun`` job (:mod:`rffkit.distributed`); :mod:`rffkit._ridge_stream` holds those
streamed fits and ``partial_fit``.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import check_is_fitted

from . import _ridge_stream
from ._default_map import (
    FEATURE_MAP_PARAMETERS,
    DefaultFeatureMap,
    default_features,
    default_features_warned,
    with_width,
)
from ._guards import atomic_fit, within_limits
from ._ridge_path import gcv_path, loo_path, path_coefficients, ridge_spectrum, row_groups
from ._scoring import StreamedScore
from ._validation import (
    SMALLEST_PENALTY,
    check_input,
    resolve_device,
    takes_sparse,
    torch_dtype_for,
    warn_if_float32_offset,
)
from .distributed import local
from .io import ArraySource, TableSource

__all__ = ["RFFRidge", "default_features"]

DEFAULT_ALPHAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4)


def _feature_map(estimator, default):
    """A clone of ``estimator.features`` (``default()`` when None), not fitted.

    ``estimator.random_state``, when not None, overrides the clone's own
    ``random_state`` so that the estimator alone controls reproducibility, and
    ``estimator.n_components``, when not None, its ``n_components`` (:func:`with_width`).
    """
    if estimator.features is None:
        return with_width(default(), estimator)
    features = clone(estimator.features)
    if estimator.random_state is not None and "random_state" in features.get_params(deep=False):
        features.set_params(random_state=estimator.random_state)
    return with_width(features, estimator)


def fitted_features(estimator, X, y=None):
    """Clone (or build) the feature map of ``estimator`` and fit it on ``X``.

    ``estimator.random_state``, when not None, overrides the clone's own
    ``random_state`` so that the estimator alone controls reproducibility.

    Parameters
    ----------
    estimator : RFFRidge or RFFClassifier
        Its ``features`` and ``random_state`` parameters are read.
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Training inputs.
    y : array-like of shape (n_samples,), default=None
        Passed to the map's ``fit_transform`` when given.

    Returns
    -------
    features : transformer
        The fitted feature map.
    Z : ndarray or sparse matrix of shape (n_samples, n_components)
        The features of ``X``.
    """
    features = _feature_map(estimator, lambda: default_features_warned(estimator, X))
    Z = features.fit_transform(X, y) if y is not None else features.fit_transform(X)
    return features, Z


def _is_stream(X):
    return isinstance(X, (TableSource, ArraySource, np.memmap))


def _dense(Z):
    return Z.toarray() if sp.issparse(Z) else np.asarray(Z)


class RFFRidge(DefaultFeatureMap, StreamedScore, RegressorMixin, BaseEstimator):
    __doc__ = (
        """Ridge regression on a random-feature map, ``alpha`` chosen along an eigen-path.

    Fits ``f(x) = z(x)^T w + b`` minimising ``||y - Z w - b||^2 + alpha ||w||^2``
    (intercept unpenalised), where ``z`` is any feature transformer of this library
    (dense or scipy-sparse output). The Gram matrix of the centred features is formed
    once on ``device`` and eigendecomposed once; every ``alpha`` of the grid is then
    scored by generalised cross-validation, exact leave-one-out or held-out rows at
    small cost, and the best one is solved for.

    ``fit`` takes arrays, or streams its rows from files or a memory map (see
    *Streamed and distributed fits* below) without ever holding the ``n x D`` feature
    matrix; ``partial_fit`` adds one chunk of rows at a time.

    Parameters
    ----------
"""
        + FEATURE_MAP_PARAMETERS
        + """    alphas : float or array-like of shape (n_alphas,), default=(1e-6, ..., 1e4)
        Regularisation strengths to try (11 decades by default). Must be positive.
    alpha_selection : {'loo', 'gcv', 'holdout'} or None, default='loo'
        'loo': exact leave-one-out squared error (a second pass over a streamed source;
        ``partial_fit`` uses GCV instead, as it keeps no rows); 'gcv': generalised
        cross-validation (Golub, Heath and Wahba, 1979), which puts the mean leverage in
        place of each row's and so misses rows of high leverage (a rare one-hot cell, few
        distinct values), for which it can choose far too small a penalty; its gain is one
        pass less over a streamed source. In memory, both leave each group of equal
        rows of ``X`` out whole (a bootstrap sample, a table of few distinct values), as a
        left-out row's twin would otherwise be interpolated. 'holdout': mean squared error
        on the rows that :func:`rffkit._streaming.validation_mask` holds out (a hash of
        the row index, a share ``validation_fraction``), after which the model is solved
        on all rows. None: no selection, ``alphas`` must then hold exactly one value.
    alpha_per_target : bool, default=False
        With a 2-D ``y``, choose one ``alpha`` per target instead of one for all.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (by centring features and targets).
    validation_fraction : float, default=0.1
        Share of the rows held out with ``alpha_selection='holdout'`` (ignored otherwise).
    memory_budget : int, str or None, default=None
        Bytes a streamed fit or ``partial_fit`` may use for its ``D x D`` statistics,
        their eigendecomposition and a block of features (about ``(5 + h) 8 D^2`` bytes,
        ``h = 1`` with 'holdout'), as an integer or a string such as ``'2GB'`` or
        ``'512MiB'``; None: half the memory available when the fit starts. A feature map
        wider than the budget allows raises ``MemoryBudgetError`` (a ValueError) naming
        the largest width that fits: lower ``n_components``. Fits on arrays
        are not checked.
    device : str, default='cpu'
        Torch device for the Gram matrix and eigendecomposition ('cpu', 'cuda',
        'cuda:N' or 'auto'); streamed fits accumulate their statistics there.
    random_state : int, RandomState instance or None, default=None
        When not None, passed to the feature map's ``random_state``; it also seeds the
        held-out split of 'holdout'.

    Attributes
    ----------
    features_ : transformer
        The fitted feature map.
    coef_ : ndarray of shape (n_components,) or (n_targets, n_components)
        Weights of the features.
    intercept_ : float or ndarray of shape (n_targets,)
        The unpenalised intercept (0 without ``fit_intercept``).
    alpha_ : float or ndarray of shape (n_targets,)
        The chosen regularisation (per target if ``alpha_per_target``).
    alphas_ : ndarray of shape (n_alphas,)
        The grid, as floats.
    cv_values_ : ndarray of shape (n_alphas,) or (n_alphas, n_targets)
        Mean GCV score, mean squared leave-one-out error or held-out mean squared error
        of each alpha (None when ``alpha_selection=None``).
    best_score_ : float or ndarray of shape (n_targets,)
        ``cv_values_`` at ``alpha_`` (None when ``alpha_selection=None``).
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names, or is a table opened with
        :func:`rffkit.io.open_table`.
    n_rows_seen_ : int
        Rows the last streamed fit or the ``partial_fit`` calls so far used (all
        ranks together); absent after a fit on arrays.

    See Also
    --------
    sklearn.linear_model.RidgeCV : the same selection on given features.
    sklearn.kernel_ridge.KernelRidge : the exact kernel machine, O(n^3).
    RFFClassifier : logistic regression on random features.

    Notes
    -----
    With centred features ``Zc`` and the eigendecomposition of the smaller Gram
    matrix, ``Zc^T Zc = V diag(s) V^T`` (D <= n) or ``Zc Zc^T = U_hat diag(s) U_hat^T``,
    let ``U = Zc V`` and ``q = U^T yc``. Then

    .. math::

        \\mathrm{RSS}(\\alpha) = \\|y_c\\|^2 - \\sum_k q_k^2 \\frac{s_k + 2\\alpha}{(s_k + \\alpha)^2},
        \\qquad
        \\mathrm{df}(\\alpha) = 1 + \\sum_k \\frac{s_k}{s_k + \\alpha},

        \\mathrm{GCV}(\\alpha) = \\frac{\\mathrm{RSS}(\\alpha) / n}{(1 - \\mathrm{df}(\\alpha) / n)^2},
        \\qquad
        \\mathrm{LOO}(\\alpha) = \\frac1n \\sum_i \\Big(\\frac{e_i(\\alpha)}{1 - h_{ii}(\\alpha)}\\Big)^2,

    with hat diagonal ``h_ii = 1/n + sum_k U_ik^2 / (s_k + alpha)`` (the ``1/n`` and
    the ``1 +`` in ``df`` are the intercept). The Gram matrix costs O(n D min(n, D)),
    the eigendecomposition O(min(n, D)^3), GCV O(min(n, D)) per alpha and target, LOO
    O(n min(n, D)) per alpha (plus O(n D min(n, D)) once). float32 input is computed
    in float32, anything else in float64; in float32 the eigenvalues below about
    ``1e-7 s_max`` are noise, so very small alphas are unreliable there.

    **Streamed and distributed fits.** ``fit`` streams when ``X`` is a
    :class:`rffkit.io.TableSource` (``open_table("data/*.parquet", target="y")``), a
    :class:`rffkit.io.ArraySource` or a ``numpy.memmap`` (then ``y`` is given as an
    array), and whenever ``alpha_selection='holdout'``. With the default features, one
    pass computes ``var(X)`` for the length scale (:class:`~rffkit._streaming.RunningMoments`);
    the feature map is then fitted on the first chunk (only its width matters to
    random Fourier features with ``sampling`` other than 'leverage'), and one pass
    accumulates ``n``, ``sum z``, ``Z^T Z``, ``Z^T y``, ``sum y`` and ``y^T y`` in float64
    (:class:`~rffkit._ridge_statistics.RidgeStatistics`; the products of each block of rows in
    the block's dtype, so ``open_table(..., dtype=numpy.float32)`` halves the time) from
    which the same path as above follows in its primal form. Memory: the statistics
    (``8 D^2`` bytes), their eigendecomposition (``~4 x 8 D^2``) and one chunk of rows
    with its block of features (``~64 MiB``), whatever ``n``; time: O(n D^2 + D^3).
    'loo' makes a second pass; 'holdout' accumulates the held-out rows' statistics
    beside the others and scores every alpha from them in closed form.

    Inside a ``torchrun`` job (a process group initialised, e.g. with
    :func:`rffkit.distributed.process_group`) a source is split over the ranks: each
    rank reads its share, the feature map is fitted on rank 0 and broadcast, and the
    statistics are summed with ``all_reduce``; every rank ends with the same model.
    Only rank 0 should write files (:func:`rffkit.distributed.is_main_process`). Arrays
    in memory are never split, 'holdout' included: each process fits on what it is given.

    References
    ----------
    G. H. Golub, M. Heath and G. Wahba (1979), "Generalized cross-validation as a
    method for choosing a good ridge parameter", Technometrics 21(2).

    A. Rahimi and B. Recht (2007), "Random features for large-scale kernel machines",
    NeurIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit import RFFRidge, RandomFourierFeatures
    >>> from rffkit.io import ArraySource
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> model = RFFRidge(features=RandomFourierFeatures(n_components=50), random_state=0).fit(X, y)
    >>> bool(model.score(X, y) > 0.9)
    True
    >>> streamed = RFFRidge(features=RandomFourierFeatures(n_components=50), random_state=0)
    >>> _ = streamed.fit(ArraySource(X, y, chunk_rows=64))  # 64 rows at a time
    >>> bool(np.allclose(streamed.predict(X), model.predict(X)))
    True
    """
    )

    _parameter_constraints = {
        "features": [None, HasMethods(["fit", "transform"])],
        "n_components": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "alphas": [Interval(numbers.Real, SMALLEST_PENALTY, None, closed="left"), "array-like"],
        "alpha_selection": [StrOptions({"gcv", "loo", "holdout"}), None],
        "alpha_per_target": ["boolean"],
        "fit_intercept": ["boolean"],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "memory_budget": [None, Interval(numbers.Integral, 1, None, closed="left"), str],
        "device": [str],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        features=None,
        n_components=None,
        alphas=DEFAULT_ALPHAS,
        alpha_selection="loo",
        alpha_per_target=False,
        fit_intercept=True,
        validation_fraction=0.1,
        memory_budget=None,
        device="cpu",
        random_state=None,
    ):
        self.features = features
        self.n_components = n_components
        self.alphas = alphas
        self.alpha_selection = alpha_selection
        self.alpha_per_target = alpha_per_target
        self.fit_intercept = fit_intercept
        self.validation_fraction = validation_fraction
        self.memory_budget = memory_budget
        self.device = device
        self.random_state = random_state

    def _check_alphas(self):
        alphas = np.atleast_1d(np.asarray(self.alphas, dtype=np.float64))
        name = type(self).__name__
        if alphas.ndim != 1 or alphas.size == 0:
            raise ValueError(f"{name}: alphas must be a positive float or a non-empty 1-D array, got {self.alphas!r}.")
        if not np.all(np.isfinite(alphas)) or np.any(alphas <= 0):
            raise ValueError(f"{name}: every alpha must be finite and > 0, got {self.alphas!r}.")
        if self.alpha_selection is None and alphas.size != 1:
            raise ValueError(
                f"{name}: alpha_selection=None needs exactly one alpha, got {alphas.size}; "
                "pass alphas=<float> or set alpha_selection='gcv', 'loo' or 'holdout'."
            )
        return alphas

    def _best(self, cv_values):
        """Index of the chosen alpha for every target, from scores of shape (A, T)."""
        if self.alpha_per_target:
            return np.argmin(cv_values, axis=0)
        return np.full(cv_values.shape[1], np.argmin(cv_values.sum(axis=1)))

    def _set_fitted(self, features, alphas, coef, intercept, best, cv_values, one_target, np_dtype):
        """Store the fit: ``coef`` (D, T) and ``intercept`` (T,) in ``np_dtype``, scores (A, T)."""
        n_targets = coef.shape[1]
        chosen = alphas[best]
        self.features_ = features
        self.alphas_ = alphas
        self.coef_ = coef[:, 0] if one_target else np.ascontiguousarray(coef.T)
        self.intercept_ = float(intercept[0]) if one_target else intercept.astype(np_dtype)
        per_target = self.alpha_per_target and not one_target
        self.alpha_ = chosen.copy() if per_target else float(chosen[0])
        if cv_values is None:
            self.cv_values_ = None
            self.best_score_ = None
        else:
            self.cv_values_ = cv_values[:, 0] if one_target else cv_values
            picked = cv_values[best, np.arange(n_targets)]
            self.best_score_ = float(picked[0]) if one_target else picked

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the feature map, score every alpha along the eigen-path, solve for the best.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            Training inputs (sparse: handed to a feature map that reads sparse input, else made dense). A source or a
            memory map is streamed chunk by chunk (split
            over the ranks of an initialised process group); arrays are fitted in memory,
            unless ``alpha_selection='holdout'``, which always streams.
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Targets; None when ``X`` is a source, which carries its own.

        Returns
        -------
        self : RFFRidge
            The fitted estimator.
        """
        if _is_stream(X):
            return _ridge_stream.fit_stream(self, X, y)
        if self.alpha_selection == "holdout":  # arrays are this process's own: never split over ranks
            with local():
                return _ridge_stream.fit_stream(self, X, y)
        X, y = check_input(
            self, X, y, accept_sparse=("csr", "csc"), densify=not takes_sparse(self.features),
            dtype=[np.float64, np.float32], y_numeric=True, multi_output=True, ensure_min_samples=2,
        )
        alphas = self._check_alphas()
        device = resolve_device(self.device, owner=type(self).__name__)
        features, Z = fitted_features(self, X)
        dtype = torch_dtype_for(X)
        np_dtype = np.float32 if X.dtype == np.float32 else np.float64
        if not sp.issparse(Z):
            Z = np.asarray(Z, dtype=np_dtype)
        y2d = np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)  # centred in float64 by the spectrum
        if self.fit_intercept:
            warn_if_float32_offset(type(self).__name__, y2d, np_dtype)

        spectrum = ridge_spectrum(Z, y2d, fit_intercept=self.fit_intercept, dtype=dtype, device=device)
        if self.alpha_selection is None:
            cv_values = None
            best = np.zeros(y2d.shape[1], dtype=int)
        else:
            groups = row_groups(X, y2d)  # equal rows are left out together
            if self.alpha_selection == "gcv":
                scores = gcv_path(spectrum, alphas, groups)
            else:
                scores = loo_path(spectrum, alphas, Z, y2d, groups)
            cv_values = scores.cpu().numpy().astype(np.float64)  # (A, T)
            best = self._best(cv_values)
        coef = path_coefficients(spectrum, alphas[best], Z).cpu().numpy().astype(np_dtype)  # (D, T)
        intercept = spectrum.target_mean - spectrum.feature_mean @ coef if self.fit_intercept else np.zeros(y2d.shape[1], dtype=np_dtype)
        self._set_fitted(features, alphas, coef, intercept, best, cv_values, y.ndim == 1, np_dtype)
        for name in ("_statistics", "_heldout_statistics", "n_rows_seen_"):
            self.__dict__.pop(name, None)
        return self

    # -- streamed fits -----------------------------------------------------------------

    def _fit_in_chunks_instead(self, X, y=None, *, error):
        """The fit when the in-memory path would not fit (``error`` says why): stream the rows.

        Dense arrays go through :class:`~rffkit.io.ArraySource` and the sufficient
        statistics, which never hold the ``n x D`` feature matrix, in this process only;
        sparse inputs, sparse feature maps and a chunked fit that would not fit either
        raise ``error``.
        """
        return _ridge_stream.fit_in_chunks_instead(self, X, y, error=error)

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, X, y):
        """Add a chunk of rows to the statistics and refit on every row seen so far.

        The first call (or the first after ``fit``) draws the feature map from this
        chunk's width (and, with ``features=None``, its variance) and starts the
        statistics; later calls add to them. After each call the model is usable:
        ``alpha`` is chosen over all rows so far by GCV ('loo' uses GCV here, as no rows
        are kept), by held-out rows ('holdout', rows numbered in the order they arrive)
        or fixed. Each call costs O(m D^2) for its ``m`` rows plus O(D^3) for the
        eigendecomposition, so prefer few large chunks; ``fit`` on a source streams in
        one call. The estimator follows dask-ml's ``Incremental`` contract and is local
        to its process (statistics are not summed over ranks). Pass each row once: the
        statistics are sums, so a second epoch over the same rows counts every row twice,
        as if the data held each one twice, and GCV then picks a smaller penalty.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A chunk of training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Its targets; the same number of targets in every call.

        Returns
        -------
        self : RFFRidge
            The estimator, refitted on all rows so far.
        """
        return _ridge_stream.partial_fit(self, X, y)

    # -- prediction --------------------------------------------------------------------

    @within_limits
    def predict(self, X):
        """Predict ``z(X) coef_ + intercept_``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            Inputs. A source or memory map is read chunk by chunk, all its rows whatever
            the rank (memory: one chunk with its features, plus the predictions).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            In the dtype of ``X`` (float32 or float64), in the order of the rows.
        """
        check_is_fitted(self)
        if _is_stream(X):
            return _ridge_stream.predict_stream(self, X)
        X = check_input(self, X, accept_sparse=("csr", "csc"), densify=not takes_sparse(self.features_),
                        dtype=[np.float64, np.float32], reset=False)
        Z = self.features_.transform(X)
        coef = self.coef_.astype(X.dtype, copy=False)
        return np.asarray(safe_sparse_dot(Z, coef.T)) + np.asarray(self.intercept_, dtype=X.dtype)

    _score_source = _ridge_stream.score_stream

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.input_tags.sparse = True  # handed to a feature map that reads it, else made dense
        return tags