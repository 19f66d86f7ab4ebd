"""rffkit: kernel methods that scale and explain themselves.

Random features turn a kernel machine into a linear model; RFFNet learns one relevance
per input (an ARD kernel) jointly with that model.
"""

from . import approximation, datasets, exceptions, kernels
from .binning import RandomBinningFeatures
from .config import config_context, get_config, set_config
from .exceptions import ChunkedFitWarning, DivergenceError, InsufficientMemoryError, SmallSampleWarning
from .features import RandomFourierFeatures
from .layers import ARDRandomFourierFeatures
from .logistic import RFFClassifier
from .persistence import load, save
from .ridge import RFFRidge
from .srff import SRFFRegressor
from .rffnet import RFFNetClassifier, RFFNetRegressor
from .stability import RelevanceStability, relevance_stability

__version__ = "0.1.0"

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
    "exceptions", "ChunkedFitWarning", "DivergenceError", "InsufficientMemoryError", "SmallSampleWarning",
]
