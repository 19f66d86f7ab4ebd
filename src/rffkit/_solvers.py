"""Optimisation of RFFNet's objective (10): tensors in, tensors out.

    minimise_{beta, lambda}  (1/n) sum_i loss(y_i, beta^T z(lambda o x_i) + c) + alpha ||beta||^2

Two solvers share one result type:

* :func:`fit_alternating_adam` -- Algorithm 1 of Otto & Izbicki: on every mini-batch one
  Adam step on the head (beta, c) and then one Adam step on lambda, with early stopping
  on a validation split and restore of the best state. Works for any loss and head.
* :func:`fit_variable_projection` -- squared loss only. For fixed lambda the optimal
  beta is a ridge solution in closed form, so beta is eliminated and the reduced
  objective f(lambda) = min_beta objective(beta, lambda) is minimised by L-BFGS. By the
  envelope theorem grad f(lambda) = d objective / d lambda at beta*(lambda), so one
  back-propagation with beta held fixed gives the exact gradient. L-BFGS runs on a
  coarse-to-fine schedule of nested subsamples (with s = floor(sqrt(m) log m) features
  at each size m, the default rule of the paper) and beta is solved on all training
  data at the end.

Around the variable-projection search: :func:`fit_ridge_head` fits the final head,
:func:`refine_layer` tries moves no gradient step makes (relevance groups at
larger values, frequencies aligned with the target), and :func:`marginal_r2` gives a
per-feature start for a second search when the first learns nothing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ._ridge_path import RidgeSpectrum, gcv_path, ridge_coefficients

__all__ = [
    "FitHistory",
    "ridge_solve",
    "select_ridge_alpha",
    "fit_alternating_adam",
    "fit_variable_projection",
    "relevance_groups",
    "refine_layer",
    "fit_ridge_head",
    "target_spectrum",
    "marginal_r2",
    "default_n_features",
]

#: Cap on the default number of random features: floor(sqrt(n) log n) passes 4,000 at
#: n ~ 140,000, where one n x s feature matrix alone takes over 2 GB in float32.
MAX_DEFAULT_FEATURES = 4000


def default_n_features(n_samples):
    """``floor(sqrt(n) log n)`` (Li et al., 2018), at least 10 and at most 4,000."""
    n = max(int(n_samples), 2)
    return int(min(MAX_DEFAULT_FEATURES, max(10, math.floor(math.sqrt(n) * math.log(n)))))


@dataclass
class FitHistory:
    """What a solver reports back; ``state`` is a deep copy of the best parameters."""

    state: dict
    train_loss: list = field(default_factory=list)
    validation_loss: list = field(default_factory=list)
    best_validation_loss: float = math.inf
    n_iter: int = 0


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss that lowering the step did not cure."""


def _snapshot(module):
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}


def ridge_solve(Z, y, alpha):
    """Minimise ``mean((Z beta + c - y)^2) + alpha ||beta||^2`` over ``beta, c``.

    The Gram matrix is accumulated in the dtype of ``Z`` and solved by a float64
    Cholesky factorisation. Returns ``(beta, c)`` in the dtype of ``Z``.
    """
    n = Z.shape[0]
    z_mean = Z.mean(dim=0)
    y_mean = y.mean(dim=0)
    Zc = Z - z_mean
    gram = (Zc.T @ Zc).double() / n
    gram.diagonal().add_(alpha)
    rhs = (Zc.T @ (y - y_mean)).double() / n
    factor, info = torch.linalg.cholesky_ex(gram)
    if int(info) != 0:  # numerically singular: fall back on a least-squares solve
        beta = torch.linalg.lstsq(gram, rhs.unsqueeze(-1) if rhs.ndim == 1 else rhs).solution
        beta = beta.reshape(rhs.shape)
    else:
        beta = torch.cholesky_solve(rhs.unsqueeze(-1) if rhs.ndim == 1 else rhs, factor).reshape(rhs.shape)
    beta = beta.to(Z.dtype)
    return beta, y_mean - z_mean @ beta


#: The grid searched when ``alpha='auto'``: half-decades from 1e-8 to 1 (the target is
#: in standard units and the feature Gram matrix has trace about 1).
ALPHA_GRID = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))


