"""How well a random feature map approximates its kernel: error measures and a plot.

Following Yu (2023), a feature map ``z`` is measured by comparing ``K_hat = Z Z^T`` with
the exact Gram matrix ``K`` on all pairs of a data set:

    RMSE  = sqrt(mean_ij (K_ij - K_hat_ij)^2) = ||K - K_hat||_F / n
    NRMSE = ||K - K_hat||_F / ||K||_F

For i.i.d. Monte Carlo features both fall like ``1 / sqrt(D)``.

References
----------
S.-C. Yu (2023), *Efficient approximation of random basis functions for covariance
kernels*, master's thesis, Technical University of Munich.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse
from sklearn.base import clone

__all__ = [
    "ApproximationError",
    "approximation_error",
    "approximate_kernel_matrix",
    "approximation_error_curve",
    "plot_approximation_error",
]


class ApproximationError(NamedTuple):
    """Root-mean-square error of a Gram matrix and its normalised version.

    Returned by :func:`approximation_error`; a named tuple, so it unpacks as
    ``rmse, nrmse = error``.

    Parameters
    ----------
    rmse : float
        ``||K - K_hat||_F / sqrt(n m)``.
    nrmse : float
        ``||K - K_hat||_F / ||K||_F`` (inf when ``K`` is zero).

    Examples
    --------
    >>> error = ApproximationError(rmse=0.1, nrmse=0.2)
    >>> error.nrmse
    0.2
    """

    rmse: float
    nrmse: float


def approximation_error(K_exact, K_approx):
    """RMSE and normalised RMSE of an approximate Gram matrix.

    Parameters
    ----------
    K_exact : array-like of shape (n, m)
        The exact Gram matrix, e.g. from :func:`rffkit.kernels.kernel_matrix`.
    K_approx : array-like or sparse matrix of shape (n, m)
        Its approximation, e.g. from :func:`approximate_kernel_matrix`.

    Returns
    -------
    ApproximationError
        ``rmse = sqrt(mean((K - K_hat)^2))`` and
        ``nrmse = ||K - K_hat||_F / ||K||_F``.

    Examples
    --------
    >>> import numpy as np
    >>> approximation_error(np.eye(2), np.zeros((2, 2)))
    ApproximationError(rmse=0.7071067811865476, nrmse=1.0)
    """
    K_exact = np.asarray(K_exact, dtype=np.float64)
    if sparse.issparse(K_approx):
        K_approx = K_approx.toarray()
    K_approx = np.asarray(K_approx, dtype=np.float64)
    if K_exact.shape != K_approx.shape:
        raise ValueError(
            f"approximation_error: K_exact has shape {K_exact.shape} but K_approx has "
            f"shape {K_approx.shape}; expected equal shapes."
        )
    residual = np.linalg.norm(K_exact - K_approx)
    reference = np.linalg.norm(K_exact)
    rmse = residual / np.sqrt(K_exact.size)
    nrmse = residual / reference if reference > 0 else np.inf
    return ApproximationError(float(rmse), float(nrmse))


def approximate_kernel_matrix(transformer, X, Y=None):
    """``K_hat = z(X) z(Y)^T`` from a fitted feature map (dense or sparse output).

    Parameters
    ----------
    transformer : fitted transformer
        A feature map such as :class:`~rffkit.RandomFourierFeatures` or
        :class:`~rffkit.RandomBinningFeatures`.
    X : array-like of shape (n_X, n_features)
        First set of points.
    Y : array-like of shape (n_Y, n_features), default=None
        Second set of points; None means ``Y = X``.

    Returns
    -------
    ndarray of shape (n_X, n_Y)
        The kernel estimate, dense.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(4, 2))
    >>> model = RandomFourierFeatures(n_components=2000, random_state=0).fit(X)
    >>> bool(np.allclose(np.diag(approximate_kernel_matrix(model, X)), 1.0, atol=0.1))
    True
    """
    ZX = transformer.transform(X)
    ZY = ZX if Y is None else transformer.transform(Y)
    product = ZX @ ZY.T
    return product.toarray() if sparse.issparse(product) else np.asarray(product)


def approximation_error_curve(estimator, X, K_exact, n_components, random_states):
    """Errors of a feature map for several ``n_components`` and seeds.

    Parameters
    ----------
    estimator : transformer
        Template with ``n_components`` and ``random_state`` parameters; it is cloned,
        re-parametrised and fitted on ``X`` for every pair.
    X : array-like of shape (n_samples, n_features)
        The points.
    K_exact : ndarray of shape (n_samples, n_samples)
        Their exact Gram matrix.
    n_components : sequence of int
        The feature counts ``D`` to try.
    random_states : sequence of int
        One seed per repetition.

    Returns
    -------
    dict
        ``'n_components'`` (array), ``'rmse'`` and ``'nrmse'``, arrays of shape
        ``(len(random_states), len(n_components))``.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit import RandomFourierFeatures
    >>> from rffkit.kernels import kernel_matrix
    >>> X = np.random.default_rng(0).uniform(size=(30, 2))
    >>> curve = approximation_error_curve(
    ...     RandomFourierFeatures(), X, kernel_matrix("gaussian", X), [10, 1000], range(3))
    >>> curve["nrmse"].shape, bool(curve["nrmse"][:, 1].mean() < curve["nrmse"][:, 0].mean())
    ((3, 2), True)
    """
    n_components = np.asarray(n_components)
    rmse = np.empty((len(random_states), n_components.size))
    nrmse = np.empty_like(rmse)
    for i, seed in enumerate(random_states):
        for j, D in enumerate(n_components):
            model = clone(estimator).set_params(n_components=int(D), random_state=seed)
            error = approximation_error(K_exact, approximate_kernel_matrix(model.fit(X), X))
            rmse[i, j], nrmse[i, j] = error
    return {"n_components": n_components, "rmse": rmse, "nrmse": nrmse}


def plot_approximation_error(
    curves, *, metric="nrmse", ax=None, title=None, reference_slope=True, colors=None, legend=True
):
    """Draw error against number of components for several feature maps on one figure.

    Parameters
    ----------
    curves : dict
        ``label -> result`` of :func:`approximation_error_curve` (or any mapping with
        ``'n_components'`` and a ``metric`` array of shape (n_seeds, n_D) or (n_D,)).
        The mean over seeds is drawn, with a band from the smallest to the largest
        seed's error.
    metric : {'nrmse', 'rmse'}, default='nrmse'
        The error to draw.
    ax : matplotlib Axes, default=None
        Created (with its figure) when None.
    title : str, default=None
        Title of the axes.
    reference_slope : bool, default=True
        Draw a dashed ``D^{-1/2}`` line through the first curve's first point.
    colors : dict, default=None
        ``label -> matplotlib colour``, to keep a map's colour across several axes.
    legend : bool, default=True
        Draw a legend on ``ax`` (turn off to draw one legend for a whole figure).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.
    """
    import matplotlib.pyplot as plt  # lazily: plotting is optional

    if metric not in ("nrmse", "rmse"):
        raise ValueError(
            f"plot_approximation_error: metric={metric!r}; expected 'nrmse' or 'rmse'."
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    first = None
    for label, result in curves.items():
        D = np.asarray(result["n_components"], dtype=np.float64)
        errors = np.atleast_2d(np.asarray(result[metric], dtype=np.float64))
        mean = errors.mean(axis=0)
        style = {"color": colors[label]} if colors and label in colors else {}
        (line,) = ax.loglog(D, mean, marker="o", markersize=3, label=label, **style)
        if errors.shape[0] > 1:
            low, high = errors.min(axis=0), errors.max(axis=0)
            ax.fill_between(D, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
        if first is None:
            first = (D, mean[0])
    if reference_slope and first is not None:
        D, start = first
        ax.loglog(D, start * np.sqrt(D[0] / D), "k--", linewidth=0.8, label=r"$\propto D^{-1/2}$")
    ax.set_xlabel("number of components D")
    ax.set_ylabel(metric.upper())
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend(fontsize="small")
    return ax
