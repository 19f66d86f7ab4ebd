"""How close do random Fourier features get to the exact kernel?

On the standardised breast-cancer inputs (bundled with scikit-learn), the Gram matrix
K_hat = Z Z^T of D random features is compared with the exact Gaussian and Laplacian
kernels from sklearn.metrics.pairwise, for i.i.d., orthogonal and quasi-Monte Carlo
frequencies, and scikit-learn's own RBFSampler. Error: ||K - K_hat||_F / ||K||_F.
Run: python examples/kernel_approximation.py
"""

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.kernel_approximation import RBFSampler
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from sklearn.preprocessing import StandardScaler

from rffkit import RandomFourierFeatures
from rffkit.approximation import approximate_kernel_matrix, approximation_error

SIZES = (64, 256, 1024)
SEEDS = (0, 1, 2)


def main():
    X = StandardScaler().fit_transform(load_breast_cancer().data)
    # rffkit's kernels are k((x - y) / l): Gaussian exp(-||d||^2 / 2), Laplacian exp(-||d||_1);
    # length scales near the typical distance between points, so K is neither ~0 nor ~1
    gaussian_scale, laplacian_scale = 5.0, 30.0
    exact = {
        "gaussian": rbf_kernel(X, gamma=1 / (2 * gaussian_scale**2)),
        "laplacian": laplacian_kernel(X, gamma=1 / laplacian_scale),
    }
    maps = {
        ("gaussian", "iid"): RandomFourierFeatures(kernel="gaussian", length_scale=gaussian_scale),
        ("gaussian", "orthogonal"): RandomFourierFeatures(length_scale=gaussian_scale, sampling="orthogonal"),
        ("gaussian", "qmc"): RandomFourierFeatures(length_scale=gaussian_scale, sampling="qmc"),
        ("gaussian", "sklearn RBFSampler"): RBFSampler(gamma=1 / (2 * gaussian_scale**2)),
        ("laplacian", "iid"): RandomFourierFeatures(kernel="laplacian", length_scale=laplacian_scale),
        ("laplacian", "qmc"): RandomFourierFeatures(kernel="laplacian", length_scale=laplacian_scale, sampling="qmc"),
    }
    print(f"{X.shape[0]} points, {X.shape[1]} inputs; relative error, mean over {len(SEEDS)} seeds")
    print(f"{'kernel':10s} {'frequencies':20s}" + "".join(f"{'D=' + str(D):>9s}" for D in SIZES))
    errors = {}
    for (kernel, label), feature_map in maps.items():
        row = []
        for D in SIZES:
            runs = [approximation_error(exact[kernel], approximate_kernel_matrix(
                feature_map.set_params(n_components=D, random_state=seed).fit(X), X)).nrmse for seed in SEEDS]
            row.append(float(np.mean(runs)))
        errors[kernel, label] = row
        print(f"{kernel:10s} {label:20s}" + "".join(f"{value:9.4f}" for value in row))
    return errors


if __name__ == "__main__":
    main()
