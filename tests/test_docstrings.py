"""Docstrings: every example runs, and every public name has a numpydoc docstring.

``test_examples_run`` runs the doctests of each ``rffkit`` module (one test per module;
a module that needs an optional dependency which is not installed is skipped).
``test_numpydoc_docstring`` validates each public class, function and method with
numpydoc: a docstring with a summary, every parameter documented (and no unknown one),
a Returns section where something is returned, and an Examples section for classes
other than exceptions.
"""

import doctest
import importlib
import inspect
import pkgutil

import pytest

import rffkit

# every module but __main__, which runs the command line when imported
MODULES = ["rffkit"] + sorted(
    f"rffkit.{info.name}" for info in pkgutil.iter_modules(rffkit.__path__) if info.name != "__main__"
)

# the public modules whose classes and functions (and their methods) are checked
PUBLIC_MODULES = [
    "rffkit.kernels",
    "rffkit.features",
    "rffkit.binning",
    "rffkit.approximation",
    "rffkit.stability",
    "rffkit.datasets",
    "rffkit.ridge",
    "rffkit.srff",
    "rffkit.logistic",
    "rffkit.layers",
    "rffkit.rffnet",
    "rffkit.persistence",
    "rffkit.inspection",
    "rffkit.io",
]
# numpydoc validation codes that fail the check
REQUIRED = {
    "GL08": "no docstring",
    "SS01": "no summary",
    "PR01": "parameters not documented",
    "PR02": "unknown parameters documented",
    "RT01": "no Returns section",
}
# classes need Examples too, except exceptions (subclasses of BaseException): a summary of
# when they are raised is their documentation
CLASS_REQUIRED = {**REQUIRED, "EX01": "no Examples section"}


def _import_or_skip(name):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] != "rffkit":
            pytest.skip(f"{name} needs {exc.name}, which is not installed")
        raise


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    module = _import_or_skip(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    report = []
    for test in finder.find(module, name):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)


def _public_objects():
    """Import paths of the public classes, functions and methods to validate."""
    paths = {}

    def add(owner_path, name, value):
        path = f"{owner_path}.{name}"
        paths[path] = value
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                if attribute.startswith("_"):
                    continue
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if inspect.isfunction(member):
                    paths[f"{path}.{attribute}"] = member

    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if name.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if getattr(value, "__module__", None) == module_name:
                add(module_name, name, value)
    for name in rffkit.__all__:
        value = getattr(rffkit, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            add(value.__module__, value.__qualname__, value)
    return paths


def _needs_examples(value):
    return inspect.isclass(value) and not issubclass(value, BaseException)


def _cases():
    cases = []
    for path, value in sorted(_public_objects().items()):
        cases.append(pytest.param(path, _needs_examples(value), id=path))
    return cases


@pytest.mark.parametrize("path, needs_examples", _cases())
def test_numpydoc_docstring(path, needs_examples):
    validate = pytest.importorskip("numpydoc.validate").validate
    required = CLASS_REQUIRED if needs_examples else REQUIRED
    errors = [f"{code} ({required[code]}): {message}" for code, message in validate(path)["errors"] if code in required]
    assert not errors, "\n".join(errors)
