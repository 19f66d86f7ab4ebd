"""The one boundary between users' arrays and the tensor numerics.

Everything that turns user input into tensors lives here: device resolution, dtype
choice, random-state plumbing (never touching global NumPy or torch state) and
numpy <-> torch conversion.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.utils import check_random_state

__all__ = [
    "SEED_BOUND",
    "draw_seeds",
    "standardisation",
    "resolve_device",
    "inference_device",
    "CPUPicklingMixin",
    "torch_dtype_for",
    "seed_from_random_state",
    "torch_generator",
    "as_tensor",
    "to_numpy",
]

#: Seeds drawn for local generators lie in [0, SEED_BOUND).
SEED_BOUND = 2**31 - 1


def resolve_device(device, *, owner="estimator"):
    """Return a ``torch.device`` for ``device``, with an actionable error if absent.

    ``device`` may be ``'cpu'``, ``'cuda'``, ``'cuda:N'``, ``'auto'`` (CUDA when one is
    present, otherwise the CPU) or a ``torch.device``.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"{owner}: device={device!r} is not a valid torch device; "
            "expected 'cpu', 'cuda', 'cuda:N' or 'auto'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{owner}: device={device!r} was requested but no CUDA GPU is available "
            "to this torch build; use device='cpu' or device='auto'."
        )
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(
            f"{owner}: device type {resolved.type!r} is not supported; "
            "expected 'cpu' or 'cuda'."
        )
    return resolved


def inference_device(fitted_device):
    """The device a fitted model predicts on: where it was fitted, or the CPU without CUDA.

    A model fitted on a GPU and moved to a machine without one predicts on the CPU
    instead of failing.
    """
    fitted_device = torch.device(fitted_device)
    if fitted_device.type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu")
    return fitted_device


class CPUPicklingMixin:
    """Pickle a fitted estimator with its fitted device (``_device``) set to the CPU.

    A pickled model then always reloads and predicts on a CPU-only machine; the
    ``device`` parameter is kept as the user passed it.
    """

    def __getstate__(self):
        state = super().__getstate__()
        if "_device" in state:
            state["_device"] = torch.device("cpu")
        return state


def torch_dtype_for(array):
    """float32 input stays float32; every other dtype computes in float64."""
    if getattr(array, "dtype", None) == np.float32:
        return torch.float32
    return torch.float64


def seed_from_random_state(random_state):
    """Draw one integer seed from ``random_state`` (None, int or RandomState).

    The draw comes from a local ``RandomState``; the global NumPy state is only read
    when ``random_state`` is None, exactly as scikit-learn does.
    """
    if isinstance(random_state, numbers.Integral):
        # Use the integer itself so the seed is stable and readable.
        return int(random_state) % SEED_BOUND
    return int(check_random_state(random_state).randint(SEED_BOUND))


def draw_seeds(random_state, n_seeds):
    """``n_seeds`` integer seeds drawn from ``random_state`` (None, int or RandomState).

    The draws come from ``check_random_state``'s local ``RandomState``, so an integer
    ``random_state`` gives the same seeds every time and the global state is untouched.
    """
    return [int(seed) for seed in check_random_state(random_state).randint(SEED_BOUND, size=n_seeds)]


def standardisation(X):
    """Column means and scales that standardise ``X``: ``(X - mean) / scale``.

    A column whose standard deviation is within rounding of zero (at most
    ``max(eps, 1e-12) * max(1, |mean|)``, ``eps`` of the dtype of ``X``) is constant:
    its scale is 1, so it stays a column of zeros instead of amplifying rounding noise.
    Returns ``(mean, scale)``, two arrays of shape (n_features,) in the dtype of ``X``.
    """
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    tolerance = max(float(np.finfo(X.dtype).eps), 1e-12) * np.maximum(np.abs(mean), 1.0)
    scale[~(scale > tolerance)] = 1.0
    return mean, scale


def torch_generator(seed, device="cpu"):
    """A local torch generator seeded with ``seed`` (global torch state untouched)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator


def as_tensor(array, *, dtype, device):
    """Convert a NumPy array (or tensor) into a contiguous tensor on ``device``."""
    if isinstance(array, torch.Tensor):
        return array.to(device=device, dtype=dtype)
    return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype, device=device)


def to_numpy(tensor):
    """Detach a tensor and return it as a NumPy array on the CPU."""
    return tensor.detach().cpu().numpy()
