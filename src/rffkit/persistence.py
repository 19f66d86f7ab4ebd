"""Safe model files: save and load estimators without pickle.

A model file is one `safetensors <https://huggingface.co/docs/safetensors>`_ file:
an 8-byte little-endian header length, a JSON header, then the raw bytes of every
numeric array and tensor. The header's ``__metadata__`` (string to string) holds:

``format``, ``format_version``
    ``'rffkit-model'`` and an integer; :func:`load` refuses files from a newer version.
``tree``
    The object as JSON: parameters, fitted attributes, nested estimators and torch
    modules, each object as its class name and its instance ``__dict__``. Values JSON
    lacks are tagged nodes ``{"$": kind, ...}`` (see :mod:`rffkit._model_tree`): floats
    nan and inf, tuples, sets, dicts with keys of any type (as ``[key, value]`` pairs),
    ``OrderedDict``, slices, bytes, complex numbers, numpy scalars, dtypes and scalar
    types, torch dtypes and devices, numpy ``RandomState`` and ``Generator`` (their
    state), and str, bytes and object arrays (their items, in JSON). Each numeric array
    or tensor is a node naming its safetensors key (its attribute path), dtype, shape,
    memory order and the SHA-256 of its bytes; tensors keep ``requires_grad`` and
    whether they are an ``nn.Parameter``. Objects met twice are stored once.
``sha256``
    The digest of every other metadata entry: with the tensors' digests in the tree,
    any edit of the file is detected.
``rffkit_version``, ``sklearn_version``, ``torch_version``, ``numpy_version``,
``estimator``, ``dtypes``, ``devices``
    For people and :func:`read_metadata`: what wrote the file, the root's class, the
    array dtypes and the devices the model was fitted on (every ``torch.device`` and
    tensor device in it).

:func:`load` never unpickles and never imports or calls anything a file names: it
rebuilds only allow-listed classes (every class defined in rffkit, all of whose modules
it imports whatever the file holds, and the scikit-learn and torch classes in
:data:`ALLOWED_CLASSES`) by ``cls.__new__(cls)`` and setting the instance ``__dict__``.
Tensors load on the CPU and every ``torch.device`` loads as ``'cpu'``, so a model fitted
on a GPU predicts on a CPU-only machine; the ``device`` parameter keeps the value the
user gave.

:func:`save` refuses, naming the attribute path and the type: functions and other
code (so a ``FunctionTransformer`` with a ``func``), instances of classes off the
allow-list (subclasses included), ``defaultdict`` and other container subclasses,
sparse tensors and tensor subclasses, datetime, structured and extended-precision
arrays, and reference cycles. Views of one array or tensor are saved as copies.

A fitted ``ColumnTransformer`` that chooses columns with a callable (``make_column_selector``)
is saved with, in place of each callable, the columns it chose at fit (what its
``transformers_`` use): the loaded pipeline predicts as the original, and its
``transformers`` parameter lists those columns, so a refit of a clone takes them by name
rather than by the selector's rule. An unfitted one with a callable is refused.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import secrets
import struct
import warnings

import numpy as np
import safetensors
import safetensors.torch
import sklearn
import torch

from ._model_tree import ALLOWED_CLASSES, TreeError, decode, encode, sha256

__all__ = ["save", "load", "read_metadata", "ModelFileError", "ALLOWED_CLASSES", "FORMAT_VERSION"]

FORMAT_NAME = "rffkit-model"
FORMAT_VERSION = 1
#: safetensors' own limit on its JSON header.
MAX_HEADER_BYTES = 100_000_000
#: What an error on a file that is no model file says was expected.
EXPECTED = "expected a model written by rffkit fit --output or rffkit.save"
#: The first bytes of formats other than a model file, and what a file starting with them is.
_SIGNATURES = (
    (b"PAR1", "a Parquet file"),
    (b"ARROW1", "an Arrow IPC or Feather file"),
    (b"PK\x03\x04", "a zip archive (such as a file of torch.save or numpy.savez)"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"\xff\xfe", "UTF-16 text"),
    (b"\xfe\xff", "UTF-16 text"),
)


class ModelFileError(ValueError):
    """A file that :func:`load` will not turn into a model, and why.

    Raised for anything that is not a complete, unmodified model file of a format
    version this rffkit reads: pickles and other formats, truncated or edited files,
    headers claiming impossible sizes, classes off the allow-list, missing tensors.
    The message starts with the file name and, for a bad value, its attribute path.

    See Also
    --------
    load : Raises it.

    Examples
    --------
    >>> import os, pickle, tempfile
    >>> import rffkit
    >>> from rffkit.persistence import ModelFileError
    >>> path = os.path.join(tempfile.mkdtemp(), "model.pkl")
    >>> with open(path, "wb") as file:
    ...     pickle.dump(rffkit.RFFRidge(), file)
    >>> try:
    ...     rffkit.load(path)
    ... except ModelFileError as error:
    ...     print("looks like a pickle" in str(error))
    True
    """


def _metadata_digest(metadata):
    fields = {k: v for k, v in metadata.items() if k != "sha256"}
    return sha256(json.dumps(fields, sort_keys=True).encode())


def save(estimator, path):
    """Write ``estimator`` to ``path`` as a safe model file (no pickle).

    Works for rffkit's estimators, transformers and torch modules, fitted or not, and
    for scikit-learn pipelines of them with the preprocessing in
    :data:`ALLOWED_CLASSES`; the object may also be a dict, list or tuple of such
    values. The file is written to a temporary file in the same directory and renamed
    over ``path`` only when complete: on any error, no file is left behind and an
    existing file at ``path`` is unchanged.

    Parameters
    ----------
    estimator : object
        What to save. Objects are stored as their instance ``__dict__`` (not
        ``__getstate__``), so devices are recorded as they were.
    path : str or os.PathLike
        Where to write; ``.safetensors`` is a good suffix.

    Raises
    ------
    TypeError
        When ``estimator`` holds something a model file cannot hold: a function or
        other code (``FunctionTransformer``), a class off the allow-list, a sparse
        tensor, a structured array... The message names the attribute path
        (``steps[1][1].model_.foo``) and the type. A fitted ``ColumnTransformer``'s
        ``make_column_selector`` is saved as the columns it chose (see the module notes).
    ValueError
        When it holds a reference cycle.

    See Also
    --------
    load : Read a model file back.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import rffkit
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> model = rffkit.RFFRidge(random_state=0).fit(X, X[:, 0])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> rffkit.save(model, path)
    >>> np.array_equal(rffkit.load(path).predict(X), model.predict(X))
    True
    """
    from . import __version__

    tree, tensors, dtypes, devices = encode(estimator)
    cls = type(estimator)
    metadata = {
        "format": FORMAT_NAME,
        "format_version": str(FORMAT_VERSION),
        "tree": json.dumps(tree, allow_nan=False, separators=(",", ":")),
        "rffkit_version": __version__,
        "sklearn_version": sklearn.__version__,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "estimator": f"{cls.__module__}.{cls.__qualname__}",
        "dtypes": json.dumps(dtypes),
        "devices": json.dumps(devices),
    }
    metadata["sha256"] = _metadata_digest(metadata)
    _write_atomically(path, safetensors.torch.save(tensors, metadata=metadata))


def _write_atomically(path, payload):
    path = os.fspath(path)
    temporary = os.path.join(os.path.dirname(os.path.abspath(path)),
                             f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


# -- load ------------------------------------------------------------------------------
def _read_verified(path):
    """Read ``path``; return (metadata, header entries, file bytes, data offset) or raise."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        prefix = file.read(8)
        not_ours = f"{os.fspath(path)!r} is not an rffkit model file"
        (header_length,) = struct.unpack("<Q", prefix.ljust(8, b"\xff"))
        if header_length > size - 8 or header_length > MAX_HEADER_BYTES:
            head = prefix + file.read(504)
            what = _looks_like(head)
            if what == "a pickle":
                raise ModelFileError(f"{not_ours}: it looks like a pickle. rffkit.load never unpickles "
                                     "(unpickling runs code); re-save the model with rffkit.save where "
                                     "you trust the pickle.")
            if what or not size:
                what = f"it looks like {what}" if what else "it is empty (0 bytes)"
                raise ModelFileError(f"{not_ours}: {what}; {EXPECTED}.")
            if len(prefix) < 8:
                raise ModelFileError(f"{not_ours}: {size} bytes is too short for a safetensors header "
                                     "(truncated?).")
            if header_length > MAX_HEADER_BYTES and head[8:9] != b"{":  # a safetensors header is a JSON object
                raise ModelFileError(f"{not_ours}: its first bytes are not the length of a safetensors header, "
                                     f"nor of another format rffkit knows; {EXPECTED}.")
            raise ModelFileError(f"{not_ours}: its first 8 bytes claim a {header_length}-byte header, "
                                 f"but the file has {size} bytes (not a safetensors file, or truncated).")
        header_bytes = file.read(header_length)
        data = prefix + header_bytes + file.read(size - 8 - header_length)
    if len(data) != size:
        raise ModelFileError(f"{not_ours}: it changed while being read.")
    try:
        header = json.loads(header_bytes)
    except (ValueError, RecursionError) as exc:
        raise ModelFileError(f"{not_ours}: its header is not valid JSON ({exc}); the file is corrupted "
                             "or not a safetensors file.") from None
    metadata = header.pop("__metadata__", None) if isinstance(header, dict) else None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{not_ours}: it has no {FORMAT_NAME!r} metadata (a safetensors file "
                             "written by another tool, or a corrupted header).")
    version = metadata.get("format_version")
    if not isinstance(version, str) or not version.isdigit() or int(version) < 1:
        raise ModelFileError(f"{not_ours}: its format_version {version!r} is not a positive integer.")
    if int(version) > FORMAT_VERSION:
        from . import __version__

        raise ModelFileError(
            f"{os.fspath(path)!r} uses model format version {version} (written by rffkit "
            f"{metadata.get('rffkit_version')!r}); this rffkit {__version__} reads versions up to "
            f"{FORMAT_VERSION}. Upgrade rffkit to load it."
        )
    intact = all(isinstance(v, str) for v in metadata.values())
    if not intact or metadata.get("sha256") != _metadata_digest(metadata):
        raise ModelFileError(f"{os.fspath(path)!r}: its metadata does not match its SHA-256; the file "
                             "was edited or corrupted.")
    return metadata, header, data, 8 + header_length


