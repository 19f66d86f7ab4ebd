"""RFFNet's heads on a fixed random-feature layer: ridge for regression, logistic for classification.

The 'varpro' fit learns the relevances on a least-squares problem (the regression
target, or the one-hot labels of a classifier: kernel ridge classification), then fits
the head on the layer it kept. The refinement moves (:mod:`rffkit._refine`) refit the
head of every candidate layer and keep the candidate only if its per-sample validation
losses beat the kept head's. A head fitter bundles what that needs for one kind of head:

* :meth:`fit` -- the head of a layer on all training rows, its penalty chosen on the
  validation split (or fixed);
* :meth:`validation_losses` -- the head's per-sample validation losses (None without a
  validation split);
* :meth:`around` -- a fitter for candidate layers close to one whose head has penalty
  ``alpha`` (the logistic path then tries only that penalty's neighbourhood);
* :meth:`install` -- write the head into an :class:`~rffkit.layers.RFFNetModule`.

:class:`RidgeHeads` scores by squared error (the regressor, and the classifier's
surrogate); :class:`LogisticHeads` by log-loss, with the penalty chosen along a
preconditioned path (:func:`rffkit._logistic.logistic_head_path`).
"""

from __future__ import annotations

import torch

from ._logistic import logistic_head_path
from ._ridge import fit_ridge_head

__all__ = ["RidgeHeads", "LogisticHeads"]


class RidgeHeads:
    """Ridge heads on ``(X, y)``, scored by squared error on ``(X_val, y_val)`` (GCV without).

    ``alpha`` is a penalty or 'auto' (chosen from ``alphas`` by
    :func:`rffkit._ridge.fit_ridge_head`, by a walk from ``start`` when it is given).
    """

    #: A ridge head costs one Gram matrix and a few Cholesky solves: the refinement
    #: confirms candidates directly.
    costly = False

    def __init__(self, X, y, X_val, y_val, *, alpha, alphas, start=None):
        self.X, self.y, self.X_val, self.y_val = X, y, X_val, y_val
        self.alpha, self.alphas, self.start = alpha, alphas, start

    @torch.no_grad()
    def fit(self, layer):
        """The ridge head of ``layer`` (a :class:`~rffkit._ridge.RidgeHead`)."""
        Z_val = None if self.X_val is None else layer(self.X_val)
        return fit_ridge_head(layer(self.X), self.y, Z_val, self.y_val, self.alpha, self.alphas, start=self.start)

    def around(self, alpha):
        """A fitter whose 'auto' penalty is found by a walk along ``alphas`` from ``alpha``.

        The refinement moves change the layer little, so the penalty chosen for the
        layer the search found is looked for in its neighbourhood
        (:func:`rffkit._ridge.walk_ridge_alpha`), without the eigendecomposition.
        """
        if not isinstance(self.alpha, str):
            return self
        return RidgeHeads(self.X, self.y, self.X_val, self.y_val, alpha=self.alpha, alphas=self.alphas, start=alpha)

    @torch.no_grad()
    def validation_losses(self, head, layer):
        """Per-sample squared errors on the validation split, summed over outputs (None without one)."""
        return None if self.X_val is None else head.sample_losses(layer(self.X_val), self.y_val)

    @staticmethod
    @torch.no_grad()
    def install(model, head):
        """Write ``head`` into the model's linear layer (one output per target column)."""
        weight = model.first_linear.weight
        weight.copy_(head.coef.reshape(weight.shape[0], -1))
        model.first_linear.bias.copy_(head.intercept.reshape(weight.shape[0]))


class LogisticHeads:
    """Logistic heads on class indices ``labels``, their penalty chosen by held-out log-loss.

    ``alphas``: the penalties tried (largest first, see
    :func:`~rffkit._logistic.logistic_head_path`), scored on the validation split or,
    with ``n_folds``, by cross-validation on the training rows; one penalty when it is
    fixed, or when nothing can be held out.
    """

    #: A logistic path costs many L-BFGS fits: the refinement screens pruning candidates
    #: by a ridge fit first.
    costly = True

    def __init__(self, X, labels, X_val, labels_val, n_classes, *, alphas, max_iter, tol, patience, n_folds=None):
        self.X, self.labels, self.X_val, self.labels_val = X, labels, X_val, labels_val
        self.n_classes, self.alphas = n_classes, tuple(alphas)
        self.max_iter, self.tol, self.patience, self.n_folds = max_iter, tol, patience, n_folds

    @torch.no_grad()
    def fit(self, layer):
        """The logistic head of ``layer`` (a :class:`~rffkit._logistic.LogisticHead`)."""
        Z_val = None if self.X_val is None else layer(self.X_val)
        return logistic_head_path(
            layer(self.X), self.labels, self.n_classes, Z_val, self.labels_val, self.alphas,
            max_iter=self.max_iter, tol=self.tol, patience=self.patience,
            n_folds=self.n_folds if len(self.alphas) > 1 else None,
        )

    def around(self, alpha, factor=10.0):
        """A fitter whose penalties are those of this one within ``factor`` of ``alpha``.

        The refinement moves change the layer little, so the penalty chosen for the
        layer the search found is searched again only in its neighbourhood: the long
        end of the path, at small penalties, is the expensive one.
        """
        near = tuple(a for a in self.alphas if alpha / factor <= a <= alpha * factor) or (alpha,)
        return LogisticHeads(self.X, self.labels, self.X_val, self.labels_val, self.n_classes, alphas=near,
                             max_iter=self.max_iter, tol=self.tol, patience=self.patience, n_folds=self.n_folds)

    @torch.no_grad()
    def validation_losses(self, head, layer):
        """Per-sample validation log-loss (None without a validation split)."""
        return None if self.X_val is None else head.sample_losses(layer(self.X_val), self.labels_val)

    @staticmethod
    @torch.no_grad()
    def install(model, head):
        """Write ``head`` into the model's linear layer: one logit per class (``[0, f]`` for two)."""
        weight, bias = model.first_linear.weight, model.first_linear.bias
        coef, intercept = head.coef.to(weight.dtype), head.intercept.to(bias.dtype)
        if coef.shape[1] == 1:
            weight.zero_()
            bias.zero_()
            weight[1].copy_(coef[:, 0])
            bias[1] = intercept[0]
        else:
            weight.copy_(coef.T)
            bias.copy_(intercept)
