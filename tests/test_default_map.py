"""The width of RFFRidge's and RFFClassifier's default feature map (features=None): the n_components
parameter, the advice of the messages that name it, set_params of features__... on the default map,
and the command line's --set (rffkit._default_map)."""

import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import SplineTransformer

import rffkit
import rffkit._memory as memory
from rffkit import RandomFourierFeatures, RFFClassifier, RFFRidge, cli
from rffkit.exceptions import MemoryBudgetError
from rffkit.io import ArraySource

ESTIMATORS = [RFFRidge, RFFClassifier]


def _data(n=120, p=3, classes=False):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, p))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    return X, (y > 0).astype(int) if classes else y


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_n_components_sets_the_width_of_the_default_map(cls):
    """RFFRidge().set_params(features__n_components=100) had failed with AttributeError on None, the advice of
    the docstring and of the memory errors; n_components sets the default map's width, in a grid too."""
    X, y = _data(classes=cls is RFFClassifier)
    model = cls(random_state=0).set_params(n_components=40)
    assert clone(model).get_params()["n_components"] == 40
    assert model.fit(X, y).features_.n_components == 40
    default = cls(random_state=0).fit(X, y)
    same = cls(n_components=500, random_state=0).fit(X, y)  # None is 500: the fits of before
    assert default.features_.n_components == 500
    np.testing.assert_array_equal(default.predict(X), same.predict(X))
    search = GridSearchCV(cls(random_state=0), {"n_components": [20, 60]}, cv=3).fit(X, y)
    assert search.best_estimator_.features_.n_components == search.best_params_["n_components"]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_features_parameters_of_the_default_map_say_what_works(cls):
    X, y = _data(classes=cls is RFFClassifier)
    with pytest.raises(ValueError, match=rf"{cls.__name__}: features__n_components sets a parameter of the feature "
                       r"map, and features=None .*set n_components=100 .*features=RandomFourierFeatures"):
        cls().set_params(features__n_components=100)
    with pytest.raises(ValueError, match="features__length_scale sets .*give the map"):
        cls().set_params(features__length_scale=2.0)
    given = cls().set_params(features=RandomFourierFeatures(), features__n_components=30)  # together: the map's
    assert given.features.n_components == 30
    search = GridSearchCV(cls(features=RandomFourierFeatures(), random_state=0),
                          {"features__n_components": [20, 40]}, cv=3).fit(X, y)
    assert search.best_estimator_.features_.n_components == search.best_params_["features__n_components"]
    overridden = cls(features=RandomFourierFeatures(n_components=90, length_scale=2.0), n_components=30).fit(X, y)
    assert (overridden.features_.n_components, overridden.features_.length_scale) == (30, 2.0)  # as random_state
    assert overridden.features.n_components == 90  # the parameter itself is left as given
    with pytest.raises(ValueError, match=r"n_components=30 sets the width of the feature map, and the map given, "
                       "SplineTransformer, has no n_components parameter"):
        cls(features=SplineTransformer(), n_components=30).fit(X, y)


def test_memory_messages_name_the_parameter_that_applies(monkeypatch):
    """The memory errors advised features__n_components, which the default map (features=None) has not;
    n_components lowers the width of either map."""
    X, y = _data(n=200)
    with pytest.raises(MemoryBudgetError, match=r"lower n_components \(at most \d+ fit\)"):
        RFFRidge(n_components=6000, memory_budget="200MB").fit(ArraySource(X, y))
    with pytest.raises(MemoryBudgetError, match=r"lower features__n_components \(at most \d+ fit\)"):
        RFFRidge(features=RandomFourierFeatures(n_components=6000), memory_budget="200MB").fit(ArraySource(X, y))
    with pytest.raises(MemoryBudgetError, match=r"lower n_components \(at most \d+ fit\)"):
        RFFRidge(features=RandomFourierFeatures(), n_components=6000, memory_budget="200MB").fit(ArraySource(X, y))
    monkeypatch.setattr(memory, "available_memory", lambda: 2**16)
    for estimator, parameter in [(RFFClassifier(), "lower n_components,"),
                                 (RFFClassifier(features=RandomFourierFeatures()), "lower features__n_components,")]:
        with pytest.raises(MemoryError, match=parameter):
            estimator.fit(*_data(n=2000, classes=True))


def test_a_model_saved_before_n_components_loads_and_clones(tmp_path):
    """Model files keep the instance's attributes: one written before the parameter existed lacks it."""
    X, y = _data()
    model = RFFRidge(random_state=0).fit(X, y)
    del model.__dict__["n_components"]
    rffkit.save(model, tmp_path / "old.rffkit")
    loaded = rffkit.load(tmp_path / "old.rffkit")
    assert "n_components" not in vars(loaded) and loaded.get_params()["n_components"] is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(clone(loaded).fit(X, y).predict(X), model.predict(X))


def _fit(capsys, path, *settings):
    status = cli.main(["fit", str(path), "--target", "y", "--model", "ridge", "--test-size", "0",
                       *[item for setting in settings for item in ("--set", setting)],
                       "--output", str(path.parent / "m.rffkit")])
    _, err = capsys.readouterr()
    assert status == 0, err
    return rffkit.load(path.parent / "m.rffkit")["estimator"][-1]


def test_command_line_sets_the_default_map_by_either_name(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "d.csv"
    pa_csv.write_csv(pa.table({"a": rng.normal(size=80), "b": rng.normal(size=80), "y": rng.normal(size=80)}), path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _fit(capsys, path, "n_components=30").features_.n_components == 30
        model = _fit(capsys, path, "features__n_components=30")  # as before: the map for standardised columns
        assert model.features_.n_components == 30 and model.features_.length_scale == math.sqrt(2 / 2)
        model = _fit(capsys, path, "n_components=40", "features__length_scale=2.0")
        assert (model.features_.n_components, model.features_.length_scale) == (40, 2.0)