@torch.no_grad()
def select_ridge_alpha(Z, y, Z_val=None, y_val=None, alphas=ALPHA_GRID):
    """Ridge fits of ``mean((Z beta + c - y)^2) + alpha ||beta||^2`` for every alpha.

    One eigendecomposition of the centred Gram matrix serves the whole grid (the path
    of :mod:`rffkit._ridge_path`, which works on the sum of squares, hence the
    penalties ``n alpha``). The best alpha minimises the mean squared error on
    ``(Z_val, y_val)`` or, without a validation set, the GCV score of
    :func:`gcv_objective`. Ties go to the largest alpha. ``y`` has shape (n, k) or
    (n,); returns ``(alpha, beta, c, score)`` with ``beta, c`` in the dtype of ``Z``.
    """
    n = Z.shape[0]
    squeeze = y.ndim == 1
    y = y.reshape(n, -1)
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    Zc, yc = Z - z_mean, y - y_mean
    # the n s^2 products run in the dtype of Z, the s x s eigendecomposition in float64
    eigenvalues, V = torch.linalg.eigh((Zc.T @ Zc).double())
    spectrum = RidgeSpectrum(
        form="primal",
        eigenvalues=eigenvalues.clamp_min(0.0),
        eigenvectors=V,
        projections=V.T @ (Zc.T @ yc).double(),
        y_norm2=(yc.double() ** 2).sum(dim=0),
        n_samples=n,
        intercept=False,  # centred here; like gcv_objective, df does not count the intercept
        feature_mean=z_mean.cpu().numpy(),
        target_mean=y_mean.cpu().numpy(),
    )
    penalties = [n * alpha for alpha in alphas]
    if Z_val is None:
        scores = gcv_path(spectrum, penalties).mean(dim=1).tolist()
    else:
        Zv = (Z_val - z_mean).double()
        target = (y_val.reshape(Z_val.shape[0], -1) - y_mean).double()
        scores = [float(((Zv @ ridge_coefficients(spectrum, a) - target) ** 2).mean()) for a in penalties]
    finite = [k for k in range(len(alphas)) if math.isfinite(scores[k])]
    # every score non-finite: fall back on the largest alpha
    best = min(finite, key=lambda k: (scores[k], -alphas[k])) if finite else int(np.argmax(alphas))
    beta = ridge_coefficients(spectrum, penalties[best]).to(Z.dtype)
    c = y_mean - z_mean @ beta
    if squeeze:
        beta, c = beta[:, 0], c[0]
    return alphas[best], beta, c, scores[best]


def _batches(n, batch_size, generator, device):
    order = torch.randperm(n, generator=generator).to(device)
    return order.split(batch_size)


@torch.no_grad()
def _mean_loss(model, loss_fn, X, y, batch_size=8192):
    total = 0.0
    for start in range(0, X.shape[0], batch_size):
        out = model(X[start : start + batch_size])
        total += float(loss_fn(out, y[start : start + batch_size])) * out.shape[0]
    return total / X.shape[0]


