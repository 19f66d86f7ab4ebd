"""The CPU kernels of rffkit._dense against torch's own operations."""

import numpy as np
import pytest
import torch

from rffkit import _dense as dense
from rffkit._ridge import solve_ridge


def _layouts(array):
    """The same matrix C-ordered, Fortran-ordered, and as a strided slice."""
    wide = torch.zeros(array.shape[0], 2 * array.shape[1], dtype=array.dtype)
    wide[:, ::2] = array
    return {"C": array.contiguous(), "F": array.T.contiguous().T, "strided": wide[:, ::2]}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("a_layout", ["C", "F", "strided"])
@pytest.mark.parametrize("b_layout", ["C", "F", "strided"])
@pytest.mark.parametrize("columns", [20, 3, 1])  # gemm, and NumPy's matmul below _GEMM_MIN_SIDE
def test_matmul_equals_torch_for_every_layout(dtype, a_layout, b_layout, columns):
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(40, 30, generator=generator, dtype=dtype)
    b = torch.randn(30, columns, generator=generator, dtype=dtype)
    product = dense.matmul(_layouts(a)[a_layout], _layouts(b)[b_layout])
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(product, a @ b, rtol=tolerance, atol=tolerance)
    assert product.dtype == dtype and product.is_contiguous()
    out = torch.full((40, columns), float("nan"), dtype=dtype)
    assert dense.matmul(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=tolerance, atol=tolerance)
    thin = dense.matmul(_layouts(b.T.contiguous())[b_layout], _layouts(a.T.contiguous())[a_layout])
    torch.testing.assert_close(thin, b.T @ a.T, rtol=tolerance, atol=tolerance)


def test_matmul_refuses_mixed_dtypes_like_torch():
    a = torch.randn(50, 30)
    with pytest.raises(RuntimeError):  # torch's own error, not a silent cast
        dense.matmul(a, torch.randn(30, 20, dtype=torch.float64))


def test_the_product_and_the_trigonometry_are_differentiable_like_torchs():
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(40, 30, generator=generator, dtype=torch.float64, requires_grad=True)
    b = torch.randn(30, 20, generator=generator, dtype=torch.float64, requires_grad=True)
    ours = (dense.cos(dense.matmul(a, b)) * dense.sin(dense.matmul(a, b))).sum()
    grads = torch.autograd.grad(ours, (a, b))
    theirs = (torch.cos(a @ b) * torch.sin(a @ b)).sum()
    expected = torch.autograd.grad(theirs, (a, b))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)
    torch.autograd.gradcheck(lambda x, y: dense.cos(dense.matmul(x, y)), (a[:20, :17], b[:17, :18]))


