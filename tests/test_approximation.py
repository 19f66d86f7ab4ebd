"""Error measures and the approximation plot."""

import subprocess
import sys

import numpy as np
import pytest
from scipy import sparse

from rffkit import RandomBinningFeatures, RandomFourierFeatures
from rffkit.approximation import (
    approximate_kernel_matrix,
    approximation_error,
    approximation_error_curve,
    plot_approximation_error,
)
from rffkit.kernels import kernel_matrix


def test_error_measures_match_loops():
    rng = np.random.default_rng(0)
    K, K_hat = rng.normal(size=(7, 5)), rng.normal(size=(7, 5))
    squares = [(K[i, j] - K_hat[i, j]) ** 2 for i in range(7) for j in range(5)]
    rmse = np.sqrt(sum(squares) / len(squares))
    nrmse = np.sqrt(sum(squares)) / np.sqrt(sum(v * v for v in K.ravel()))
    error = approximation_error(K, K_hat)
    assert error.rmse == pytest.approx(rmse, rel=1e-12)
    assert error.nrmse == pytest.approx(nrmse, rel=1e-12)
    assert approximation_error(K, sparse.csr_matrix(K)) == (0.0, 0.0)
    with pytest.raises(ValueError, match="expected equal shapes"):
        approximation_error(K, K_hat.T)


def test_curve_and_kernel_estimates():
    X = np.random.default_rng(1).uniform(size=(40, 1))
    K = kernel_matrix("laplacian", X)
    model = RandomBinningFeatures(n_components=5, random_state=0).fit(X)
    Z = model.transform(X)
    np.testing.assert_allclose(approximate_kernel_matrix(model, X), (Z @ Z.T).toarray())
    curve = approximation_error_curve(RandomFourierFeatures(kernel="laplacian"), X, K, [8, 32, 128], [0, 1])
    assert curve["nrmse"].shape == curve["rmse"].shape == (2, 3)
    # NRMSE and RMSE differ by the constant ||K||_F / n.
    np.testing.assert_allclose(curve["rmse"] / curve["nrmse"], np.linalg.norm(K) / 40)
    assert np.all(np.diff(curve["nrmse"].mean(axis=0)) < 0)


def test_plot_draws_one_line_per_map(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    curves = {
        "a": {"n_components": [1, 2, 4], "nrmse": [[1.0, 0.7, 0.5], [1.2, 0.8, 0.6]]},
        "b": {"n_components": [1, 2, 4], "nrmse": [0.5, 0.4, 0.3]},
    }
    ax = plot_approximation_error(curves, title="t")
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["a", "b", r"$\propto D^{-1/2}$"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [1.1, 0.75, 0.55])
    ax.figure.savefig(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="metric"):
        plot_approximation_error(curves, metric="mae", ax=ax)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_matplotlib_is_imported_lazily():
    code = "import sys, rffkit.approximation; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