def fit_alternating_adam(
    model,
    loss_fn,
    X,
    y,
    X_val,
    y_val,
    *,
    alpha,
    learning_rate,
    batch_size,
    max_iter,
    n_iter_no_change,
    tol,
    generator,
    penalised,
    relevances,
    relevance_penalty=0.0,
    single_block=False,
    optimizer="adam",
    verbose=0,
    log=print,
):
    """Algorithm 1: alternating Adam steps on the head and on the relevances.

    ``penalised`` are the weight tensors that carry ``alpha ||.||^2``; ``relevances``
    is the lambda parameter. Every epoch the (validation, or training when ``X_val``
    is None) loss is recorded; after ``n_iter_no_change`` epochs without an
    improvement of at least ``tol`` training stops and the best state is restored.
    A non-finite loss restores the best state and halves the step (at most 5 times).
    ``single_block=True`` updates all parameters with one optimiser (the ablation's
    "single block"); ``optimizer='sgd'`` swaps Adam for plain SGD.
    ``relevance_penalty`` adds ``penalty ||lambda||_1``, applied after every step on
    lambda by its proximal map, soft-thresholding at ``learning_rate * penalty``, so
    relevances reach exactly zero (Otto & Izbicki §3.5).
    """
    head_params = [p for p in model.parameters() if p is not relevances]
    make = (lambda ps, lr: torch.optim.Adam(ps, lr=lr)) if optimizer == "adam" else (
        lambda ps, lr: torch.optim.SGD(ps, lr=lr)
    )

    def build(lr):
        if single_block:
            return [make(head_params + [relevances], lr)]
        return [make(head_params, lr), make([relevances], lr)]

    def objective(xb, yb):
        loss = loss_fn(model(xb), yb)
        return loss + alpha * sum((w * w).sum() for w in penalised)

    lr = learning_rate
    optimisers = build(lr)
    history = FitHistory(state=_snapshot(model))
    best, stall, restarts = math.inf, 0, 0
    monitor_X, monitor_y = (X_val, y_val) if X_val is not None else (X, y)
    epoch = 0
    while epoch < max_iter:
        model.train()
        running, seen, finite = 0.0, 0, True
        for idx in _batches(X.shape[0], batch_size, generator, X.device):
            xb, yb = X[idx], y[idx]
            for opt in optimisers:
                opt.zero_grad(set_to_none=True)
                loss = objective(xb, yb)
                loss.backward()
                opt.step()
            if relevance_penalty > 0:
                with torch.no_grad():
                    shrunk = relevances.abs() - lr * relevance_penalty
                    relevances.copy_(torch.sign(relevances) * shrunk.clamp_min(0.0))
            if not torch.isfinite(loss):
                finite = False
                break
            running += float(loss.detach()) * idx.shape[0]
            seen += idx.shape[0]
        model.eval()
        score = _mean_loss(model, loss_fn, monitor_X, monitor_y) if finite else math.nan
        if not math.isfinite(score):
            restarts += 1
            if restarts > 5:
                raise DivergenceError(
                    f"training diverged (non-finite loss) even after lowering the learning "
                    f"rate to {lr:.3g}; lower learning_rate or standardise the inputs."
                )
            model.load_state_dict(history.state)
            lr /= 2.0
            optimisers = build(lr)
            if verbose:
                log(f"epoch {epoch + 1}: non-finite loss, restoring best state, learning_rate -> {lr:.3g}")
            continue
        epoch += 1
        history.train_loss.append(running / max(seen, 1))
        history.validation_loss.append(score)
        if verbose:
            log(f"epoch {epoch}: train loss {history.train_loss[-1]:.5f}, validation loss {score:.5f}")
        if score < best - tol * max(abs(best), 1e-12) if math.isfinite(best) else True:
            best, stall = score, 0
            history.state = _snapshot(model)
            history.best_validation_loss = score
        else:
            stall += 1
            if n_iter_no_change is not None and stall >= n_iter_no_change:
                break
    history.n_iter = epoch
    model.load_state_dict(history.state)
    return history


def gcv_objective(Z, y, alpha):
    """Generalised cross-validation score of the ridge fit on ``Z`` (differentiable).

    ``GCV = mean(r^2) / (1 - df / m)^2`` with ``df = tr(Z (Z^T Z + m alpha I)^-1 Z^T)``
    (Golub, Heath & Wahba, 1979), ``r`` the ridge residuals: the training error
    inflated by the effective number of parameters, a rotation-invariant leave-one-out
    estimate. Unlike the training objective it does not reward relevances that let
    the features fit noise, which matters when ``m`` is not much larger than ``s``;
    when ``df << m`` both agree. Returns ``(score, beta, c)``.
    """
    m, s = Z.shape
    z_mean, y_mean = Z.mean(dim=0), y.mean(dim=0)
    Zc, yc = Z - z_mean, y - y_mean
    eye = torch.eye(s, dtype=torch.float64, device=Z.device)
    # the m s^2 products run in the input dtype (float32 is twice as fast); the s x s
    # algebra in float64
    factor = torch.linalg.cholesky((Zc.T @ Zc).double() / m + alpha * eye)
    beta = torch.cholesky_solve((Zc.T @ yc).double() / m, factor).to(Z.dtype)
    residual = Zc @ beta - yc
    inverse_factor = torch.linalg.solve_triangular(factor, eye, upper=False)
    df = s - alpha * (inverse_factor * inverse_factor).sum()
    score = (residual * residual).mean() / (1.0 - df / m) ** 2
    return score.to(Z.dtype), beta, y_mean - z_mean @ beta


#: Rows of the first (smallest) stage of the coarse-to-fine relevance search.
FIRST_STAGE_ROWS = 2000


def _stage_evaluations(m, s, flop_budget):
    """GCV evaluations (with gradient, about ``4 m s^2`` flops each) a stage can afford."""
    return int(flop_budget / (4.0 * m * s * s))


