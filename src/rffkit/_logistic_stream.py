"""Logistic regression on fixed features of every row of a streamed source.

Minimises ``mean_i loss_i + (c / 2) ||W||_F^2`` over the training rows of a source
(binary: one logit column; multinomial: one per class; bias unpenalised) by SciPy's
L-BFGS-B, each evaluation of the objective and its gradient one pass over the rows: every
rank sums the log-loss and its gradient ``Z^T (P - Y)`` over its share, block by block
(:func:`rffkit._logistic.objective_and_gradient`), and one all-reduce of
``D K + K + 4`` float64 values adds the ranks' sums, so the bytes sent do not grow with the
rows. The same pass sums the log-loss of the validation rows (chosen by the hash of the row
index, :func:`rffkit._streaming.validation_mask`) at the point evaluated, which is how the
penalty path of :func:`streamed_penalty_walk` scores a penalty without a pass of its own.

Preconditioning (as :mod:`rffkit._logistic` does in memory, from a sample): near the
optimum the Hessian in ``W`` is about ``Zc^T diag(w) Zc / n``, ``w`` the probability
curvatures. With the centred Gram matrix of the features of a uniform sample of ``m``
rows, ``Zc^T Zc / m = V diag(s) V^T``, the change of variables ``W = V diag(d) theta``,
``d = 1 / sqrt(kappa s + c)`` (``kappa`` the curvature at the class frequencies) makes it
close to the identity in ``theta``, and the logits are centred at the sample's feature mean
so that the intercept decouples from the weights. Every direction is kept (``V`` is square),
so the minimiser is that of the full problem whatever the sample: the sample only speeds
L-BFGS up. References: Liu & Nocedal (1989) for L-BFGS; Rahimi & Recht (2008) for the
features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ._dense import symmetric_eigh
from ._logistic import _as_target, _sample_losses, objective_and_gradient
from ._streaming import validation_mask
from ._sufficient import block_rows_for
from .distributed import all_reduce_sum, world

__all__ = ["Preconditioner", "SampleCurvature", "StreamedLogistic", "streamed_penalty_walk"]


@dataclass(frozen=True)
class Preconditioner:
    """A Hessian estimate ``V diag(s) V^T`` of the mean log-loss in each logit's weights, and the mean that centres the logits."""

    mean: torch.Tensor
    eigenvectors: torch.Tensor
    eigenvalues: torch.Tensor

    def scales(self, penalty):
        """``d = 1 / sqrt(s + c)``, floored where both vanish."""
        floor = 1e-10 * max(float(self.eigenvalues.max()), 1e-300)
        return 1.0 / (self.eigenvalues + penalty + floor).sqrt()


class SampleCurvature:
    """The features of a uniform sample of training rows, whose Hessian at any point preconditions L-BFGS.

    At ``(W, b)`` each sample row gets the curvature of its log-loss, ``p (1 - p)`` (for
    several classes the mean over the classes of ``p_k (1 - p_k)``, one weight shared by
    the classes' blocks: separate blocks per class were tried and needed more iterations
    on three classes, 485 passes against 350); the weighted centred Gram matrix over ``m`` rows
    is then the sample's Hessian in the weights once the intercept is eliminated (a
    subsampled Hessian, as in Byrd, Chin, Neveitt & Nocedal, 2011), and the weighted mean
    centres the logits. At the start (zero weights, the log class frequencies) every row
    has the curvature of the class frequencies.
    """

    def __init__(self, Z, n_classes, block_rows=4096):
        self.Z, self.n_classes, self.block_rows = Z.detach(), n_classes, block_rows

    def _blocks(self):
        for start in range(0, self.Z.shape[0], self.block_rows):
            yield self.Z[start:start + self.block_rows].to(torch.float64)

    @torch.no_grad()
    def at(self, weights, bias, fit_intercept=True):
        """The :class:`Preconditioner` at ``(weights, bias)`` (the logits uncentred without ``fit_intercept``)."""
        weights, bias = weights.to(self.Z.device), bias.to(self.Z.device)
        curvatures = []
        for Z in self._blocks():
            logits = Z @ weights + bias
            P = torch.sigmoid(logits) if logits.shape[1] == 1 else torch.softmax(logits, dim=1)
            curvatures.append((P * (1.0 - P)).mean(dim=1))
        w = torch.cat(curvatures)
        D = self.Z.shape[1]
        mean = torch.zeros(D, dtype=torch.float64, device=self.Z.device)
        if fit_intercept:
            start = 0
            for Z in self._blocks():
                mean += w[start:start + Z.shape[0]] @ Z
                start += Z.shape[0]
            mean /= w.sum().clamp_min(1e-300)
        gram = torch.zeros(D, D, dtype=torch.float64, device=self.Z.device)
        start = 0
        for Z in self._blocks():
            block = (Z - mean) * w[start:start + Z.shape[0], None].sqrt()
            gram += block.T @ block
            start += Z.shape[0]
        s, V = symmetric_eigh(gram / max(self.Z.shape[0], 1))
        return Preconditioner(mean, V, s.clamp_min(0.0))


