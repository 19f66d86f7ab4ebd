"""RFFNet: kernel machines with learned per-feature relevances (an ARD kernel).

RFFNet (Otto & Izbicki, 2022) fits ``f(x) = beta^T z(lambda o x) + c``, where ``z``
is the random Fourier map of a shift-invariant kernel at unit relevances (Rahimi &
Recht, 2008) and ``lambda`` holds one relevance per input feature, by minimising
objective (10) of the paper::

    (1/n) sum_i loss(y_i, f(x_i)) + alpha ||beta||_2^2

over ``beta``, ``c`` and ``lambda``. The kernel depends on ``|lambda|`` only, so
``|lambda|`` scaled to [0, 1] ranks the features. The fit itself lives in
:mod:`rffkit._rffnet_base` and the solvers it calls.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import ClassifierMixin, RegressorMixin, _fit_context
from sklearn.metrics import accuracy_score, r2_score
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ._heads import LogisticHeads
from ._rffnet_base import BaseRFFNet
from ._adam_stream import fit_adam_stream, runs_adam
from ._classifier_stream import StreamedAccuracy, fit_rffnet_classifier_stream, per_chunk
from ._rffnet_stream import fit_stream, is_stream, predict_stream, score_stream
from ._guards import atomic_fit, within_limits
from ._validation import as_tensor, check_input

__all__ = ["RFFNetRegressor", "RFFNetClassifier"]

_PARAMETERS = """
    Parameters
    ----------
    n_components : int, default=None
        Number of random features ``D``. None uses ``floor(sqrt(n) log n)`` with ``n``
        the training rows after the validation split (the rule of Otto & Izbicki,
        2022, after Li et al., 2018), capped at 4,000; with the 'varpro' solver at
        least ``min(n, 1000)`` and, above 2,000 rows, at least
        ``min(n / 2, 2500, sqrt(3e10 / n))`` (2,250 at 4,500 rows, 1,825 at 9,000),
        since its search uses ``floor(sqrt(m) log m)`` features per stage anyway
        and the closed-form head on the rest is cheap.
    kernel : {'gaussian', 'laplacian', 'cauchy', 'matern12', 'matern32', \
'matern52', 'spline', 'induced'}, default='gaussian'
        The ARD kernel ``k(lambda o (x - y))``; any name of :data:`rffkit.kernels.KERNELS`.
    variant : {'cos', 'cos_sin'}, default='cos_sin'
        The random-feature map: ``sqrt(2/D) cos(W^T (lambda o x) + b)`` with random
        phases, or ``cos`` and ``sin`` of ``ceil(D/2)`` frequencies without phases
        (see :class:`~rffkit.layers.ARDRandomFourierFeatures`).
    linear_term : bool, default=True
        'varpro' only. After the search, try adding ``w^T (lambda o x)`` to the model
        (an ARD linear kernel with the relevances of the ARD kernel): a stationary
        kernel cannot extrapolate a trend, and on real tables inputs often act
        (nearly) linearly over a heavy-tailed range. Tried first and kept if it
        lowers the validation error (without a validation split: the GCV score by
        more than 1%); a feature of relevance 0 still has no effect. After the refinement moves, with a validation split, the model is
        compared with the linear-only one (ridge or logistic regression on the
        standardised inputs of the features of non-zero relevance) and reduces to
        it, random-feature weights 0, unless it has the lower held-out loss: on at
        most 1,000 rows both fits are cross-validated on 5 folds of all rows (the
        relevance search refitted in each, about 5 times the fit's cost), the
        kernel model is kept only if it wins on 4 of the 5 folds, and the linear-only
        model is fitted on all rows, its penalty chosen on them (GCV, or 5-fold
        cross-validation for the logistic head); on more rows both are scored on
        the validation split. ``relevances_`` still rank the features.
    alpha : float or 'auto', default='auto'
        Ridge penalty ``alpha ||beta||^2`` on the head (the regression target is in
        standard units). 'auto' with the 'varpro' solver: the relevances are searched
        at 1e-4 and the head's penalty is chosen from half-decades 1e-8 ... 1 on the
        validation split, by a walk along them from the search's penalty (one
        Cholesky solve per penalty visited), or by GCV from one eigendecomposition
        without ``early_stopping``; on a training split of at most 2,000 rows the search is
        repeated at 1e-3 and 3e-2, from the uniform start and from one
        proportional to each feature's marginal R^2, and the best head on
        validation is kept; on a larger split it is repeated at 1 only when the
        first model explains under 5% of the validation variance. The classifier's
        logistic head then takes its own penalty from half-decades 1e-6 ... 1, by
        validation log-loss, or by 5-fold cross-validation on a training split of at
        most 1,000 rows. 'auto' with 'adam': 1e-4. The value used is ``alpha_``.
    relevance_penalty : float, default=0.0
        Strength of an l1 penalty ``penalty ||lambda||_1`` on the relevances (Otto &
        Izbicki, 2022), applied by its proximal step ('adam') or as L-BFGS-B on
        ``lambda >= 0`` ('varpro'), so irrelevant features get relevance exactly 0.
    rescale_groups : bool, default=True
        'varpro' only. After the search, try setting each group of similar (or of
        the weakest) relevances to 2.5 and 5 times its largest value, which escapes
        the plateau where the kernel is too smooth to see a fast-varying component.
    align_frequencies : bool, default=True
        'varpro' only, and only with ``early_stopping`` (the validation split judges
        it). Draw up to 64 times as many frequencies from the kernel's spectral
        density and keep the ones whose ``(cos, sin)`` pair covaries most with the
        target at the learned relevances times 1, 1.5, 2 and 3 (kernel alignment,
        Sinha & Duchi, 2016). The kernel is then one learned from its spectral
        density rather than the ARD kernel exactly.
    prune_relevances : bool, default=True
        'varpro' only. Last, try zeroing the relevances under 0.1, 0.2 and 0.3 of the
        largest. The candidates of each move are screened by ridge fits on a
        subsample (at most 3 per move after a first look on 2,000 rows; a pruned
        layer must screen better than the layer), and the best is kept only if the
        head refitted on all training rows lowers the validation error by more than
        two standard errors (without a validation split: the GCV score by 1%).
    hidden_layer_sizes : tuple of int, default=()
        Empty: RFFNet's linear head. Otherwise ReLU layers of these widths follow the
        random-feature layer (RFFNet+, Otto, 2022), fitted by 'adam'; ``alpha`` then
        penalises the first dense layer.
    solver : {'auto', 'varpro', 'adam'}, default='auto'
        'varpro' eliminates ``beta`` in closed form and runs L-BFGS on ``lambda``
        over coarse-to-fine subsamples, then fits the head on all training rows
        (linear head only). The classifier's search runs on the least-squares
        problem of its one-hot labels (kernel ridge classification); its head is
        then logistic (multinomial), fitted on the fixed features by Newton's method
        (few rows and features) or preconditioned L-BFGS, and it judges the refinement
        moves by validation log-loss. 'adam'
        is Algorithm 1 of Otto & Izbicki (2022): alternating Adam steps on the head
        and on ``lambda`` over mini-batches. 'auto' picks 'varpro' where it applies,
        else 'adam'.
    learning_rate : float, default=1e-2
        'adam' only: the Adam step size.
    batch_size : int, default=256
        'adam' only: rows per mini-batch; in a streamed fit over ``R`` ranks, the
        rows of the global batch (``batch_size / R`` per rank).
    max_iter : int, default=100
        Epochs for 'adam'; most L-BFGS iterations per search stage for 'varpro'.
        Stopping on it while still improving issues a ``ConvergenceWarning``.
    tol : float, default=1e-4
        Relative improvement of the monitored loss that counts as progress.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the rows. 'adam' monitors the validation
        loss every epoch, stops after ``n_iter_no_change`` epochs without progress
        and restores the best state; 'varpro' scores every iterate on it, keeps the
        best relevances, chooses ``alpha='auto'`` and judges the refinement moves on
        it. Without it every row trains: 'adam' runs ``max_iter`` epochs, and
        'varpro' uses the GCV score in place of the validation error, skips
        ``align_frequencies`` and still ends each stage after ``n_iter_no_change``
        iterations without progress in GCV.
    validation_fraction : float, default=0.1
        Fraction of the rows held out when ``early_stopping`` (stratified by class
        for the classifier). Fewer than 2 held-out or 2 remaining rows: none.
    n_iter_no_change : int, default=10
        Epochs ('adam') or L-BFGS iterations per stage ('varpro') without progress
        after which the solver stops.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the random features and the batches through local
        generators (the global NumPy and torch states are untouched).
    device : str or torch.device, default='cpu'
        'cpu', 'cuda', 'cuda:N' or 'auto'. A fitted model predicts on the device it
        was fitted on, or on the CPU where there is no GPU.
    verbose : int, default=0
        0: silent. 1: one progress bar naming the current search, stage,
        refinement move or epoch, and a summary line (time, ``alpha_``,
        ``n_components_``, validation score). 2: also a line per iteration. Lines go
        through the ``rffkit`` logger (to standard error when no logging is
        configured).
    memory_budget : int, str or None, default=None
        Streamed 'varpro' fits only (``X`` a source or a memory map): bytes
        (or a string such as '2GB') that the relevance search on the sample and the
        ``D x D`` statistics of the head may each use. With ``n_components=None`` the
        head's ``D`` is the largest under ``floor(sqrt(n) log n)`` (at most 4,000)
        whose two float64 ``D x D`` statistics and eigendecomposition fit; a given
        ``n_components`` that does not fit raises ``MemoryBudgetError``. None: half
        the memory available when the fit starts (the smallest over the ranks).
