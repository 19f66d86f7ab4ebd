"""The object tree of a model file: objects to JSON plus tensors, and back, safely.

:func:`encode` turns an object into a JSON-able tree and a dict of CPU tensors (the
arrays); :func:`decode` rebuilds it. JSON ``null``, booleans, numbers and strings stand
for themselves (non-finite floats excepted); every other value is a node
``{"$": kind, ...}``:

=====================  =====================================================================
kind                   fields
=====================  =====================================================================
float                  ``v``: ``'nan'``, ``'inf'`` or ``'-inf'``
complex, slice         ``v``: ``[real, imag]``, ``[start, stop, step]``
bytes                  ``hex``
list, tuple, set,      ``items``
frozenset
dict, ordered_dict     ``map`` (all keys strings) or ``items``: ``[[key, value], ...]``
builtin_type,          ``v``: ``'float'``; a numpy dtype string (``'<f8'``); ``'float32'``
numpy_type,
numpy_dtype,
torch_dtype
torch_device           ``v``: the device as saved (decoded as ``'cpu'``)
numpy_scalar           ``dtype``, ``v``
ndarray                ``dtype``, ``shape`` and either ``items`` (str, bytes, object arrays) or
                       ``key``, ``sha256`` and ``axes`` (the memory order, when not C) of a tensor
tensor                 as ndarray, plus ``requires_grad``, ``parameter``, ``device``
random_state,          ``state``; ``bit_generator`` (a numpy RandomState or Generator)
generator
object                 ``module``, ``qualname``, ``state`` (the instance ``__dict__``)
ref                    ``id``: the node with that ``id``, met earlier (shared objects)
=====================  =====================================================================

The decoder builds only these values and instances of allow-listed classes, made by
``cls.__new__(cls)`` and given their ``__dict__``: it imports nothing a tree names (only
rffkit's own modules, all of them, whatever the tree holds), and calls no function or
constructor a tree names.

The vocabulary of the tree (allow-list, dtypes, :class:`TreeError`) is in
``rffkit._tree_common``, :func:`encode` in ``rffkit._tree_encoder`` and :func:`decode` in
``rffkit._tree_decoder``; import them from here.
"""

from __future__ import annotations

from ._tree_common import ALLOWED_CLASSES, TreeError, sha256
from ._tree_decoder import decode
from ._tree_encoder import encode

__all__ = ["ALLOWED_CLASSES", "TreeError", "encode", "decode", "sha256"]
