"""Sparse Random Fourier Features (SRFF): nonlinear variable selection at scale.

The estimator of Gregorová, Ramapuram, Kalousis and Marchand-Maillet (2018); its
numerics live in :mod:`rffkit._srff_solver`.

References
----------
M. Gregorová, J. Ramapuram, A. Kalousis and S. Marchand-Maillet (2018), "Large-scale
nonlinear variable selection via kernel random features", ECML-PKDD 2018.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.neighbors import NearestNeighbors
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ._srff_solver import alpha_grid, fit_srff, srff_features, srff_regularisation_path
from ._guards import atomic_fit, within_limits
from ._validation import (
    SMALLEST_LENGTH_SCALE,
    check_input,
    CPUPicklingMixin,
    as_tensor,
    inference_device,
    resolve_device,
    seed_from_random_state,
    standardisation,
    to_numpy,
    torch_dtype_for,
    warn_if_float32_offset,
)

__all__ = ["SRFFRegressor", "median_neighbour_distance"]

_WIDTH_QUERIES = 500  # query points for the kernel-width heuristic


def median_neighbour_distance(X, *, n_neighbors=20, max_queries=_WIDTH_QUERIES, rng=None):
    """Median Euclidean distance from a point to its ``n_neighbors`` nearest neighbours.

    The kernel-width heuristic of Gregorová et al. (2018, §5.0.1). For
    ``n > max_queries`` the distances are computed for a random subset of
    ``max_queries`` query points, their neighbours still searched among all of ``X``
    (so the width does not depend on the subsample size): ``max_queries * n_neighbors``
    distances, cost ``O(max_queries n d)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The points (standardised inputs in :class:`SRFFRegressor`).
    n_neighbors : int, default=20
        Neighbours per query point (at most ``n_samples - 1``).
    max_queries : int, default=500
        Largest number of query points.
    rng : numpy.random.Generator, default=None
        Draws the query subset; None uses a generator seeded with 0.

    Returns
    -------
    float
        The median distance; 1.0 when every distance is zero or there is one point.

    Examples
    --------
    >>> import numpy as np
    >>> median_neighbour_distance(np.array([[0.0], [1.0], [3.0]]), n_neighbors=1)
    1.0
    """
    n_samples = X.shape[0]
    k = min(n_neighbors, n_samples - 1)
    if k < 1:
        return 1.0
    if n_samples > max_queries:
        rng = np.random.default_rng(0) if rng is None else rng
        queries = X[np.sort(rng.choice(n_samples, max_queries, replace=False))]
    else:
        queries = X
    distances, _ = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X).kneighbors(queries)
    width = float(np.median(distances[:, 1:]))  # column 0 is the query itself
    return width if np.isfinite(width) and width > 0 else 1.0


class SRFFRegressor(CPUPicklingMixin, RegressorMixin, BaseEstimator):
    """Sparse Random Fourier Features regression with learned variable relevances.

    A ridge regression on ``D`` random Fourier features of a Gaussian kernel whose
    frequencies ``omega_j = gamma * epsilon_j`` share one learned scale vector
    ``gamma`` constrained to the simplex ``{gamma >= 0, sum(gamma) = n_features}``.
    The simplex drives the ``gamma`` of irrelevant inputs to exactly zero, so
    ``feature_importances_`` selects variables. The regularisation ``alpha`` is chosen
    on a held-out validation split from a data-dependent grid.

    Parameters
    ----------
    n_components : int, default=300
        Number of random features ``D`` (Gregorová et al., 2018, use 300 throughout).
    alphas : int or array-like of shape (n_alphas,), default=50
        Regularisation values to search. An integer ``m`` gives the authors'
        data-dependent grid of ``m`` values, ``2 n ||X||_2^2 10^(-9.8 k / (m - 1))``,
        ``k = 0..m-1`` (``X`` the standardised training inputs); an array gives the
        values themselves. A single value skips the validation split and fits it on
        all of the data.
    length_scale : float or None, default=None
        Gaussian kernel width ``sigma`` (in standardised units). None sets it to the
        median distance among the 20 nearest neighbours of the training inputs
        (Gregorová et al., 2018, §5.0.1), on a subsample of 500 query points for
        larger inputs.
    validation_fraction : float, default=0.2
        Fraction of the samples held out to choose ``alpha``.
    draw_per_alpha : bool, default=False
        Give each grid value its own draw of ``epsilon`` and ``b``, as the authors'
        experiments do (their Algorithm 1 draws them each time it runs), so the
        validation error chooses among draws as well as penalties and the model keeps
        the draw of the chosen value. It helps when the validation split is large and
        can hurt when it is small, where the search overfits the split (see
        benchmarks/results/srff_tables.md, which compares both settings). The default
        fits the whole grid on one draw. Ignored with a single ``alpha``.
    n_iter_no_change : int or None, default=5
        Stop the search along the grid (visited from the largest ``alpha`` down) once
        the validation error has not improved for that many consecutive values after
        the model starts to learn. None visits the whole grid, as the paper does.
    refit : bool, default=True
        Refit on all the data (training and validation part) with the chosen
        ``alpha``. False keeps the model fitted on the training part only, which is
        the protocol of the paper's experiments.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (centre ``Z`` and ``y`` inside the loss).
    tol : float, default=1e-4
        Stop the alternating descent when the objective decreases by less than
        ``tol`` relative to its value.
    max_iter : int, default=100
        Maximum number of alternating (ridge step, ``gamma`` step) iterations.
    max_inner_iter : int, default=10
        Maximum number of FISTA iterations on ``gamma`` per alternating iteration.
    device : str, default='cpu'
        Torch device for the numerics: ``'cpu'``, ``'cuda'``, ``'cuda:N'`` or ``'auto'``.
    random_state : int, RandomState instance or None, default=None
        Controls the validation split, the draws of ``epsilon`` and ``b`` and the
        subsample of the width heuristic. Global random state is never modified.
    verbose : int, default=0
        Print the validation error of each ``alpha`` when positive.

    Attributes
    ----------
    gamma_ : ndarray of shape (n_features_in_,)
        Learned scales, non-negative and summing to the number of inputs that are not
        constant over the training rows; zero for an input the model ignores and for a
        constant one (which takes no part in the fit). They act on standardised inputs.
    feature_importances_ : ndarray of shape (n_features_in_,)
        ``gamma_ / max(gamma_)``, in [0, 1].
    alpha_ : float
        The chosen regularisation.
    coef_ : ndarray of shape (n_components,)
        Weights ``a`` of the random features.
    intercept_ : float
        The unpenalised intercept ``c``.
    n_iter_ : int
        Alternating iterations of the final fit.
    length_scale_ : float
        The kernel width ``sigma`` used.
    random_weights_ : ndarray of shape (n_features_in_, n_components)
        ``epsilon / sigma``, the unscaled frequencies (of the chosen draw with
        ``draw_per_alpha``); zero in the rows of constant inputs.
    random_offset_ : ndarray of shape (n_components,)
        The phases ``b``.
    alphas_ : ndarray of shape (n_visited,)
        The grid values visited, in order (largest first).
    validation_errors_ : ndarray of shape (n_visited,)
        Validation mean squared error of each visited value (empty if one ``alpha``).
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.

    See Also
    --------
    rffkit.RandomFourierFeatures : random features of a fixed kernel.
    rffkit.RFFNetRegressor : learns ARD relevances by gradient instead of on a simplex.

    Notes
    -----
    With inputs standardised by their training mean and standard deviation, the
    model is ``f(x) = sum_j a_j sqrt(2) cos(epsilon_j^T (gamma * x) / sigma + b_j) + c``
    with ``epsilon_j ~ N(0, I)`` and ``b_j ~ U[0, 2 pi)`` drawn once. Algorithm 1 of
    Gregorová et al. (2018) minimises

    ``J(a, gamma) = ||y - Z a||^2 + alpha ||a||^2``  subject to  ``gamma in simplex``

    by alternating (a) ``a = (Z^T Z + alpha I)^{-1} Z^T y`` and (b) projected gradient
    steps on ``gamma`` with FISTA and backtracking (the projection is the sort-based
    ``O(d log d)`` algorithm), until ``J`` converges. Each ``alpha`` starts from the
    uniform ``gamma = 1`` (no warm start along the grid, as in the paper: warm starts
    are faster but were seen to stall near the uniform ``gamma`` on SE1); the search
    may stop early (``n_iter_no_change``), which the paper does not do.

    Inputs are standardised inside the estimator with the mean and standard deviation
    of all of ``X`` given to ``fit`` (the paper standardises before fitting, with the
    training statistics), so ``gamma_`` compares inputs whatever their units. The
    kernel width, the grid and the fit use the training part of the split only; the
    grid is the authors': ``||X||_2^2`` of the standardised training inputs times
    ``2 n 10^(-9.8)..2 n``, the factor 2 because the features here carry the
    ``sqrt(2)`` of the paper's equation (7) that the authors' code leaves out.

    References
    ----------
    M. Gregorová, J. Ramapuram, A. Kalousis and S. Marchand-Maillet (2018), "Large-scale
    nonlinear variable selection via kernel random features", ECML-PKDD 2018.

    A. Beck and M. Teboulle (2009), "A fast iterative shrinkage-thresholding algorithm
    for linear inverse problems", SIAM J. Imaging Sciences.

    Examples
    --------
    >>> from rffkit import SRFFRegressor
    >>> from rffkit.datasets import make_gregorova_se2
    >>> X, y = make_gregorova_se2(300, random_state=0)
    >>> model = SRFFRegressor(n_components=50, alphas=8, random_state=0).fit(X, y)
    >>> model.gamma_.shape
    (100,)
    """

    _parameter_constraints = {
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "alphas": [Interval(numbers.Integral, 1, None, closed="left"), "array-like"],
        "length_scale": [Interval(numbers.Real, SMALLEST_LENGTH_SCALE, None, closed="left"), None],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "draw_per_alpha": ["boolean"],
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "refit": ["boolean"],
        "fit_intercept": ["boolean"],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_inner_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        n_components=300,
        alphas=50,
        length_scale=None,
        validation_fraction=0.2,
        draw_per_alpha=False,
        n_iter_no_change=5,
        refit=True,
        fit_intercept=True,
        tol=1e-4,
        max_iter=100,
        max_inner_iter=10,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.alphas = alphas
        self.length_scale = length_scale
        self.validation_fraction = validation_fraction
        self.draw_per_alpha = draw_per_alpha
        self.n_iter_no_change = n_iter_no_change
        self.refit = refit
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.max_inner_iter = max_inner_iter
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _explicit_alphas(self):
        if isinstance(self.alphas, numbers.Integral):
            return None
        values = np.asarray(self.alphas, dtype=np.float64).ravel()
        if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError(
                f"{type(self).__name__}: alphas must be a positive integer or a non-empty "
                f"array of finite non-negative values, got {self.alphas!r}."
            )
        return np.sort(values)[::-1]

    def _validation_rows(self, n_samples):
        """Rows held out to choose ``alpha``: ``validation_fraction`` of ``n_samples``, rounded up (after
        rounding off, so that 1000 / 6000 of 6000 samples is 1000, not 1001); at least 1, leaving 2."""
        n_validation = int(np.ceil(round(self.validation_fraction * n_samples, 9)))
        if n_validation < 1 or n_samples - n_validation < 2:
            raise ValueError(
                f"{type(self).__name__}: n_samples={n_samples} is too few to hold out validation_fraction="
                f"{self.validation_fraction} ({n_validation} rows) and still train on 2 samples; pass more samples "
                "or a single value in alphas to skip the validation search."
            )
        return n_validation

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn ``gamma``, ``a`` and ``alpha`` from training data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training inputs (a sparse matrix is made dense); float32 is computed in float32, anything else in float64.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self : SRFFRegressor
            The fitted estimator.
        """
        name = type(self).__name__
        X, y = check_input(self, X, y, dtype=[np.float64, np.float32], y_numeric=True, densify=True)
        explicit = self._explicit_alphas()
        device = resolve_device(self.device, owner=name)
        n_samples, n_features = X.shape
        search = explicit is None and self.alphas > 1 or explicit is not None and explicit.size > 1
        n_validation = self._validation_rows(n_samples) if search else 0
        dtype = torch_dtype_for(X)
        mean, scale, constant = standardisation(X)
        # a constant column takes no part: on the simplex its gamma would hold mass that moves nothing
        active = ~constant if not constant.all() else np.ones(n_features, dtype=bool)
        standardised = ((X[:, active] - mean[active]) / scale[active]).astype(X.dtype, copy=False)
        # the fit runs on y centred (in float64, before any cast to float32) and in units of its
        # spread, so that its steps and tolerances do not depend on y's units or offset
        y_offset = float(np.mean(y, dtype=np.float64)) if self.fit_intercept else 0.0
        y_scale = float(np.std(y, dtype=np.float64) if self.fit_intercept else
                        np.sqrt(np.mean(np.square(y, dtype=np.float64))))
        y_scale = y_scale if np.isfinite(y_scale) and y_scale > 0 else 1.0
        target = ((np.asarray(y, dtype=np.float64) - y_offset) / y_scale).astype(X.dtype, copy=False)
        warn_if_float32_offset(name, y, X.dtype)

        rng = np.random.default_rng(seed_from_random_state(self.random_state))
        order = rng.permutation(n_samples)
        train_index, validation_index = np.sort(order[n_validation:]), np.sort(order[:n_validation])
        width = (
            float(self.length_scale)
            if self.length_scale is not None
            else median_neighbour_distance(standardised[train_index], rng=rng)
        )
        tensor = lambda array: as_tensor(array, dtype=dtype, device=device)  # noqa: E731

        def draw(index=0):  # the path asks for draws 1, 2, ... in order, so rng stays reproducible
            weights = rng.standard_normal((n_features, self.n_components))[active] / width
            return tensor(weights), tensor(rng.uniform(0.0, 2.0 * np.pi, self.n_components))

        frequencies, phase = draw()
        fit_params = dict(
            tol=self.tol, max_iter=self.max_iter, max_inner_iter=self.max_inner_iter,
            fit_intercept=self.fit_intercept,
        )  # fmt: skip
        X_all, y_all = tensor(standardised), tensor(target)
        if search:
            X_train, y_train = X_all[train_index], y_all[train_index]
            grid = alpha_grid(X_train, int(self.alphas)) if explicit is None else [float(a) for a in explicit]
            best, errors, solutions = srff_regularisation_path(
                X_train, y_train, X_all[validation_index], y_all[validation_index], frequencies, phase, grid,
                patience=self.n_iter_no_change, draw=draw if self.draw_per_alpha else None, **fit_params,
            )  # fmt: skip
            if self.verbose:
                for alpha, error in zip(grid, errors):
                    print(f"{name}: alpha={alpha:.4g} validation MSE={error * y_scale**2:.6g}")
            alpha = grid[best]
            frequencies, phase = solutions[best].frequencies, solutions[best].offsets
            solution = fit_srff(X_all, y_all, frequencies, phase, alpha, **fit_params) if self.refit else solutions[best]
            self.alphas_ = np.asarray(grid[: len(errors)])
            self.validation_errors_ = np.asarray(errors) * y_scale**2
        else:
            alpha = float(explicit[0]) if explicit is not None else alpha_grid(X_all, 1)[0]
            solution = fit_srff(X_all, y_all, frequencies, phase, alpha, **fit_params)
            self.alphas_ = np.asarray([alpha])
            self.validation_errors_ = np.empty(0)

        self._x_mean, self._x_scale = mean, scale
        self._device = device
        self.length_scale_ = width
        self.random_weights_ = np.zeros((n_features, self.n_components))
        self.random_weights_[active] = to_numpy(frequencies)
        self.random_offset_ = to_numpy(phase).astype(np.float64)
        self.alpha_ = float(alpha)
        self.gamma_ = np.zeros(n_features)
        self.gamma_[active] = to_numpy(solution.gamma)
        self.gamma_[constant] = 0.0  # all columns constant: the fit ran on them, and they mean nothing
        top = self.gamma_.max()
        self.feature_importances_ = self.gamma_ / top if top > 0 else np.zeros_like(self.gamma_)
        self.coef_ = to_numpy(solution.coef).astype(np.float64) * y_scale
        self.intercept_ = float(solution.intercept) * y_scale + y_offset
        self.n_iter_ = int(solution.n_iter)
        return self

    @within_limits
    def predict(self, X):
        """Predict with the fitted model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), in the dtype of ``X`` (float32 or float64)
        """
        check_is_fitted(self)
        X = check_input(self, X, dtype=[np.float64, np.float32], reset=False, densify=True)
        dtype = torch_dtype_for(X)
        device = inference_device(self._device)
        tensor = lambda array: as_tensor(np.asarray(array, dtype=X.dtype), dtype=dtype, device=device)  # noqa: E731
        standardised = (X - self._x_mean.astype(X.dtype)) / self._x_scale.astype(X.dtype)
        features = srff_features(
            tensor(standardised), tensor(self.gamma_), tensor(self.random_weights_), tensor(self.random_offset_)
        )
        return to_numpy(features @ tensor(self.coef_) + tensor(self.intercept_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified by the input check
        return tags