def _looks_like(head):
    """What a file whose first bytes are ``head`` (up to 512) is, when they are not a safetensors header:
    ``'a pickle'``, another binary format, text (its first line quoted), or None when unrecognised."""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "a pickle"
    for signature, what in _SIGNATURES:
        if head.startswith(signature):
            return what
    try:  # a character cut by the end of head is fine
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head)
    except UnicodeDecodeError:
        return None
    if not text.strip() or not all(character.isprintable() or character in "\t\r\n" for character in text):
        return None
    first = text.lstrip().splitlines()[0]
    first = first if len(first) <= 60 else first[:57] + "..."
    kind = "JSON text" if first[:1] in ("{", "[") else "text such as a CSV file"
    return f"{kind} (it starts {first!r})"


def read_metadata(path):
    """The metadata of a model file, verified, without building the model.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save`.

    Returns
    -------
    dict
        ``format`` (str), ``format_version`` (int), ``rffkit_version``,
        ``sklearn_version``, ``torch_version``, ``numpy_version``, ``estimator`` (the
        class of the saved object), ``dtypes`` and ``devices`` (lists of str).

    Raises
    ------
    ModelFileError
        As :func:`load`, for a file that is not an unmodified model file.

    See Also
    --------
    load : Read the model itself.

    Examples
    --------
    >>> import os, tempfile
    >>> import rffkit
    >>> from rffkit.persistence import read_metadata
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> rffkit.save(rffkit.RFFNetRegressor(), path)
    >>> read_metadata(path)["estimator"]
    'rffkit.rffnet.RFFNetRegressor'
    """
    metadata = dict(_read_verified(path)[0])
    del metadata["tree"], metadata["sha256"]
    metadata["format_version"] = int(metadata["format_version"])
    for key in ("dtypes", "devices"):
        metadata[key] = json.loads(metadata[key])
    return metadata


