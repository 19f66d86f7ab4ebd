"""scikit-learn's estimator checks and the RFFNet contract (determinism, pickling, errors)."""

import pickle

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from rffkit import RFFNetClassifier, RFFNetRegressor

# Small, fast configurations: the checks fit dozens of times on tiny data.
FAST = dict(n_random_features=32, max_iter=30, random_state=0)


def _expected_failures(estimator):
    return {}


@parametrize_with_checks(
    [
        RFFNetRegressor(**FAST),
        RFFNetRegressor(**FAST, solver="adam"),
        RFFNetClassifier(**FAST),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
