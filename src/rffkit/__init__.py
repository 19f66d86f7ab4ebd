"""rffkit: kernel methods that scale and explain themselves.

Random features turn a kernel machine into a linear model; RFFNet learns one relevance
per input (an ARD kernel) jointly with that model.

The estimators and submodules below load on first use (PEP 562), so ``import rffkit`` and
the command line's ``--help`` do not wait for torch and scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from . import exceptions
from .config import config_context, get_config, set_config
from .exceptions import (
    ChunkedFitWarning, DivergenceError, InsufficientMemoryError, MemoryBudgetError, SmallSampleWarning,
)

__version__ = "0.1.0"

#: Where each lazily loaded name lives: a public submodule (None) or the module that defines it.
_LAZY = {
    **dict.fromkeys(["approximation", "binning", "cli", "datasets", "distributed", "features", "inspection",
                     "io", "kernels", "layers", "logistic", "persistence", "rffnet", "ridge", "srff",
                     "stability"]),
    "ARDRandomFourierFeatures": "layers",
    "RandomBinningFeatures": "binning",
    "RandomFourierFeatures": "features",
    "RFFClassifier": "logistic",
    "RFFRidge": "ridge",
    "SRFFRegressor": "srff",
    "RFFNetClassifier": "rffnet",
    "RFFNetRegressor": "rffnet",
    "RelevanceStability": "stability",
    "relevance_stability": "stability",
    "save": "persistence",
    "load": "persistence",
}

__all__ = [
    "ARDRandomFourierFeatures",
    "RandomBinningFeatures",
    "RandomFourierFeatures",
    "RFFClassifier",
    "RFFRidge",
    "SRFFRegressor",
    "RFFNetClassifier",
    "RFFNetRegressor",
    "RelevanceStability",
    "relevance_stability",
    "approximation",
    "datasets",
    "kernels",
    "__version__",
    "save", "load",
    "config_context", "get_config", "set_config",
    "exceptions", "ChunkedFitWarning", "DivergenceError", "InsufficientMemoryError", "MemoryBudgetError",
    "SmallSampleWarning",
]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _LAZY[name]
    value = importlib.import_module(f".{name if module is None else module}", __name__)
    if module is not None:
        value = getattr(value, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what static tools and editors see
    from . import approximation, datasets, kernels
    from .binning import RandomBinningFeatures
    from .features import RandomFourierFeatures
    from .layers import ARDRandomFourierFeatures
    from .logistic import RFFClassifier
    from .persistence import load, save
    from .rffnet import RFFNetClassifier, RFFNetRegressor
    from .ridge import RFFRidge
    from .srff import SRFFRegressor
    from .stability import RelevanceStability, relevance_stability