def load(path):
    """Read a model file written by :func:`save`, executing nothing it names.

    The file's integrity is checked (SHA-256 of the metadata and of every tensor's
    bytes) before any value is used, and only allow-listed classes are rebuilt: every
    class defined in an rffkit module, and those in :data:`ALLOWED_CLASSES`. ``load``
    never unpickles, never imports a module the file names (it imports all of rffkit's,
    which load on first use, whatever the file holds), never calls a function or
    constructor the file names (objects are made by ``cls.__new__(cls)`` and their
    ``__dict__`` set),
    and reads the file once, in time and memory proportional to its size. Tensors and
    every ``torch.device`` load on the CPU.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save`.

    Returns
    -------
    object
        The saved object. A ``UserWarning`` says when the file was written by another
        version of rffkit or scikit-learn (fitted state may then not be compatible).

    Raises
    ------
    ModelFileError
        A ``ValueError`` naming what is wrong: not a model file (a pickle, another
        format), a newer format version, a truncated or edited file, a class off the
        allow-list or a tensor missing (named by attribute path).
    OSError
        When the file cannot be read.

    See Also
    --------
    save : Write a model file.
    read_metadata : Versions, class, dtypes and devices of a file, without loading it.

    Examples
    --------
    >>> import os, tempfile
    >>> import rffkit
    >>> path = os.path.join(tempfile.mkdtemp(), "unfitted.safetensors")
    >>> rffkit.save(rffkit.RFFRidge(alphas=(0.1, 1.0)), path)
    >>> rffkit.load(path).get_params()["alphas"]
    (0.1, 1.0)
    """
    metadata, entries, data, offset = _read_verified(path)
    name = os.fspath(path)
    try:
        tree = json.loads(metadata["tree"], parse_constant=_reject_constant)
        tensors = safetensors.torch.load(data)  # checks the layout: every byte covered, once
        digests = {key: sha256(memoryview(data)[offset + begin : offset + end])
                   for key, (begin, end) in ((k, e["data_offsets"]) for k, e in entries.items())}
    except (ValueError, TypeError, KeyError, RecursionError, safetensors.SafetensorError) as exc:
        raise ModelFileError(f"{name!r} is not a valid model file (truncated, extended or corrupted): "
                             f"{type(exc).__name__}: {exc}") from None
    try:
        result, classes = decode(tree, tensors, digests, budget=16 * offset + 64 * 2**20)
    except TreeError as exc:
        raise ModelFileError(f"{name!r}: {exc}") from None
    _warn_versions(metadata, classes)
    return result


def _reject_constant(name):
    raise ValueError(f"the tree holds the non-JSON constant {name}")


def _warn_versions(metadata, classes):
    from . import __version__

    saved = metadata.get("rffkit_version")
    if saved != __version__:
        warnings.warn(f"This model file was written by rffkit {saved}; this is rffkit {__version__}. "
                      "Fitted state may not be compatible: check it, or refit and save again.",
                      UserWarning, stacklevel=3)
    saved = metadata.get("sklearn_version")
    used = sorted(name for name in classes if name.startswith("sklearn."))
    if used and saved != sklearn.__version__:
        warnings.warn(f"This model file's {', '.join(used)} were fitted with scikit-learn {saved}; this is "
                      f"scikit-learn {sklearn.__version__}, whose private state may differ.",
                      UserWarning, stacklevel=3)
