"""Logistic regression on random features: L2-penalised, binary or multinomial, in torch.

:class:`RFFClassifier` is the classification counterpart of :class:`~rffkit.RFFRidge`;
its L-BFGS solver, :func:`fit_logistic`, lives with the other logistic numerics in
:mod:`rffkit._logistic` (RFFNet's logistic head uses them too).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ._classifier_stream import StreamedAccuracy, fit_rff_classifier_stream, per_chunk
from ._default_map import FEATURE_MAP_PARAMETERS, DefaultFeatureMap
from ._guards import atomic_fit, within_limits
from ._logistic import fit_logistic, logistic_objective
from ._rffnet_stream import is_stream
from ._validation import (
    FLOAT32_MAX, check_input, fit_warning, one_class_error, resolve_device, takes_sparse, torch_dtype_for,
)
from .ridge import fitted_features

__all__ = ["RFFClassifier", "fit_logistic", "logistic_objective"]


class RFFClassifier(DefaultFeatureMap, StreamedAccuracy, ClassifierMixin, BaseEstimator):
    __doc__ = (
        """Logistic regression (binary or multinomial) on a random-feature map.

    Minimises ``(1/n) sum_i loss(y_i, W^T z(x_i) + b) + (alpha / 2) ||W||_F^2`` by
    full-batch L-BFGS in torch on ``device``, where ``z`` is any feature transformer
    of this library (sparse output is densified). A sparse ``X`` is handed to a feature
    map that accepts sparse input (its ``input_tags.sparse``) as it is, and made dense
    for the others (the default random Fourier features among them).

    Parameters
    ----------
