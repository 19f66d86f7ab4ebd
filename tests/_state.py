"""The whole state of an estimator, to check that a failed or interrupted fit changed nothing."""

import copy
import math

import numpy as np
import torch
from sklearn.base import BaseEstimator


def _snapshot(value):
    """A deep copy of a fitted value, to check that nothing changed it in place."""
    if isinstance(value, torch.nn.Module):
        return {name: tensor.detach().clone() for name, tensor in value.state_dict().items()}
    if isinstance(value, BaseEstimator):
        return {name: _snapshot(item) for name, item in vars(value).items()}
    return copy.deepcopy(value)


def _same(first, second):
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    if isinstance(first, torch.Tensor):
        return torch.equal(first, second)
    if isinstance(first, np.ndarray):
        return first.dtype == second.dtype and np.array_equal(first, second, equal_nan=first.dtype.kind in "fc")
    if isinstance(first, (list, tuple)):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    if isinstance(first, float) and math.isnan(first):
        return isinstance(second, float) and math.isnan(second)
    try:
        return bool(first == second)
    except Exception:  # objects without a useful ==: the identity check covers them
        return True


def state_of(estimator):
    """``(references, contents)`` of everything in the estimator's ``__dict__``."""
    return dict(vars(estimator)), {name: _snapshot(value) for name, value in vars(estimator).items()}


def assert_state_unchanged(estimator, before):
    references, contents = before
    now = vars(estimator)
    assert now.keys() == references.keys(), f"attributes changed: {set(now) ^ set(references)}"
    for name, value in references.items():
        assert now[name] is value, f"{name} was replaced by a failed fit"
        assert _same(_snapshot(now[name]), contents[name]), f"{name} was changed in place by a failed fit"
