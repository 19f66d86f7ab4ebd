"""Shared fixtures: fixed seeds, dtypes and a device list whose CUDA entries skip."""

import numpy as np
import pytest
import torch

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
