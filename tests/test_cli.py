"""rffkit demo, --version and --help."""

import re
import sys

import numpy as np
import pyarrow.csv as pa_csv
import pytest

import rffkit
from rffkit.cli import demo, main


def test_demo_learns_names_features_one_way_and_runs_the_command_line(tmp_path, capsys):
    chart = tmp_path / "relevances.png"
    model, mse, baseline = demo(n_samples=1500, random_state=0, plot=str(chart), directory=str(tmp_path / "cli"))
    out = capsys.readouterr().out
    assert mse < baseline and chart.stat().st_size > 1000
    assert set(np.argsort(-model.feature_importances_)[:3]) <= {0, 2, 6, 7, 8}
    # one-based names everywhere: x1..x18, the relevant ones x1, x3, x7, x8, x9
    assert "18 features x1..x18, of which x1, x3, x7, x8, x9 are relevant" in out
    assert "zero-based" not in out and "[0, 2, 6, 7, 8]" not in out and not re.search(r"\bx0\b", out)
    ranked = re.findall(r"^\s+\d+\. (x\d+)\s+[\d.]+(  <- relevant)?$", out, re.M)
    assert len(ranked) == 18 and {name for name, mark in ranked if mark} == {"x1", "x3", "x7", "x8", "x9"}
    # the command line on the diabetes file, with the commands as a user types them
    for command in ("$ rffkit fit diabetes.csv --target progression --output diabetes.rffkit",
                    "$ rffkit relevances diabetes.rffkit --top 5",
                    "$ rffkit predict diabetes.rffkit diabetes.csv --output predictions.csv"):
        assert command in out
    assert "held-out score on" in out and "wrote 442 predictions to predictions.csv" in out
    assert pa_csv.read_csv(tmp_path / "cli" / "predictions.csv").num_rows == 442
    assert rffkit.load(tmp_path / "cli" / "diabetes.rffkit")["meta"]["target"] == "progression"


def test_demo_without_matplotlib_says_so_before_fitting(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--n-samples", "300", "--random-state", "1"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first == 'matplotlib is not installed, so no bar chart (rffnet_relevances.png): pip install "rffkit[plot]"'
    assert "RFFNetRegressor on SE1: 300 training points" in out and "bar chart" not in out.split("\n", 1)[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the demo's files went to a temporary folder


def test_demo_keeps_its_default_chart_with_its_files(tmp_path, capsys, monkeypatch):
    """With --dir the default chart goes there too (helper-46: it had gone to the current folder)."""
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--n-samples", "300", "--dir", "kept"]) == 0
    assert "bar chart of the relevances saved to kept/rffnet_relevances.png" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert (tmp_path / "kept" / "rffnet_relevances.png").stat().st_size > 1000


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"rffkit {rffkit.__version__}\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(command in text for command in ("fit", "predict", "relevances", "info", "demo"))
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "torchrun --standalone --nproc_per_node=2 -m rffkit fit" in text
    assert "at most 20 distinct whole numbers" in text and "--set PARAM=VALUE" in text


def test_help_version_and_usage_errors_do_not_import_torch():
    # the parser answers before the commands' modules load (rffkit._cli_commands)
    import subprocess

    probe = ("import sys\n"
             "from rffkit.cli import main\n"
             "for argv in (['--help'], ['fit', '--help'], ['--version']):\n"
             "    try:\n"
             "        main(argv)\n"
             "    except SystemExit as stop:\n"
             "        assert stop.code == 0, argv\n"
             "assert main(['fit', 'data.csv']) == 2\n"  # --target missing: a usage error
             "heavy = sorted({'torch', 'sklearn', 'pandas', 'pyarrow'} & set(sys.modules))\n"
             "print('loaded:', heavy)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "loaded: []"
    assert "the following arguments are required: --target" in result.stderr


def test_package_names_load_on_first_use():
    import importlib
    import subprocess

    for name in rffkit.__all__:
        assert getattr(rffkit, name) is not None and name in dir(rffkit)
    assert rffkit.RFFNetRegressor is importlib.import_module("rffkit.rffnet").RFFNetRegressor
    assert rffkit.io.open_table is importlib.import_module("rffkit.io").open_table
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        rffkit.nope
    result = subprocess.run([sys.executable, "-c", "import sys, rffkit; print('torch' in sys.modules)"],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


def test_commands_in_a_new_process_read_the_model_file(tmp_path, capsys):
    # each command starts a Python that has imported nothing of rffkit's estimators; the
    # model file names their classes (5a5818a's lazy loading made this fail: 'not on the
    # allow-list'), and rffkit demo, which runs them in its own process, did not see it
    import subprocess

    from rffkit.cli import write_diabetes_csv

    data, model = tmp_path / "diabetes.csv", tmp_path / "diabetes.rffkit"
    write_diabetes_csv(str(data))
    assert main(["fit", str(data), "--target", "progression", "--output", str(model)]) == 0
    capsys.readouterr()
    for command in (["info", str(model)], ["relevances", str(model), "--top", "3"]):
        done = subprocess.run([sys.executable, "-m", "rffkit", *command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert "RFFNetRegressor" in done.stdout
    info = main_output(["info", str(model)])
    assert "(rffkit-model format version 1, command-line model version 2, written by" in info
    # a reader that stops early (rffkit info MODEL | head -1, rffkit fit ... | head -5) does not stop the command:
    # its output is dropped and a fit still writes its model (helper-46, helper-48)
    refit = tmp_path / "again.rffkit"
    for command in (["info", str(model)], ["fit", str(data), "--target", "progression", "--output", str(refit)]):
        reader = subprocess.Popen([sys.executable, "-m", "rffkit", *command], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        reader.stdout.close()  # before the command (still importing) writes: its output goes to a closed pipe
        with reader.stderr:
            error = reader.stderr.read()
        assert reader.wait(timeout=120) == 0 and error == b"", error
    assert rffkit.load(refit)["meta"]["target"] == "progression"


def main_output(argv):
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(argv) == 0
    return out.getvalue()