def _schedule(n_train, n_components, first=FIRST_STAGE_ROWS, factor=4, flop_budget=None, min_evaluations=10):
    """Nested subsample sizes and feature counts, coarse to fine.

    Without ``flop_budget`` the sizes grow by ``factor`` and end at full size. With
    it, a stage after the first that cannot afford ``min_evaluations`` evaluations
    (``4 m s^2`` flops each) runs on the largest subsample that can instead, or is
    dropped when that is under 1.5 times the previous stage: a training set just
    above the affordable size still gets a fine stage (10k rows searched on 9.4k,
    not on the first stage's 2,000 alone).
    """
    features = lambda m: min(n_components, default_n_features(m))  # noqa: E731
    sizes, m = [], min(first, n_train)
    while True:
        sizes.append(m)
        if m >= n_train:
            break
        m = min(n_train, m * factor)
        if n_train - m < m // 2:  # avoid a last stage barely larger than the previous
            m = n_train
    if flop_budget is None:
        return [(m, features(m)) for m in sizes]
    affordable = lambda m: _stage_evaluations(m, features(m), flop_budget) >= min_evaluations  # noqa: E731
    stages = [(sizes[0], features(sizes[0]))]
    for m in sizes[1:]:
        if not affordable(m):
            low, high = stages[-1][0], m  # largest affordable size, by bisection
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if affordable(middle) else (low, middle)
            if low < 1.5 * stages[-1][0]:
                continue
            m = low
        stages.append((m, features(m)))
    return stages


def fit_variable_projection(
    layer,
    X,
    y,
    X_val,
    y_val,
    *,
    alpha,
    max_iter,
    n_iter_no_change,
    tol,
    generator,
    relevance_penalty=0.0,
    flop_budget=3e11,
    verbose=0,
    log=print,
):
    """Variable projection: L-BFGS on the relevances, beta eliminated, coarse to fine.

    For fixed relevances the ridge coefficients are a closed-form function of them, so
    only ``lambda`` is optimised, on the GCV score of the ridge fit
    (:func:`gcv_objective`, exact gradient by back-propagation), by SciPy's L-BFGS-B.
    (torch's L-BFGS stalled in its line search from small initial relevances on SE1;
    SciPy's More-Thuente search did not.) Stages run on nested subsamples of growing
    size ``m`` with ``s = floor(sqrt(m) log m)`` features (the first ``s`` columns of
    the layer's draw); each stage starts from the best relevances so far.

    Parameters
    ----------
    layer : ARDRandomFourierFeatures
        Its ``relevances`` are optimised in place.
    X, y : Tensor
        Training data, ``y`` of shape (n, k).
    X_val, y_val : Tensor or None
        Validation split: every iteration is scored on it and the best relevances are
        kept (``None`` keeps the best GCV score instead).
    alpha : float
        Ridge penalty of the GCV objective.
    max_iter : int
        Most L-BFGS iterations at any one stage.
    n_iter_no_change, tol : int, float
        A stage ends after ``n_iter_no_change`` iterations without a relative
        improvement of ``tol`` in the validation score.
    relevance_penalty : float
        Adds ``penalty ||lambda||_1``. As the kernel depends on ``|lambda|`` only, this
        is solved exactly as ``GCV + penalty * sum(lambda)`` under ``lambda >= 0`` by
        L-BFGS-B's bound constraints (projected quasi-Newton), so irrelevant features
        end at exactly 0.
    flop_budget : float
        Floating-point operations allowed per stage. One evaluation with its gradient
        costs about ``4 m s^2``, so a stage may evaluate ``budget / (4 m s^2)`` times;
        a stage that cannot afford 10 evaluations runs on the largest subsample that
        can, or is skipped when that is not 1.5 times the previous stage (the caller
        solves beta on all data at the end).

    Returns
    -------
    history : FitHistory
        ``state`` holds the best relevances.
    """
    from scipy.optimize import minimize

    n_train = X.shape[0]
    start_time = time.perf_counter()
    order = torch.randperm(n_train, generator=generator).to(X.device)
    lam = layer.relevances
    history = FitHistory(state=_snapshot(layer))
    tracker = {"best": math.inf, "iterations": 0}

    for m, s in _schedule(n_train, layer.n_components, flop_budget=flop_budget):
        max_evaluations = _stage_evaluations(m, s, flop_budget)
        idx = order[:m]
        Xs, ys = X[idx], y[idx]
        evaluated = {}

        def objective(values):
            with torch.no_grad():
                lam.copy_(torch.as_tensor(values, dtype=lam.dtype, device=lam.device))
            lam.grad = None
            loss, beta, c = gcv_objective(layer(Xs, s), ys, alpha)
            if relevance_penalty > 0:
                loss = loss + relevance_penalty * lam.sum()
            loss.backward()
            value = float(loss.detach())
            evaluated[values.tobytes()] = (value, beta.detach(), c.detach())
            if not math.isfinite(value):
                raise FloatingPointError
            return value, lam.grad.detach().double().cpu().numpy()

        stage_state = {"best": math.inf, "stall": 0}

        def callback(intermediate_result):
            values = intermediate_result.x
            gcv, beta, c = evaluated.get(values.tobytes()) or (None, None, None)
            if beta is None:  # not evaluated at exactly this point (rare): refit
                objective(values)
                gcv, beta, c = evaluated[values.tobytes()]
            with torch.no_grad():
                lam.copy_(torch.as_tensor(values, dtype=lam.dtype, device=lam.device))
                if X_val is not None:
                    residual = layer(X_val, s) @ beta + c - y_val
                    score = float((residual * residual).mean())
                else:
                    score = gcv
            evaluated.clear()
            tracker["iterations"] += 1
            history.train_loss.append(gcv)
            history.validation_loss.append(score)
            if verbose:
                log(
                    f"stage m={m} s={s}: GCV {gcv:.5f}, validation MSE {score:.5f} "
                    f"({time.perf_counter() - start_time:.1f} s)"
                )
            if score < tracker["best"]:
                tracker["best"] = score
                history.state = _snapshot(layer)
                history.best_validation_loss = score
            if score < stage_state["best"] - tol * abs(stage_state["best"]) or not math.isfinite(stage_state["best"]):
                stage_state["best"], stage_state["stall"] = score, 0
            else:
                stage_state["stall"] += 1
                if n_iter_no_change is not None and stage_state["stall"] >= n_iter_no_change:
                    raise StopIteration

        start = lam.detach().double().cpu().numpy()
        bounds = None
        if relevance_penalty > 0:
            start = np.abs(start)
            bounds = [(0.0, None)] * start.shape[0]
        try:
            minimize(
                objective, start, jac=True, method="L-BFGS-B", callback=callback, bounds=bounds,
                options={"maxiter": max_iter, "maxfun": max(max_evaluations, 10)},
            )
        except FloatingPointError:
            pass  # left the valid region: keep the best state found
        layer.load_state_dict(history.state)  # the next stage starts from the best so far
    history.n_iter = tracker["iterations"]
    return history


