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
* :meth:`install` -- write the head into an :class:`~rffkit.layers.RFFNetModule`;
* :meth:`refit` -- the head of the kept layer at its chosen penalty, refitted on the
  training and validation rows together once nothing is left to judge (the validation
  rows are a tenth of the data the head can learn from);
* :meth:`fit_linear` -- the linear-only head of a layer with linear columns: the
  penalised linear model on the standardised inputs of the features whose relevance
  is not zero, written on the layer's ``lambda o x`` columns (weights ``w / lambda``)
  with zeros on the random features.

:func:`reduce_to_linear` keeps the kernel model only if it beats that linear-only head
on held-out rows (the validation split, or cross-validation of both fits on small data:
:mod:`rffkit._kernel_or_linear`), so a data set without non-linear signal gets the
linear (or logistic) regression it calls for, while the relevances still rank the
features.

:class:`RidgeHeads` scores by squared error (the regressor, and the classifier's
surrogate); :class:`LogisticHeads` by log-loss, with the penalty chosen along a
preconditioned path (:func:`rffkit._logistic_path.logistic_head_path`).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from ._logistic_path import logistic_head_path
from ._ridge import GramShare, fit_ridge_head, loo_ridge_head, solve_ridge

__all__ = [
    "KernelGramMemo", "RidgeHeads", "LogisticHeads", "linear_inputs", "on_layer", "paired_gain", "reduce_to_linear",
]


def _joined(first, second):
    return first if second is None else torch.cat([first, second])


def linear_inputs(layer):
    """``(kept, scale)``: the features of non-zero relevance and the weight factors ``1 / lambda`` of their columns.

    A linear head ``x[:, kept] @ w`` on standardised inputs is the same function as
    ``(lambda o x)[:, kept] @ (w / lambda[kept])`` on the layer's linear columns.
    """
    relevances = layer.relevances.detach()
    kept = torch.nonzero(relevances != 0).flatten()
    return kept, 1.0 / relevances[kept]


def on_layer(layer, head, kept, scale):
    """``head`` (fitted on ``x[:, kept]``) with its coefficients on all columns of ``layer``."""
    coef = head.coef.reshape(kept.shape[0], -1)
    full = torch.zeros(layer.width, coef.shape[1], dtype=coef.dtype, device=coef.device)
    full[layer.n_components + kept] = coef * scale.to(coef.dtype)[:, None]
    return dataclasses.replace(head, coef=full.reshape((layer.width,) + tuple(head.coef.shape[1:])))


def paired_gain(losses, new_losses, z):
    """``(mean, threshold, n)``: the mean of ``losses - new_losses`` (per-sample validation losses of
    two models on the same ``n`` rows) and ``z`` standard errors of these paired differences;
    the new model validates better by more than ``z`` standard errors when ``mean > threshold``."""
    gain = (losses - new_losses).double()
    n = gain.shape[0]
    return float(gain.mean()), float(z * gain.std() / math.sqrt(n)), n


def with_linear(layer):
    """``layer`` with its linear columns (itself when it has them): where the linear-only model is fitted."""
    return layer if layer.has_linear else layer.replace(linear=True)


@torch.no_grad()
def linear_only(heads, layer):
    """``(linear_layer, head, losses)``: the linear-only model on ``layer``'s inputs, its head fitted by
    ``heads`` (``fit_linear``) and its per-sample validation losses (None without a validation split)."""
    linear_layer = with_linear(layer)
    head = heads.fit_linear(linear_layer)
    return linear_layer, head, heads.validation_losses(head, linear_layer)