class StreamedLogistic:
    """The logistic objective of a fixed feature map over every training row of a source.

    Parameters
    ----------
    source : TableSource or ArraySource
        Read with this rank's share (:func:`rffkit.distributed.world`).
    features : callable
        A block of raw inputs (ndarray (b, p)) to its features, a tensor (b, D).
    labels : callable
        ``chunk.y`` to class indices in ``[0, n_classes)`` (int64 ndarray).
    n_classes : int
    fraction, seed : float, int
        Rows that :func:`~rffkit._streaming.validation_mask` holds out are scored, never
        trained on; ``fraction=0`` trains on every row.
    n_features : int
        ``D``.

    Attributes
    ----------
    n_passes : int
        Passes over the source so far (one per evaluation).
    """

    def __init__(self, source, features, labels, *, n_classes, fraction, seed, n_features, device):
        self.source, self.features, self.labels = source, features, labels
        self.n_classes, self.fraction, self.seed = n_classes, float(fraction), seed
        self.n_out = 1 if n_classes == 2 else n_classes
        self.n_features, self.device = int(n_features), device
        self.n_passes = 0

    def _target(self, indices):
        return _as_target(indices, self.n_classes, torch.float64, self.device)

    @torch.no_grad()
    def evaluate(self, weights, bias):
        """Sums over every rank's rows at ``(weights, bias)``: ``(loss, d/dW, d/db, n_train, validation loss, n_val)``.

        ``loss`` and the gradients are sums over the training rows (no penalty);
        ``validation loss`` the summed log-loss of the held-out rows.
        """
        rank, world_size = world()
        D, K = self.n_features, self.n_out
        sums = torch.zeros(D * K + K + 4, dtype=torch.float64, device=self.device)
        block_rows = block_rows_for(D, 8)
        for chunk in self.source.iter_chunks(rank=rank, world_size=world_size):
            held = validation_mask(chunk.rows, self.fraction, self.seed)
            indices = self.labels(chunk.y)
            for start in range(0, chunk.rows.shape[0], block_rows):
                stop = min(start + block_rows, chunk.rows.shape[0])
                Z = self.features(chunk.X[start:stop]).to(torch.float64)
                mask = torch.as_tensor(held[start:stop], device=Z.device)
                train = ~mask
                m = int(train.sum())
                if m:
                    value, gW, gb = objective_and_gradient(weights, bias, Z[train], self._target(
                        indices[start:stop][~held[start:stop]]), 0.0)
                    sums[:D * K] += m * gW.reshape(-1)
                    sums[D * K:D * K + K] += m * gb
                    sums[-4] += m * value
                    sums[-3] += m
                if m < stop - start:
                    logits = Z[mask] @ weights + bias
                    target = self._target(indices[start:stop][held[start:stop]])
                    sums[-2] += _sample_losses(logits, target).sum()
                    sums[-1] += stop - start - m
        all_reduce_sum(sums)
        self.n_passes += 1
        return (float(sums[-4]), sums[:D * K].reshape(D, K), sums[D * K:D * K + K], int(sums[-3]),
                float(sums[-2]), int(sums[-1]))

    def start(self, class_counts):
        """``(W, b)``: zero weights and the log class frequencies (as :mod:`rffkit._logistic` starts)."""
        log_prior = torch.as_tensor(np.maximum(class_counts, 0.5), dtype=torch.float64, device=self.device).log()
        bias = (log_prior[1:] - log_prior[:1]) if self.n_out == 1 else log_prior - log_prior.mean()
        return torch.zeros(self.n_features, self.n_out, dtype=torch.float64, device=self.device), bias

    def minimise(self, penalty, curvature, weights, bias, *, max_iter, tol, fit_intercept=True, first_round=10,
                 history_size=20):
        """L-BFGS-B from ``(weights, bias)`` at ``penalty`` (the ``c`` of the module docstring), in rounds.

        Each round preconditions by the sample's Hessian at its starting point
        (:meth:`SampleCurvature.at`) and runs L-BFGS-B for at most ``first_round``
        iterations, twice as many as the last round after the first, until the largest
        gradient entry in the round's coordinates is at most ``tol`` or ``max_iter``
        iterations have run in all. Without ``fit_intercept`` the bias stays 0 (a bound of
        L-BFGS-B) and the logits are not centred.

        Returns
        -------
        weights, bias : Tensor
        info : dict
            ``objective``, ``validation_loss`` (mean over the held-out rows, nan without),
            ``gradient``, ``n_iter`` (over the rounds), ``converged``.
        """
        n_iter, budget = 0, first_round
        while True:
            preconditioner = curvature.at(weights, bias, fit_intercept)
            weights, bias, info, status = self._lbfgs(
                penalty, preconditioner, weights, bias, max_iter=min(budget, max_iter - n_iter), tol=tol,
                fit_intercept=fit_intercept, history_size=history_size)
            n_iter += info["n_iter"]
            converged = info["gradient"] <= tol
            if converged or status != 1 or n_iter >= max_iter:  # status 1: the round's iterations ran out
                return weights, bias, dict(info, n_iter=n_iter, converged=converged or n_iter < max_iter)
            budget = max_iter  # one re-preconditioning, then to the end

    def _lbfgs(self, penalty, preconditioner, weights, bias, *, max_iter, tol, fit_intercept, history_size):
        """One round of :meth:`minimise`: ``(weights, bias, info, SciPy's status)``."""
        from scipy.optimize import minimize

        V, mu = preconditioner.eigenvectors.to(self.device), preconditioner.mean.to(self.device)
        if not fit_intercept:
            bias = torch.zeros_like(bias)
        d = preconditioner.scales(penalty).to(self.device)[:, None]
        D, K = self.n_features, self.n_out
        theta0 = (V.T @ weights) / d
        centred_bias0 = bias + mu @ weights
        seen = {}

        def unpack(x):
            x = torch.as_tensor(x, dtype=torch.float64, device=self.device)
            theta, centred_bias = x[:D * K].reshape(D, K), x[D * K:]
            W = V @ (d * theta)
            return W, centred_bias - mu @ W

        def objective(x):
            W, b = unpack(x)
            loss, gW, gb, n, validation, n_val = self.evaluate(W, b)
            value = loss / n + 0.5 * penalty * float((W * W).sum())
            gW = gW / n + penalty * W
            gb = gb / n
            g_theta = d * (V.T @ (gW - mu[:, None] * gb[None, :]))
            gradient = torch.cat([g_theta.reshape(-1), gb]).cpu().numpy()
            seen[x.tobytes()] = dict(objective=value, validation_loss=validation / n_val if n_val else math.nan,
                                     gradient=float(np.abs(gradient[:None if fit_intercept else D * K]).max()))
            return value, gradient

        initial = torch.cat([theta0.reshape(-1), centred_bias0]).cpu().numpy()
        bounds = None if fit_intercept else [(None, None)] * (D * K) + [(0.0, 0.0)] * K
        # the BLAS is on one thread here, as in every estimator's fit (_guards.limited_threads)
        result = minimize(objective, initial, jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": max_iter, "maxfun": 2 * max_iter, "gtol": tol, "ftol": 0.0,
                                   "maxcor": history_size})
        info = seen.get(result.x.tobytes())
        if info is None:  # L-BFGS-B returned a point it did not evaluate last: one more pass
            objective(result.x)
            info = seen[result.x.tobytes()]
        W, b = unpack(result.x)
        return W, b, dict(info, n_iter=max(int(result.nit), 1)), int(result.status)