@pytest.mark.parametrize("device", ["meta", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU on this machine"))])
def test_cos_and_sin_of_a_tensor_off_the_cpu_keep_their_gradient_on_few_threads(device):
    """Off the CPU (a GPU; 'meta' stands in for one without it) the trigonometry is torch's,
    with autograd, whatever the thread count: on one or two threads it once wrote into an
    ``out=`` tensor, which autograd refuses, so every RFFNet fit on a GPU failed there."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.linspace(-5.0, 5.0, 12, device=device).reshape(3, 4).requires_grad_()
        for ours, theirs in ((dense.cos, torch.cos), (dense.sin, torch.sin)):
            value = ours(x)
            assert value.requires_grad and value.device == x.device
            if device != "meta":
                torch.testing.assert_close(value, theirs(x))
                torch.testing.assert_close(torch.autograd.grad(value.sum(), x)[0],
                                           torch.autograd.grad(theirs(x).sum(), x)[0])
    finally:
        torch.set_num_threads(threads)


def test_cos_and_sin_in_place_and_into_a_slice():
    x = torch.linspace(-50.0, 50.0, 600).reshape(20, 30)
    expected_cos, expected_sin = torch.cos(x), torch.sin(x)
    out = torch.zeros(20, 40)
    dense.sin(x, out=out[:, 5:35])
    torch.testing.assert_close(out[:, 5:35], expected_sin, rtol=0, atol=1e-6)
    assert torch.equal(out[:, :5], torch.zeros(20, 5))
    assert dense.cos(x, out=x) is x
    torch.testing.assert_close(x, expected_cos, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_syrk_upper_holds_the_gram_matrix_above_the_diagonal(dtype):
    Z = torch.randn(60, 25, dtype=dtype)
    expected = (Z.T @ Z).numpy()
    tolerance = 1e-4 if dtype == torch.float32 else 1e-10
    for layout in _layouts(Z).values():
        upper = dense.syrk_upper(layout)
        assert upper.flags.f_contiguous
        np.testing.assert_allclose(np.triu(upper), np.triu(expected), rtol=tolerance, atol=tolerance)
    system = dense.system_upper(Z, 0.5, 3.0)  # 0.5 Z^T Z + 3 I in float64
    assert system.dtype == np.float64 and system.flags.f_contiguous
    np.testing.assert_allclose(np.triu(system), np.triu(0.5 * expected + 3.0 * np.eye(25)), rtol=tolerance,
                               atol=tolerance)


def test_cholesky_solve_upper_reads_the_upper_triangle_and_refuses_an_indefinite_system():
    generator = np.random.default_rng(0)
    A = generator.normal(size=(30, 12))
    system = A.T @ A + np.eye(12)
    rhs = generator.normal(size=(12, 2))
    damaged = np.asfortranarray(np.triu(system) + np.tril(np.full((12, 12), 1e6), -1))  # garbage below
    solution = dense.cholesky_solve_upper(damaged, rhs)
    np.testing.assert_allclose(solution, np.linalg.solve(system, rhs), rtol=1e-10)
    assert dense.cholesky_solve_upper(np.asfortranarray(-system), rhs) is None
    vector = dense.cholesky_solve_upper(np.asfortranarray(system.copy()), rhs[:, 0])
    assert vector.shape == (12,)


def test_a_float32_system_is_formed_and_factorised_in_float32():
    generator = np.random.default_rng(1)
    A = generator.normal(size=(40, 12))
    rhs = generator.normal(size=(12, 2))
    system = dense.system_upper(torch.from_numpy(A.astype(np.float32)), 0.25, 2.0, dtype=np.float32)
    assert system.dtype == np.float32 and system.flags.f_contiguous
    np.testing.assert_allclose(np.triu(system), np.triu(0.25 * A.T @ A + 2.0 * np.eye(12)), rtol=1e-5, atol=1e-5)
    solution = dense.cholesky_solve_upper(system, rhs)  # rhs in float64: solved in the system's float32
    assert solution.dtype == np.float32
    np.testing.assert_allclose(solution, np.linalg.solve(0.25 * A.T @ A + 2.0 * np.eye(12), rhs), rtol=1e-4, atol=1e-6)
    assert dense.cholesky_solve_upper(np.asfortranarray(-system), rhs) is None


@pytest.mark.parametrize("width", [30, 60])  # a singular system of 31 columns on torch, of 61 on LAPACK
def test_the_float32_ridge_solve_is_the_float64_one_to_its_precision_and_falls_back_when_singular(width):
    generator = torch.Generator().manual_seed(3)
    Z = torch.rand(3000, 60, generator=generator)  # above the size where the LAPACK path runs
    y = torch.randn(3000, 2, generator=generator)
    single = solve_ridge(Z, y, 1e-4, solve_dtype=torch.float32)
    double = solve_ridge(Z, y, 1e-4)
    assert single.coef.dtype == torch.float32
    # cond(Z^T Z / n + 1e-4 I) is about 3e3 here: float32 leaves a few 1e-5 relative
    torch.testing.assert_close(single.coef, double.coef, rtol=1e-3, atol=1e-3 * float(double.coef.abs().max()))
    # a constant column at alpha = 0: the float32 factorisation fails, and the float64 solve
    # (then least squares) answers as for float64 features, not None or NaN
    singular = torch.cat([Z[:, :width], torch.full((3000, 1), 3.0)], dim=1)
    assert dense.syrk_pays(singular) == (width == 60)
    fallback = solve_ridge(singular, y, 0.0, solve_dtype=torch.float32)
    assert torch.isfinite(fallback.coef).all() and float(fallback.coef[-1].abs().max()) < 1e-4
    torch.testing.assert_close(fallback.coef, solve_ridge(singular, y, 0.0).coef, rtol=1e-4, atol=1e-4)


def test_the_lapack_ridge_solve_equals_the_torch_one_and_falls_back_when_singular():
    generator = torch.Generator().manual_seed(2)
    Z = torch.randn(3000, 60, generator=generator)  # above the size where the LAPACK path runs
    y = torch.randn(3000, generator=generator)
    fast = solve_ridge(Z, y, 1e-3)
    slow = solve_ridge(Z, y, 1e-3, solve_dtype=None)  # float32 torch solve
    torch.testing.assert_close(fast.coef, slow.coef, rtol=1e-3, atol=1e-4)
    centred = Z.clone()
    in_place = solve_ridge(centred, y, 1e-3, overwrite_z=True)
    assert torch.equal(in_place.coef, fast.coef)
    torch.testing.assert_close(centred.mean(dim=0), torch.zeros(60), rtol=0, atol=1e-5)
    # a constant column at alpha = 0: centred, its row of the system is exactly zero, so the
    # Cholesky factorisation fails and least squares answers (coefficient 0 on that column)
    # (on two threads, where MKL's default least squares, gelsy, missed by up to 0.07 call to call)
    singular = torch.cat([Z[:, :30].double(), torch.full((3000, 1), 3.0, dtype=torch.float64)], dim=1)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        solution = solve_ridge(singular, y.double(), 0.0)
    finally:
        torch.set_num_threads(previous)
    assert torch.isfinite(solution.coef).all() and float(solution.coef[-1].abs()) < 1e-8
    expected = torch.linalg.lstsq(torch.cat([singular[:, :30], torch.ones(3000, 1, dtype=torch.float64)], dim=1),
                                  y.double()[:, None]).solution[:, 0]
    torch.testing.assert_close(solution.coef[:30], expected[:30], rtol=1e-8, atol=1e-10)


def test_on_more_than_two_threads_torchs_kernels_run_and_agree():
    """There torch's parallel kernels take over below the threaded size: the same values to rounding."""
    generator = torch.Generator().manual_seed(3)
    a, b = torch.randn(300, 40, generator=generator), torch.randn(40, 200, generator=generator)
    x = torch.randn(300, 200, generator=generator)
    ours = dense.matmul(a, b), dense.cos(x), dense.sin(x)
    previous = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        theirs = dense.matmul(a, b), dense.cos(x), dense.sin(x)
    finally:
        torch.set_num_threads(previous)
    # a float32 sum of 40 products whose terms reach 10 and more, summed in another order on more threads:
    # differences of a few eps32 * max |a_i b_i|, 2e-6 on an AMD EPYC (MKL), so atol is 1e-5 there
    for got, want, atol in zip(ours, theirs, (1e-5, 1e-6, 1e-6)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=atol)


def test_symmetric_eigh_retries_a_decomposition_that_does_not_converge(monkeypatch):
    """LAPACK failed on a curvature-weighted Gram matrix of 663 columns, 598 of them zero, entries under 1e-6
    (on one thread, a many-class streamed fit); the retry decomposes it scaled to a unit diagonal, in float64."""
    from rffkit._dense import symmetric_eigh

    rng = np.random.default_rng(0)
    Z = np.zeros((32, 60))
    Z[:, :9] = rng.random((32, 9)) < 0.2
    Zc = Z - Z.mean(axis=0)
    for dtype in (torch.float32, torch.float64):
        matrix = torch.as_tensor(Zc.T @ Zc * 1e-7, dtype=dtype)
        eigh, calls = torch.linalg.eigh, []

        def failing_first(A):
            calls.append(A)
            if len(calls) == 1:
                raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")
            return eigh(A)

        monkeypatch.setattr(torch.linalg, "eigh", failing_first)
        values, vectors = symmetric_eigh(matrix)
        monkeypatch.undo()
        assert len(calls) == 2 and calls[1].dtype == torch.float64 and float(torch.diagonal(calls[1]).max()) == 1.0
        assert values.dtype == vectors.dtype == dtype
        rebuilt = (vectors.double() * values.double()) @ vectors.double().T
        tolerance = 1e-6 if dtype == torch.float32 else 1e-12
        np.testing.assert_allclose(rebuilt.numpy(), matrix.double().numpy(), atol=tolerance * float(matrix.abs().max()))
        np.testing.assert_allclose(values.double().numpy(), np.linalg.eigvalsh(matrix.double().numpy()),
                                   atol=tolerance * float(matrix.abs().max()))
