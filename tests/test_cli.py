import numpy as np

from rffkit.cli import demo, main


def test_demo_learns_and_writes_the_chart(tmp_path, capsys):
    output = tmp_path / "relevances.png"
    model, mse, baseline = demo(n_samples=1500, random_state=0, output=str(output))
    assert output.stat().st_size > 1000
    assert mse < baseline
    assert "ranked by relevance" in capsys.readouterr().out
    assert set(np.argsort(-model.feature_importances_)[:3]) <= {0, 2, 6, 7, 8}


def test_main_parses_demo(tmp_path, capsys):
    output = tmp_path / "r.png"
    main(["demo", "--n-samples", "600", "--random-state", "1", "--output", str(output)])
    printed = capsys.readouterr().out
    assert "RFFNetRegressor on SE1: 600 training points, 18 features" in printed
    assert f"saved to {output}" in printed and output.stat().st_size > 1000
