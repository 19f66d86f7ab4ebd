"""The fit shared by RFFNet's estimators: validate -> standardise -> split -> features -> solve.

:class:`BaseRFFNet` reads top to bottom as the data path of a fit:
:meth:`~BaseRFFNet._prepare` turns checked inputs into standardised tensors, a
validation split and a random-feature layer (a :class:`_Problem`); one of
:meth:`~BaseRFFNet._solve_varpro` and :meth:`~BaseRFFNet._solve_adam` fits it; only
then does :meth:`~BaseRFFNet._set_fitted` change the estimator. The subclasses supply
the target encoding and the loss (the ``_encode_target`` family of hooks).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.utils._param_validation import Interval, StrOptions

from ._adam import fixed_relevance_penalty, fit_alternating_adam
from ._heads import RidgeHeads
from ._kernel_or_linear import kernel_or_linear, widened
from ._progress import FitProgress
from ._rffnet_docs import LINEAR_ONLY_NOTE
from ._search import default_n_components, varpro_n_components
from ._search_refine import search_and_refine_retried
from ._settings import DEFAULT_SETTINGS
from ._warp import quantile_warp
from ._validation import (
    FLOAT32_MAX,
    LARGEST_LEARNING_RATE,
    CPUPicklingMixin,
    as_tensor,
    draw_seeds,
    fit_warning,
    inference_device,
    resolve_device,
    standardisation,
    to_numpy,
    torch_generator,
)
from .exceptions import DivergenceError
from .kernels import KERNELS
from .layers import ARDRandomFourierFeatures, RFFNetModule

__all__ = ["BaseRFFNet"]

#: Parameters that only one solver reads.
_ADAM_ONLY = ("learning_rate", "batch_size")
_VARPRO_ONLY = ("linear_term", "rescale_groups", "align_frequencies", "prune_relevances", "warp_inputs")


@dataclass
class _Problem:
    """A fit's inputs once prepared: standardised tensors, the split and the layer."""

    solver: str
    hidden: tuple
    device: torch.device
    x_mean: np.ndarray
    x_scale: np.ndarray
    target: np.ndarray
    target_state: object
    n_outputs: int
    validation_rows: np.ndarray | None
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_val: torch.Tensor | None
    y_val: torch.Tensor | None
    layer: ARDRandomFourierFeatures
    generator: torch.Generator
    #: A head fitter that judges the refinement moves instead of :meth:`BaseRFFNet._output_heads`
    #: (a streamed fit's, on every row of its source: :mod:`rffkit._rffnet_stream`).
    heads: object = None
    #: The training rows the fit stands for when ``X_train`` is a sample of them (a streamed
    #: fit); None: the rows of ``X_train``. Decides whether the search is retried
    #: (``settings.refined_retry_rows``).
    n_train_rows: int | None = None
    #: Which input columns are constant over the training rows (their relevance is set to 0).
    constant: np.ndarray | None = None
    #: The seed of ``layer``'s draws (a fit at another ``D`` draws with it).
    layer_seed: int = 0


