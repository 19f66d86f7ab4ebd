"""The vocabulary of a model file's object tree, shared by its encoder and its decoder.

The allow-list of classes from outside rffkit and :func:`lookup_class`, the dtypes, bit
generators and builtin types a tree may name, the naming of attribute paths in messages, and
:class:`TreeError`. The tree itself is described in :mod:`rffkit._model_tree`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import pkgutil
import sys

import numpy as np
import torch
from sklearn.compose import ColumnTransformer
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    RobustScaler,
    StandardScaler,
)
from torch import nn

__all__ = ["ALLOWED_CLASSES", "MAX_DEPTH", "TreeError", "import_rffkit", "lookup_class", "sha256", "where"]

MAX_DEPTH = 200

#: Classes from outside rffkit that a tree may hold, by the public name it records.
ALLOWED_CLASSES = {
    f"{public}.{cls.__name__}": cls
    for public, classes in {
        "sklearn.pipeline": (Pipeline, FeatureUnion),
        "sklearn.compose": (ColumnTransformer,),
        "sklearn.preprocessing": (
            StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler, OneHotEncoder, OrdinalEncoder,
            FunctionTransformer,  # only the identity (func=None), which remainder='passthrough' holds
        ),
        "sklearn.impute": (SimpleImputer, MissingIndicator),
        "torch.nn": (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.Linear, nn.ReLU, nn.Identity),
    }.items()
    for cls in classes
}
BUILTIN_TYPES = {t.__name__: t for t in (bool, int, float, complex, str, bytes, object)}
BIT_GENERATORS = {
    c.__name__: c
    for c in (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64)
}
TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
NUMERIC_KINDS, TEXT_KINDS = "biufc", "USO"


class TreeError(ValueError):
    """A tree that does not decode; the message starts with the attribute path."""


def sha256(data):
    """The SHA-256 of ``data`` (bytes or a byte buffer), as hex digits."""
    return hashlib.sha256(data).hexdigest()


def attr(path, name):
    """The path of attribute ``name`` of the object at ``path``."""
    return f"{path}.{name}" if path else name


def item(path, key):
    """The path of item ``key`` of the container at ``path``."""
    return f"{path or '<root>'}[{key!r}]"


def where(path):
    """``path`` for messages: the root object is ``<root>``."""
    return path or "<root>"


@functools.cache
def import_rffkit():
    """Import every module of rffkit but ``__main__`` (which runs the command line), once.

    ``import rffkit`` loads its modules on first use, so a class of a model file may live in
    a module nothing has imported yet. The decoder calls this before it rebuilds a tree: what
    it imports then never depends on the file, and :func:`lookup_class` finds every class of
    rffkit's in ``sys.modules``.
    """
    import rffkit

    for info in pkgutil.iter_modules(rffkit.__path__):
        if info.name != "__main__":
            importlib.import_module(f"rffkit.{info.name}")


def lookup_class(module, qualname):
    """The class ``module.qualname`` if a tree may hold it, else None; imports nothing."""
    cls = ALLOWED_CLASSES.get(f"{module}.{qualname}")
    if cls is not None:
        return cls
    if module != "rffkit" and not module.startswith("rffkit."):
        return None
    found = sys.modules.get(module)  # every module of rffkit's, once import_rffkit has run
    for part in qualname.split("."):  # vars(), not getattr(): no descriptor runs
        found = vars(found).get(part) if found is not None and part.isidentifier() else None
    if (
        isinstance(found, type)
        and found.__module__ == module
        and found.__qualname__ == qualname
        and found.__new__ is object.__new__
        and not any(getattr(base, "__slots__", ()) for base in found.__mro__[:-1])
    ):
        return found
    return None


def checked_dtype(dtype, path, kinds=NUMERIC_KINDS + TEXT_KINDS, error=TypeError):
    """``dtype`` if a tree may hold it (of ``kinds``, no structured or extended types), else
    ``error`` naming ``path``."""
    portable = not (dtype.kind == "f" and dtype.itemsize > 8 or dtype.kind == "c" and dtype.itemsize > 16)
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in kinds or not portable:
        raise error(f"{'Cannot save ' if error is TypeError else ''}{where(path)}: numpy dtype {dtype} is "
                    "not supported (bool, integer, float up to 64 bits, complex, str, bytes, object).")
    return dtype
