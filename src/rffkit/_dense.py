"""Dense kernels of the fits on the CPU: products, Cholesky solves and cosines by SciPy and NumPy.

The products and factorisations of a random-feature fit are a few BLAS and LAPACK
calls on large matrices: the Gram matrix ``Z^T Z`` of an ``n x D`` feature matrix
(``syrk``), products with it (``gemm``), the Cholesky factor of a ``D x D`` system
(``potrf``, ``potrs``), and the cosines and sines of the ``n x D`` projections. On a
CPU float tensor these run here on SciPy's BLAS and LAPACK and NumPy's vectorised
``cos``/``sin``, in place where the caller owns the memory; elsewhere (a GPU, another
dtype) on torch. Two reasons, both measured (1 thread, the AMD EPYC of
``benchmarks/results``): torch's CPU build ships MKL, whose ``gemm`` ran an
``8000 x 803`` by ``803 x 803`` float32 product at a third of OpenBLAS's rate
(170 against 53 ms) and whose ``cos`` took 8.5 ms where NumPy's takes 3.5 ms on
``8000 x 803`` values; and every fresh ``D x D`` or ``n x D`` temporary costs its page
faults on first touch (a 30 MB copy took 40 ms), so a solve that writes its system,
factor and features into buffers it already holds saves more than the flops.

SciPy's BLAS threads follow :func:`rffkit._guards.large_blas_call` (one thread
elsewhere inside rffkit's entry points, see :mod:`rffkit.config`).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch

from ._guards import large_blas_call

__all__ = [
    "on_cpu", "syrk_pays", "syrk_upper", "system_upper", "bordered_system_upper", "gram_matrix", "matmul",
    "cholesky_solve_upper", "spd_inverse_upper", "symmetric_eigh", "cos", "sin",
]

#: From this many multiply-adds a product runs on all of rffkit's threads, below on one.
_THREADED_WORK = 1e10
#: Below this many multiply-adds a Gram matrix is one plain product (SYRK's set-up does not pay).
SYRK_MIN_WORK = 1e7
#: A product with a side shorter than this is a matrix-vector product in all but name: OpenBLAS's
#: ``gemm`` packs the large operand first (19 ms against 3 ms for an ``8388 x 2000`` matrix by a
#: vector), and torch's MKL runs a thin product at a third of OpenBLAS's rate (``1213 x 1000`` by
#: ``1000 x 10``, float64: 2.0 against 1.1 ms; its transpose 3.1 against 1.3 ms), so NumPy's
#: ``matmul`` takes them (``gemv`` for a vector, ``gemm`` without the copies otherwise).
_GEMM_MIN_SIDE = 16


def on_cpu(*tensors):
    """Whether every tensor is a CPU float32 or float64 tensor of one dtype (the kernels here apply)."""
    dtype = tensors[0].dtype
    if dtype not in (torch.float32, torch.float64):
        return False
    for t in tensors:  # a loop, as in _needs_grad
        if t.device.type != "cpu" or t.dtype != dtype:
            return False
    return True


def syrk_pays(Z):
    """Whether ``Z`` (n x D) is a CPU float tensor large enough for ``syrk`` and LAPACK (see ``SYRK_MIN_WORK``)."""
    return on_cpu(Z) and float(Z.shape[0]) * Z.shape[1] ** 2 >= SYRK_MIN_WORK


def _threads(work):
    return large_blas_call() if work >= _THREADED_WORK else nullcontext()


def _torch_is_faster(work=0.0):
    """Whether torch's kernel beats the single-threaded one here: torch runs on more than two
    threads and the call is below the threaded size (NumPy's ``cos`` and OpenBLAS's ``gemm`` on
    one thread take 0.4x and 0.6x the time of torch's on one, measured)."""
    return work < _THREADED_WORK and torch.get_num_threads() > 2


def _transposed(array):
    """``(view, trans)`` such that ``op(view)`` is ``array^T`` with ``view`` Fortran-ordered (a copy only
    when ``array`` is neither C- nor Fortran-ordered)."""
    if array.flags.c_contiguous:
        return array.T, 0
    if array.flags.f_contiguous:
        return array, 1
    return np.ascontiguousarray(array).T, 0


def syrk_upper(Z):
    """The upper triangle of ``Z^T Z`` (diagonal included) by ``syrk``, as a Fortran-ordered array.

    ``Z`` is a CPU float tensor of shape (n, D); the result has its dtype, and what lies
    below the diagonal is unspecified.
    """
    from scipy.linalg.blas import dsyrk, ssyrk

    array = Z.detach().numpy()
    view, trans = _transposed(array)  # Z^T = op(view): syrk forms op(view) op(view)^T
    syrk = ssyrk if array.dtype == np.float32 else dsyrk
    with _threads(float(array.shape[0]) * array.shape[1] ** 2):
        return syrk(1.0, view, trans=trans, lower=0)


def system_upper(Z, scale, shift=0.0, dtype=np.float64):
    """``scale Z^T Z + shift I`` in ``dtype``, its upper triangle in a Fortran-ordered array (one
    ``D x D`` allocation beside ``syrk``'s, none when ``dtype`` is that of ``Z``), ready for
    :func:`cholesky_solve_upper` or :func:`spd_inverse_upper`."""
    system = syrk_upper(Z).astype(dtype, order="F", copy=False)
    system *= system.dtype.type(scale)
    system.flat[:: system.shape[0] + 1] += system.dtype.type(shift)
    return system


def bordered_system_upper(Z, known, scale):
    """:func:`system_upper` ``(Z, scale)`` when ``known``, a Fortran-ordered float64 ``k x k`` array
    whose upper triangle holds ``scale Z[:, :k]^T Z[:, :k]``, is at hand: only the products with
    the last ``D - k`` columns are formed (``n D (D - k)`` multiply-adds, not ``n D^2 / 2``)."""
    k, D = known.shape[0], Z.shape[1]
    array = Z.detach().numpy()
    system = np.zeros((D, D), order="F")
    system[:k, :k] = known
    with _threads(float(array.shape[0]) * k * (D - k)):
        # NumPy's matmul reads the column blocks in place (BLAS's leading dimension), SciPy's would copy them
        system[:k, k:] = np.matmul(array[:, :k].T, array[:, k:])
    system[k:, k:] = syrk_upper(Z[:, k:])
    system[:, k:] *= scale
    return system


def _mirrored(upper):
    return torch.triu(upper) + torch.triu(upper, diagonal=1).T


class _Gram(torch.autograd.Function):
    """``Z^T Z`` by ``syrk`` with the gradient ``Z (G + G^T)``: one product back, where autograd's
    ``Z.T @ Z`` takes two (one per operand) after a forward product of twice the flops."""

    @staticmethod
    def forward(ctx, Z):
        ctx.save_for_backward(Z)
        return _mirrored(torch.from_numpy(syrk_upper(Z)))

    @staticmethod
    def backward(ctx, grad):
        (Z,) = ctx.saved_tensors
        return matmul(Z, grad + grad.T)


def gram_matrix(Z, *, upper_only=False):
    """``Z^T Z`` in the dtype of ``Z``, by BLAS ``syrk`` on the CPU: half the flops of ``Z.T @ Z``.

    ``syrk`` computes the upper triangle only, which is then mirrored; with
    ``upper_only`` the mirror is skipped and only the upper triangle (diagonal
    included) of the result holds ``Z^T Z`` (what is below it is unspecified). When
    ``Z`` needs a gradient the product is differentiable, its backward one product
    ``Z (G + G^T)``. Tensors on a GPU, small ones and those of another dtype take
    ``Z.T @ Z``. SciPy's BLAS runs on the threads :func:`threadpoolctl.threadpool_limits`
    allows (rffkit's entry points set them, see :mod:`rffkit.config`).
    """
    if not syrk_pays(Z):
        return Z.T @ Z
    if torch.is_grad_enabled() and Z.requires_grad:
        return _Gram.apply(Z)
    upper = torch.from_numpy(syrk_upper(Z))
    return upper if upper_only else _mirrored(upper)


def _needs_grad(*tensors):
    if not torch.is_grad_enabled():
        return False
    for t in tensors:  # a loop, not a generator: an interrupt inside one can land in its finaliser
        if t.requires_grad:
            return True
    return False


class _Product(torch.autograd.Function):
    """``a @ b`` with both products of the backward pass by :func:`matmul` too."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return matmul(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = matmul(grad, b.T) if ctx.needs_input_grad[0] else None
        grad_b = matmul(a.T, grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


def matmul(a, b, out=None):
    """``a @ b`` for 2-D tensors: by ``gemm`` on CPU float tensors (no copies of C- or Fortran-ordered
    operands), by torch elsewhere; differentiable. ``out``, a C-ordered tensor of the result's shape
    and dtype, receives the product (not with a gradient)."""
    if (not on_cpu(a, b) or a.ndim != 2 or b.ndim != 2 or (out is not None and not out.is_contiguous())
            or a.shape[1] == 0 or _torch_is_faster(float(a.shape[0]) * a.shape[1] * b.shape[1])):
        return torch.matmul(a, b, out=out) if out is not None else a @ b
    if _needs_grad(a, b):
        if out is not None:
            raise RuntimeError("matmul: out= with a gradient")
        return _Product.apply(a, b)
    a_array, b_array = a.detach().numpy(), b.detach().numpy()
    if min(a.shape[0], b.shape[1]) < _GEMM_MIN_SIDE:
        if out is None:
            return torch.from_numpy(np.matmul(a_array, b_array))
        np.matmul(a_array, b_array, out=out.numpy())
        return out
    from scipy.linalg.blas import dgemm, sgemm

    # (a b)^T = b^T a^T: a Fortran-ordered (k, m) result is the C-ordered (m, k) product
    b_view, b_trans = _transposed(b_array)
    a_view, a_trans = _transposed(a_array)
    gemm = sgemm if a_array.dtype == np.float32 else dgemm
    with _threads(float(a_array.shape[0]) * a_array.shape[1] * b_array.shape[1]):
        if out is None:
            return torch.from_numpy(gemm(1.0, b_view, a_view, trans_a=b_trans, trans_b=a_trans).T)
        gemm(1.0, b_view, a_view, beta=0.0, c=out.numpy().T, trans_a=b_trans, trans_b=a_trans, overwrite_c=1)
        return out


def cholesky_solve_upper(system, rhs):
    """Solve ``A x = rhs`` from the upper triangle of ``A``, factorised in place by ``potrf``.

    ``system`` is a Fortran-ordered float64 or float32 ``D x D`` array holding ``A``'s
    upper triangle (what is below is ignored); it is overwritten with the factor. ``rhs``
    is an array of shape (D,) or (D, T), solved in the dtype of ``system``. Returns ``x``
    (the shape of ``rhs``), or None when ``A`` is not numerically positive definite.
    """
    from scipy.linalg.lapack import dpotrf, dpotrs, spotrf, spotrs

    single = system.dtype == np.float32
    potrf, potrs = (spotrf, spotrs) if single else (dpotrf, dpotrs)
    with _threads(system.shape[0] ** 3 / 3.0):
        factor, info = potrf(system, lower=0, clean=0, overwrite_a=1)
        if info != 0:
            return None
        column = rhs.reshape(rhs.shape[0], -1).astype(system.dtype, copy=False)
        solution, info = potrs(factor, column, lower=0)
    return solution.reshape(rhs.shape) if info == 0 else None


def spd_inverse_upper(system):
    """``A^-1`` (symmetric, whole) from the upper triangle of ``A`` by ``potrf`` and ``potri``.

    ``system`` is a Fortran-ordered float64 array, overwritten. None when ``A`` is not
    numerically positive definite.
    """
    from scipy.linalg.lapack import dpotrf, dpotri

    with _threads(system.shape[0] ** 3):
        factor, info = dpotrf(system, lower=0, clean=0, overwrite_a=1)
        if info != 0:
            return None
        inverse, info = dpotri(factor, lower=0, overwrite_c=1)
    if info != 0:
        return None
    upper = np.triu(inverse)
    return upper + np.triu(inverse, 1).T


def symmetric_eigh(matrix):
    """``torch.linalg.eigh(matrix)``, retried where LAPACK's solver does not converge.

    The solver can fail on a Gram matrix that is badly scaled or nearly all zero: one of
    constant inputs in float32, or a curvature-weighted one of hundreds of classes, whose
    entries were all below 1e-6 with 598 of its 663 columns zero (converged once scaled by
    1e6). The retry decomposes ``matrix / c`` in float64, ``c`` its largest diagonal
    entry, and scales the eigenvalues back; the result keeps the input's dtype.
    """
    try:
        return torch.linalg.eigh(matrix)
    except torch.linalg.LinAlgError:
        scale = torch.diagonal(matrix).abs().max().double()
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        values, vectors = torch.linalg.eigh(matrix.double() / scale)
        return (values * scale).to(matrix.dtype), vectors.to(matrix.dtype)


def _differentiable(value, derivative):
    """An autograd Function computing ``value(t)`` (no gradient inside) with the gradient
    ``grad * derivative(t)``."""

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return value(t)

        @staticmethod
        def backward(ctx, grad):
            (t,) = ctx.saved_tensors
            return grad * derivative(t)

    return Function


def _elementwise(numpy_function, torch_function, function, t, out):
    if not on_cpu(*((t,) if out is None else (t, out))) or _torch_is_faster():
        # torch's kernel (a GPU tensor, or more than two CPU threads); autograd takes no out=
        return torch_function(t, out=out) if out is not None else torch_function(t)
    if _needs_grad(t):
        if out is not None:
            raise RuntimeError(f"{numpy_function.__name__}: out= with a gradient")
        return function.apply(t)
    if out is None:
        out = torch.empty(t.shape, dtype=t.dtype)
    numpy_function(t.detach().numpy(), out=out.numpy())
    return out


def cos(t, out=None):
    """``torch.cos(t, out=out)``, differentiable (``out=t`` for in place): NumPy's vectorised cosine on
    the CPU."""
    return _elementwise(np.cos, torch.cos, _COSINE, t, out)


def sin(t, out=None):
    """``torch.sin(t, out=out)``, differentiable (``out=t`` for in place): NumPy's vectorised sine on
    the CPU."""
    return _elementwise(np.sin, torch.sin, _SINE, t, out)


_COSINE = _differentiable(cos, lambda t: sin(t).neg_())
_SINE = _differentiable(sin, cos)
