"""The benchmark scripts' progress bar: shown on a terminal, off with --quiet or in a log."""

import argparse
import io
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def common(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common

    return _common


def _run(common, monkeypatch, stderr, **options):
    monkeypatch.setattr(sys, "stderr", stderr)
    units = [("SE1", 0, "rffnet"), ("SE1", 1, "rffnet")]
    seen = list(common.progress(units, desc="bench_test", **options))
    assert seen == units
    return stderr.getvalue()


def test_the_bar_counts_the_units_and_names_the_one_in_progress(common, monkeypatch):
    shown = _run(common, monkeypatch, _Terminal())
    assert "bench_test" in shown and "2/2" in shown and "SE1 1 rffnet" in shown
    labelled = _run(common, monkeypatch, _Terminal(), label=lambda unit: f"{unit[0]} seed={unit[1]}")
    assert "SE1 seed=1" in labelled


def test_no_bar_in_a_log_or_with_quiet(common, monkeypatch):
    assert _run(common, monkeypatch, io.StringIO()) == ""  # not a terminal
    assert _run(common, monkeypatch, _Terminal(), quiet=True) == ""


def test_quiet_flag_and_lines_above_the_bar(common, capsys):
    parser = common.add_quiet_argument(argparse.ArgumentParser())
    assert parser.parse_args(["--quiet"]).quiet and not parser.parse_args([]).quiet
    common.say("SE1 seed=0", "mse=0.0383")
    assert capsys.readouterr().out == "SE1 seed=0 mse=0.0383\n"