@torch.no_grad()
def reduce_to_linear(heads, layer, head, *, z=0.0, kernel_wins=None, linear_heads=None):
    """``(layer, head, reduced)``: the linear-only model unless the kernel model beats it.

    The linear-only head (:meth:`RidgeHeads.fit_linear`, :meth:`LogisticHeads.fit_linear`)
    is fitted on ``layer`` with its linear columns added (when it has none). Whether
    the kernel model ``head`` is kept is ``kernel_wins`` when given (the verdict of a
    cross-validation of both fitting procedures, :mod:`rffkit._kernel_or_linear`);
    otherwise it is kept when its mean per-sample validation loss is lower by more
    than ``z`` standard errors of the paired differences, a comparison that favours
    the kernel: the split chose the search's iterates and moves. The linear-only head
    is fitted by ``linear_heads`` (default ``heads``) and returned with the relevances
    of its ARD linear kernel: ``||w_j||``, the norms of the weights of the standardised
    inputs (:func:`_linear_relevances`). Without a verdict or a validation split, or
    when every relevance is 0, nothing changes.
    """
    if (kernel_wins is None and not heads.validated) or not bool((layer.relevances.detach() != 0).any()):
        return layer, head, False
    linear_layer, linear_head = with_linear(layer), None
    if kernel_wins is None:
        linear_layer, linear_head, linear_loss = linear_only(heads, layer)
        mean, threshold, _ = paired_gain(linear_loss, heads.validation_losses(head, layer), z)
        kernel_wins = mean > threshold
    if kernel_wins:
        return layer, head, False
    if linear_head is None or linear_heads is not None:
        linear_head = (linear_heads or heads).fit_linear(linear_layer)
    return (*_linear_relevances(linear_layer, linear_head), True)


def _linear_relevances(layer, head):
    """The same linear-only model with relevances ``||w_j||``, the weights of the standardised inputs.

    The function ``sum_j (lambda_j x_j) v_j`` depends on ``lambda_j v_j = w_j`` only, so
    ``lambda_j = ||w_j||`` (over the outputs) with column weights ``w_j / ||w_j||`` is the
    same model, whose relevances are those of its ARD linear kernel and rank the
    features by their effect (the random features, of weight 0, are unaffected).
    """
    D, relevances = layer.n_components, layer.relevances.detach()
    shape = head.coef.shape
    coef = head.coef.reshape(layer.width, -1)
    weights = coef[D:] * relevances.to(coef.dtype)[:, None]  # w on the standardised inputs
    magnitude = weights.norm(dim=1)
    new_coef = torch.zeros_like(coef)
    nonzero = magnitude > 0
    new_coef[D:][nonzero] = weights[nonzero] / magnitude[nonzero, None]
    new_layer = layer.replace(relevances=magnitude.to(relevances.dtype))
    return new_layer, dataclasses.replace(head, coef=new_coef.reshape(shape))


def _kernel_state(layer):
    """What a layer's random-feature columns depend on, besides the inputs."""
    return (layer.frequencies, layer.offsets, layer.relevances.detach().clone(), layer.n_components, layer.variant,
            layer.input_range, layer.input_warp)


def _same(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a is b or (a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b))
    return a == b


class KernelGramMemo:
    """The centred Gram matrix of one layer's random features on the training rows, kept from the
    ridge head of the searched layer for the head of the same layer with its linear term (one memo
    serves the heads of one training set).

    The linear-term move's features are that layer's ``D`` columns and ``p`` more, so its walk
    (:func:`rffkit._ridge.walk_ridge_alpha`) forms only the new columns' products with all
    (``n D p`` multiply-adds) instead of the whole Gram matrix (``n D^2 / 2``). :meth:`keep`
    holds one matrix (``D x D``, float64); :meth:`share` hands it to the head of a layer with
    linear columns and the same random features, once, and forgets it.
    """

    def __init__(self):
        self._state = self._gram = None

    def keep(self, layer, share):
        """Hold the Gram matrix ``share`` took out of the walk that fitted ``layer``'s head."""
        if not layer.has_linear and share is not None and share.formed is not None:
            self._state, self._gram = _kernel_state(layer), share.formed

    def share(self, layer):
        """A :class:`~rffkit._ridge.GramShare` for the head of ``layer``: the kept matrix when
        ``layer`` adds linear columns to the same random features."""
        known = None
        if layer.has_linear and self._state is not None and _same(self._state, _kernel_state(layer)):
            known = self._gram
            self.clear()
        return GramShare(known=known)

    def clear(self):
        """Forget the kept matrix."""
        self._state = self._gram = None


