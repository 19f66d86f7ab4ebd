"""Safe model files: round trips, refusals at save time and hostile files at load time."""

import collections
import doctest
import json
import os
import pickle
import struct
import sys
import time

import numpy as np
import pandas as pd
import pytest
import safetensors.torch
import torch
from sklearn.base import clone
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.exceptions import NotFittedError
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
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
from sklearn.utils.validation import check_is_fitted
from torch import nn

import rffkit
from rffkit import persistence
from rffkit.persistence import ModelFileError

N_ROWS = 150


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, 4))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=N_ROWS)
    labels = np.array(["low", "mid", "high"], dtype=object)[np.digitize(X[:, 0] + X[:, 2], [-0.5, 0.5])]
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame["colour"] = np.where(X[:, 3] > 0, "red", "blue")
    return X, y, labels, frame


X, Y, LABELS, FRAME = _data()
X_NAN = X.copy()
X_NAN[::7, 1] = np.nan


def _frame_pipeline():
    columns = ColumnTransformer(
        [("onehot", OneHotEncoder(), ["colour"]), ("scale", StandardScaler(), ["a", "b", "c", "d"])]
    )
    return Pipeline([("columns", columns), ("ridge", rffkit.RFFRidge(random_state=0))])


def _index_pipeline():
    columns = ColumnTransformer(
        [
            ("ordinal", OrdinalEncoder(), [3]),
            ("impute", Pipeline([("i", SimpleImputer()), ("s", StandardScaler())]), [0, 1]),
        ],
        remainder="passthrough",
    )
    return Pipeline([("columns", columns), ("net", rffkit.RFFNetClassifier(max_iter=5, random_state=0))])


def _scaler_pipeline():
    union = FeatureUnion([("minmax", MinMaxScaler()), ("maxabs", MaxAbsScaler())])
    steps = [("impute", SimpleImputer(add_indicator=True)), ("robust", RobustScaler()), ("union", union)]
    return Pipeline(steps + [("srff", rffkit.SRFFRegressor(n_components=20, alphas=3, random_state=0))])


# name -> (unfitted estimator factory, fit arguments)
CASES = {
    "RFFRidge": (lambda: rffkit.RFFRidge(random_state=0), (X, Y)),
    "SRFFRegressor": (lambda: rffkit.SRFFRegressor(n_components=20, alphas=3, random_state=0), (X, Y)),
    "RFFClassifier": (lambda: rffkit.RFFClassifier(random_state=0), (X, LABELS)),
    "RandomFourierFeatures": (lambda: rffkit.RandomFourierFeatures(n_components=16, random_state=0), (X,)),
    "RandomBinningFeatures": (lambda: rffkit.RandomBinningFeatures(n_components=5, random_state=0), (X,)),
    "RFFNetRegressor": (lambda: rffkit.RFFNetRegressor(max_iter=5, random_state=0), (X, Y)),
    "RFFNetClassifier": (
        lambda: rffkit.RFFNetClassifier(max_iter=5, random_state=0, early_stopping=False), (X, LABELS)
    ),
    "Pipeline-DataFrame": (_frame_pipeline, (FRAME, Y)),
    "Pipeline-indices": (_index_pipeline, (np.column_stack([X_NAN[:, :3], LABELS]), LABELS)),
    "Pipeline-scalers": (_scaler_pipeline, (X_NAN, Y)),
}


@pytest.fixture(scope="module")
def fitted():
    return {name: factory().fit(*args) for name, (factory, args) in CASES.items()}


def _outputs(model, X):
    outputs = {}
    for method in ("predict", "predict_proba", "decision_function", "transform"):
        if hasattr(model, method):
            result = getattr(model, method)(X)
            outputs[method] = result.toarray() if hasattr(result, "toarray") else result
    assert outputs
    return outputs


def _assert_same_outputs(a, b):
    assert a.keys() == b.keys()
    for method in a:
        assert a[method].dtype == b[method].dtype
        np.testing.assert_array_equal(a[method], b[method], err_msg=method)