@torch.no_grad()
def fit_ridge_head(Z, y, Z_val, y_val, alpha):
    """Ridge head on ``Z`` and its score: ``(alpha, beta, c, score)``.

    ``alpha='auto'`` chooses the penalty with :func:`select_ridge_alpha`; a number is
    used as given. The score is the MSE on ``(Z_val, y_val)``, or the GCV score
    without a validation split.
    """
    if isinstance(alpha, str):
        return select_ridge_alpha(Z, y, Z_val, y_val)
    if Z_val is None:
        score, beta, c = gcv_objective(Z, y, alpha)
        return alpha, beta, c, float(score)
    beta, c = ridge_solve(Z, y, alpha)
    residual = Z_val @ beta + c - y_val
    return alpha, beta, c, float((residual * residual).mean())


def relevance_groups(relevances, *, gap=1.5, floor=0.1, max_groups=6):
    """Sets of relevant features to rescale together, as lists of indices.

    The features whose ``|relevance|`` is at least ``floor`` times the largest count
    as relevant. Two kinds of set are returned, without repeats and at most
    ``max_groups`` of them: runs of similar magnitude (the sorted magnitudes cut
    wherever one is more than ``gap`` times the next), because features that act
    together, like x1 and x3 in SE1's ``sin((x1 + x3)^2)``, end a gradient search with
    similar relevances; and the weakest ``k`` relevant features for ``k >= 2``, because
    partners can also end apart (0.23 and 0.45 on one SE1 draw), and the features
    the search left smoothest are the ones a too-smooth plateau holds back.
    """
    magnitude = np.abs(np.asarray(relevances, dtype=np.float64))
    top = magnitude.max(initial=0.0)
    if not top > 0:
        return []
    order = [int(i) for i in np.argsort(-magnitude, kind="stable") if magnitude[i] >= floor * top]
    runs, current = [], [order[0]]
    for previous, index in zip(order[:-1], order[1:]):
        if magnitude[previous] > gap * magnitude[index]:
            runs.append(current)
            current = []
        current.append(index)
    runs.append(current)
    weakest = [order[-k:] for k in range(2, len(order))]
    groups = []
    for group in runs + weakest:
        if sorted(group) not in [sorted(g) for g in groups]:
            groups.append(group)
    return groups[:max_groups]