class RidgeHeads:
    """Ridge heads on ``(X, y)``, scored by squared error on ``(X_val, y_val)`` (GCV without).

    ``alpha`` is a penalty or 'auto' (chosen from ``alphas`` by
    :func:`rffkit._ridge.fit_ridge_head`, by a walk from ``start`` when it is given).
    ``grams``: a :class:`KernelGramMemo` of heads on ``X`` whose matrix these heads may use.
    """

    #: A ridge head costs one Gram matrix and a few Cholesky solves: the refinement
    #: confirms candidates directly.
    costly = False

    def __init__(self, X, y, X_val, y_val, *, alpha, alphas, start=None, grams=None):
        self.X, self.y, self.X_val, self.y_val = X, y, X_val, y_val
        self.alpha, self.alphas, self.start, self.grams = alpha, alphas, start, grams

    @torch.no_grad()
    def fit(self, layer):
        """The ridge head of ``layer`` (a :class:`~rffkit._ridge.RidgeHead`)."""
        Z_val = None if self.X_val is None else layer(self.X_val)
        share = None if self.grams is None else self.grams.share(layer)
        return fit_ridge_head(layer(self.X), self.y, Z_val, self.y_val, self.alpha, self.alphas, start=self.start,
                              overwrite_z=True, share=share)

    def around(self, alpha):
        """A fitter whose 'auto' penalty is found by a walk along ``alphas`` from ``alpha``.

        The refinement moves change the layer little, so the penalty chosen for the
        layer the search found is looked for in its neighbourhood
        (:func:`rffkit._ridge.walk_ridge_alpha`), without the eigendecomposition.
        """
        if not isinstance(self.alpha, str):
            return self
        return RidgeHeads(self.X, self.y, self.X_val, self.y_val, alpha=self.alpha, alphas=self.alphas, start=alpha,
                          grams=self.grams)

    @torch.no_grad()
    def fit_linear(self, layer):
        """The ridge head of the standardised inputs alone, on ``layer``'s linear columns (see the module)."""
        kept, scale = linear_inputs(layer)
        # in float64: the few columns cost nothing, and a float32 Gram matrix's rounding gives the directions
        # it leaves free (the indicators of a category sum to 1, as does the intercept's column) eigenvalues of
        # 1e-7 of the largest, along which a small penalty let the weights drift far (the linear model the same,
        # its relevances, the weights' sizes, not)
        X_val = None if self.X_val is None else self.X_val[:, kept].double()
        y_val = None if self.y_val is None else self.y_val.double()
        head = fit_ridge_head(self.X[:, kept].double(), self.y.double(), X_val, y_val, self.alpha, self.alphas)
        dtype = self.X.dtype
        head = dataclasses.replace(head, coef=head.coef.to(dtype), intercept=head.intercept.to(dtype))
        return on_layer(layer, head, kept, scale)

    @property
    def validated(self):
        """Whether heads are judged on a validation split."""
        return self.X_val is not None

    @torch.no_grad()
    def validation_losses(self, head, layer):
        """Per-sample squared errors on the validation split, summed over outputs (None without one)."""
        return None if self.X_val is None else head.sample_losses(layer(self.X_val), self.y_val)

    @torch.no_grad()
    def refit(self, layer, head, loo_rows=0):
        """``head`` refitted on the training and validation rows together (its score kept).

        At its penalty or, when the penalty is chosen ('auto') and the rows are at most
        ``loo_rows``, at the penalty of ``alphas`` with the least exact leave-one-out
        error on all of them (:func:`rffkit._ridge.loo_ridge_head`): where the validation
        split holds a few dozen rows it chooses the penalty by luck.
        """
        if self.X_val is None:
            return head
        X, y = _joined(self.X, self.X_val), _joined(self.y, self.y_val)
        if isinstance(self.alpha, str) and X.shape[0] <= loo_rows:
            return dataclasses.replace(loo_ridge_head(layer(X), y, self.alphas, X), score=head.score)
        solution = solve_ridge(layer(X), y, head.alpha)
        return dataclasses.replace(head, coef=solution.coef.reshape(head.coef.shape),
                                   intercept=solution.intercept.reshape(head.intercept.shape))

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
    :func:`~rffkit._logistic_path.logistic_head_path`), scored on the validation split or,
    with ``leave_one_out``, on the training rows held out (approximate leave-one-out, or
    ``n_folds``-fold cross-validation where that costs less); one penalty when it is fixed,
    or when nothing can be held out.
    """

    #: A logistic path costs many L-BFGS fits: the refinement screens pruning candidates
    #: by a ridge fit first.
    costly = True

    def __init__(self, X, labels, X_val, labels_val, n_classes, *, alphas, max_iter, tol, patience,
                 leave_one_out=False, n_folds=5):
        self.X, self.labels, self.X_val, self.labels_val = X, labels, X_val, labels_val
        self.n_classes, self.alphas = n_classes, tuple(alphas)
        self.max_iter, self.tol, self.patience = max_iter, tol, patience
        self.leave_one_out, self.n_folds = leave_one_out, n_folds

    @torch.no_grad()
    def fit(self, layer):
        """The logistic head of ``layer`` (a :class:`~rffkit._logistic.LogisticHead`)."""
        Z_val = None if self.X_val is None else layer(self.X_val)
        return logistic_head_path(
            layer(self.X), self.labels, self.n_classes, Z_val, self.labels_val, self.alphas,
            max_iter=self.max_iter, tol=self.tol, patience=self.patience,
            leave_one_out=self.leave_one_out and len(self.alphas) > 1, n_folds=self.n_folds,
        )

    @torch.no_grad()
    def fit_linear(self, layer):
        """The logistic head of the standardised inputs alone, on ``layer``'s linear columns (see the module).

        Its penalty is chosen from all of ``alphas`` (leave-one-out on the training
        rows is fair here: no part of a linear model was fitted to them before).
        """
        kept, scale = linear_inputs(layer)
        X_val = None if self.X_val is None else self.X_val[:, kept]
        head = logistic_head_path(
            self.X[:, kept], self.labels, self.n_classes, X_val, self.labels_val, self.alphas,
            max_iter=self.max_iter, tol=self.tol, patience=self.patience,
            leave_one_out=self.leave_one_out and len(self.alphas) > 1, n_folds=self.n_folds,
        )
        return on_layer(layer, head, kept, scale)

    def around(self, alpha, factor=10.0):
        """A fitter whose penalties are those of this one within ``factor`` of ``alpha``.

        The refinement moves change the layer little, so the penalty chosen for the
        layer the search found is searched again only in its neighbourhood: the long
        end of the path, at small penalties, is the expensive one.
        """
        near = tuple(a for a in self.alphas if alpha / factor <= a <= alpha * factor) or (alpha,)
        return LogisticHeads(self.X, self.labels, self.X_val, self.labels_val, self.n_classes, alphas=near,
                             max_iter=self.max_iter, tol=self.tol, patience=self.patience,
                             leave_one_out=self.leave_one_out, n_folds=self.n_folds)

    @property
    def validated(self):
        """Whether heads are judged on a validation split."""
        return self.X_val is not None

    @torch.no_grad()
    def validation_losses(self, head, layer):
        """Per-sample validation log-loss (None without a validation split)."""
        return None if self.X_val is None else head.sample_losses(layer(self.X_val), self.labels_val)

    @torch.no_grad()
    def refit(self, layer, head, loo_rows=0):
        """``head`` refitted on the training and validation rows together at its penalty (its score kept).

        ``loo_rows`` is not used: on at most ``logistic_loo_rows`` training rows the
        penalty was already chosen on held-out training rows (:class:`LogisticHeads`).
        """
        if self.X_val is None:
            return head
        refitted = logistic_head_path(layer(_joined(self.X, self.X_val)), _joined(self.labels, self.labels_val),
                                      self.n_classes, None, None, (head.alpha,), max_iter=self.max_iter,
                                      tol=self.tol, patience=self.patience)
        return dataclasses.replace(refitted, score=head.score)

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
