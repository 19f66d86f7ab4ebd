"""``rffkit demo``: RFFNet on Gregorová's SE1, then the command line on the diabetes data.

:func:`demo` fits :class:`~rffkit.RFFNetRegressor` on the synthetic SE1 problem
(:func:`rffkit.datasets.make_gregorova_se1`), prints its test error and the relevance of
each feature (and saves a bar chart when matplotlib is installed), then writes
scikit-learn's diabetes data as a CSV file (:func:`write_diabetes_csv`) and runs
``rffkit fit``, ``relevances`` and ``predict`` on it, printing each command.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shlex
import time

import numpy as np

from ._cli_support import check_output_folder, replaced_atomically
from .cli import CommandLineError

__all__ = ["demo", "demo_command", "write_diabetes_csv"]


def _matplotlib_or_message(plot):
    """``plot`` if matplotlib can draw it, else None after saying why (before any fit starts)."""
    if not plot:
        return None
    try:
        importlib.import_module("matplotlib.figure")  # an optional dependency
    except ImportError:
        print(f'matplotlib is not installed, so no bar chart ({plot}): pip install "rffkit[plot]"')
        return None
    return plot


def demo(n_samples=10_000, random_state=0, plot="rffnet_relevances.png", directory=None):
    """Fit RFFNet on Gregorová's SE1, then show the command line on the diabetes data.

    Features are named one-based, ``x1`` to ``x18``, everywhere in the output. The second
    part writes ``diabetes.csv`` (scikit-learn's diabetes data, in their original units)
    into ``directory`` (a temporary folder, removed afterwards, when None) and runs
    ``rffkit fit``, ``relevances`` and ``predict`` on it, printing each command.

    Returns
    -------
    model : RFFNetRegressor
        Fitted on SE1.
    mse, baseline : float
        Its test MSE and the mean predictor's.
    """
    from .datasets import make_gregorova_se1
    from .rffnet import RFFNetRegressor

    plot = _matplotlib_or_message(plot)
    X, y, support = make_gregorova_se1(n_samples + 2000, random_state=random_state, return_support=True)
    names = [f"x{j + 1}" for j in range(X.shape[1])]
    relevant = [names[j] for j in support]
    X_train, y_train, X_test, y_test = X[:n_samples], y[:n_samples], X[n_samples:], y[n_samples:]
    print(f"RFFNetRegressor on SE1: {n_samples} training points, {X.shape[1]} features "
          f"x1..x{X.shape[1]}, of which {', '.join(relevant)} are relevant")
    start = time.perf_counter()
    model = RFFNetRegressor(random_state=random_state).fit(X_train, y_train)
    seconds = time.perf_counter() - start
    mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
    baseline = float(np.mean((y_train.mean() - y_test) ** 2))
    print(f"fit: {seconds:.1f} s, solver={model.solver_}, {model.n_components_} random features")
    print(f"test MSE {mse:.4f}   mean-predictor MSE {baseline:.4f}   noise floor 0.0100")
    print("features ranked by relevance (|lambda| scaled to [0, 1]):")
    for rank, j in enumerate(np.argsort(-model.feature_importances_), start=1):
        marker = "  <- relevant" if j in support else ""
        print(f"  {rank:2d}. {names[j]:<4} {model.feature_importances_[j]:.3f}{marker}")
    if plot:
        from matplotlib.figure import Figure

        figure = Figure(figsize=(7, 3), layout="constrained")
        ax = figure.subplots()
        ax.bar(names, model.feature_importances_,
               color=["tab:red" if j in support else "tab:gray" for j in range(X.shape[1])])
        ax.set_xlabel("feature (red: relevant in the generating function)")
        ax.set_ylabel("relevance, scaled")
        ax.set_title(f"RFFNet relevances on SE1 (n={n_samples}, test MSE {mse:.3f})")
        with replaced_atomically(plot) as temporary:
            figure.savefig(temporary, format="png", dpi=120)
        print(f"bar chart of the relevances saved to {plot}")
    print()
    _command_line_demo(directory)
    return model, mse, baseline


def write_diabetes_csv(path):
    """Write scikit-learn's diabetes data (442 patients, original units) as a CSV file.

    The columns are age, sex, bmi, bp, s1-s6 and ``progression``, the disease progression
    one year after baseline (the target).
    """
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    from sklearn.datasets import load_diabetes

    data = load_diabetes(scaled=False)
    columns = {name: data.data[:, j] for j, name in enumerate(data.feature_names)}
    pa_csv.write_csv(pa.table({**columns, "progression": data.target}), path)


def _command_line_demo(directory):
    """Run ``rffkit fit``, ``relevances`` and ``predict`` on the diabetes data in ``directory``."""
    from .cli import main  # cli imports this module

    commands = [
        ["fit", "diabetes.csv", "--target", "progression", "--output", "diabetes.rffkit"],
        ["relevances", "diabetes.rffkit", "--top", "5"],
        ["predict", "diabetes.rffkit", "diabetes.csv", "--output", "predictions.csv"],
    ]
    with contextlib.ExitStack() as stack:
        if directory is None:
            import tempfile

            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="rffkit-demo-"))
        os.makedirs(directory, exist_ok=True)
        print(f"The command line on a file: scikit-learn's diabetes data written to "
              f"{os.path.join(directory, 'diabetes.csv')}.")
        print(f"$ cd {shlex.quote(directory)}")
        previous = os.getcwd()
        os.chdir(directory)
        stack.callback(os.chdir, previous)
        write_diabetes_csv("diabetes.csv")
        for command in commands:
            print(f"$ rffkit {shlex.join(command)}", flush=True)
            if main(command) != 0:
                raise RuntimeError(f"the demo's `rffkit {shlex.join(command)}` failed")


def demo_command(args):
    """``rffkit demo``: see ``rffkit demo --help``."""
    if args.dir and os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise CommandLineError(f"--dir {args.dir!r} is a file; give a folder (it is made if missing).")
    if args.plot:  # a chart named by the user: its folder is checked before the demo makes any
        check_output_folder(args.plot, "--plot")
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    if args.plot is None:  # the default chart goes with the demo's other files
        args.plot = os.path.join(args.dir or "", "rffnet_relevances.png")
    demo(args.n_samples, args.random_state, args.plot, args.dir)
    return 0
