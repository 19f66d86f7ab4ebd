"""Encoding of a model file's object tree: an object to JSON-able nodes and CPU tensors.

:func:`encode` refuses, naming the attribute path, whatever a tree may not hold; the tree is
described in :mod:`rffkit._model_tree`.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import torch
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import FunctionTransformer
from torch import nn

from ._tree_common import (
    ALLOWED_CLASSES,
    BIT_GENERATORS,
    BUILTIN_TYPES,
    MAX_DEPTH,
    NUMERIC_KINDS,
    TEXT_KINDS,
    TORCH_DTYPES,
    attr,
    checked_dtype,
    item,
    lookup_class,
    sha256,
    where,
)

__all__ = ["encode"]

_PUBLIC_NAMES = {cls: name for name, cls in ALLOWED_CLASSES.items()}
_FUNCTION_TRANSFORMER_HINT = (
    "it holds Python functions, and a model file holds data only; only the identity "
    "FunctionTransformer (func=None, inverse_func=None) can be saved: use a scikit-learn "
    "transformer from the allow-list instead"
)
_STORABLE_TORCH_DTYPES = {
    TORCH_DTYPES[name]
    for name in ("bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                 "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
    if name in TORCH_DTYPES
}
_CONTAINERS = (tuple, list, set, frozenset, dict, collections.OrderedDict, np.ndarray,
               np.random.RandomState, np.random.Generator)


def _class_name(cls):
    public = _PUBLIC_NAMES.get(cls)
    return tuple(public.rsplit(".", 1)) if public is not None else (cls.__module__, cls.__qualname__)


def _encode_float(value):
    return value if math.isfinite(value) else {"$": "float", "v": repr(value)}


def _memory_order(strides, shape):
    """Axes from slowest to fastest in memory, so that ``transpose(axes)`` is C-ordered."""
    if all(s >= 0 for s in strides) and all(a >= b for a, b in zip(strides, strides[1:])):
        return tuple(range(len(shape)))
    return tuple(sorted(range(len(shape)), key=lambda axis: -abs(strides[axis]) if shape[axis] > 1 else 0))


def tensor_bytes(tensor):
    """The bytes of a contiguous CPU tensor, as a uint8 array (what the SHA-256 covers)."""
    if tensor.numel() == 0:  # an empty tensor may have any strides, which view() refuses
        return np.zeros(0, dtype=np.uint8)
    return tensor.reshape(-1).view(torch.uint8).numpy()


def encode(obj):
    """``(tree, tensors, dtypes, devices)`` for ``obj``; TypeError/ValueError naming the path.

    A refusal is raised here, once, rather than from deep in the recursion over the tree.
    """
    encoder = _Encoder()
    try:
        tree = encoder.encode(obj, "", 0)
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError) or not str(error).startswith("Cannot save"):
            raise
        refusal = error
    else:
        return tree, encoder.tensors, sorted(encoder.dtypes), sorted(encoder.devices)
    raise type(refusal)(str(refusal)) from None


def _column_transformer_state(transformer, path):
    """The ``__dict__`` of a ColumnTransformer to save: a fitted one's callable column selectors (such as
    ``make_column_selector``) replaced by the columns they chose at fit, which its ``transformers_`` and
    predictions use; an unfitted one with a callable selector is refused."""
    state = vars(transformer)
    specs = state.get("transformers")
    if not isinstance(specs, (list, tuple)) or not any(
            isinstance(spec, (list, tuple)) and len(spec) == 3 and callable(spec[2]) for spec in specs):
        return state
    chosen = state.get("_columns")
    if "transformers_" not in state or not isinstance(chosen, list) or len(chosen) != len(specs):
        raise TypeError(f"Cannot save {where(attr(path, 'transformers'))}: this ColumnTransformer selects columns "
                        "with a callable (such as make_column_selector), which is code, and it is not fitted, so "
                        "the columns it selects are not known; fit it first, or give explicit column lists.")
    resolved = [type(spec)((*spec[:2], columns)) if callable(spec[2]) else spec for spec, columns in zip(specs, chosen)]
    return {**state, "transformers": type(specs)(resolved)}


class _Encoder:
    def __init__(self):
        self.tensors, self.memo, self.in_progress = {}, {}, set()  # memo keeps its objects alive
        self.next_id = 0
        self.dtypes, self.devices = set(), set()

    @staticmethod
    def refuse(path, obj, why):
        cls = type(obj)
        return TypeError(
            f"Cannot save {where(path)}: type {cls.__module__}.{cls.__qualname__} is not supported ({why})."
        )

    def encode(self, obj, path, depth):
        if depth > MAX_DEPTH:
            raise ValueError(f"Cannot save {where(path)}: nested deeper than {MAX_DEPTH} levels.")
        seen = self.memo.get(id(obj))
        if seen is not None:
            if id(obj) in self.in_progress:
                raise ValueError(f"Cannot save {where(path)}: it refers back to {where(seen[2])}, "
                                 "which contains it (a reference cycle).")
            if "id" not in seen[1]:
                seen[1]["id"], self.next_id = self.next_id, self.next_id + 1
            return {"$": "ref", "id": seen[1]["id"]}
        cls = type(obj)
        if obj is None or cls in (bool, int, str):
            return obj
        if cls is float:
            return _encode_float(obj)
        if isinstance(obj, np.generic):  # before the Python types: np.float64 is a float
            return self.encode_numpy_scalar(obj, path)
        if cls in _CONTAINERS or isinstance(obj, torch.Tensor):
            pass
        elif cls is complex:
            return {"$": "complex", "v": [_encode_float(obj.real), _encode_float(obj.imag)]}
        elif cls is bytes:
            return {"$": "bytes", "hex": obj.hex()}
        elif cls is slice:
            parts = (obj.start, obj.stop, obj.step)
            return {"$": "slice", "v": [self.encode(p, attr(path, "slice"), depth + 1) for p in parts]}
        elif isinstance(obj, type) and obj in BUILTIN_TYPES.values():
            return {"$": "builtin_type", "v": obj.__name__}
        elif isinstance(obj, type) and issubclass(obj, np.generic):
            return {"$": "numpy_type", "v": checked_dtype(np.dtype(obj), path).str}
        elif isinstance(obj, np.dtype):
            return {"$": "numpy_dtype", "v": checked_dtype(obj, path).str}
        elif cls is torch.dtype:
            return {"$": "torch_dtype", "v": str(obj).removeprefix("torch.")}
        elif cls is torch.device:
            self.devices.add(str(obj))
            return {"$": "torch_device", "v": str(obj)}
        elif cls is FunctionTransformer and (obj.func is not None or obj.inverse_func is not None):
            raise self.refuse(path, obj, _FUNCTION_TRANSFORMER_HINT)
        elif lookup_class(*_class_name(cls)) is not cls or not hasattr(obj, "__dict__"):
            why = "only rffkit classes and these can be saved: " + ", ".join(sorted(ALLOWED_CLASSES))
            if cls.__name__ == "FunctionTransformer":
                why = _FUNCTION_TRANSFORMER_HINT
            elif isinstance(obj, type) or callable(obj):
                why = "it is code, and a model file holds data only"
            raise self.refuse(path, obj, why)
        node = {}
        if cls is not tuple:  # immutable: a shared tuple is written again, not referenced
            self.memo[id(obj)] = (obj, node, path)
        self.in_progress.add(id(obj))
        try:
            node.update(self.encode_container(obj, path, depth + 1))
        finally:
            self.in_progress.discard(id(obj))
        return node

    def encode_container(self, obj, path, depth):
        cls = type(obj)
        if cls in (tuple, list, set, frozenset):
            items = [self.encode(v, item(path, i), depth) for i, v in enumerate(obj)]
            return {"$": cls.__name__, "items": items}
        if cls in (dict, collections.OrderedDict):
            kind = "dict" if cls is dict else "ordered_dict"
            if all(type(k) is str for k in obj):
                return {"$": kind, "map": {k: self.encode(v, item(path, k), depth) for k, v in obj.items()}}
            return {"$": kind, "items": [[self.encode(k, attr(path, "<key>"), depth),
                                          self.encode(v, item(path, k), depth)] for k, v in obj.items()]}
        if cls is np.ndarray:
            return self.encode_array(obj, path, depth)
        if isinstance(obj, torch.Tensor):
            return self.encode_tensor(obj, path)
        if cls is np.random.RandomState:
            return {"$": "random_state", "state": self.encode(obj.get_state(), attr(path, "state"), depth)}
        if cls is np.random.Generator:
            bit_generator = type(obj.bit_generator)
            if BIT_GENERATORS.get(bit_generator.__name__) is not bit_generator:
                raise self.refuse(attr(path, "bit_generator"), obj.bit_generator, "an unknown bit generator")
            state = self.encode(obj.bit_generator.state, attr(path, "state"), depth)
            return {"$": "generator", "bit_generator": bit_generator.__name__, "state": state}
        # the instance __dict__, not __getstate__: devices are kept as they were
        state = _column_transformer_state(obj, path) if cls is ColumnTransformer else vars(obj)
        if any(type(k) is not str for k in state):
            raise self.refuse(path, obj, "its __dict__ has keys that are not strings")
        module, qualname = _class_name(cls)
        return {"$": "object", "module": module, "qualname": qualname,
                "state": {k: self.encode(v, attr(path, k), depth) for k, v in state.items()}}

    def encode_numpy_scalar(self, value, path):
        dtype = checked_dtype(value.dtype, path, kinds=NUMERIC_KINDS + "US")
        item = value.item()
        if dtype.kind == "f":
            item = _encode_float(item)
        elif dtype.kind == "c":
            item = [_encode_float(item.real), _encode_float(item.imag)]
        elif dtype.kind == "S":
            item = item.hex()
        return {"$": "numpy_scalar", "dtype": dtype.str, "v": item}

    def encode_array(self, array, path, depth):
        dtype = checked_dtype(array.dtype, path)
        self.dtypes.add(dtype.name)
        node = {"$": "ndarray", "dtype": dtype.str, "shape": list(array.shape)}
        if dtype.kind in TEXT_KINDS:
            flat = list(array.ravel()) if dtype.kind == "O" else array.ravel().tolist()
            flat = [v.hex() for v in flat] if dtype.kind == "S" else flat
            return node | {"items": [self.encode(v, item(path, i), depth) for i, v in enumerate(flat)]}
        axes = _memory_order(array.strides, array.shape)
        stored = np.array(array.transpose(axes), dtype=dtype.newbyteorder("="), order="C")  # a copy
        if dtype.kind == "c":
            stored = stored.reshape(stored.shape + (1,)).view(stored.real.dtype)
        return node | self.store(torch.from_numpy(stored), path, axes)

    def encode_tensor(self, tensor, path):
        if type(tensor) not in (torch.Tensor, nn.Parameter) or tensor.layout != torch.strided:
            raise self.refuse(path, tensor, "only dense torch.Tensor and nn.Parameter can be saved")
        if tensor.dtype not in _STORABLE_TORCH_DTYPES or tensor.is_meta:
            raise self.refuse(path, tensor, f"a tensor of dtype {tensor.dtype} on {tensor.device}")
        dtype = str(tensor.dtype).removeprefix("torch.")
        self.dtypes.add(dtype)
        self.devices.add(str(tensor.device))
        data = tensor.detach().resolve_conj().resolve_neg()
        axes = _memory_order(data.stride(), data.shape)
        stored = data.permute(axes).to("cpu", copy=True).contiguous()
        if stored.is_complex():
            stored = torch.view_as_real(stored).contiguous()
        node = {"$": "tensor", "dtype": dtype, "shape": list(tensor.shape),
                "requires_grad": tensor.requires_grad, "parameter": type(tensor) is nn.Parameter,
                "device": str(tensor.device)}
        return node | self.store(stored, path, axes)

    def store(self, stored, path, axes):
        key, n = path or "<root>", 1
        while key in self.tensors:
            key, n = f"{path or '<root>'}#{n + 1}", n + 1
        self.tensors[key] = stored
        node = {"key": key, "sha256": sha256(tensor_bytes(stored))}
        return node | ({"axes": list(axes)} if list(axes) != sorted(axes) else {})