@torch.no_grad()
def target_spectrum(X, y, frequencies, *, chunk=4096):
    """Empirical Fourier transform of the centred target at each frequency.

    For every column ``w`` of ``frequencies`` returns ``(C, S)`` with
    ``C = sum_i (y_i - ybar) cos(w^T x_i) / n`` and ``S`` the same with ``sin``, so
    ``C^2 + S^2 = |sum_i (y_i - ybar) exp(i w^T x_i)|^2 / n^2`` is the squared
    covariance of the pair ``(cos, sin)`` with ``y``: the alignment of the
    random-feature kernel ``cos(w^T (x - x'))`` with the target (Cristianini et al.,
    2002). ``y`` has shape (n, k); ``C`` and ``S`` have shape (n_frequencies, k).
    The ``n x chunk`` projections are formed a chunk of columns at a time.
    """
    n = X.shape[0]
    yc = (y - y.mean(dim=0)) / n
    cos_sums, sin_sums = [], []
    for block in frequencies.split(chunk, dim=1):
        projection = X @ block
        cos_sums.append(torch.cos(projection).T @ yc)
        sin_sums.append(torch.sin(projection).T @ yc)
    return torch.cat(cos_sums), torch.cat(sin_sums)


#: Multipliers tried on each relevance group by :func:`refine_layer`.
RESCALE_FACTORS = (2.5, 5.0)
#: Relevance multipliers at which :func:`refine_layer` selects aligned frequencies.
ALIGN_SCALES = (1.0, 1.5, 2.0, 3.0)
#: Candidate frequencies drawn per frequency kept, at most (see ``flop_budget``).
ALIGN_POOL = 64
#: Fractions of the largest relevance under which the pruning move zeroes relevances.
PRUNE_FRACTIONS = (0.1, 0.2, 0.3)


def _layer_state(layer):
    return layer.frequencies, layer.offsets, layer.relevances.detach().clone()


def _install(layer, state):
    layer.frequencies, layer.offsets = state[0], state[1]
    layer.relevances.copy_(state[2])


def _rescale_candidates(layer, factors):
    """Relevance vectors with one group of :func:`relevance_groups` set higher."""
    start = layer.relevances.detach().clone()
    for group in relevance_groups(start.cpu().numpy()):
        for factor in factors:
            candidate = start.clone()
            candidate[group] = factor * start[group].abs().max()
            yield (layer.frequencies, layer.offsets, candidate)


def _aligned_candidates(layer, X, y, sample_frequencies, scales, pool, flop_budget, generator):
    """Layers whose frequencies are the best-aligned of a larger draw, one per scale."""
    n_features, kept = layer.frequencies.shape
    affordable = int(flop_budget / (2.0 * X.shape[0] * n_features * kept))
    size = max(4, min(pool, affordable)) * kept
    rng = np.random.default_rng(int(torch.randint(2**31 - 1, (1,), generator=generator)))
    dtype, device = layer.frequencies.dtype, layer.frequencies.device
    draw = torch.as_tensor(sample_frequencies(rng, n_features, size), dtype=dtype, device=device)
    if layer.variant == "cos":
        phases = torch.as_tensor(rng.uniform(0.0, 2.0 * np.pi, size), dtype=dtype, device=device)
    else:
        phases = torch.zeros(size, dtype=dtype, device=device)
    start = layer.relevances.detach().clone()
    for scale in scales:
        relevances = scale * start
        cos_sums, sin_sums = target_spectrum(X * relevances, y, draw)
        if layer.variant == "cos":  # cos(w x + b) = cos b cos(w x) - sin b sin(w x)
            score = ((phases.cos()[:, None] * cos_sums - phases.sin()[:, None] * sin_sums) ** 2).sum(dim=1)
        else:
            score = (cos_sums**2 + sin_sums**2).sum(dim=1)
        top = torch.topk(score, kept).indices
        yield (draw[:, top].contiguous(), phases[top].contiguous(), relevances)


