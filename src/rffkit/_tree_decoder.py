"""Decoding of a model file's object tree, safely: it builds only allow-listed values.

:func:`decode` imports nothing a tree names (it imports all of rffkit's modules, whatever
the tree holds) and calls no function or constructor a tree names; errors are
:class:`~rffkit._tree_common.TreeError` naming the attribute path. The tree is
described in :mod:`rffkit._model_tree`.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import torch
from torch import nn

from ._tree_common import (
    ALLOWED_CLASSES,
    BIT_GENERATORS,
    BUILTIN_TYPES,
    MAX_DEPTH,
    NUMERIC_KINDS,
    TEXT_KINDS,
    TORCH_DTYPES,
    TreeError,
    attr,
    checked_dtype,
    import_rffkit,
    item,
    lookup_class,
    where,
)

__all__ = ["decode"]


def decode(tree, tensors, digests, budget):
    """Rebuild the object of ``tree``; return it and the names of the classes it holds.

    ``tensors`` maps keys to the file's tensors and ``digests`` to the SHA-256 of their
    bytes in the file; ``budget`` bounds the bytes that text and object arrays may take.
    Every tensor must be used exactly once. Raises :class:`TreeError`, or the exception
    that a malformed value raised, with ``decoder.path`` the place. rffkit's modules are
    all imported first (:func:`rffkit._tree_common.import_rffkit`), whatever the tree names.
    """
    import_rffkit()
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
        return [self.decode(v, item(path, i), depth) for i, v in enumerate(self.field(node, "items", list))]

    def pair(self, node, path, depth):
        values = self.field(node, "v", list)
        if len(values) != 2:
            raise self.fail("expected two values")
        return [self.decode(v, path, depth) for v in values]

    def dtype(self, node, name, kinds):
        return checked_dtype(np.dtype(self.field(node, name, str)), self.path, kinds, error=TreeError)

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
            return cls((k, self.decode(v, item(path, k), depth)) for k, v in mapping.items())
        pairs = self.field(node, "items", list)
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise self.fail("dict items must be [key, value] pairs")
        decoded = ((self.decode(k, path, depth), self.decode(v, item(path, i), depth))
                   for i, (k, v) in enumerate(pairs))
        return cls(decoded)

    def decode_ordered_dict(self, node, path, depth):
        return self.decode_dict(node, path, depth, cls=collections.OrderedDict)

    def decode_builtin_type(self, node, path, depth):
        return BUILTIN_TYPES[self.field(node, "v", str)]

    def decode_numpy_type(self, node, path, depth):
        return self.dtype(node, "v", NUMERIC_KINDS + TEXT_KINDS).type

    def decode_numpy_dtype(self, node, path, depth):
        return self.dtype(node, "v", NUMERIC_KINDS + TEXT_KINDS)

    def decode_torch_dtype(self, node, path, depth):
        return TORCH_DTYPES[self.field(node, "v", str)]

    def decode_torch_device(self, node, path, depth):
        self.field(node, "v", str)  # the device it was saved from: models load on the CPU
        return torch.device("cpu")

    def decode_numpy_scalar(self, node, path, depth):
        dtype, value = self.dtype(node, "dtype", NUMERIC_KINDS + "US"), node.get("v")
        if dtype.kind == "f":
            value = self.decode(value, path, depth)
        elif dtype.kind == "c":
            value = complex(*self.pair(node, path, depth))
        elif dtype.kind == "S":
            value = bytes.fromhex(value)
        return dtype.type(value)

    def decode_random_state(self, node, path, depth):
        random_state = np.random.RandomState(0)
        random_state.set_state(self.decode(node.get("state"), attr(path, "state"), depth))
        return random_state

    def decode_generator(self, node, path, depth):
        bit_generator = BIT_GENERATORS[self.field(node, "bit_generator", str)](0)
        bit_generator.state = self.decode(node.get("state"), attr(path, "state"), depth)
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
        dtype, shape = self.dtype(node, "dtype", NUMERIC_KINDS + TEXT_KINDS), self.shape(node)
        if dtype.kind in TEXT_KINDS:
            items, count = self.field(node, "items", list), math.prod(shape)
            self.budget -= count * dtype.itemsize
            if len(items) != count or self.budget < 0:
                raise self.fail(f"{len(items)} items for shape {shape}, or too large to decode")
            if dtype.kind == "O":
                array = np.empty(count, dtype=object)
                for i, v in enumerate(items):
                    array[i] = self.decode(v, item(path, i), depth)
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
        dtype, shape = TORCH_DTYPES[self.field(node, "dtype", str)], self.shape(node)
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
        state = {k: self.decode(v, attr(path, k), depth) for k, v in self.field(node, "state", dict).items()}
        self.path = path
        obj = cls.__new__(cls)
        if isinstance(obj, nn.Module):
            if not all(isinstance(state.get(k), dict) for k in ("_parameters", "_buffers", "_modules")):
                raise self.fail(f"torch module {module}.{qualname} lacks its parameters, buffers or modules")
            nn.Module.__setstate__(obj, state)  # also fills in hook dicts that newer torch versions add
        else:
            obj.__dict__.update(state)
        return obj