class BaseRFFNet(CPUPicklingMixin, BaseEstimator):
    """Parameters, input handling and fit shared by the RFFNet estimators."""

    _parameter_constraints = {
        "n_components": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(KERNELS))],
        "variant": [StrOptions({"cos", "cos_sin"})],
        "linear_term": ["boolean"],
        "alpha": [Interval(numbers.Real, 0, FLOAT32_MAX, closed="both"), StrOptions({"auto"})],
        "relevance_penalty": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "rescale_groups": ["boolean"],
        "align_frequencies": ["boolean"],
        "prune_relevances": ["boolean"],
        "warp_inputs": ["boolean"],
        "hidden_layer_sizes": ["array-like"],
        "solver": [StrOptions({"auto", "adam", "varpro"})],
        "learning_rate": [Interval(numbers.Real, 0, LARGEST_LEARNING_RATE, closed="right")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "device": [str, torch.device],
        "verbose": ["verbose"],
        "memory_budget": [None, Interval(numbers.Integral, 1, None, closed="left"), str],
    }
    #: The solvers' tuning constants (:class:`rffkit._settings.RFFNetSettings`).
    _settings = DEFAULT_SETTINGS
    #: Whether a small fit also cross-validates its kernel model at ``settings.cv_wide_features``
    #: random features (:func:`rffkit._kernel_or_linear.wider_width`).
    _widens_by_cross_validation = False
    #: What a model file saved before ``warp_inputs`` existed reads back: it was fitted
    #: without input maps (``get_params``, ``repr`` and ``clone`` then work).
    warp_inputs = False
    #: Whether the loss is the squared loss, which the 'varpro' solver needs.
    _supports_varpro = False

    def __init__(
        self, *, n_components=None, kernel="gaussian", variant="cos_sin", linear_term=True, alpha="auto",
        relevance_penalty="auto",
        rescale_groups=True, align_frequencies=True, prune_relevances=True, warp_inputs=True, hidden_layer_sizes=(),
        solver="auto",
        learning_rate=1e-2, batch_size=256, max_iter=100, tol=1e-4, early_stopping=True, validation_fraction=0.1,
        n_iter_no_change=10, random_state=None, device="cpu", verbose=0, memory_budget=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.variant = variant
        self.linear_term = linear_term
        self.alpha = alpha
        self.relevance_penalty = relevance_penalty
        self.rescale_groups = rescale_groups
        self.align_frequencies = align_frequencies
        self.prune_relevances = prune_relevances
        self.warp_inputs = warp_inputs
        self.hidden_layer_sizes = hidden_layer_sizes
        self.solver = solver
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.memory_budget = memory_budget

    # -- hooks of the subclasses --------------------------------------------------------------
    def _encode_target(self, y):
        """``(target, n_outputs, target_state)``: the target as the loss sees it."""
        raise NotImplementedError

    def _target_tensor(self, target, device):
        raise NotImplementedError

    def _set_target_state(self, target_state):
        raise NotImplementedError

    def _loss_fn(self):
        raise NotImplementedError

    def _validation_score(self, outputs, target_val):
        """The estimator's score (R^2, accuracy) of model ``outputs`` (a float64 array) on ``target_val``."""
        raise NotImplementedError

    def _loss_units(self, values, target_state):
        """A loss in the user's units (identity unless the target was scaled)."""
        return values

    def _stratify(self, target):
        return None

    def _surrogate_target(self, y, n_outputs):
        """The least-squares target of the 'varpro' search for the target tensor ``y`` (None stays None)."""
        return y

    def _output_heads(self, problem, auto_alpha, surrogate_alpha, *, linear=False):
        """The model's head fitter for 'varpro' (:mod:`rffkit._heads`); None: the surrogate's ridge head.

        ``surrogate_alpha`` is the penalty of the surrogate's ridge head on the same layer;
        ``linear``: the fitter serves linear-only heads, whose penalty is chosen on the
        rows however many they are (a linear head is cheap to fit along a path).
        """
        return None

    def _warn_if_not_converged(self, history, solver, head=None, chosen=False):
        """ConvergenceWarning when a solver stopped on its iteration limit, at the user's call of ``fit``
        (:func:`~rffkit._validation.fit_warning`), whichever fit path (in memory or streamed) reports it.
        ``chosen``: the head's penalty was chosen from a grid by held-out loss (not given, nor fixed)."""
        name = type(self).__name__
        if history.stopped_on_max_iter:
            what = "Adam" if solver == "adam" else "the last stage of the relevance search (L-BFGS)"
            fit_warning(
                f"{name}: {what} stopped on max_iter={self.max_iter} while still improving; "
                "increase max_iter.",
                ConvergenceWarning,
            )
        if head is not None and not getattr(head, "converged", True):
            # under alpha='auto' the penalty was chosen by the validation loss of the head as it stands, and
            # a larger one converges but can predict worse (helper-47: 32 classes, log-loss 0.0124 -> 0.0136)
            advice = "a larger alpha helps"
            if chosen:
                advice = ("alpha='auto' chose this penalty by the validation loss of the head as it stands; a larger "
                          "fixed alpha converges, and may predict worse")
            fit_warning(
                f"{name}: the fit of the logistic head at alpha={head.alpha:g} stopped after "
                f"{head.n_iter} iterations without meeting its tolerance (nearly separable classes); {advice}.",
                ConvergenceWarning,
            )

    # -- the fit, top to bottom ---------------------------------------------------------------------
    def _fit(self, X, y):
        problem = self._prepare(X, y)
        adam = problem.solver == "adam"
        with FitProgress(type(self).__name__, self.verbose, total=self.max_iter if adam else None,
                         unit="epoch" if adam else "iteration") as progress:
            if adam:
                model, history, alpha = self._solve_adam(problem, progress)
            else:
                model, history, alpha = self._solve_varpro(problem, progress)
            model.eval()
            if not all(torch.isfinite(parameter).all() for parameter in model.parameters()):
                raise DivergenceError(
                    f"{type(self).__name__}: training produced non-finite parameters; "
                    "lower learning_rate or raise alpha."
                )
            self._set_fitted(X, problem, model, history, alpha)
            score = "none" if self.best_validation_score_ is None else f"{self.best_validation_score_:.4f}"
            progress.summary(
                f"fitted in {progress.elapsed:.1f} s: solver {self.solver_}, alpha {self.alpha_:g}, "
                f"{self.n_components_} random features, {self.n_iter_} iterations, validation score {score}"
                + (LINEAR_ONLY_NOTE if self.linear_only_ else "")
            )
        return self

    def _prepare(self, X, y):
        """Check the parameters, standardise ``X``, encode ``y``, split, draw the layer."""
        hidden = self._hidden_sizes()
        solver = self._resolve_solver(hidden)
        device = resolve_device(self.device, owner=type(self).__name__)
        split_seed, layer_seed, torch_seed = draw_seeds(self.random_state, 3)
        # standardised with training statistics, relevances compare across features whatever their units
        x_mean, x_scale, constant = standardisation(X)
        target, n_outputs, target_state = self._encode_target(y)

        n_samples = X.shape[0]
        n_val = int(math.floor(self.validation_fraction * n_samples)) if self.early_stopping else 0
        stratify = self._stratify(target) if n_val else None
        if n_val >= 2 and n_samples - n_val >= 2:
            train_rows, validation_rows = train_test_split(
                np.arange(n_samples), test_size=n_val, random_state=split_seed, stratify=stratify
            )
        else:  # too few samples to hold any out: monitor the training loss instead
            train_rows, validation_rows = np.arange(n_samples), None

        Xs = (X - x_mean) / x_scale
        tensor = lambda rows: as_tensor(Xs[rows], dtype=torch.float32, device=device)  # noqa: E731
        X_val = y_val = None
        if validation_rows is not None:
            X_val, y_val = tensor(validation_rows), self._target_tensor(target[validation_rows], device)

        n_components = self.n_components
        if n_components is None:
            n_components = (varpro_n_components if solver == "varpro" else default_n_components)(
                len(train_rows), self._settings)
        layer = self._draw_layer(X.shape[1], n_components, layer_seed, device)
        if solver == "varpro":
            self._warp_layer(layer, Xs[train_rows])
        return _Problem(
            solver, hidden, device, x_mean, x_scale, target, target_state, n_outputs, validation_rows,
            tensor(train_rows), self._target_tensor(target[train_rows], device), X_val, y_val, layer,
            torch_generator(torch_seed), constant=constant, layer_seed=layer_seed,
        )

    def _draw_layer(self, n_features, n_components, seed, device):
        """The random-feature layer of a fit: the kernel's draws, in float32, relevances at their start."""
        return ARDRandomFourierFeatures.from_kernel(
            n_features, n_components, self.kernel, random_state=seed, dtype=torch.float32, device=device,
            variant=self.variant,
        )

    def _warp_layer(self, layer, X_train, bounds=None):
        """Give ``layer`` the quantile maps of the heavy-tailed columns of ``X_train`` (standardised), if any.

        ``bounds``: the range of every column over all rows, when ``X_train`` is a sample
        (see :func:`rffkit._warp.quantile_warp`).
        """
        settings = self._settings
        if not self.warp_inputs:
            return layer
        warp = quantile_warp(X_train, min_kurtosis=settings.warp_kurtosis, min_distinct=settings.warp_min_distinct,
                             n_knots=settings.warp_knots, max_tie=settings.warp_max_tie, bounds=bounds)
        return layer if warp is None else layer.set_input_warp(*warp)

    def _solve_varpro(self, problem, progress):
        """Relevance search, head, refinement moves: ``(model, history, alpha)``.

        The search and the screening of the refinement moves fit ridge on the
        least-squares target (:meth:`_surrogate_target`); the model's head is the one
        :meth:`_output_heads` fits (ridge for the regressor, logistic for the
        classifier), and with a validation split that head judges the refinement moves.
        On a training split of a few thousand rows the search and the moves run again at
        larger penalties and the lower validation loss wins
        (:func:`rffkit._search_refine.search_and_refine_retried`).
        """
        p, settings = problem, self._settings
        auto_alpha = isinstance(self.alpha, str)
        y_train, y_val = self._surrogate_target(p.y_train, p.n_outputs), self._surrogate_target(p.y_val, p.n_outputs)
        alpha = settings.default_alpha if auto_alpha else float(self.alpha)
        draws = p.generator.get_state()
        kept = search_and_refine_retried(self, p, y_train, y_val, alpha, auto_alpha, progress)
        found, layer, head, judge, full_path, surrogate = kept
        reduced = False
        if self.linear_term and settings.reduce_linear:
            progress.stage("the linear model")
            layer, head, reduced, width = kernel_or_linear(
                self, p, full_path, layer, head,
                lambda X, y: self._all_row_heads(p, X, y, auto_alpha, found.alpha), progress)
            if width is not None:  # cross-validation kept the kernel model at a wider D: the fit at that D
                progress.stage(f"{width} random features")
                p = widened(self, p, width)
                p.generator.set_state(draws)
                kept = search_and_refine_retried(self, p, y_train, y_val, alpha, auto_alpha, progress)
                found, layer, head, judge, full_path, surrogate = kept
        heads = judge
        if p.X_val is None:
            heads = self._output_heads(p, auto_alpha, head.alpha) or surrogate
            if heads is not surrogate and not reduced:  # a reduced model keeps its linear-only head
                progress.stage("head")
                head = heads.fit(layer)
        model = RFFNetModule(layer, p.hidden, p.n_outputs, p.generator)
        heads.install(model, head)
        history = found.history
        # the penalty is chosen on validation, or (without a split) by cross-validation when the heads hold a grid
        chosen = auto_alpha and (p.X_val is not None or len(getattr(heads, "alphas", ())) > 1)
        self._warn_if_not_converged(history, "varpro", head, chosen)
        if p.X_val is not None:
            with torch.no_grad():
                outputs = model(p.X_val)
                final = float(self._loss_fn()(outputs, p.y_val))
            history.validation_loss.append(final)
            history.best_validation_loss = final
            history.best_validation_score = self._validation_score(
                to_numpy(outputs).astype(np.float64), to_numpy(p.y_val))
            # nothing is judged on the validation rows any more: the head learns from them too
            # (a reduced model's linear head is left as chosen; a streamed fit refits its own head)
            n_rows = p.X_train.shape[0] + p.X_val.shape[0]
            if settings.refit_head and n_rows <= settings.refit_head_rows and not reduced and p.heads is None:
                progress.stage("head on all rows")
                head = heads.refit(layer, head, loo_rows=settings.ridge_loo_rows)
                heads.install(model, head)
        return model, history, head.alpha

    def _all_row_heads(self, problem, X, y, auto_alpha, surrogate_alpha):
        """The fitter of linear-only heads on the rows ``(X, y)`` (target tensor), without a validation split."""
        rows = dataclasses.replace(problem, X_train=X, y_train=y, X_val=None, y_val=None)
        return self._output_heads(rows, auto_alpha, surrogate_alpha, linear=True) or RidgeHeads(
            X, self._surrogate_target(y, problem.n_outputs), None, None,
            alpha="auto" if auto_alpha else float(self.alpha), alphas=self._settings.alpha_grid)

    def _solve_adam(self, problem, progress):
        """Algorithm 1 on the whole network: ``(model, history, alpha)``."""
        p = problem
        alpha = self._settings.default_alpha if isinstance(self.alpha, str) else float(self.alpha)
        model = RFFNetModule(p.layer, p.hidden, p.n_outputs, p.generator)
        progress.stage("Adam epochs")

        def report(epoch, train, score):
            progress.step(f"epoch {epoch}: train loss {train:.5f}, validation loss {score:.5f}",
                          train=f"{train:.4g}", validation=f"{score:.4g}")

        history = fit_alternating_adam(
            model, self._loss_fn(), p.X_train, p.y_train, p.X_val, p.y_val,
            alpha=alpha, learning_rate=self.learning_rate, batch_size=self.batch_size, max_iter=self.max_iter,
            n_iter_no_change=self.n_iter_no_change if self.early_stopping else None, tol=self.tol,
            generator=p.generator, penalised=[model.first_linear.weight], relevances=p.layer.relevances,
            relevance_penalty=fixed_relevance_penalty(self.relevance_penalty),
            convergence_patience=self.n_iter_no_change, settings=self._settings, progress=report,
        )
        self._warn_if_not_converged(history, "adam")
        return model, history, alpha

    def _set_fitted(self, X, problem, model, history, alpha, x_range=None):
        """Everything succeeded: only now does the estimator change.

        The model's random features clamp their inputs to the range of the training rows,
        ``x_range`` (minimum, maximum; from ``X`` when not given).
        """
        p = problem
        if x_range is None and X is not None:
            x_range = np.min(X, axis=0), np.max(X, axis=0)
        self._x_mean, self._x_scale = p.x_mean, p.x_scale
        self._set_target_state(p.target_state)
        # inference runs in float64: batch-invariant, no float32 rounding in the predictions
        self.model_ = model.to("cpu").double()
        if x_range is not None:
            self.model_.rff.set_input_range(*((np.asarray(bound, dtype=np.float64) - p.x_mean) / p.x_scale
                                              for bound in x_range))
        self._device = p.device
        self.solver_ = p.solver
        self.alpha_ = alpha
        self.n_components_ = model.rff.n_components
        if p.constant is not None and p.constant.any():
            # a constant column is zero once standardised: no signal, and its relevance never left its start
            with torch.no_grad():
                self.model_.rff.relevances[torch.as_tensor(p.constant)] = 0.0
        self.relevances_ = to_numpy(self.model_.rff.relevances).astype(np.float64)
        peak = np.max(np.abs(self.relevances_))
        self.feature_importances_ = np.abs(self.relevances_) / peak if peak > 0 else np.zeros_like(self.relevances_)
        self.n_iter_ = history.n_iter
        self.linear_only_ = _linear_only(self.model_)
        to_units = lambda values: self._loss_units(np.asarray(values, dtype=np.float64), p.target_state)  # noqa: E731
        self.loss_curve_ = to_units(history.train_loss)
        self.validation_loss_curve_ = to_units(history.validation_loss)
        self.best_validation_loss_ = float(to_units(history.best_validation_loss))
        rows = p.validation_rows
        self.best_validation_score_ = history.best_validation_score
        if self.best_validation_score_ is None and rows is not None:
            self.best_validation_score_ = self._validation_score(self._forward(X[rows]), p.target[rows])
        return self

    # -- checks and helpers -------------------------------------------------------------------------
    def _hidden_sizes(self):
        given = np.atleast_1d(np.asarray(self.hidden_layer_sizes, dtype=object)).tolist()
        whole = all(isinstance(h, (int, np.integer)) and not isinstance(h, bool) for h in given)
        sizes = tuple(int(h) for h in given) if whole else ()
        if not whole or any(h < 1 for h in sizes):
            raise ValueError(
                f"{type(self).__name__}: hidden_layer_sizes must hold positive integers, "
                f"got {self.hidden_layer_sizes!r}."
            )
        return sizes

    def _resolve_solver(self, hidden_sizes):
        """The solver 'auto' stands for; warns about set parameters the solver ignores."""
        solver = self.solver
        if solver == "auto":
            solver = "varpro" if self._supports_varpro and not hidden_sizes else "adam"
        if solver == "varpro" and (not self._supports_varpro or hidden_sizes):
            raise ValueError(
                f"{type(self).__name__}: solver='varpro' eliminates beta in closed form, which needs the squared "
                "loss and a linear head (hidden_layer_sizes=()); use solver='adam'."
            )
        defaults = {name: p.default for name, p in inspect.signature(BaseRFFNet.__init__).parameters.items()}
        for name in _VARPRO_ONLY if solver == "adam" else _ADAM_ONLY:
            if getattr(self, name) != defaults[name]:
                fit_warning(
                    f"{type(self).__name__}: {name}={getattr(self, name)!r} applies to "
                    f"solver={'varpro' if solver == 'adam' else 'adam'!r} only; the solver used, {solver!r}, "
                    "ignores it.",
                    UserWarning,
                )
        return solver

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified by the input check: the kernel's inputs are dense
        return tags

    def _standardise(self, X):
        return (X - self._x_mean) / self._x_scale

    def _forward(self, X):
        """Model outputs for validated raw ``X``, as a float64 array, a chunk of rows at a time."""
        Xs = self._standardise(X)
        device = inference_device(self._device)
        model = self.model_.to(device)
        outputs = []
        chunk = self._settings.predict_chunk_rows
        with torch.no_grad():
            for start in range(0, Xs.shape[0], chunk):
                rows = as_tensor(Xs[start : start + chunk], dtype=torch.float64, device=device)
                outputs.append(to_numpy(model(rows)))
        self.model_.to("cpu")
        return np.concatenate(outputs).astype(np.float64)


def _linear_only(model):
    """Whether ``model`` is RFFNet's linear-only model: linear columns, a linear head, zero random-feature weights."""
    layer = model.rff
    if not layer.has_linear or len(model.head) != 1:
        return False
    return bool(torch.all(model.first_linear.weight[:, : layer.n_components] == 0))
