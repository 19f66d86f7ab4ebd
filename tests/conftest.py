"""Shared fixtures: fixed seeds, dtypes and a device list whose CUDA entries skip.

Hypothesis profiles: ``rffkit`` (loaded by default) replays the same examples on every run
(``derandomize``), writes no example database and sets no deadline (fits vary in time);
``slow`` searches with fresh random examples and 25 times the budget of each property
test: ``HYPOTHESIS_PROFILE=slow pytest tests/test_properties.py``.
"""

import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

_HYPOTHESIS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("rffkit", max_examples=10, derandomize=True, **_HYPOTHESIS)
settings.register_profile("slow", max_examples=250, derandomize=False, **_HYPOTHESIS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "rffkit"))

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine"),
    ),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)