@torch.no_grad()
def refine_layer(
    layer, X, y, X_val, y_val, head, *, search_alpha, head_alpha, generator,
    rescale_groups=True, sample_frequencies=None, screen_rows=8_000, margin=0.01,
    factors=RESCALE_FACTORS, scales=ALIGN_SCALES, pool=ALIGN_POOL, score_rows=2_000, flop_budget=3e10,
    prune_fractions=(),
):
    """Moves the relevance search cannot make, screened on a subsample, confirmed once.

    **Group rescaling** (``rescale_groups``). A gradient search from small relevances
    can stop on a plateau where the kernel is too smooth to resolve a fast-varying
    component, which it then treats as noise: on SE1 the factor ``sin((x1 + x3)^2)``
    is invisible below relevance ~1 on x1 and x3, the validation error is flat there,
    and it falls by a sixth at 2.5 (``benchmarks/results/se1_landscape.md``). No local
    move sees that, and moving one feature alone does not help when features act
    together. So each set of :func:`relevance_groups` in turn is set to ``factor``
    times its largest relevance, for each of ``factors``.

    **Aligned frequencies** (``sample_frequencies`` given, and a validation split).
    The search leaves relevances that suit the layer's ``m`` iid draws from the
    kernel's spectral density, most of which are wasted on a function that varies
    along few directions: SE2's ``log((x11 + ... + x15)^2)`` varies only along the
    sum, and a frequency with a large component across it averages the target out.
    So ``pool * m`` candidates are drawn from the same density and, at relevances
    ``scale * lambda`` for each of ``scales``, the ``m`` whose ``(cos, sin)`` pair
    covaries most with the target on ``score_rows`` training rows
    (:func:`target_spectrum`) are kept: the random-feature form of kernel-alignment
    learning (Sinha & Duchi, 2016), with the top of the pool instead of a
    reweighting. Larger scales give the pool the high frequencies that sharp
    features need; the selection drops those that do not align. The pool shrinks so
    that scoring one scale costs at most ``flop_budget`` (at least 4 candidates per
    kept frequency). Without a validation split this move is skipped: the selection
    has seen the training target, so no training-set score can judge it.

    Every candidate is screened with all the layer's features (the smooth model wins
    with few of them, which is how the coarse-to-fine search gets there) on
    ``screen_rows`` training rows: validation MSE of the ridge fit at
    ``search_alpha`` (GCV without a validation split). Group rescaling runs first
    and the aligned frequencies are drawn at its best relevances. The best layer, if
    it beats the starting one by ``margin``, is confirmed once with the head refitted
    on all of ``X`` at ``head_alpha``: with a validation split it must lower the
    validation squared error by more than two standard errors of the paired
    per-sample differences (a small split must not pick a model by luck); without
    one, its GCV score must be lower by ``margin``. Otherwise the layer is restored.

    **Pruning** (``prune_fractions``). Last, the relevances under each fraction of
    the largest are set to 0, and each such layer is judged directly by its head on
    all of ``X``, by the same confirmation test against the layer kept so far; the
    best confirmed one is kept. The search leaves small relevances on irrelevant
    features (990 of them on SE3, or one at a quarter of the relevant ones on SE1),
    and the rescaling and alignment moves scale them up with the rest; each adds
    phase noise to every feature. Screening does not judge this move: at the search
    penalty on a subsample it rejects prunings that the head's own penalty confirms.

    Parameters
    ----------
    layer : ARDRandomFourierFeatures
        Its relevances (and, for aligned frequencies, ``frequencies`` and
        ``offsets``) are replaced only by a confirmed candidate.
    X, y, X_val, y_val : Tensor
        Training and validation data (``X_val`` may be None).
    head : tuple
        ``(alpha, beta, c, score)`` of :func:`fit_ridge_head` for the current layer.
    search_alpha, head_alpha : float or 'auto'
        Penalties of the screening fits and of the head.
    generator : torch.Generator
        Draws the screening rows and seeds the candidate frequencies.
    rescale_groups : bool
    sample_frequencies : callable or None
        ``sample_frequencies(rng, n_features, n)``, the kernel's spectral sampler
        (:class:`rffkit.kernels.Kernel`); None skips the aligned frequencies.
    prune_fractions : sequence of float
        Fractions of the largest relevance under which pruning candidates zero the
        relevances; empty skips the move.

    Returns
    -------
    head : tuple
        The head of the kept layer: the given one, or the candidate's.
    """
    n_train = X.shape[0]
    rows = torch.randperm(n_train, generator=generator)[: min(max(screen_rows, score_rows), n_train)].to(X.device)
    X_screen, y_screen = X[rows[:screen_rows]], y[rows[:screen_rows]]

    def screen(state):
        _install(layer, state)
        Z_val = None if X_val is None else layer(X_val)
        return fit_ridge_head(layer(X_screen), y_screen, Z_val, y_val, search_alpha)[3]

    start = _layer_state(layer)
    # per-sample validation loss of the current head, for the final tests
    old_loss = None if X_val is None else _sample_losses(layer(X_val), y_val, head)
    screened_moves = rescale_groups or (sample_frequencies is not None and X_val is not None)
    best, best_score = start, screen(start) if screened_moves else math.inf  # pruning alone screens nothing

    def consider(candidates):  # each move starts from the best layer so far
        nonlocal best, best_score
        for candidate in list(candidates):  # all drawn from the layer as it stands
            value = screen(candidate)
            if value < best_score * (1.0 - margin):
                best, best_score = candidate, value
        _install(layer, best)

    if rescale_groups:
        consider(_rescale_candidates(layer, factors))
    if sample_frequencies is not None and X_val is not None:
        consider(_aligned_candidates(
            layer, X[rows[:score_rows]], y[rows[:score_rows]], sample_frequencies, scales, pool, flop_budget,
            generator,
        ))
    if best is not start:
        new_head, accepted, new_loss = _confirm(layer, X, y, X_val, y_val, head, old_loss, head_alpha, margin)
        if accepted:
            head, old_loss = new_head, new_loss
        else:
            _install(layer, start)
    if prune_fractions:
        head = _prune(layer, X, y, X_val, y_val, head, old_loss, head_alpha, prune_fractions, margin)
    return head


