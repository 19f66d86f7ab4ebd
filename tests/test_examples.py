"""The scripts in examples/ run, print their results and reach the numbers they show."""

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _main(name):
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")["main"]


def _printed(pattern, text):
    return [float(value) for value in re.findall(pattern, text)]


def test_diabetes_regression(capsys):
    scores = _main("diabetes_regression")()
    printed = _printed(r"test R\^2 (\d\.\d{3})", capsys.readouterr().out)
    assert printed == pytest.approx([scores[name] for name in scores], abs=5e-4)
    assert scores["RFFNetRegressor"] > 0.3 and scores["RFFRidge"] > 0.2 and scores["RidgeCV (linear)"] > 0.3


@pytest.mark.slow  # 8 s; the classifier's default fit is tested in test_rffnet and bench_classification
def test_breast_cancer_classification(capsys):
    accuracy = _main("breast_cancer_classification")()
    output = capsys.readouterr().out
    assert _printed(r"accuracy (\d\.\d{3})", output) == pytest.approx(list(accuracy.values()), abs=5e-4)
    assert min(accuracy.values()) > 0.9
    assert min(_printed(r"ROC AUC (\d\.\d{3})", output)) > 0.95


def test_categorical_pipeline(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    grouped = _main("categorical_pipeline")(plot=tmp_path / "relevances.png")
    output = capsys.readouterr().out
    assert sorted(grouped.index) == sorted(["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"])
    assert grouped["sum"].sum() == pytest.approx(1.0) and grouped["norm"].sum() == pytest.approx(1.0)
    assert np.all(grouped["max"] <= grouped["sum"] + 1e-12)
    assert list(grouped.index) == list(grouped["norm"].sort_values(ascending=False, kind="stable").index)
    assert "RFFNet saw 15 columns made from the table's 10" in output  # 2 sexes + 5 age bands + 8 numbers
    assert _printed(r"test R\^2 (\d\.\d{3})", output)[0] > 0.3
    assert (tmp_path / "relevances.png").stat().st_size > 1000


def test_kernel_approximation(capsys):
    errors = _main("kernel_approximation")()
    output = capsys.readouterr().out
    for (kernel, label), row in errors.items():
        assert row[0] > row[1] > row[2], (kernel, label)  # more features, smaller error
        assert row[2] < 0.1
        assert f"{row[2]:9.4f}" in output


def test_readme_quick_start_prints_what_the_readme_shows(capsys):
    readme = (EXAMPLES.parent / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README quick start", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    # the same lines; the R^2 may differ in the last digit on another machine or BLAS
    assert _printed(r"R\^2: (\d\.\d{3})", printed) == pytest.approx(_printed(r"R\^2: (\d\.\d{3})", shown), abs=0.01)
    assert [line.split()[0] for line in printed.splitlines()[1:]] == [line.split()[0] for line in shown.splitlines()[1:]]