"""
        + FEATURE_MAP_PARAMETERS
        + """    alpha : float, default=1e-4
        L2 penalty. ``LogisticRegression(C=C)`` corresponds to ``alpha = 1 / (C n)``.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    max_iter : int, default=500
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-6
        Stop when the largest absolute gradient entry falls below ``tol``, or when no
        step lowers the objective in the precision of ``X`` any more (float32 input may
        stop there above ``tol``): both count as converged, and only a fit stopped by
        ``max_iter`` warns (``ConvergenceWarning``).
    device : str, default='cpu'
        Torch device ('cpu', 'cuda', 'cuda:N' or 'auto').
    random_state : int, RandomState instance or None, default=None
        When not None, passed to the feature map's ``random_state``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    features_ : transformer
        The fitted feature map.
    coef_ : ndarray of shape (1, n_components) or (n_classes, n_components)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : int
        L-BFGS iterations run.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.
    n_rows_seen_ : int
        Rows of the last streamed fit (absent after a fit on arrays).

    See Also
    --------
    sklearn.linear_model.LogisticRegression : the same model on given features.
    RFFRidge : ridge regression on random features.

    Notes
    -----
    Binary: ``P(y = classes_[1] | x) = sigma(f(x))``, ``f(x) = w^T z(x) + b``, loss
    ``log(1 + exp(-t f))`` with ``t = +-1``. Multinomial:
    ``P(y = k | x) = exp(f_k(x)) / sum_j exp(f_j(x))`` with one weight vector per
    class (identifiable thanks to the penalty). The objective is strictly convex in
    ``W``, so L-BFGS from zero reaches the unique minimiser.

    References
    ----------
    A. Rahimi and B. Recht (2007), "Random features for large-scale kernel machines",
    NeurIPS 2007.

    D. C. Liu and J. Nocedal (1989), "On the limited memory BFGS method for large scale
    optimization", Mathematical Programming 45.

    Examples
    --------
    >>> import numpy as np
    >>> from rffkit import RFFClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    >>> clf = RFFClassifier(random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9), clf.classes_.tolist()
    (True, ['a', 'b'])
    """
    )

    _parameter_constraints = {
        "features": [None, HasMethods(["fit", "transform"])],
        "n_components": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "alpha": [Interval(numbers.Real, 0, FLOAT32_MAX, closed="both")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "device": [str],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        features=None,
        n_components=None,
        alpha=1e-4,
        fit_intercept=True,
        max_iter=500,
        tol=1e-6,
        device="cpu",
        random_state=None,
    ):
        self.features = features
        self.n_components = n_components
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.random_state = random_state

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the feature map, then the penalised logistic model by L-BFGS.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            A sparse matrix is made dense unless the feature map accepts sparse input.
            A source or a memory map is streamed (split over the ranks of an
            initialised process group): the feature map is fitted on the first chunk,
            and every L-BFGS evaluation is one pass over the rows, preconditioned by the
            Hessian of a sample (:mod:`rffkit._classifier_stream`); ``tol`` then bounds
            the gradient in the preconditioned coordinates.
        y : array-like of shape (n_samples,), default=None
            Labels of any type, none missing; ``predict`` returns them as given (pandas'
            nullable ``Int64`` and ``boolean`` columns as NumPy ints and booleans). None
            when ``X`` is a source, which carries its own.

        Returns
        -------
        self : RFFClassifier
        """
        if is_stream(X):
            return fit_rff_classifier_stream(self, X, y)
        self.__dict__.pop("n_rows_seen_", None)
        X, y = check_input(self, X, y, accept_sparse=("csr", "csc"), densify=not takes_sparse(self.features),
                           dtype=[np.float64, np.float32], ensure_min_samples=2)
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        if classes.shape[0] < 2:
            raise one_class_error(type(self).__name__, classes[0])
        device = resolve_device(self.device, owner=type(self).__name__)
        features, Z = fitted_features(self, X)
        np_dtype = np.float32 if X.dtype == np.float32 else np.float64
        Z = Z.toarray() if sp.issparse(Z) else Z
        Z = np.asarray(Z, dtype=np_dtype)
        weights, bias, n_iter, gradient, converged = fit_logistic(
            Z, labels, classes.shape[0], alpha=float(self.alpha), fit_intercept=self.fit_intercept,
            max_iter=self.max_iter, tol=self.tol, dtype=torch_dtype_for(X), device=device, return_converged=True,
        )
        if not converged:
            fit_warning(
                f"{type(self).__name__}: L-BFGS stopped after {n_iter} iterations with gradient "
                f"{gradient:.2e} > tol={self.tol:g}; increase max_iter or tol.",
                ConvergenceWarning,
            )
        self.classes_ = classes
        self.features_ = features
        self.coef_ = np.ascontiguousarray(weights.cpu().numpy().T)
        self.intercept_ = bias.cpu().numpy()
        self.n_iter_ = n_iter
        return self

    @within_limits
    def decision_function(self, X):
        """Logits ``z(X) coef_^T + intercept_``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), or a source
            Inputs; a source or a memory map is read chunk by chunk, every row whatever
            the rank.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for two classes (positive favours ``classes_[1]``), else one
            per class; in the dtype of ``X`` (float32 or float64).
        """
        check_is_fitted(self)
        if is_stream(X):
            return per_chunk(self, X, self._decision_rows)
        X = check_input(self, X, accept_sparse=("csr", "csc"), densify=not takes_sparse(self.features_),
                        dtype=[np.float64, np.float32], reset=False)
        return self._decision_rows(X)

    def _decision_rows(self, X):
        """:meth:`decision_function` of validated rows."""
        Z = self.features_.transform(X)
        Z = Z.toarray() if sp.issparse(Z) else np.asarray(Z)
        scores = Z @ self.coef_.T.astype(Z.dtype, copy=False) + self.intercept_.astype(Z.dtype, copy=False)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def _predict_labels(self, X):
        """:meth:`predict` of validated rows."""
        scores = self._decision_rows(X)
        return self.classes_[(scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """Class probabilities.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), or a source
            Inputs; a source or a memory map is read chunk by chunk.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in ``classes_`` order; rows sum to 1.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            positive = expit(scores)
            return np.column_stack([1.0 - positive, positive])
        return softmax(scores, axis=1)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Columns in ``classes_`` order.
        """
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """The most probable class of each sample.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), or a source
            Inputs; a source or a memory map is read chunk by chunk.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels as given to ``fit``.
        """
        scores = self.decision_function(X)
        index = (scores > 0).astype(int) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[index]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # handed to a feature map that reads it, else made dense
        return tags
