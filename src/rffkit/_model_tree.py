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
``cls.__new__(cls)`` and given their ``__dict__``: it imports nothing, and calls no
function or constructor a tree names.
"""

from __future__ import annotations

import collections
import hashlib
import math
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

__all__ = ["ALLOWED_CLASSES", "TreeError", "encode", "decode", "sha256"]

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
_PUBLIC_NAMES = {cls: name for name, cls in ALLOWED_CLASSES.items()}
_FUNCTION_TRANSFORMER_HINT = (
    "it holds Python functions, and a model file holds data only; only the identity "
    "FunctionTransformer (func=None, inverse_func=None) can be saved: use a scikit-learn "
    "transformer from the allow-list instead"
)
_BUILTIN_TYPES = {t.__name__: t for t in (bool, int, float, complex, str, bytes, object)}
_BIT_GENERATORS = {
    c.__name__: c
    for c in (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64)
}
_TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
_STORABLE_TORCH_DTYPES = {
    _TORCH_DTYPES[name]
    for name in ("bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                 "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
    if name in _TORCH_DTYPES
}
_NUMERIC_KINDS, _TEXT_KINDS = "biufc", "USO"
_CONTAINERS = (tuple, list, set, frozenset, dict, collections.OrderedDict, np.ndarray,
               np.random.RandomState, np.random.Generator)


class TreeError(ValueError):
    """A tree that does not decode; the message starts with the attribute path."""


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def _attr(path, name):
    return f"{path}.{name}" if path else name


def _item(path, key):
    return f"{path or '<root>'}[{key!r}]"


def where(path):
    return path or "<root>"


def lookup_class(module, qualname):
    """The class ``module.qualname`` if a tree may hold it, else None; imports nothing."""
    cls = ALLOWED_CLASSES.get(f"{module}.{qualname}")
    if cls is not None:
        return cls
    if module != "rffkit" and not module.startswith("rffkit."):
        return None
    found = sys.modules.get(module)  # `import rffkit` loads every module with estimators
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


def _class_name(cls):
    public = _PUBLIC_NAMES.get(cls)
    return tuple(public.rsplit(".", 1)) if public is not None else (cls.__module__, cls.__qualname__)


def _checked_dtype(dtype, path, kinds=_NUMERIC_KINDS + _TEXT_KINDS, error=TypeError):
    portable = not (dtype.kind == "f" and dtype.itemsize > 8 or dtype.kind == "c" and dtype.itemsize > 16)
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in kinds or not portable:
        raise error(f"{'Cannot save ' if error is TypeError else ''}{where(path)}: numpy dtype {dtype} is "
                    "not supported (bool, integer, float up to 64 bits, complex, str, bytes, object).")
    return dtype


def _encode_float(value):
    return value if math.isfinite(value) else {"$": "float", "v": repr(value)}


def _memory_order(strides, shape):
    """Axes from slowest to fastest in memory, so that ``transpose(axes)`` is C-ordered."""
    if all(s >= 0 for s in strides) and all(a >= b for a, b in zip(strides, strides[1:])):
        return tuple(range(len(shape)))
    return tuple(sorted(range(len(shape)), key=lambda axis: -abs(strides[axis]) if shape[axis] > 1 else 0))


def tensor_bytes(tensor):
    return tensor.reshape(-1).view(torch.uint8).numpy()


def encode(obj):
    """``(tree, tensors, dtypes, devices)`` for ``obj``; TypeError/ValueError naming the path."""
    encoder = _Encoder()
    tree = encoder.encode(obj, "", 0)
    return tree, encoder.tensors, sorted(encoder.dtypes), sorted(encoder.devices)


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
            return {"$": "slice", "v": [self.encode(p, _attr(path, "slice"), depth + 1) for p in parts]}
        elif isinstance(obj, type) and obj in _BUILTIN_TYPES.values():
            return {"$": "builtin_type", "v": obj.__name__}
        elif isinstance(obj, type) and issubclass(obj, np.generic):
            return {"$": "numpy_type", "v": _checked_dtype(np.dtype(obj), path).str}
        elif isinstance(obj, np.dtype):
            return {"$": "numpy_dtype", "v": _checked_dtype(obj, path).str}
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
            items = [self.encode(v, _item(path, i), depth) for i, v in enumerate(obj)]
            return {"$": cls.__name__, "items": items}
        if cls in (dict, collections.OrderedDict):
            kind = "dict" if cls is dict else "ordered_dict"
            if all(type(k) is str for k in obj):
                return {"$": kind, "map": {k: self.encode(v, _item(path, k), depth) for k, v in obj.items()}}
            return {"$": kind, "items": [[self.encode(k, _attr(path, "<key>"), depth),
                                          self.encode(v, _item(path, k), depth)] for k, v in obj.items()]}
        if cls is np.ndarray:
            return self.encode_array(obj, path, depth)
        if isinstance(obj, torch.Tensor):
            return self.encode_tensor(obj, path)
        if cls is np.random.RandomState:
            return {"$": "random_state", "state": self.encode(obj.get_state(), _attr(path, "state"), depth)}
        if cls is np.random.Generator:
            bit_generator = type(obj.bit_generator)
            if _BIT_GENERATORS.get(bit_generator.__name__) is not bit_generator:
                raise self.refuse(_attr(path, "bit_generator"), obj.bit_generator, "an unknown bit generator")
            state = self.encode(obj.bit_generator.state, _attr(path, "state"), depth)
            return {"$": "generator", "bit_generator": bit_generator.__name__, "state": state}
        state = vars(obj)  # the instance __dict__, not __getstate__: devices are kept as they were
        if any(type(k) is not str for k in state):
            raise self.refuse(path, obj, "its __dict__ has keys that are not strings")
        module, qualname = _class_name(cls)
        return {"$": "object", "module": module, "qualname": qualname,
                "state": {k: self.encode(v, _attr(path, k), depth) for k, v in state.items()}}

    def encode_numpy_scalar(self, value, path):
        dtype = _checked_dtype(value.dtype, path, kinds=_NUMERIC_KINDS + "US")
        item = value.item()
        if dtype.kind == "f":
            item = _encode_float(item)
        elif dtype.kind == "c":
            item = [_encode_float(item.real), _encode_float(item.imag)]
        elif dtype.kind == "S":
            item = item.hex()
        return {"$": "numpy_scalar", "dtype": dtype.str, "v": item}

    def encode_array(self, array, path, depth):
        dtype = _checked_dtype(array.dtype, path)
        self.dtypes.add(dtype.name)
        node = {"$": "ndarray", "dtype": dtype.str, "shape": list(array.shape)}
        if dtype.kind in _TEXT_KINDS:
            flat = list(array.ravel()) if dtype.kind == "O" else array.ravel().tolist()
            flat = [v.hex() for v in flat] if dtype.kind == "S" else flat
            return node | {"items": [self.encode(v, _item(path, i), depth) for i, v in enumerate(flat)]}
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


def decode(tree, tensors, digests, budget):
    """Rebuild the object of ``tree``; return it and the names of the classes it holds.

    ``tensors`` maps keys to the file's tensors and ``digests`` to the SHA-256 of their
    bytes in the file; ``budget`` bounds the bytes that text and object arrays may take.
    Every tensor must be used exactly once. Raises :class:`TreeError`, or the exception
    that a malformed value raised, with ``decoder.path`` the place.
    """
    decoder = _Decoder(tensors, digests, budget)
    try:
        result = decoder.decode(tree, "", 0)
    except TreeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed value: say where
        raise TreeError(f"{where(decoder.path)}: malformed ({type(exc).__name__}: {exc})") from None
    unused = sorted(set(tensors) - decoder.used)
    if unused:
        raise TreeError(f"the file holds tensors no attribute refers to: {unused[:5]}")
    return result, decoder.classes


class _Decoder:
    def __init__(self, tensors, digests, budget):
        self.tensors, self.digests, self.budget = tensors, digests, budget
        self.memo, self.used, self.classes, self.path = {}, set(), set(), ""

    def fail(self, message):
        return TreeError(f"{where(self.path)}: {message}")

    def field(self, node, name, kind):
        value = node.get(name)
        if not isinstance(value, kind) or kind is int and isinstance(value, bool):
            raise self.fail(f"field {name!r} of a {node.get('$')!r} node is missing or not a {kind.__name__}")
        return value

    def decode(self, node, path, depth):
        self.path = path
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if not isinstance(node, dict) or not isinstance(node.get("$"), str):
            raise self.fail(f"expected a value node, found {type(node).__name__}")
        kind = node["$"]
        if kind == "ref":
            ref = self.field(node, "id", int)
            if ref not in self.memo:
                raise self.fail(f"refers to object {ref}, which is not defined before it")
            return self.memo[ref]
        method = getattr(self, "decode_" + kind, None) if kind.isidentifier() else None
        if method is None:
            raise self.fail(f"unknown node kind {kind!r}")
        result = method(node, path, depth + 1)
        if "id" in node:  # registered once complete, so a crafted cycle is an undefined reference
            self.memo[self.field(node, "id", int)] = result
        return result

    def items(self, node, path, depth):
        return [self.decode(v, _item(path, i), depth) for i, v in enumerate(self.field(node, "items", list))]

    def pair(self, node, path, depth):
        values = self.field(node, "v", list)
        if len(values) != 2:
            raise self.fail("expected two values")
        return [self.decode(v, path, depth) for v in values]

    def dtype(self, node, name, kinds):
        return _checked_dtype(np.dtype(self.field(node, name, str)), self.path, kinds, error=TreeError)

    def shape(self, node):
        shape = self.field(node, "shape", list)
        if not all(type(n) is int and n >= 0 for n in shape):
            raise self.fail(f"bad shape {shape}")
        return tuple(shape)

    def decode_float(self, node, path, depth):
        value = self.field(node, "v", str)
        if value not in ("nan", "inf", "-inf"):
            raise self.fail(f"bad float {value!r}")
        return float(value)

    def decode_complex(self, node, path, depth):
        return complex(*self.pair(node, path, depth))

    def decode_bytes(self, node, path, depth):
        return bytes.fromhex(self.field(node, "hex", str))

    def decode_slice(self, node, path, depth):
        return slice(*(self.decode(v, path, depth) for v in self.field(node, "v", list)[:3]))

    def decode_list(self, node, path, depth):
        return self.items(node, path, depth)

    def decode_tuple(self, node, path, depth):
        return tuple(self.items(node, path, depth))

    def decode_set(self, node, path, depth):
        return set(self.items(node, path, depth))

    def decode_frozenset(self, node, path, depth):
        return frozenset(self.items(node, path, depth))

    def decode_dict(self, node, path, depth, cls=dict):
        if "map" in node:
            mapping = self.field(node, "map", dict)
            return cls((k, self.decode(v, _item(path, k), depth)) for k, v in mapping.items())
        pairs = self.field(node, "items", list)
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise self.fail("dict items must be [key, value] pairs")
        decoded = ((self.decode(k, path, depth), self.decode(v, _item(path, i), depth))
                   for i, (k, v) in enumerate(pairs))
        return cls(decoded)

    def decode_ordered_dict(self, node, path, depth):
        return self.decode_dict(node, path, depth, cls=collections.OrderedDict)

    def decode_builtin_type(self, node, path, depth):
        return _BUILTIN_TYPES[self.field(node, "v", str)]

    def decode_numpy_type(self, node, path, depth):
        return self.dtype(node, "v", _NUMERIC_KINDS + _TEXT_KINDS).type

    def decode_numpy_dtype(self, node, path, depth):
        return self.dtype(node, "v", _NUMERIC_KINDS + _TEXT_KINDS)

    def decode_torch_dtype(self, node, path, depth):
        return _TORCH_DTYPES[self.field(node, "v", str)]

    def decode_torch_device(self, node, path, depth):
        self.field(node, "v", str)  # the device it was saved from: models load on the CPU
        return torch.device("cpu")

    def decode_numpy_scalar(self, node, path, depth):
        dtype, value = self.dtype(node, "dtype", _NUMERIC_KINDS + "US"), node.get("v")
        if dtype.kind == "f":
            value = self.decode(value, path, depth)
        elif dtype.kind == "c":
            value = complex(*self.pair(node, path, depth))
        elif dtype.kind == "S":
            value = bytes.fromhex(value)
        return dtype.type(value)

    def decode_random_state(self, node, path, depth):
        random_state = np.random.RandomState(0)
        random_state.set_state(self.decode(node.get("state"), _attr(path, "state"), depth))
        return random_state

    def decode_generator(self, node, path, depth):
        bit_generator = _BIT_GENERATORS[self.field(node, "bit_generator", str)](0)
        bit_generator.state = self.decode(node.get("state"), _attr(path, "state"), depth)
        return np.random.Generator(bit_generator)

    def stored(self, node, shape):
        """The tensor ``node`` names, its bytes checked, and the axes of its memory order."""
        key = self.field(node, "key", str)
        if key not in self.tensors:
            raise self.fail(f"its tensor {key!r} is missing from the file")
        if self.digests.get(key) != self.field(node, "sha256", str):
            raise self.fail(f"the bytes of tensor {key!r} do not match their SHA-256; the file was "
                            "edited or corrupted")
        if key in self.used:
            raise self.fail(f"tensor {key!r} is referenced twice")
        self.used.add(key)
        axes = tuple(node.get("axes", range(len(shape))))
        if sorted(axes) != list(range(len(shape))):
            raise self.fail(f"bad axes {axes} for shape {shape}")
        return self.tensors[key], axes, tuple(shape[a] for a in axes)

    def decode_ndarray(self, node, path, depth):
        dtype, shape = self.dtype(node, "dtype", _NUMERIC_KINDS + _TEXT_KINDS), self.shape(node)
        if dtype.kind in _TEXT_KINDS:
            items, count = self.field(node, "items", list), math.prod(shape)
            self.budget -= count * dtype.itemsize
            if len(items) != count or self.budget < 0:
                raise self.fail(f"{len(items)} items for shape {shape}, or too large to decode")
            if dtype.kind == "O":
                array = np.empty(count, dtype=object)
                for i, v in enumerate(items):
                    array[i] = self.decode(v, _item(path, i), depth)
                return array.reshape(shape)
            if not all(type(v) is str for v in items):
                raise self.fail("a text array holds strings")
            values = [bytes.fromhex(v) for v in items] if dtype.kind == "S" else items
            return np.array(values, dtype).reshape(shape)
        tensor, axes, stored_shape = self.stored(node, shape)
        native = dtype.newbyteorder("=")
        real, expected = native, stored_shape
        if dtype.kind == "c":
            real, expected = np.dtype(native.char.lower()), stored_shape + (2,)
        array = tensor.numpy()
        if array.dtype != real or array.shape != expected:
            raise self.fail(f"a tensor of {array.dtype} {array.shape} where {real} {expected} was saved")
        if dtype.kind == "c":
            array = array.view(native)[..., 0]
        return array.astype(dtype, copy=False).transpose(np.argsort(axes))

    def decode_tensor(self, node, path, depth):
        dtype, shape = _TORCH_DTYPES[self.field(node, "dtype", str)], self.shape(node)
        tensor, axes, stored_shape = self.stored(node, shape)
        real, expected = dtype, stored_shape
        if dtype.is_complex:
            real, expected = dtype.to_real(), stored_shape + (2,)
        if tensor.dtype != real or tuple(tensor.shape) != expected:
            found = f"{tensor.dtype} {tuple(tensor.shape)}"
            raise self.fail(f"a tensor of {found} where {real} {expected} was saved")
        if dtype.is_complex:
            tensor = torch.view_as_complex(tensor)
        tensor = tensor.permute(tuple(int(a) for a in np.argsort(axes)))
        requires_grad = self.field(node, "requires_grad", bool)
        if self.field(node, "parameter", bool):
            return nn.Parameter(tensor, requires_grad=requires_grad)
        return tensor.requires_grad_(requires_grad)

    def decode_object(self, node, path, depth):
        module, qualname = self.field(node, "module", str), self.field(node, "qualname", str)
        cls = lookup_class(module, qualname)
        if cls is None:
            raise self.fail(f"class {module}.{qualname} is not on the allow-list (rffkit's classes and "
                            f"{', '.join(sorted(ALLOWED_CLASSES))}); load imports and runs nothing "
                            "a file names")
        self.classes.add(f"{module}.{qualname}")
        state = {k: self.decode(v, _attr(path, k), depth) for k, v in self.field(node, "state", dict).items()}
        self.path = path
        obj = cls.__new__(cls)
        if isinstance(obj, nn.Module):
            if not all(isinstance(state.get(k), dict) for k in ("_parameters", "_buffers", "_modules")):
                raise self.fail(f"torch module {module}.{qualname} lacks its parameters, buffers or modules")
            nn.Module.__setstate__(obj, state)  # also fills in hook dicts that newer torch versions add
        else:
            obj.__dict__.update(state)
        return obj