def _assert_same(a, b, where="root"):
    """Equal values of the same types; estimators compared by their parameters."""
    assert type(a) is type(b), where
    if hasattr(a, "get_params") and not isinstance(a, type):
        _assert_same(a.get_params(deep=False), b.get_params(deep=False), where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same(u, v, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if a.flags.c_contiguous or a.flags.f_contiguous:  # other views load contiguous
            assert a.flags.c_contiguous == b.flags.c_contiguous, where
            assert a.flags.f_contiguous == b.flags.f_contiguous, where
        if a.dtype == object:
            _assert_same(a.ravel().tolist(), b.ravel().tolist(), where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride(), where
        assert a.requires_grad == b.requires_grad and b.device.type == "cpu", where
        assert torch.equal(a.detach(), b.detach()), where
    elif isinstance(a, (float, np.floating)) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def _round_trip(obj, tmp_path, name="model.safetensors"):
    path = tmp_path / name
    rffkit.save(obj, path)
    return rffkit.load(path)


# -- round trips ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CASES))
def test_fitted_round_trip(fitted, name, tmp_path):
    model, fit_args = fitted[name], CASES[name][1]
    loaded = _round_trip(model, tmp_path)
    assert type(loaded) is type(model)
    expected = _outputs(model, fit_args[0])
    _assert_same_outputs(expected, _outputs(loaded, fit_args[0]))
    _assert_same(model.get_params(deep=True), loaded.get_params(deep=True))
    for attribute in ("feature_names_in_", "classes_", "n_features_in_"):
        if hasattr(model, attribute):
            _assert_same(getattr(model, attribute), getattr(loaded, attribute))
    again = pickle.loads(pickle.dumps(loaded))
    _assert_same_outputs(expected, _outputs(again, fit_args[0]))


def test_a_fresh_process_loads_every_saved_model(fitted, tmp_path):
    """``import rffkit`` loads its modules on first use, so the process that reads a file may
    not have imported the module of a class it holds (5a5818a broke this: every estimator
    was 'not on the allow-list' in a new process). The models are saved here and loaded,
    and their outputs computed, in a new Python process that imports only rffkit."""
    import subprocess

    for name, model in fitted.items():
        rffkit.save(model, tmp_path / f"{name}.safetensors")
    with open(tmp_path / "inputs.pickle", "wb") as handle:
        pickle.dump({name: CASES[name][1][0] for name in CASES}, handle)
    script = (
        "import pickle, sys, rffkit\n"
        "folder, names = sys.argv[1], sys.argv[2:]\n"
        "inputs = pickle.load(open(folder + '/inputs.pickle', 'rb'))\n"
        "outputs = {}\n"
        "for name in names:\n"
        "    model = rffkit.load(f'{folder}/{name}.safetensors')\n"
        "    outputs[name] = {m: getattr(model, m)(inputs[name]) for m in "
        "('predict', 'predict_proba', 'decision_function', 'transform') if hasattr(model, m)}\n"
        "pickle.dump(outputs, open(folder + '/outputs.pickle', 'wb'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), *CASES], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "outputs.pickle", "rb") as handle:
        outputs = pickle.load(handle)  # written by the test's own subprocess
    for name, model in fitted.items():
        expected = _outputs(model, CASES[name][1][0])
        got = {method: value.toarray() if hasattr(value, "toarray") else value
               for method, value in outputs[name].items()}
        _assert_same_outputs(expected, got)


def test_round_trip_keeps_names_and_labels(fitted, tmp_path):
    loaded = _round_trip(fitted["Pipeline-DataFrame"], tmp_path)
    assert list(loaded.feature_names_in_) == ["a", "b", "c", "d", "colour"]
    expected = fitted["Pipeline-DataFrame"][:-1].get_feature_names_out()
    _assert_same(loaded[:-1].get_feature_names_out(), expected)
    classifier = _round_trip(fitted["RFFNetClassifier"], tmp_path)
    assert classifier.classes_.dtype == object and list(classifier.classes_) == ["high", "low", "mid"]


@pytest.mark.parametrize("name", list(CASES))
def test_unfitted_round_trip(name, tmp_path):
    model = CASES[name][0]()
    loaded = _round_trip(model, tmp_path)
    assert type(loaded) is type(model)
    _assert_same(model.get_params(deep=True), loaded.get_params(deep=True))
    with pytest.raises(NotFittedError):
        check_is_fitted(loaded)
    _assert_same_outputs(_outputs(CASES[name][0]().fit(*CASES[name][1]), CASES[name][1][0]),
                         _outputs(loaded.fit(*CASES[name][1]), CASES[name][1][0]))


def test_torch_modules_round_trip(tmp_path):
    layer = rffkit.ARDRandomFourierFeatures.from_kernel(4, 8, random_state=0)
    layer.frequencies.requires_grad_(False)
    network = nn.Sequential(layer, nn.Linear(8, 3, dtype=torch.float64), nn.ReLU(), nn.Identity())
    network[1].bias.requires_grad_(False)
    container = nn.ModuleDict({"net": network, "extra": nn.ModuleList([nn.Linear(2, 2)])})
    loaded = _round_trip(container, tmp_path)
    inputs = torch.as_tensor(X, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(loaded["net"](inputs), network(inputs), rtol=0, atol=0)
    assert type(loaded["net"][0]) is rffkit.ARDRandomFourierFeatures
    assert isinstance(loaded["net"][0].relevances, nn.Parameter) and loaded["net"][0].relevances.requires_grad
    assert not loaded["net"][1].bias.requires_grad
    assert [n for n, _ in loaded.named_buffers()] == [n for n, _ in container.named_buffers()]
    _assert_same(dict(container.state_dict()), dict(loaded.state_dict()))
    assert loaded["net"][0].n_components == 8


def test_values_round_trip(tmp_path):
    shared = np.arange(6.0).reshape(2, 3)
    random_state, generator = np.random.RandomState(3), np.random.default_rng(4)
    random_state.normal(), generator.normal()
    values = {
        "floats": [np.nan, np.inf, -np.inf, -0.0, 1e-320, 0.1],
        "ints": (0, -1, 2**70, True, None),
        "numpy_scalars": [np.float32(0.1), np.float16(np.nan), np.int8(-3), np.uint64(2**64 - 1),
                          np.bool_(True), np.complex64(1 - 2j), np.str_("é"), np.bytes_(b"\x00z")],
        "types": [np.float64, np.int32, float, int, str, np.dtype("<U3"), np.dtype(">i4"), torch.bfloat16],
        "misc": [slice(1, None, 2), 3 + 4j, b"\x00\xff", "ünï", frozenset({1, 2}), {"a", "b"}],
        "mapping": collections.OrderedDict([("b", 1), ("a", 2)]),
        "non_string_keys": {0: "zero", (1, "x"): "tuple", None: 2.5, 1.5: "float"},
        "arrays": [np.arange(12, dtype=np.int16).reshape(3, 4).T, np.zeros((0, 3)), np.array(2.5),
                   np.array([1 + 2j, 3 - 4j]), np.arange(3, dtype=">f8"), np.array([True, False]),
                   np.array(["a", "bcd"]), np.array([b"x", b"yz"]),
                   np.array(["s", None, np.nan, 3], dtype=object),
                   np.arange(10, dtype=np.float16)[::3], np.array([2**64 - 1], dtype=np.uint64)],
        "tensors": [torch.arange(6.0).reshape(2, 3).t(), torch.ones(3, dtype=torch.bfloat16),
                    torch.tensor([1 + 1j], dtype=torch.complex64),
                    nn.Parameter(torch.zeros(2), requires_grad=False),
                    torch.zeros(2, requires_grad=True), torch.tensor(7, dtype=torch.int64)],
        "devices": [torch.device("cpu"), torch.device("cuda:1")],
        "random": [random_state, generator],
        "shared": [shared, shared],
        "shared_list": [[1], None],
    }
    values["shared_list"][1] = values["shared_list"][0]
    loaded = _round_trip(values, tmp_path)
    expected = dict(values, devices=[torch.device("cpu")] * 2)  # devices load on the CPU
    del expected["random"]
    _assert_same(expected, {k: v for k, v in loaded.items() if k != "random"})
    assert loaded["shared"][0] is loaded["shared"][1] and loaded["shared_list"][0] is loaded["shared_list"][1]
    assert loaded["arrays"][0].flags.f_contiguous and loaded["arrays"][0].dtype == np.int16
    assert loaded["arrays"][4].dtype.str == ">f8" and loaded["numpy_scalars"][7] == b"\x00z"
    assert type(loaded["tensors"][3]) is nn.Parameter and not loaded["tensors"][3].requires_grad
    loaded_state, loaded_generator = loaded["random"]
    assert loaded_state.normal() == random_state.normal() and loaded_generator.normal() == generator.normal()


def _devices(obj, replace=None, seen=None):
    """Every torch.device reachable through __dict__, dicts and lists; each set to ``replace``."""
    seen, found = set() if seen is None else seen, []
    if id(obj) in seen:
        return found
    seen.add(id(obj))
    children = vars(obj) if hasattr(obj, "__dict__") and not isinstance(obj, type) else obj
    if isinstance(children, dict):
        for key, value in children.items():
            if isinstance(value, torch.device):
                found.append(value)
                children[key] = value if replace is None else replace
            else:
                found += _devices(value, replace, seen)
    elif isinstance(children, (list, tuple)):
        for value in children:
            found += _devices(value, replace, seen)
    return found


def test_model_fitted_on_gpu_loads_on_cpu(tmp_path):
    """Simulated: every device in the fitted state says CUDA, as after a fit on a GPU."""
    model = rffkit.RFFNetRegressor(max_iter=5, random_state=0).fit(X, Y)
    expected = model.predict(X)
    assert _devices(model, replace=torch.device("cuda:0"))
    path = tmp_path / "gpu.safetensors"
    rffkit.save(model, path)
    assert "cuda:0" in persistence.read_metadata(path)["devices"]
    loaded = rffkit.load(path)
    assert {str(device) for device in _devices(loaded)} == {"cpu"}
    assert {tensor.device.type for tensor in loaded.model_.state_dict().values()} == {"cpu"}
    np.testing.assert_array_equal(loaded.predict(X), expected)


def test_read_metadata(fitted, tmp_path):
    path = tmp_path / "m.safetensors"
    rffkit.save(fitted["RFFNetClassifier"], path)
    metadata = persistence.read_metadata(path)
    assert metadata["format"] == "rffkit-model" and metadata["format_version"] == persistence.FORMAT_VERSION
    assert metadata["rffkit_version"] == rffkit.__version__
    assert metadata["estimator"] == "rffkit.rffnet.RFFNetClassifier"
    assert "float64" in metadata["dtypes"] and metadata["devices"] == ["cpu"]
    with safetensors.safe_open(str(path), framework="pt") as file:  # a plain safetensors file too
        assert any(key.startswith("model_.") for key in file.keys())


def test_version_mismatch_warns(fitted, tmp_path, monkeypatch):
    path = tmp_path / "old.safetensors"
    monkeypatch.setattr(rffkit, "__version__", "0.0.1")
    rffkit.save(fitted["RFFRidge"], path)
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="written by rffkit 0.0.1"):
        rffkit.load(path)


def test_docstring_examples():
    result = doctest.testmod(persistence, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0


# -- refused at save time ----------------------------------------------------------------
class _MyRidge(rffkit.RFFRidge):
    pass


def _with_code_in_fitted_model():
    model = _index_pipeline().fit(*CASES["Pipeline-indices"][1])
    model[-1].model_.foo = lambda v: v
    return model


REFUSED = {
    "FunctionTransformer": (
        lambda: Pipeline([("f", FunctionTransformer(np.log1p)), ("m", rffkit.RFFRidge())]),
        TypeError,
        r"steps\[0\]\[1\].*FunctionTransformer.*holds Python functions",
    ),
    "code deep inside": (_with_code_in_fitted_model, TypeError, r"steps\[1\]\[1\]\.model_\.foo.*function"),
    "foreign estimator": (
        lambda: Pipeline([("m", LinearRegression())]), TypeError, r"steps\[0\]\[1\].*LinearRegression"
    ),
    "user subclass": (lambda: {"model": _MyRidge()}, TypeError, r"\['model'\].*_MyRidge"),
    "defaultdict": (
        lambda: rffkit.RFFRidge(alphas=collections.defaultdict(list)), TypeError, "alphas.*defaultdict"
    ),
    "datetime array": (
        lambda: {"t": np.array(["2020-01-01"], dtype="datetime64[D]")}, TypeError, r"\['t'\].*datetime64"
    ),
    "sparse tensor": (lambda: [torch.eye(2).to_sparse()], TypeError, r"\[0\].*dense"),
    "cycle": (lambda: (lambda cycle: cycle.append(cycle) or cycle)([]), ValueError, "cycle"),
    "unfitted column selector": (
        lambda: ColumnTransformer([("scale", StandardScaler(), make_column_selector(dtype_include="number"))]),
        TypeError,
        r"transformers: this ColumnTransformer selects columns with a callable.*fit it first, or give explicit",
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_save_refuses_clearly_and_leaves_no_file(name, tmp_path):
    factory, error, message = REFUSED[name]
    (tmp_path / "model.safetensors").write_bytes(b"previous")
    with pytest.raises(error, match=message):
        rffkit.save(factory(), tmp_path / "model.safetensors")
    assert os.listdir(tmp_path) == ["model.safetensors"]
    assert (tmp_path / "model.safetensors").read_bytes() == b"previous"


def test_refusal_is_raised_once_at_the_top(tmp_path):
    with pytest.raises(TypeError, match="Cannot save") as caught:
        rffkit.save(_with_code_in_fitted_model(), tmp_path / "model.safetensors")
    assert len(caught.traceback) <= 3  # save, encode: not a frame per level of the tree


def test_empty_arrays_and_tensors_are_saved(tmp_path):
    """The pipeline rffkit's missing-value message suggests, fitted on rows without a missing value: its
    MissingIndicator's ``features_`` is an empty int array, which any strides may describe."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    model = Pipeline([("impute", SimpleImputer(add_indicator=True)), ("ridge", rffkit.RFFRidge(random_state=0))])
    model.fit(X, X["a"])
    rffkit.save(model, tmp_path / "model.safetensors")
    loaded = rffkit.load(tmp_path / "model.safetensors")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded[0].indicator_.features_.dtype == np.int64 and loaded[0].indicator_.features_.shape == (0,)
    empty = {"int": np.array([], np.int64), "strided": np.zeros(4, np.float32)[4:], "rows": np.zeros((0, 3)),
             "tensor": torch.zeros(0, dtype=torch.float64)}
    rffkit.save(empty, tmp_path / "empty.safetensors")
    back = rffkit.load(tmp_path / "empty.safetensors")
    assert {k: (str(v.dtype), tuple(v.shape)) for k, v in back.items()} == {
        k: (str(v.dtype), tuple(v.shape)) for k, v in empty.items()}


def test_fitted_column_selector_is_saved_as_the_columns_it_chose(tmp_path):
    columns = ColumnTransformer([("scale", StandardScaler(), make_column_selector(dtype_include="number")),
                                 ("onehot", OneHotEncoder(), make_column_selector(dtype_exclude="number"))])
    model = Pipeline([("columns", columns), ("ridge", rffkit.RFFRidge(random_state=0))]).fit(FRAME, Y)
    rffkit.save(model, tmp_path / "model.safetensors")
    loaded = rffkit.load(tmp_path / "model.safetensors")
    np.testing.assert_array_equal(loaded.predict(FRAME), model.predict(FRAME))
    assert [spec[2] for spec in loaded[0].transformers] == [["a", "b", "c", "d"], ["colour"]]
    assert callable(model[0].transformers[0][2])  # the saved object itself is unchanged
    refitted = clone(loaded).fit(FRAME, Y)
    np.testing.assert_array_equal(refitted.predict(FRAME), model.predict(FRAME))


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_leaves_no_file(fitted, failing, tmp_path, monkeypatch):
    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match="disk full"):
        rffkit.save(fitted["RFFRidge"], tmp_path / "model.safetensors")
    assert os.listdir(tmp_path) == []


def test_file_appears_only_when_complete(fitted, tmp_path, monkeypatch):
    path, replace, seen = tmp_path / "model.safetensors", os.replace, []

    def checking_replace(source, destination):
        assert not path.exists()
        seen.append(rffkit.load(source))  # the temporary file is already complete
        replace(source, destination)

    monkeypatch.setattr(os, "replace", checking_replace)
    rffkit.save(fitted["RFFRidge"], path)
    assert len(seen) == 1 and os.listdir(tmp_path) == ["model.safetensors"]


# -- hostile or broken files ---------------------------------------------------------------
class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_is_refused_and_never_run(protocol, tmp_path):
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(_Payload(str(control)), protocol=protocol)).close()
    assert control.exists()  # the payload does run when unpickled
    marker, path = tmp_path / "marker", tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(_Payload(str(marker)), protocol=protocol))
    message = "looks like a pickle. rffkit.load never unpickles" if protocol >= 2 else "not an rffkit model file"
    with pytest.raises(ModelFileError, match=message):
        rffkit.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"", b"\x01\x02", b"x" * 100, b'{"not": "safetensors"}',
                                     struct.pack("<Q", 2) + b"[]", struct.pack("<Q", 2) + b"{}"])
def test_garbage_is_refused(content, tmp_path):
    path = tmp_path / "garbage"
    path.write_bytes(content)
    with pytest.raises(ModelFileError):
        rffkit.load(path)


@pytest.mark.parametrize("content, looks_like", [
    (b"a,b,y\n1.5,2,3\n", "it looks like text such as a CSV file (it starts 'a,b,y')"),
    (b"\xef\xbb\xbfx;y\n1,5;2\n", "it looks like text such as a CSV file (it starts 'x;y')"),
    (b'{"a": [1, 2]}', "it looks like JSON text (it starts '{\"a\": [1, 2]}')"),
    (b"PAR1" + bytes(range(200)), "it looks like a Parquet file"),
    (b"PK\x03\x04" + bytes(200), "it looks like a zip archive (such as a file of torch.save or numpy.savez)"),
    (b"\x1f\x8b\x08\x00" + bytes(200), "it looks like a gzip-compressed file"),
    (b"", "it is empty (0 bytes)"),
    (b"\xa5" * 8 + bytes(range(200)),
     "its first bytes are not the length of a safetensors header, nor of another format rffkit knows"),
])
def test_a_file_of_another_format_is_named_with_what_was_expected(content, looks_like, tmp_path):
    """A data file given where a model was expected says what it looks like, not that its first
    8 bytes claim a header of 8e18 bytes; a truncated model file still says it may be truncated."""
    path = tmp_path / "data"
    path.write_bytes(content)
    with pytest.raises(ModelFileError) as caught:
        rffkit.load(path)
    assert str(caught.value) == (f"{str(path)!r} is not an rffkit model file: {looks_like}; expected a model "
                                 "written by rffkit fit --output or rffkit.save.")
    rffkit.save(rffkit.RFFRidge(), path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ModelFileError, match=r"its first 8 bytes claim a \d+-byte header, but the file has 40 "
                                             r"bytes \(not a safetensors file, or truncated\)"):
        rffkit.load(path)


def test_header_length_that_looks_like_pickle_magic(tmp_path):
    """A valid file whose length prefix starts 0x80 0x02..0x05 is no pickle."""
    source, target = tmp_path / "source.safetensors", tmp_path / "padded.safetensors"
    rffkit.save(rffkit.RFFRidge(), source)
    for pad in range(0, 1200, 8):
        _rewrite(source, target, lambda tree, tensors: tree, padding="x" * pad)
        if target.read_bytes()[0] == 0x80 and target.read_bytes()[1] in (2, 3, 4, 5):
            break
    else:
        pytest.fail("no padding gave a pickle-like prefix")
    assert type(rffkit.load(target)) is rffkit.RFFRidge


def test_foreign_safetensors_file_is_refused(tmp_path):
    path = tmp_path / "weights.safetensors"
    safetensors.torch.save_file({"w": torch.zeros(3)}, path, metadata={"format": "pt"})
    with pytest.raises(ModelFileError, match="no 'rffkit-model' metadata"):
        rffkit.load(path)


@pytest.mark.parametrize("claimed", ["size", 2**40, 2**63])
def test_huge_header_length_is_refused(fitted, claimed, tmp_path):
    path = tmp_path / "model.safetensors"
    rffkit.save(fitted["RFFRidge"], path)
    data = path.read_bytes()
    claimed = len(data) - 7 if claimed == "size" else claimed
    path.write_bytes(struct.pack("<Q", claimed) + data[8:])
    with pytest.raises(ModelFileError, match=f"claim a {claimed}-byte header"):
        rffkit.load(path)


def test_newer_format_version_is_refused(fitted, tmp_path, monkeypatch):
    path = tmp_path / "future.safetensors"
    monkeypatch.setattr(persistence, "FORMAT_VERSION", 2)
    rffkit.save(fitted["RFFRidge"], path)
    monkeypatch.undo()
    with pytest.raises(ModelFileError, match="format version 2.*reads versions up to 1. Upgrade rffkit"):
        rffkit.load(path)


def _saved_bytes(model, tmp_path):
    path = tmp_path / "original.safetensors"
    rffkit.save(model, path)
    data = path.read_bytes()
    return data, 8 + struct.unpack("<Q", data[:8])[0]


@pytest.mark.parametrize("fraction", [0.001, 0.3, 0.7, 0.999])
def test_truncated_file_is_refused(fitted, fraction, tmp_path):
    data, _ = _saved_bytes(fitted["RFFNetRegressor"], tmp_path)
    path = tmp_path / "cut.safetensors"
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelFileError):
        rffkit.load(path)


def test_edited_tree_is_detected(fitted, tmp_path):
    data, header_end = _saved_bytes(fitted["RFFRidge"], tmp_path)
    position = data.index(b"random_state", 0, header_end) + 2  # inside the JSON tree
    path = tmp_path / "edited.safetensors"
    path.write_bytes(data[:position] + b"X" + data[position + 1 :])
    with pytest.raises(ModelFileError, match="does not match its SHA-256"):
        rffkit.load(path)


def test_flipped_tensor_byte_is_detected_and_named(fitted, tmp_path):
    data, _ = _saved_bytes(fitted["RFFNetRegressor"], tmp_path)
    path = tmp_path / "flipped.safetensors"
    path.write_bytes(data[:-3] + bytes([data[-3] ^ 0x10]) + data[-2:])
    with pytest.raises(ModelFileError, match=r"\w+.*: the bytes of tensor .* do not match their SHA-256"):
        rffkit.load(path)


def _rewrite(source, target, edit, padding=None):
    """Re-save ``source`` after ``edit(tree, tensors)``, with a valid digest (a crafted file)."""
    data = source.read_bytes()
    header = json.loads(data[8 : 8 + struct.unpack("<Q", data[:8])[0]])
    metadata = header["__metadata__"]
    tree, tensors = json.loads(metadata["tree"]), safetensors.torch.load(data)
    tree = edit(tree, tensors)
    metadata["tree"] = json.dumps(tree)
    if padding is not None:
        metadata["padding"] = padding
    metadata["sha256"] = persistence._metadata_digest(metadata)
    target.write_bytes(safetensors.torch.save(tensors, metadata=metadata))


def _set_class(module, qualname):
    def edit(tree, tensors):
        tree["module"], tree["qualname"] = module, qualname
        return tree

    return edit


def _drop_tensor(tree, tensors):
    del tensors[sorted(tensors)[0]]
    return tree


def _add_tensor(tree, tensors):
    tensors["extra"] = torch.zeros(3)
    return tree


def _float32_claimed(tree, tensors):
    return json.loads(json.dumps(tree).replace('"<f8"', '"<f4"', 1))


def _nest(depth):
    return lambda tree, tensors: json.loads('{"$": "list", "items": [' * depth + "]}" * depth)


CRAFTED = {
    "module never imported": (_set_class("this", "Zen"), "class this.Zen is not on the allow-list"),
    "os.system": (_set_class("os", "system"), "class os.system is not on the allow-list"),
    "rffkit function": (_set_class("rffkit.cli", "main"), "rffkit.cli.main is not on the allow-list"),
    "rffkit main module": (_set_class("rffkit.__main__", "main"), "not on the allow-list"),
    "name imported into rffkit": (_set_class("rffkit.rffnet", "LabelEncoder"), "not on the allow-list"),
    "sklearn class off the list": (
        _set_class("sklearn.linear_model", "LinearRegression"), "not on the allow-list"
    ),
    "missing tensor": (_drop_tensor, r"its tensor .* is missing from the file"),
    "extra tensor": (_add_tensor, r"tensors no attribute refers to: \['extra'\]"),
    "dtype claimed": (_float32_claimed, r"a tensor of float64 .* where float32 .* was saved"),
    "undefined reference": (
        lambda tree, t: {"$": "list", "items": [{"$": "ref", "id": 5}]}, "not defined before it"
    ),
    "unknown node": (lambda tree, t: {"$": "__import__"}, "unknown node kind"),
    "deep nesting": (_nest(400), "nested deeper than"),
    "huge text array": (
        lambda tree, t: {"$": "ndarray", "dtype": "<U100000000", "shape": [2], "items": ["a", "b"]},
        "too large",
    ),
    "bad shape": (
        lambda tree, t: {"$": "ndarray", "dtype": "|O", "shape": [10**12], "items": []}, "items for shape"
    ),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_files(fitted, name, tmp_path):
    edit, message = CRAFTED[name]
    source, target = tmp_path / "source.safetensors", tmp_path / "crafted.safetensors"
    rffkit.save(fitted["RFFNetRegressor"], source)
    if name in ("missing tensor", "extra tensor", "dtype claimed"):
        _rewrite(source, target, edit)
    else:  # drop the tensors, so that the edit is the only thing wrong
        _rewrite(source, target, lambda tree, tensors: tensors.clear() or edit(tree, tensors))
    rffkit.load(source)  # a valid file: whatever any load imports (all of rffkit's modules)
    modules = set(sys.modules)
    with pytest.raises(ModelFileError, match=message):
        rffkit.load(target)
    assert set(sys.modules) == modules  # nothing the crafted file names


# -- fuzzing ---------------------------------------------------------------------------------
def _mutations(data, header_end, rng, count):
    for case in range(count):
        mutated = bytearray(data)
        kind = case % 5
        if kind == 0:  # flip a bit in the header
            position = int(rng.integers(header_end))
            mutated[position] ^= 1 << int(rng.integers(8))
        elif kind == 1:  # flip a bit anywhere
            position = int(rng.integers(len(data)))
            mutated[position] ^= 1 << int(rng.integers(8))
        elif kind == 2:  # truncate
            del mutated[int(rng.integers(len(data))) :]
        elif kind == 3:  # extend
            mutated += rng.bytes(int(rng.integers(1, 64)))
        else:  # overwrite a span with random bytes
            start = int(rng.integers(len(data)))
            span = rng.bytes(int(rng.integers(1, 16)))
            mutated[start : start + len(span)] = span
        yield bytes(mutated)


def _fuzz(fitted, tmp_path, names, count, seed):
    rng = np.random.default_rng(seed)
    path = tmp_path / "fuzzed.safetensors"
    outcomes = collections.Counter()
    for name in names:
        model, inputs = fitted[name], CASES[name][1][0]
        expected = _outputs(model, inputs)
        data, header_end = _saved_bytes(model, tmp_path)
        for mutated in _mutations(data, header_end, rng, count):
            path.write_bytes(mutated)
            start = time.perf_counter()
            try:
                loaded = rffkit.load(path)
            except ModelFileError:
                outcomes["refused"] += 1
            else:  # an edit that changes nothing, e.g. bytes past the end of a file without tensors
                _assert_same_outputs(expected, _outputs(loaded, inputs))
                outcomes["loaded"] += 1
            assert time.perf_counter() - start < 2.0
    return outcomes


def test_fuzzed_files_load_or_raise_model_file_error(fitted, tmp_path):
    outcomes = _fuzz(fitted, tmp_path, ["RFFNetClassifier", "Pipeline-DataFrame"], 100, seed=0)
    assert sum(outcomes.values()) == 200 and outcomes["refused"] >= 190


@pytest.mark.slow
def test_fuzzed_files_many(fitted, tmp_path):
    outcomes = _fuzz(fitted, tmp_path, list(CASES), 200, seed=1)
    assert sum(outcomes.values()) == 200 * len(CASES)
