import numpy as np
import pytest

from rffkit.datasets import (
    SYNTHETIC_PROBLEMS,
    make_gregorova_se1,
    make_gregorova_se2,
    make_gregorova_se3,
    make_jordan_se1,
)


@pytest.mark.parametrize(
    "make, n_features, support",
    [
        (make_gregorova_se1, 18, [0, 2, 6, 7, 8]),
        (make_gregorova_se2, 100, [10, 11, 12, 13, 14]),
        (make_gregorova_se3, 1000, list(range(10))),
        (make_jordan_se1, 18, [0]),
    ],
)
def test_shapes_support_and_determinism(make, n_features, support):
    X, y, found = make(50, random_state=3, return_support=True)
    assert X.shape == (50, n_features) and y.shape == (50,)
    np.testing.assert_array_equal(found, support)
    X2, y2 = make(50, random_state=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("name", sorted(SYNTHETIC_PROBLEMS))
def test_noise_is_independent_of_inputs(name):
    make = SYNTHETIC_PROBLEMS[name]
    X0, y0 = make(400, noise=0.0, random_state=1)
    X1, y1 = make(400, noise=1.0, random_state=1)
    # the inputs do not depend on the noise level, and the noise is the difference
    np.testing.assert_array_equal(X0, X1)
    eps = y1 - y0
    assert abs(eps.std() - 1.0) < 0.1
    # uncorrelated with every input column (|r| < 4 / sqrt(n))
    r = np.corrcoef(np.column_stack([eps, X0[:, :20]]).T)[0, 1:]
    assert np.max(np.abs(r)) < 4 / np.sqrt(400)


def test_se1_formula_and_noise_floor():
    X, y = make_gregorova_se1(2000, noise=0.0, random_state=0)
    expected = np.sin((X[:, 0] + X[:, 2]) ** 2) * np.sin(X[:, 6] * X[:, 7] * X[:, 8])
    np.testing.assert_allclose(y, expected)
    _, y_noisy = make_gregorova_se1(2000, random_state=0)
    assert abs(np.mean((y_noisy - y) ** 2) - 0.01) < 0.002


def test_se3_blocks_are_noisy_copies_of_latents():
    X, _ = make_gregorova_se3(3000, random_state=0)
    # columns of one block correlate at 1 / (1 + 0.1^2) ~ 0.99, across blocks ~ 0
    r = np.corrcoef(X[:, :10].T)
    assert r[0, 4] > 0.98 and abs(r[0, 5]) < 0.1


def test_jordan_correlation_structure():
    X, y = make_jordan_se1(20000, random_state=0, noise=0.0)
    c = np.corrcoef(X[:, :3].T)
    np.testing.assert_allclose([c[0, 1], c[0, 2]], [0.6, 0.36], atol=0.03)
    np.testing.assert_array_equal(y, X[:, 0])


@pytest.mark.parametrize("kwargs", [{"n_samples": 0}, {"n_samples": 2.5}, {"noise": -1.0}, {"noise": np.nan}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="make_gregorova_se1"):
        make_gregorova_se1(**{"n_samples": 10, **kwargs})
