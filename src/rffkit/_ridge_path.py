"""Tensor numerics of ridge regression along a regularisation path.

One symmetric eigendecomposition serves every ``alpha`` of a grid. With centred
features ``Zc`` (n x D) and centred targets ``yc`` (n x T), write the thin spectral
decomposition of the smaller Gram matrix as

    Zc = U_hat diag(sqrt(s)) V^T,   U = Zc V = U_hat diag(sqrt(s))   (n x r),

with ``r = min(n, D)``: in the *primal* form ``Zc^T Zc = V diag(s) V^T`` (D x D) and
``U = Zc V``; in the *dual* form ``Zc Zc^T = U_hat diag(s) U_hat^T`` (n x n) and
``U = U_hat diag(sqrt(s))``. Let ``q = U^T yc`` (r x T). Then, for every ``alpha``,

* coefficients   ``w(alpha) = V diag(1 / (s + alpha)) q``           (primal)
                 ``w(alpha) = Zc^T U_hat diag(1 / (s + alpha)) U_hat^T yc``  (dual)
* hat matrix     ``H(alpha) = 1 1^T / n + U diag(1 / (s + alpha)) U^T``
  (the ``1 1^T / n`` term is the unpenalised intercept, present when centring),
* degrees of freedom ``df(alpha) = tr H = 1 + sum_k s_k / (s_k + alpha)``,
* residual sum of squares, in O(r T) per alpha:
  ``RSS(alpha) = ||yc||^2 - sum_k q_k^2 (s_k + 2 alpha) / (s_k + alpha)^2``,
  since ``yc^T H yc = sum q_k^2 / (s_k + alpha)`` and ``||H yc||^2 = sum s_k q_k^2 / (s_k + alpha)^2``,
* hat diagonal, in O(r) per sample and alpha:
  ``h_ii(alpha) = 1 / n + sum_k U_ik^2 / (s_k + alpha)
  = 1 / n + sum_k U_hat_ik^2 s_k / (s_k + alpha)``.

Generalised cross-validation (Golub, Heath and Wahba, 1979) is
``GCV(alpha) = (RSS(alpha) / n) / (1 - df(alpha) / n)^2`` and exact leave-one-out is
``LOO(alpha) = (1 / n) sum_i (e_i(alpha) / (1 - h_ii(alpha)))^2`` with residuals
``e = yc - U diag(1 / (s + alpha)) q``. Costs: forming the Gram matrix is
O(n r max(n, D)), the eigendecomposition O(r^3); then GCV costs O(r T) per alpha and
LOO O(n r (1 + T)) per alpha, plus O(n D r) once to form ``U`` in the primal form
(done in row blocks so that ``U`` is never held whole).

Rows that repeat (a bootstrap sample; tables of few distinct values) make both scores
blind to overfitting: leaving one copy out leaves its twin, which the fit interpolates.
With :class:`RowGroups` a group of equal rows is left out whole. Write ``c_i`` for its size,
``ybar_i`` for its mean target and ``W`` for the squared spread of the targets about their
group means. The fit is that of the weighted problem on the groups (``Zc^T Zc`` and
``Zc^T yc`` are unchanged), whose hat diagonal is ``c_i h_i`` with ``h_i`` the diagonal
above at any row of the group, so

* leave-one-group-out: ``(1 / n) (W + sum_i c_i ((ybar_i - f_i) / (1 - c_i h_i))^2)``,
* its GCV form: ``(1 / n) (W + (RSS - W) / (1 - df / G)^2)`` for ``G`` groups,

both the plain scores when every row is its own group.

Streamed fits (:mod:`rffkit._sufficient`) build the primal spectrum from sufficient
statistics instead of ``Z``; two functions serve them. :func:`loo_sums` adds up the
squared leave-one-out residuals of a block of rows (exact LOO is a second pass over the
data, since ``h_ii`` needs each row), and :func:`heldout_path` scores every alpha on
held-out rows from their statistics alone: with ``A``, ``b``, ``c`` the held-out
``sum (z - mean_z)(z - mean_z)^T``, ``sum (z - mean_z)(y - mean_y)`` and
``sum (y - mean_y)^2`` about the training means, the squared error of ``w(alpha)`` is
``c - 2 w^T b + w^T A w``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from ._dense import symmetric_eigh

__all__ = [
    "RidgeSpectrum",
    "RowGroups",
    "row_groups",
    "ridge_spectrum",
    "gcv_path",
    "loo_path",
    "loo_sums",
    "heldout_path",
    "path_coefficients",
]

_BLOCK_ROWS = 4096


@dataclass
class RidgeSpectrum:
    """Everything the path needs, computed once from ``Z`` and ``y``.

    Attributes
    ----------
    form : {'primal', 'dual'}
    eigenvalues : tensor of shape (r,)
        ``s``, clamped at zero (rounding can make tiny ones negative).
    eigenvectors : tensor
        ``V`` (D x r) in the primal form, ``U_hat`` (n x r) in the dual form.
    projections : tensor of shape (r, T)
        ``q = U^T yc``.
    y_norm2 : tensor of shape (T,)
        ``||yc||^2`` per target.
    n_samples : int
    intercept : bool
        Whether features and targets were centred (unpenalised intercept).
    feature_mean : ndarray of shape (D,)
    target_mean : ndarray of shape (T,)
    dual_projections : tensor of shape (r, T) or None
        ``U_hat^T yc`` in the dual form (kept to avoid dividing by ``sqrt(s)``).
    """

    form: str
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    projections: torch.Tensor
    y_norm2: torch.Tensor
    n_samples: int
    intercept: bool
    feature_mean: np.ndarray
    target_mean: np.ndarray
    dual_projections: torch.Tensor | None = None


@dataclass
class RowGroups:
    """Rows of ``X`` that are equal, for the scores of :func:`gcv_path` and :func:`loo_path`.

    Attributes
    ----------
    first : ndarray of shape (G,)
        The index of one row of each group.
    counts : ndarray of shape (G,)
        The rows of each group, ``c_i``.
    target_means : ndarray of shape (G, T)
        The mean target of each group, ``ybar_i``.
    within : ndarray of shape (T,)
        ``W``: the squared deviations of the targets from their group's mean, summed.
    """

    first: np.ndarray
    counts: np.ndarray
    target_means: np.ndarray
    within: np.ndarray


def row_groups(X, y):
    """The :class:`RowGroups` of a dense ``X`` (n, p) with targets ``y`` (n, T), or None when every row
    is distinct, when all rows are equal (no group could be left out with anything left to fit), or
    when ``X`` is sparse. Rows are equal when their values are (``-0.0`` is ``0.0``)."""
    if sp.issparse(X):
        return None
    X = np.ascontiguousarray(X) + 0.0  # -0.0 + 0.0 is 0.0: equal values, equal bytes
    keys = X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    if len(first) == X.shape[0] or len(first) < 2:
        return None
    y = np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)
    inverse = inverse.ravel()
    sums = np.zeros((len(first), y.shape[1]))
    np.add.at(sums, inverse, y)
    means = sums / counts[:, None]
    within = ((y - means[inverse]) ** 2).sum(axis=0)
    return RowGroups(first=first, counts=counts, target_means=means, within=within)


def _numerical_rank(spectrum):
    """``spectrum`` with the eigenvalues under ``eps max(n, r) max(s)`` (NumPy's ``matrix_rank`` tolerance)
    and their projections set to zero: directions of rounding noise, which the scores of repeated rows
    must not count (in float32 they gave a group's rows different hat values, ``c h`` above 1)."""
    s = spectrum.eigenvalues
    if s.numel() == 0:
        return spectrum
    tolerance = torch.finfo(s.dtype).eps * max(spectrum.n_samples, s.shape[0]) * s.max()
    kept = s > tolerance
    dual = spectrum.dual_projections
    return dataclasses.replace(
        spectrum, eigenvalues=torch.where(kept, s, 0.0), projections=spectrum.projections * kept[:, None],
        dual_projections=None if dual is None else dual * kept[:, None])


def _writable(array):
    """torch warns on read-only NumPy buffers (memory maps); copy those."""
    return array if array.flags.writeable else array.copy()


def _dense_tensor(array, dtype, device):
    return torch.as_tensor(np.ascontiguousarray(_writable(np.asarray(array))), dtype=dtype, device=device)


def ridge_spectrum(Z, y, *, fit_intercept, dtype, device, form="auto"):
    """Centre, form the smaller Gram matrix and eigendecompose it (once).

    Parameters
    ----------
    Z : ndarray or scipy sparse matrix of shape (n, D)
    y : ndarray of shape (n, T)
    fit_intercept : bool
    dtype : torch.dtype
    device : torch.device
    form : {'auto', 'primal', 'dual'}
        'auto' takes the primal D x D Gram matrix when ``D <= n``, else the dual.

    Returns
    -------
    RidgeSpectrum
    """
    n, D = Z.shape
    if form == "auto":
        form = "primal" if D <= n else "dual"
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    # centred in float64: a float32 fit of a target far from zero (prices, years) would
    # otherwise round the target before its mean is removed
    y = np.asarray(y, dtype=np.float64)
    target_mean = y.mean(axis=0) if fit_intercept else np.zeros(y.shape[1])
    centred = (y - target_mean).astype(np_dtype, copy=False)
    yc = _dense_tensor(centred, dtype, device)
    sparse = sp.issparse(Z)
    if sparse:
        Z = sp.csr_matrix(Z, dtype=np_dtype)
        feature_mean = np.asarray(Z.mean(axis=0), dtype=np_dtype).ravel()
    else:
        Zt = _dense_tensor(Z, dtype, device)
        mean_t = Zt.mean(dim=0) if fit_intercept else torch.zeros(D, dtype=dtype, device=device)
        feature_mean = mean_t.cpu().numpy()
        Zt = Zt - mean_t
    if not fit_intercept:
        feature_mean = np.zeros(D, dtype=np_dtype)

    if form == "primal":
        if sparse:
            # Zc^T Zc = Z^T Z - n m m^T, computed in float64 to limit cancellation.
            gram = (Z.T @ Z).toarray().astype(np.float64)
            mean64 = feature_mean.astype(np.float64)
            gram -= n * np.outer(mean64, mean64)
            gram = torch.as_tensor(gram, dtype=dtype, device=device)
            zty = Z.T @ centred - np.outer(feature_mean, centred.sum(axis=0))
            zty = _dense_tensor(zty, dtype, device)
        else:
            gram = Zt.T @ Zt
            zty = Zt.T @ yc
        s, V = symmetric_eigh(gram)
        q = V.T @ zty
        vectors = V
        p = None
    else:
        if sparse:
            kernel = (Z @ Z.T).toarray().astype(np.float64)
            if fit_intercept:
                row = kernel.mean(axis=1, keepdims=True)
                kernel = kernel - row - row.T + row.mean()
            kernel = torch.as_tensor(kernel, dtype=dtype, device=device)
        else:
            kernel = Zt @ Zt.T
        s, U_hat = symmetric_eigh(kernel)
        p = U_hat.T @ yc
        q = torch.sqrt(torch.clamp(s, min=0.0))[:, None] * p
        vectors = U_hat
    return RidgeSpectrum(
        form=form,
        eigenvalues=torch.clamp(s, min=0.0),
        eigenvectors=vectors,
        projections=q,
        y_norm2=(yc * yc).sum(dim=0),
        n_samples=n,
        intercept=bool(fit_intercept),
        feature_mean=feature_mean,
        target_mean=target_mean,
        dual_projections=p,
    )


def _alphas_tensor(alphas, like):
    return torch.as_tensor(np.asarray(alphas, dtype=np.float64), dtype=like.dtype, device=like.device)


def gcv_path(spectrum, alphas, groups=None):
    """GCV score of every alpha for every target, shape (n_alphas, T), O(r T) per alpha.

    ``GCV(alpha) = (RSS(alpha) / n) / (1 - df(alpha) / n)^2``; ``inf`` where
    ``df(alpha) >= n`` (an interpolating fit, for which GCV is undefined). With
    ``groups`` (:class:`RowGroups`), the GCV form of leaving each group of equal rows out
    whole (module docstring), ``inf`` where ``df(alpha)`` reaches the number of groups.
    """
    if groups is not None:
        spectrum = _numerical_rank(spectrum)
    s = spectrum.eigenvalues
    a = _alphas_tensor(alphas, s)[:, None]  # (A, 1)
    n = spectrum.n_samples
    shrink = 1.0 / (s[None, :] + a)  # (A, r)
    weight = (s[None, :] + 2.0 * a) * shrink * shrink  # (A, r)
    q2 = spectrum.projections * spectrum.projections  # (r, T)
    rss = torch.clamp(spectrum.y_norm2[None, :] - weight @ q2, min=0.0)  # (A, T)
    df = (s[None, :] * shrink).sum(dim=1) + (1.0 if spectrum.intercept else 0.0)  # (A,)
    if groups is None:
        n_groups, within, between = n, torch.zeros_like(spectrum.y_norm2), rss
    else:
        # RSS - W without cancellation at small alphas: the squared norm of the group means' part outside the
        # features' span, ||yc||^2 - W - sum p_k^2, plus sum p_k^2 (alpha / (s_k + alpha))^2 inside it, with
        # p_k^2 = q_k^2 / s_k the squared projections on the orthonormal eigenvectors
        n_groups, within = len(groups.counts), torch.as_tensor(groups.within, dtype=rss.dtype, device=rss.device)
        p2 = torch.where(s[:, None] > 0, q2 / torch.where(s > 0, s, 1.0)[:, None], 0.0)  # (r, T)
        outside = torch.clamp(spectrum.y_norm2 - within - p2.sum(dim=0), min=0.0)
        between = outside[None, :] + ((a * shrink) ** 2) @ p2
    denominator = (1.0 - df / n_groups) ** 2
    score = (within[None, :] + between / denominator[:, None]) / n
    score = torch.where((df < n_groups * (1 - 1e-7))[:, None], score, torch.full_like(score, float("inf")))
    return score


def _u_block(spectrum, Zc_rows):
    """Rows of ``U``: ``Zc[rows] V`` (primal) or ``U_hat[rows] sqrt(s)`` (dual)."""
    if spectrum.form == "primal":
        return Zc_rows @ spectrum.eigenvectors
    return Zc_rows * torch.sqrt(spectrum.eigenvalues)[None, :]


def _loo_terms(spectrum, alphas):
    """``(alphas, shrink (r, A), coefficients in the eigenbasis (r, A*T))`` of every alpha."""
    s = spectrum.eigenvalues
    a = _alphas_tensor(alphas, s)
    shrink = 1.0 / (s[:, None] + a[None, :])  # (r, A)
    q = spectrum.projections  # (r, T)
    coef_in_basis = (q[:, None, :] * shrink[:, :, None]).reshape(q.shape[0], -1)  # (r, A*T)
    return a, shrink, coef_in_basis


def _loo_block(spectrum, terms, U, yc_rows, counts=None):
    """Sum over a block of rows of the squared leave-one-out residuals, shape (A, T), float64.

    ``U`` holds the block's rows of ``U`` (b, r), ``yc_rows`` its centred targets (b, T).
    With ``counts`` (b,), each row stands for a group of that many equal rows, ``yc_rows``
    their mean target, and the group is left out whole (its squared residual counted
    ``counts`` times).
    """
    a, shrink, coef_in_basis = terms
    T = spectrum.projections.shape[1]
    base = 1.0 / spectrum.n_samples if spectrum.intercept else 0.0
    hat = base + (U * U) @ shrink  # (b, A)
    if counts is not None:  # a group's hat value, under 1 unless it is fitted exactly
        hat = torch.clamp(counts[:, None] * hat, max=1.0)
    fitted = (U @ coef_in_basis).reshape(-1, a.shape[0], T)  # (b, A, T)
    resid = yc_rows[:, None, :] - fitted
    loo = resid / (1.0 - hat)[:, :, None]
    if counts is not None:  # a group fitted exactly (hat 1) predicts its left-out copies not at all
        loo = torch.where((hat < 1.0)[:, :, None], loo, torch.full_like(loo, float("inf")))
    squares = loo * loo if counts is None else counts[:, None, None] * loo * loo
    return squares.sum(dim=0).to(torch.float64)


def loo_path(spectrum, alphas, Z, y, groups=None):
    """Exact leave-one-out mean squared error, shape (n_alphas, T).

    Uses ``e_i / (1 - h_ii)`` with the hat diagonal of the module docstring; ``Z`` and
    ``y`` are the same arrays given to :func:`ridge_spectrum`. With ``groups``
    (:class:`RowGroups`) each group of equal rows is left out whole. Costs O(n r (1 + T))
    per alpha (O(G r (1 + T)) for G groups); rows are processed in blocks.
    """
    # directions of rounding noise (the centred dual kernel's null direction comes out at 1e-15, not 0)
    # would add s / (s + alpha) to hat values within alpha of 1 at the smallest penalties
    if groups is not None or spectrum.form == "dual":
        spectrum = _numerical_rank(spectrum)
    s = spectrum.eigenvalues
    dtype, device = s.dtype, s.device
    terms = _loo_terms(spectrum, alphas)
    T = spectrum.projections.shape[1]
    n = spectrum.n_samples
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    if groups is None:
        index, targets, counts = np.arange(n), np.asarray(y, dtype=np.float64), None
    else:
        index, targets = groups.first, np.asarray(groups.target_means, dtype=np.float64)
        counts = torch.as_tensor(groups.counts, dtype=dtype, device=device)
    yc = (targets - spectrum.target_mean).astype(np_dtype, copy=False)  # centred in float64, as in ridge_spectrum
    total = torch.zeros(terms[0].shape[0], T, dtype=torch.float64, device=device)
    if groups is not None:
        total += torch.as_tensor(groups.within, dtype=torch.float64, device=device)[None, :]
    for start in range(0, len(index), _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, len(index))
        block = index[start:stop]
        if spectrum.form == "primal":
            rows = Z[block] if groups is not None else Z[start:stop]
            rows = rows.toarray() if sp.issparse(rows) else rows
            rows = _dense_tensor(rows, dtype, device) - torch.as_tensor(spectrum.feature_mean, dtype=dtype, device=device)
        else:
            rows = spectrum.eigenvectors[torch.as_tensor(block, device=device)]
        U = _u_block(spectrum, rows)  # (b, r)
        total += _loo_block(spectrum, terms, U, _dense_tensor(yc[start:stop], dtype, device),
                            None if counts is None else counts[start:stop])
    return (total / n).to(dtype)


def loo_sums(spectrum, alphas, Z, y):
    """Squared leave-one-out residuals of a block of rows, summed: shape (n_alphas, T), float64.

    The streamed form of :func:`loo_path` for a primal spectrum (one built from
    sufficient statistics): the hat diagonal needs each row, so exact leave-one-out is a
    second pass over the data, adding up this function's output chunk by chunk (and over
    ranks); dividing the total by ``spectrum.n_samples`` gives :func:`loo_path`'s score.
    Costs O(b D r + b r A T) for ``b`` rows.

    Parameters
    ----------
    spectrum : RidgeSpectrum
        In the primal form, built from all the rows.
    alphas : array-like of shape (n_alphas,)
    Z : Tensor or ndarray of shape (b, D)
        Uncentred features of the rows.
    y : Tensor or ndarray of shape (b, T)
        Their targets.

    Returns
    -------
    Tensor of shape (n_alphas, T)
    """
    if spectrum.form != "primal":
        raise ValueError("loo_sums needs a spectrum in the primal form.")
    V = spectrum.eigenvectors
    dtype, device = V.dtype, V.device
    Z = Z.to(device=device, dtype=dtype) if isinstance(Z, torch.Tensor) else _dense_tensor(Z, dtype, device)
    y = torch.as_tensor(y, dtype=torch.float64, device=device) if isinstance(y, torch.Tensor) \
        else _dense_tensor(y, torch.float64, device)
    y = y.reshape(Z.shape[0], -1)
    Zc = Z - torch.as_tensor(spectrum.feature_mean, dtype=dtype, device=device)
    yc = (y - torch.as_tensor(spectrum.target_mean, dtype=torch.float64, device=device)).to(dtype)
    return _loo_block(spectrum, _loo_terms(spectrum, alphas), Zc @ V, yc)


def heldout_path(spectrum, alphas, gram, cross, y_norm2, n_heldout):
    """Mean squared error on held-out rows of every alpha, from their statistics: (n_alphas, T).

    With the held-out rows' features and targets centred at the *training* means,
    ``A = sum (z - mean_z)(z - mean_z)^T``, ``b = sum (z - mean_z)(y - mean_y)`` and
    ``c = sum (y - mean_y)^2``, the prediction error of the ridge fit ``w(alpha)`` (with
    intercept ``mean_y - mean_z^T w``) on those rows is, in closed form,
    ``SSE(alpha) = c - 2 w^T b + w^T A w``: one pass over the data scores every alpha.

    Parameters
    ----------
    spectrum : RidgeSpectrum
        Of the training rows, primal form.
    alphas : array-like of shape (n_alphas,)
    gram : Tensor of shape (D, D)
        ``A`` above.
    cross : Tensor of shape (D, T)
        ``b`` above.
    y_norm2 : Tensor of shape (T,)
        ``c`` above.
    n_heldout : int
        Number of held-out rows (> 0).

    Returns
    -------
    Tensor of shape (n_alphas, T), in the dtype of the spectrum
    """
    scores = []
    for alpha in np.asarray(alphas, dtype=np.float64):
        w = path_coefficients(spectrum, alpha)  # (D, T)
        sse = y_norm2 - 2.0 * (w * cross).sum(dim=0) + (w * (gram @ w)).sum(dim=0)
        scores.append(torch.clamp(sse, min=0.0) / n_heldout)
    return torch.stack(scores)


def path_coefficients(spectrum, alpha, Z=None):
    """Coefficients ``w`` (D x T) for one alpha, or one alpha per target (shape (T,)).

    ``Z`` (the uncentred features) is needed in the dual form only.
    """
    s = spectrum.eigenvalues
    a = _alphas_tensor(np.atleast_1d(alpha), s)[None, :]  # (1, T) or (1, 1)
    shrink = 1.0 / (s[:, None] + a)  # (r, T) or (r, 1)
    if spectrum.form == "primal":
        return spectrum.eigenvectors @ (spectrum.projections * shrink)
    # dual: w = Zc^T c with c = (Zc Zc^T + alpha I)^{-1} yc = U_hat diag(1/(s+alpha)) U_hat^T yc.
    dual = spectrum.eigenvectors @ (spectrum.dual_projections * shrink)  # (n, T)
    dual_np = dual.cpu().numpy()
    if sp.issparse(Z):
        w = np.asarray(Z.T @ dual_np)
    else:
        w = np.asarray(Z).T.astype(dual_np.dtype, copy=False) @ dual_np
    w = w - np.outer(spectrum.feature_mean, dual_np.sum(axis=0))
    return torch.as_tensor(np.ascontiguousarray(w), dtype=s.dtype, device=s.device)
