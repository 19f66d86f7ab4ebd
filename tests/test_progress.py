"""verbose: one progress bar and a summary line at 1, a line per iteration at 2, through logging."""

import logging
import subprocess
import sys

import pytest

from rffkit import RFFNetRegressor
from rffkit.datasets import make_jordan_se1


@pytest.fixture(scope="module")
def data():
    return make_jordan_se1(300, random_state=0)


@pytest.mark.parametrize("solver", ["varpro", "adam"])
def test_verbose_levels(data, solver, caplog, capsys):
    X, y = data
    params = dict(solver=solver, max_iter=5, random_state=0, n_components=50)
    with caplog.at_level(logging.INFO, logger="rffkit"):
        RFFNetRegressor(verbose=0, **params).fit(X, y)
    assert caplog.records == [] and capsys.readouterr().err == ""

    with caplog.at_level(logging.INFO, logger="rffkit"):
        model = RFFNetRegressor(verbose=1, **params).fit(X, y)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("RFFNetRegressor: fitted in ")
    assert f"alpha {model.alpha_:g}" in messages[0] and f"{model.n_components_} random features" in messages[0]
    assert "RFFNetRegressor" in capsys.readouterr().err  # the bar, on standard error
    caplog.clear()

    with caplog.at_level(logging.INFO, logger="rffkit"):
        model = RFFNetRegressor(verbose=2, **params).fit(X, y)
    messages = [record.getMessage() for record in caplog.records]
    if solver == "adam":
        assert sum(message.startswith("RFFNetRegressor: epoch ") for message in messages) == model.n_iter_
    else:  # 300 rows: five searches (1e-4, then two penalties from two starts), a line per iteration
        searches = {message.split(", stage")[0] for message in messages if "stage m=" in message}
        assert len(searches) == 5 and "RFFNetRegressor: search alpha=0.03, marginal start" in searches
        assert sum("stage m=" in message for message in messages) >= model.n_iter_
    assert messages[-1].startswith("RFFNetRegressor: fitted in ")


def test_verbose_lines_reach_standard_error_without_logging_configured():
    """In a fresh interpreter, with no logging set up, the summary line is printed to stderr."""
    code = (
        "import logging; from rffkit import RFFNetRegressor; from rffkit.datasets import make_jordan_se1\n"
        "X, y = make_jordan_se1(200, random_state=0)\n"
        "RFFNetRegressor(verbose=1, solver='adam', max_iter=2, random_state=0, n_components=20).fit(X, y)\n"
        "assert not logging.getLogger('rffkit').handlers\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "RFFNetRegressor: fitted in" in result.stderr and result.stdout == ""
    # the bar is closed before the summary, which a log file (stderr not a terminal) keeps last (helper-46)
    lines = [line for line in result.stderr.replace("\r", "\n").splitlines() if line.startswith("RFFNetRegressor:")]
    assert lines[-1].startswith("RFFNetRegressor: fitted in"), lines[-3:]
