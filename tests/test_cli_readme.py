"""The command-line transcript in docs/cli.md is what the commands print, and the README's
three commands are commands of that transcript."""

import re
import shlex
from pathlib import Path

import pytest

from rffkit.cli import main, write_diabetes_csv

ROOT = Path(__file__).resolve().parents[1]


def _transcript(path, heading):
    section = path.read_text().split(heading, 1)[1]
    block = re.search(r"```console\n(.*?)```", section, re.S).group(1)
    steps = []
    for line in block.splitlines():
        if line.startswith("$ rffkit "):
            steps.append((shlex.split(line[len("$ rffkit "):], comments=True), []))
        else:
            steps[-1][1].append(line)
    return steps


def _same(printed, shown):
    """Equal words, numbers within 2% (or 0.01), but the fit time and the available memory,
    which are the machine's."""
    if shown.startswith("fit: "):
        return printed.split()[2:] == shown.split()[2:]
    if shown.startswith("in memory: "):
        return printed.split(";")[0] == shown.split(";")[0] and "the in-memory fit needs" in printed
    words, expected = printed.split(), shown.split()
    if len(words) != len(expected):
        return False
    for word, want in zip(words, expected):
        try:
            if float(word.rstrip(",")) != pytest.approx(float(want.rstrip(",")), rel=0.02, abs=0.01):
                return False
        except ValueError:
            if word != want:
                return False
    return True


def test_the_documented_transcript(tmp_path, monkeypatch, capsys):
    steps = _transcript(ROOT / "docs" / "cli.md", "## A session on a real file")
    assert [argv[0] for argv, _ in steps] == ["fit", "relevances", "predict"]
    monkeypatch.chdir(tmp_path)
    write_diabetes_csv("diabetes.csv")
    for argv, shown in steps:
        assert main(argv) == 0
        printed = capsys.readouterr().out.splitlines()
        assert len(printed) == len(shown), (argv, printed)
        for line, expected in zip(printed, shown):
            assert _same(line, expected), (line, expected)


def test_the_readme_shows_three_commands_of_the_transcript():
    shown = [argv for argv, _ in _transcript(ROOT / "README.md", "## Command line")]
    documented = [argv for argv, _ in _transcript(ROOT / "docs" / "cli.md", "## A session on a real file")]
    assert len(shown) == 3 and all(argv in documented for argv in shown), shown