"""

_ATTRIBUTES = """
    Attributes
    ----------
    relevances_ : ndarray of shape (n_features_in_,)
        The learned ``lambda``, for standardised inputs. A model reduced to its
        linear part (see ``linear_term``) has those of its ARD linear kernel: the
        norms of its weights on the standardised inputs.
    feature_importances_ : ndarray of shape (n_features_in_,)
        ``|lambda|`` scaled to [0, 1]; usable by ``SelectFromModel``.
    n_components_ : int
        Number of random features of the fitted model.
    solver_ : str
        The solver used.
    alpha_ : float
        The penalty of the head (the one chosen when ``alpha='auto'``).
    n_iter_ : int
        Epochs ('adam') or L-BFGS iterations over all stages and searches ('varpro').
    loss_curve_ : ndarray of shape (n_iter_,)
        Training objective per epoch, or GCV score per L-BFGS iteration.
    validation_loss_curve_ : ndarray
        The monitored loss at the same points (for 'varpro' followed by the final
        model's validation loss), in the target's units. The classifier's 'varpro'
        search monitors the squared error of its one-hot surrogate, and its final
        entry is the validation log-loss.
    best_validation_loss_ : float
        The monitored loss of the fitted model.
    best_validation_score_ : float or None
        {score} of the fitted model on the validation split (None without one).
    model_ : torch.nn.Module
        The fitted :class:`~rffkit.layers.RFFNetModule`, in float64 on the CPU.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.
"""

_NOTES = """
    Notes
    -----
    Inputs are standardised with training statistics, so ``relevances_`` refer to
    standardised inputs and compare across features whatever their units. The map
    ``z(lambda o x)^T z(lambda o y)`` is an unbiased estimate of the ARD kernel
    ``k(lambda o (x - y))`` (Otto & Izbicki, 2022, Proposition 2), so the model is a
    kernel machine whose kernel learns one length scale per feature.

    References
    ----------
    M. P. Otto and R. Izbicki (2022). RFFNet: Scalable and interpretable kernel
    methods via random Fourier features. arXiv:2211.06410.

    A. Rahimi and B. Recht (2008). Random features for large-scale kernel machines.
    Advances in Neural Information Processing Systems 20.
"""


class RFFNetRegressor(RegressorMixin, BaseRFFNet):
    __doc__ = (
        """RFFNet for regression (squared loss), with learned per-feature relevances.

    Solves objective (10) of Otto & Izbicki (2022) with the squared loss; the target
    is centred and scaled internally, which makes ``alpha`` free of its units.
"""
        + _PARAMETERS
        + _ATTRIBUTES.format(score="R^2")
        + """
    See Also
    --------
    RFFNetClassifier : The same model for classification.
    SRFFRegressor : Sparse random Fourier features (Gregorová et al., 2018).
    RFFRidge : Ridge regression on random features of a fixed kernel.
"""
        + _NOTES
        + """
    Examples
    --------
    >>> from rffkit import RFFNetRegressor
    >>> from rffkit.datasets import make_gregorova_se1
    >>> X, y = make_gregorova_se1(500, random_state=0)
    >>> model = RFFNetRegressor(random_state=0).fit(X, y)
    >>> model.feature_importances_.shape
    (18,)
"""
    )

    _supports_varpro = True

    def _encode_target(self, y):
        y = np.asarray(y, dtype=np.float64)
        mean, scale = float(y.mean()), float(y.std())
        scale = scale if scale > 0 else 1.0
        return (y - mean) / scale, 1, (mean, scale)

    def _set_target_state(self, state):
        self._y_mean, self._y_scale = state

    def _target_tensor(self, target, device):
        return as_tensor(target.reshape(-1, 1), dtype=torch.float32, device=device)

    def _loss_fn(self):
        return nn.MSELoss()

    def _loss_units(self, values, target_state):
        return values * target_state[1] ** 2

    def _validation_score(self, X_val, target_val):
        return r2_score(target_val, self._forward(X_val)[:, 0])

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the relevances and the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            Training inputs (standardised internally). A source or a memory map is
            streamed (split over the ranks of an initialised process group): 'varpro'
            searches the relevances on a hashed sample of the rows and fits the head on
            every row from its ridge statistics (:mod:`rffkit._rffnet_stream`); 'adam'
            reads mini-batches from the source every epoch, summing the gradients over
            the ranks (:mod:`rffkit._adam_stream`).
        y : array-like of shape (n_samples,), default=None
            Targets; None when ``X`` is a source, which carries its own.

        Returns
        -------
        self : RFFNetRegressor
            The fitted estimator; an error during the fit leaves it as it was.
        """
        if is_stream(X):
            return fit_adam_stream(self, X, y) if runs_adam(self) else fit_stream(self, X, y)
        X, y = check_input(self, X, y, dtype=np.float64, y_numeric=True)
        self.__dict__.pop("n_rows_seen_", None)
        return self._fit(X, y)

    @within_limits
    def predict(self, X):
        """Predicted targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            A source or a memory map is read chunk by chunk, every row whatever the rank.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if is_stream(X):
            return predict_stream(self, X)
        X = check_input(self, X, dtype=np.float64, reset=False)
        return self._predict_rows(X)

    def _predict_rows(self, X):
        """Predictions for validated raw float64 rows."""
        return self._forward(X)[:, 0] * self._y_scale + self._y_mean

    @within_limits
    def score(self, X, y=None, sample_weight=None):
        """R^2 of the predictions on ``(X, y)``, or on a source's rows and target, chunk by chunk.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
        y : array-like of shape (n_samples,), default=None
            None when ``X`` is a source with a target.
        sample_weight : array-like of shape (n_samples,), default=None
            Arrays only.

        Returns
        -------
        score : float
        """
        if is_stream(X) and sample_weight is None:
            check_is_fitted(self)
            return score_stream(self, X, y)
        return super().score(X, y, sample_weight=sample_weight)


class RFFNetClassifier(StreamedAccuracy, ClassifierMixin, BaseRFFNet):
    __doc__ = (
        """RFFNet for classification (cross-entropy), binary or multiclass.

    The same model with one output per class and the cross-entropy loss. By default
    ('varpro') the relevances are learned by the variable-projection search on the
    least-squares problem of the one-hot labels, and the head is the penalised
    logistic (multinomial) regression on the learned features, its penalty chosen by
    held-out log-loss, so ``predict_proba`` is a fitted probability model rather than
    a squashed score. Where this kernel model does not beat plain (penalised)
    logistic regression on held-out rows, the fitted model is that logistic
    regression (see ``linear_term``). Labels may be of any type and are returned as
    given.
"""
        + _PARAMETERS
        + _ATTRIBUTES.format(score="Accuracy")
        + """    classes_ : ndarray of shape (n_classes,)
        The class labels.

    See Also
    --------
    RFFNetRegressor : The same model for regression.
    RFFClassifier : Logistic regression on random features of a fixed kernel.
"""
        + _NOTES
        + """
    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from rffkit import RFFNetClassifier
    >>> X, y = make_classification(300, n_features=6, random_state=0)
    >>> RFFNetClassifier(random_state=0, max_iter=20).fit(X, y).predict(X[:3]).shape
    (3,)
"""
    )

    def _encode_target(self, y):
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        if encoder.classes_.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__}: y contains only one class ({encoder.classes_[0]!r}); "
                "classification needs at least two classes."
            )
        return encoder.transform(y), encoder.classes_.shape[0], encoder.classes_

    def _set_target_state(self, classes):
        self.classes_ = classes

    def _stratify(self, target):
        counts = np.bincount(target)
        n_val = int(np.floor(self.validation_fraction * target.shape[0]))
        return target if counts.min() >= 2 and n_val >= counts.shape[0] else None

    _supports_varpro = True

    def _target_tensor(self, target, device):
        return as_tensor(target, dtype=torch.long, device=device)

    def _surrogate_target(self, labels, n_classes):
        """One-hot labels (the indicator of the second class for two): kernel ridge classification."""
        if labels is None:
            return None
        if n_classes == 2:
            return labels.to(torch.float32).reshape(-1, 1)
        return torch.nn.functional.one_hot(labels, n_classes).to(torch.float32)

    def _output_heads(self, problem, auto_alpha, surrogate_alpha):
        settings = self._settings
        cross_validate = problem.X_train.shape[0] <= settings.logistic_cv_rows
        if not auto_alpha:
            alphas = (float(self.alpha),)
        elif problem.X_val is None and not cross_validate:
            alphas = (surrogate_alpha * settings.logistic_alpha_ratio,)
        else:
            alphas = settings.logistic_alpha_grid
        return LogisticHeads(
            problem.X_train, problem.y_train, problem.X_val, problem.y_val, problem.n_outputs, alphas=alphas,
            max_iter=settings.logistic_max_iter, tol=settings.logistic_tol, patience=settings.logistic_patience,
            n_folds=settings.logistic_cv_folds if cross_validate else None,
        )

    def _loss_fn(self):
        return nn.CrossEntropyLoss()

    def _validation_score(self, X_val, target_val):
        return accuracy_score(target_val, np.argmax(self._forward(X_val), axis=1))

    @atomic_fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the relevances and the classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            A source or a memory map is streamed (split over the ranks of an initialised
            process group): 'varpro' searches the relevances on a hashed sample of the
            rows and fits the logistic head on every row by L-BFGS, one pass per
            evaluation (:mod:`rffkit._classifier_stream`); 'adam' reads mini-batches from
            the source every epoch (:mod:`rffkit._adam_stream`).
        y : array-like of shape (n_samples,), default=None
            Class labels of any type; at least two classes. None when ``X`` is a source,
            which carries its own.

        Returns
        -------
        self : RFFNetClassifier
        """
        if is_stream(X):
            return fit_adam_stream(self, X, y) if runs_adam(self) else fit_rffnet_classifier_stream(self, X, y)
        X, y = check_input(self, X, y, dtype=np.float64)
        self.__dict__.pop("n_rows_seen_", None)
        return self._fit(X, y)

    @within_limits
    def decision_function(self, X):
        """The model's logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            A source or a memory map is read chunk by chunk, every row whatever the rank.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes), or (n_samples,) for two classes
            The logits; for two classes the difference of the second and the first.
        """
        check_is_fitted(self)
        if is_stream(X):
            return per_chunk(self, X, self._decision_rows)
        return self._decision_rows(check_input(self, X, dtype=np.float64, reset=False))

    def _decision_rows(self, X):
        logits = self._forward(X)
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits

    @within_limits
    def predict_proba(self, X):
        """Class probabilities, the softmax of the logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            A source or a memory map is read chunk by chunk, every row whatever the rank.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        if is_stream(X):
            return per_chunk(self, X, self._proba_rows)
        return self._proba_rows(check_input(self, X, dtype=np.float64, reset=False))

    def _proba_rows(self, X):
        logits = self._forward(X)
        logits -= logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(axis=1, keepdims=True)

    @within_limits
    def predict(self, X):
        """Predicted labels, of the type seen in ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
            A source or a memory map is read chunk by chunk, every row whatever the rank.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if is_stream(X):
            return per_chunk(self, X, self._predict_labels)
        return self._predict_labels(check_input(self, X, dtype=np.float64, reset=False))

    def _predict_labels(self, X):
        """Labels for validated raw float64 rows."""
        return self.classes_[np.argmax(self._forward(X), axis=1)]