def streamed_penalty_walk(problem, curvature, grid, start_alpha, *, to_penalty, class_counts, validated,
                          max_iter, tol):
    """The penalty of ``grid`` with the least validation log-loss, by a walk from ``start_alpha``.

    The head at ``start_alpha`` (the grid value nearest to it) is fitted first, then at
    ever smaller penalties while the validation loss falls, each fit warm-started from the
    last; if the first smaller penalty is no better, at ever larger ones instead. Every fit
    costs L-BFGS's evaluations, one pass each. Without a validation split only
    ``start_alpha`` is fitted.

    Parameters
    ----------
    problem : StreamedLogistic
    curvature : SampleCurvature
    grid : sequence of float
        The penalties (the estimator's own convention).
    start_alpha : float
    to_penalty : callable
        The estimator's penalty to the ``c`` of ``(c / 2) ||W||^2``.
    class_counts : ndarray
        Rows per class (the start of the first fit).
    validated : bool
    max_iter, tol : int, float
        Of each L-BFGS fit.

    Returns
    -------
    alpha : float
    weights, bias : Tensor
    info : dict
        That of :meth:`StreamedLogistic.minimise` at ``alpha``, with ``n_fits`` and
        ``n_iter`` summed over the fits.
    """
    grid = sorted(set(float(a) for a in grid))
    walk = validated and len(grid) > 1
    here = min(range(len(grid)), key=lambda k: abs(math.log(grid[k]) - math.log(start_alpha))) if walk else None
    W, b = problem.start(class_counts)
    fits = {}

    def fit(alpha, W, b):
        fits[alpha] = problem.minimise(to_penalty(alpha), curvature, W, b, max_iter=max_iter, tol=tol)

    fit(grid[here] if walk else float(start_alpha), W, b)
    if walk:
        loss = lambda k: fits[grid[k]][2]["validation_loss"]  # noqa: E731
        for step in (-1, 1):  # smaller penalties first; larger ones only if the first smaller is no better
            k = here
            while 0 <= k + step < len(grid):
                fit(grid[k + step], *fits[grid[k]][:2])
                if not loss(k + step) < loss(k):
                    break
                k += step
            if k != here:
                break
    best = min(fits, key=lambda a: (fits[a][2]["validation_loss"] if validated else 0.0, -a))
    W, b, info = fits[best]
    info = dict(info, n_fits=len(fits), n_iter=sum(f[2]["n_iter"] for f in fits.values()))
    return best, W, b, info