def _sample_losses(Z_val, y_val, head):
    """Per-sample squared validation error of ``head = (alpha, beta, c, score)`` on ``Z_val``."""
    return ((Z_val @ head[1] + head[2] - y_val) ** 2).sum(dim=1)


def _confirm(layer, X, y, X_val, y_val, old_head, old_loss, head_alpha, margin):
    """Head of the layer as installed and whether it beats ``old_head``: ``(head, accepted, loss)``.

    With a validation split the per-sample squared error must fall by more than two
    standard errors of the paired differences from ``old_loss``; without one, the
    GCV score by ``margin``. ``loss`` is the new per-sample validation loss (or None).
    """
    Z_val = None if X_val is None else layer(X_val)
    new_head = fit_ridge_head(layer(X), y, Z_val, y_val, head_alpha)
    if X_val is None:
        return new_head, bool(new_head[3] < old_head[3] * (1.0 - margin)), None
    new_loss = _sample_losses(Z_val, y_val, new_head)
    gain = (old_loss - new_loss).double()
    return new_head, bool(gain.mean() > 2.0 * gain.std() / math.sqrt(gain.shape[0])), new_loss


def _prune(layer, X, y, X_val, y_val, head, old_loss, head_alpha, fractions, margin):
    """The pruning move of :func:`refine_layer`: returns the head of the layer kept.

    ``old_loss`` is the per-sample validation loss of ``head`` (None without a split).
    """
    start = _layer_state(layer)
    relevances = start[2]
    magnitude = relevances.abs()
    best, tried = None, []
    for fraction in fractions:
        candidate = torch.where(magnitude < fraction * magnitude.max(), 0.0, relevances)
        if torch.equal(candidate, relevances) or any(torch.equal(candidate, seen) for seen in tried):
            continue
        tried.append(candidate)
        _install(layer, (start[0], start[1], candidate))
        new_head, accepted, _ = _confirm(layer, X, y, X_val, y_val, head, old_loss, head_alpha, margin)
        if accepted and (best is None or new_head[3] < best[1][3]):
            best = (candidate, new_head)
    if best is None:
        _install(layer, start)
        return head
    _install(layer, (start[0], start[1], best[0]))
    return best[1]


@torch.no_grad()
def marginal_r2(X, y, degree=3, max_rows=5_000):
    """R^2 of a polynomial of each single feature: a cheap marginal screen.

    For every column ``x_j`` of ``X``, the least-squares fit of ``y`` (all outputs
    pooled) on ``x_j, x_j^2, ..., x_j^degree`` plus an intercept, from its own
    ``degree x degree`` normal equations, all columns at once; at most ``max_rows``
    (the first) rows are used. It sees main effects, monotone or U-shaped, and is
    blind to pure interactions (SE1's ``sin(x7 x8 x9)``), so it serves only as a
    starting point, never as a ranking. Returns a tensor of shape (n_features,).
    """
    X, y = X[:max_rows].double(), y[:max_rows].double().reshape(min(max_rows, X.shape[0]), -1)
    powers = torch.stack([X ** k for k in range(1, degree + 1)], dim=2)  # (n, p, degree)
    powers = powers - powers.mean(dim=0)
    yc = y - y.mean(dim=0)
    gram = torch.einsum("npa,npb->pab", powers, powers)
    # a tiny ridge keeps constant (all-zero after centring) columns solvable: they explain 0
    ridge = 1e-10 * (gram.diagonal(dim1=1, dim2=2).sum(dim=1) + 1.0)
    gram = gram + ridge[:, None, None] * torch.eye(degree, dtype=gram.dtype, device=gram.device)
    rhs = torch.einsum("npa,nk->pak", powers, yc)
    coef = torch.linalg.solve(gram, rhs)
    explained = (coef * rhs).sum(dim=(1, 2))
    return (explained / (yc * yc).sum().clamp_min(1e-300)).clamp(0.0, 1.0)
