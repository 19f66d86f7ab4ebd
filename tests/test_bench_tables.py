"""The SRFF-tables benchmark builds its tables from many runs: a run must merge, not clobber.

The committed ``benchmarks/results/srff_tables.csv`` is merged from runs of many hours;
``make bench`` runs the script at its quick defaults, which must replace only the rows
it refits and keep every other row and the notes.
"""

import csv
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_srff_tables.py"


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # the script imports its sibling _common
    spec = importlib.util.spec_from_file_location("bench_srff_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    monkeypatch.setenv("RFFKIT_COMMIT", "abc1234")
    return module


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _run(bench, *argv):
    bench.main(["--problems", "SE1", "--sizes", "60", "--methods", "Mean", "Ridge", *argv])


def test_a_run_merges_its_rows_and_keeps_the_others_and_the_notes(bench, tmp_path):
    _run(bench, "--reps", "2", "--note", "first note")
    first = _rows(tmp_path / "srff_tables.csv")
    assert [(r["rep"], r["method"]) for r in first] == [("0", "Mean"), ("0", "Ridge"), ("1", "Mean"), ("1", "Ridge")]
    assert {r["commit"] for r in first} == {"abc1234"}

    # a later run refits repetition 1 only, at another commit, with no notes of its own
    bench.os.environ["RFFKIT_COMMIT"] = "def5678"
    _run(bench, "--reps", "1", "--start-rep", "1")
    second = _rows(tmp_path / "srff_tables.csv")
    assert len(second) == 4
    assert [r["commit"] for r in second] == ["abc1234", "abc1234", "def5678", "def5678"]
    assert second[:2] == first[:2]  # repetition 0 untouched, byte for byte
    markdown = (tmp_path / "srff_tables.md").read_text()
    assert "- first note" in markdown
    assert "abc1234: 2, def5678: 2" in markdown
    assert json.loads((tmp_path / "srff_tables.notes.json").read_text()) == ["first note"]
    assert not list(tmp_path.glob("*.tmp"))


def test_replace_starts_afresh_and_old_csvs_without_commit_are_read(bench, tmp_path):
    _run(bench, "--reps", "1", "--note", "old note")
    path = tmp_path / "srff_tables.csv"
    old = _rows(path)
    with open(path, "w", newline="") as handle:  # the format before the commit column
        fields = [f for f in bench.FIELDS if f != "commit"]
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: r[k] for k in fields} for r in old)
    rows = bench.read_rows(path)
    assert [r["commit"] for r in rows] == ["", ""]
    assert "unrecorded: 2" in bench.provenance_note(rows)

    _run(bench, "--reps", "1", "--start-rep", "3", "--replace")
    assert [r["rep"] for r in _rows(path)] == ["3", "3"]
    assert not (tmp_path / "srff_tables.notes.json").exists()
    assert "old note" not in (tmp_path / "srff_tables.md").read_text()


def test_markdown_only_needs_a_table(bench):
    with pytest.raises(SystemExit, match="missing or empty"):
        bench.main(["--markdown-only"])
