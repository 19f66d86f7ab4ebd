"""rffkit: kernel methods that scale and explain themselves.

Random features turn a kernel machine into a linear model; RFFNet learns one relevance
per input (an ARD kernel) jointly with that model.
"""

from . import datasets, kernels
from .features import RandomFourierFeatures
from .layers import ARDRandomFourierFeatures
from .linear import RFFClassifier
from .ridge import RFFRidge

__version__ = "0.1.0"

__all__ = [
    "ARDRandomFourierFeatures",
    "RandomFourierFeatures",
    "RFFClassifier",
    "RFFRidge",
    "datasets",
    "kernels",
    "__version__",
]
