"""Issue 4's benchmark: seed 000 Table 2 / dissertation Tables 4 and 7 on Gregorová SE1 and SE2.

Protocol of the papers: 50,000 training, 2,000 validation and 2,000 test points, inputs
standardised with training statistics; hyper-parameters are chosen on the validation
split only and the test split is touched once per fit. Every fit runs in a fresh
(spawned) process, so the peak RAM is that process's maximum resident set size above
its size just before the timed fit (sampled every 5 ms, helpers of
``bench_rffnet_se.py``), and all methods are timed in the same run on the same machine.
Validation searches run before the timed fit and are not timed.

Methods
-------
krr
    scikit-learn ``KernelRidge(kernel='rbf')``. At n = 50,000 the n x n float64 kernel
    matrix alone is 20 GB (and ``KernelRidge`` holds a second copy while solving), which
    does not fit this machine's memory budget, so KRR is fitted on the first
    ``--n-krr`` (10,000) training points; gamma and alpha are chosen on the validation
    split from fits on the first 3,000 training points.
bard
    ``ARDRegression`` with lambda_1, lambda_2 in {1e-8, 1e-6, 1e-4} chosen on validation
    (dissertation §4.3 tunes these two); importances are |coef_|.
gam
    pyGAM ``LinearGAM()`` defaults (one spline per feature, dissertation §4.3), only
    if ``pygam`` imports; it is no dependency of rffkit.
srff
    ``SRFFRegressor()`` at its defaults (its own validation split picks alpha), on the
    first ``--n-srff`` (10,000) training points: at 50,000 one fit took over 10 minutes
    on this machine (the whole default run's budget is 25 minutes).
rffnet
    ``RFFNetRegressor()`` at its defaults.
rffnet_plus
    RFFNet+ (dissertation §5.3): ``RFFNetRegressor(hidden_layer_sizes=(20, 10),
    n_components=300, ...)``, early stopping with patience 10 and no other
    regularisation, learning rate / batch size / epochs / alpha of :data:`PLUS_PARAMS`,
    chosen on the validation split (see that constant).

Writes ``benchmarks/results/rffnet_table2.md`` and ``.csv`` after every fit (the CSV
atomically). ``--update`` keeps the existing rows and replaces those the run refits.
Notes given with ``--note`` describe rows and are kept in ``rffnet_table2.notes.json``,
so later ``--update`` and ``--markdown-only`` runs print them again; a run without
``--update`` starts a new table and a new notes file.

Usage: python benchmarks/bench_rffnet_table2.py [--seeds 3] [--slow-seeds 1] [--n-train 50000]
       [--n-krr 10000] [--problems gregorova_se1 gregorova_se2] [--methods ...]
       python benchmarks/bench_rffnet_table2.py --tune [--tune-learning-rates 1e-3 3e-3 1e-2]
       [--tune-batch-sizes 256] [--tune-alphas 1e-4 0]     (RFFNet+ grid, seed 0, about an hour)
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_quiet_argument, in_fresh_process, load_notes, progress, say, write_csv_atomically  # noqa: E402
from bench_rffnet_se import _data, _PeakRSS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PROBLEMS = ("gregorova_se1", "gregorova_se2")
#: Run order for every (seed, problem).
METHODS = ("rffnet_plus", "bard", "rffnet", "krr", "gam", "srff")
#: Methods that run on ``--slow-seeds`` seeds only (to keep the default run near 25 min).
SLOW = ("rffnet", "krr", "gam", "srff")
TARGETS = {"gregorova_se1": 0.057, "gregorova_se2": 0.17}

#: RFFNet+ settings chosen on the 2,000-point validation split of seed 0 at n = 50,000:
#: learning_rate in {1e-3, 3e-3, 1e-2} at alpha=1e-4 (the default), then alpha=0 (the
#: dissertation's "no regularisation") at the best learning rate; batch_size 256,
#: max_iter 200 epochs, patience 10. Validation MSE (SE1 / SE2): lr 1e-2: 0.0489 / 0.354,
#: 3e-3: 0.0483 / 0.198, 1e-3: 0.0493 / 0.138; alpha=0 at the best lr: 0.0438 / 0.146.
PLUS_PARAMS = {
    "gregorova_se1": {"learning_rate": 3e-3, "batch_size": 256, "max_iter": 200, "alpha": 0.0},
    "gregorova_se2": {"learning_rate": 1e-3, "batch_size": 256, "max_iter": 200, "alpha": 1e-4},
}

#: Published figures: dissertation Table 4 (RFFNet+ from Table 7) and seed 000 Table 2.
#: (MSE mean (sd), RAM, time).
PUBLISHED = {
    ("gregorova_se1", "krr"): ("0.082 (0.008), 38.6 GB, 345 s", "OOM"),
    ("gregorova_se1", "bard"): ("0.085 (0.008), 0.3 GB, 0.04 s", "0.088 (0.008), 0.17 s"),
    ("gregorova_se1", "gam"): ("0.086 (0.009), 1.7 GB, 4.3 s", "-"),
    ("gregorova_se1", "srff"): ("0.083 (0.008), 0.9 GB, 20.2 s", "0.085 (0.007), 23.9 s"),
    ("gregorova_se1", "rffnet"): ("0.070 (0.008), 0.6 GB, 63 s", "0.071 (0.007), 38 s"),
    ("gregorova_se1", "rffnet_plus"): ("0.057 (0.005), 0.4 GB, 78.5 s (Table 7)", "-"),
    ("gregorova_se2", "krr"): ("3.7 (0.5), 38.9 GB, 337 s", "OOM"),
    ("gregorova_se2", "bard"): ("5.3 (0.5), 0.5 GB, 0.4 s", "4.9 (0.5), 1.7 s"),
    ("gregorova_se2", "gam"): ("4.9 (0.5), 9.9 GB, 50.9 s", "-"),
    ("gregorova_se2", "srff"): ("5.4 (0.5), 1.0 GB, 91 s", "5.0 (0.5), 141 s"),
    ("gregorova_se2", "rffnet"): ("1.3 (0.2), 0.6 GB, 71 s", "1.2 (0.2), 462 s"),
    ("gregorova_se2", "rffnet_plus"): ("0.17 (0.02), 0.6 GB, 50.2 s (Table 7)", "-"),
}


def _val_mse(model, X, y):
    return float(np.mean((model.predict(X) - y) ** 2))


def _timed_fit(model, X, y, result):
    with _PeakRSS() as memory:
        start = time.perf_counter()
        model.fit(X, y)
        result["fit_s"] = time.perf_counter() - start
    result["peak_mb"] = memory.peak_mb
    return model


def _fit_one(problem, seed, n_train, n_krr, n_srff, method, plus_params, queue):
    """Child process: build data, tune on validation (untimed), time one fit, score on test.

    ``plus_params`` overrides :data:`PLUS_PARAMS` for RFFNet+ (the ``--tune`` grid).
    """
    (X_tr, X_va, X_te), (y_tr, y_va, y_te), support = _data(problem, seed, n_train)
    result = {"problem": problem, "seed": seed, "method": method, "n_fit": X_tr.shape[0], "params": ""}
    importances = None
    if method == "krr":
        from sklearn.kernel_ridge import KernelRidge

        n_tune = min(3000, n_krr)
        scores = {}
        for gamma in (1e-3, 1e-2, 1e-1):
            for alpha in (1e-3, 1e-2, 1e-1):
                model = KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha).fit(X_tr[:n_tune], y_tr[:n_tune])
                scores[(gamma, alpha)] = _val_mse(model, X_va, y_va)
                del model
        gamma, alpha = min(scores, key=scores.get)
        result["params"] = f"gamma={gamma:g} alpha={alpha:g}"
        result["n_fit"] = min(n_krr, X_tr.shape[0])
        model = _timed_fit(KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha), X_tr[:n_krr], y_tr[:n_krr], result)
    elif method == "bard":
        from sklearn.linear_model import ARDRegression

        grid = (1e-8, 1e-6, 1e-4)
        scores = {
            (l1, l2): _val_mse(ARDRegression(lambda_1=l1, lambda_2=l2).fit(X_tr, y_tr), X_va, y_va)
            for l1 in grid
            for l2 in grid
        }
        l1, l2 = min(scores, key=scores.get)
        result["params"] = f"lambda_1={l1:g} lambda_2={l2:g}"
        model = _timed_fit(ARDRegression(lambda_1=l1, lambda_2=l2), X_tr, y_tr, result)
        importances = np.abs(model.coef_)
    elif method == "gam":
        from pygam import LinearGAM

        model = _timed_fit(LinearGAM(), X_tr, y_tr, result)
    elif method == "srff":
        from rffkit import SRFFRegressor

        result["n_fit"] = min(n_srff, X_tr.shape[0])
        model = _timed_fit(SRFFRegressor(random_state=seed), X_tr[:n_srff], y_tr[:n_srff], result)
        importances = model.feature_importances_
    elif method in ("rffnet", "rffnet_plus"):
        from rffkit import RFFNetRegressor

        if method == "rffnet":
            kwargs, result["params"] = {}, "defaults"
        else:
            chosen = PLUS_PARAMS[problem] if plus_params is None else plus_params
            kwargs = {"hidden_layer_sizes": (20, 10), "n_components": 300, **chosen}
            result["params"] = " ".join(f"{k}={v}" for k, v in chosen.items())
        model = _timed_fit(RFFNetRegressor(random_state=seed, **kwargs), X_tr, y_tr, result)
        importances = model.feature_importances_
        result["params"] += f" ({model.solver_}, {model.n_iter_} epochs/iterations)"
    else:
        raise ValueError(method)
    result["val_mse"] = _val_mse(model, X_va, y_va)
    result["test_mse"] = _val_mse(model, X_te, y_te)
    if importances is not None:
        order = np.argsort(-importances)
        result["top"] = " ".join(str(i) for i in order[:5])
        result["support_found"] = bool(set(order[: len(support)].tolist()) == set(support.tolist()))
    else:
        result["top"], result["support_found"] = "", ""
    queue.put(result)


def run(problem, seed, n_train, n_krr, n_srff, method, plus_params=None):
    return in_fresh_process(_fit_one, problem, seed, n_train, n_krr, n_srff, method, plus_params)


def _gam_available():
    try:
        import pygam  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any import failure means: skip the GAM
        return f"{type(error).__name__}: {error}"
    return None


def summarise(rows, args):
    lines = [
        "| problem | method | n fitted | seeds | test MSE mean (sd) | fit s mean | peak RAM MB mean "
        "| relevant = top-k | top-5 (first seed) | settings (first seed) | published: dissertation Table 4/7 "
        "| published: seed 000 Table 2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for problem in args.problems:
        for method in METHODS:
            sel = [r for r in rows if r["problem"] == problem and r["method"] == method]
            if not sel:
                continue
            mse = np.array([r["test_mse"] for r in sel])
            found = [r["support_found"] for r in sel if r["support_found"] != ""]
            sd = f"{mse.std(ddof=1):.3g}" if len(mse) > 1 else "-"
            dissertation, paper = PUBLISHED[(problem, method)]
            name = {"rffnet_plus": "RFFNet+"}.get(method, method)
            if sel[0]["n_fit"] < args.n_train:
                name += f" (subsample n={sel[0]['n_fit']})"
            lines.append(
                f"| {problem} | {name} | {sel[0]['n_fit']} | {len(sel)} | {mse.mean():.3g} ({sd}) "
                f"| {np.mean([r['fit_s'] for r in sel]):.1f} | {np.mean([r['peak_mb'] for r in sel]):.0f} "
                f"| {f'{sum(found)}/{len(found)}' if found else '-'} | {sel[0]['top'] or '-'} "
                f"| {sel[0]['params'] or 'defaults'} | {dissertation} | {paper} |"
            )
    return "\n".join(lines)


def write(rows, args, notes):
    """(Re)write the CSV and markdown; called after every fit so partial runs count."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    fields = ["problem", "seed", "method", "n_fit", "params", "fit_s", "peak_mb", "val_mse", "test_mse", "top",
              "support_found"]
    write_csv_atomically(RESULTS / f"{args.output}.csv", fields, rows)
    import torch

    header = (
        f"# SE1 / SE2 at n_train={args.n_train} (2,000 validation, 2,000 test): "
        "seed 000 Table 2, dissertation Tables 4 and 7\n\n"
        f"Produced by `benchmarks/bench_rffnet_table2.py` on {platform.machine()}, {os.cpu_count()} CPU cores "
        f"(shared), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, torch {torch.__version__}. "
        f"Seeds: {args.seeds} for RFFNet+ and bard, {args.slow_seeds} for rffnet, krr, gam and srff (slow; "
        "`--slow-seeds`). Test MSE mean (sample sd over seeds; '-' for one seed); fit seconds and peak RSS increase "
        "of the timed fit only (validation searches untimed). `relevant = top-k`: seeds whose k largest "
        "importances are exactly the k relevant features (SE1: 0 2 6 7 8, SE2: 10..14). "
        f"Targets for RFFNet+: SE1 <= {TARGETS['gregorova_se1']}, SE2 <= {TARGETS['gregorova_se2']}.\n\n"
    )
    text = header + summarise(rows, args) + "\n\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    (RESULTS / f"{args.output}.md").write_text(text)
    return text


def _read_rows(stem):
    """Rows of an earlier run's CSV, typed as :func:`run` returns them."""
    if not (RESULTS / f"{stem}.csv").exists():
        raise SystemExit(f"{RESULTS / f'{stem}.csv'} does not exist: nothing to update or render.")
    rows = []
    with open(RESULTS / f"{stem}.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            row["seed"], row["n_fit"] = int(row["seed"]), int(row["n_fit"])
            for key in ("fit_s", "peak_mb", "val_mse", "test_mse"):
                row[key] = float(row[key])
            row["support_found"] = {"True": True, "False": False}.get(row["support_found"], "")
            rows.append(row)
    return rows


def tune(args):
    """RFFNet+ grid on seed 0: validation MSE decides; the test MSE is recorded, never used."""
    rows = []
    fields = ["problem", "seed", "params", "fit_s", "val_mse", "test_mse", "top", "support_found"]
    grid = [(problem, batch_size, learning_rate, alpha) for problem in args.problems
            for batch_size in args.tune_batch_sizes for learning_rate in args.tune_learning_rates
            for alpha in args.tune_alphas]
    for problem, batch_size, learning_rate, alpha in progress(
            grid, desc="bench_rffnet_table2: tuning", quiet=args.quiet,
            label=lambda u: f"{u[0]} batch_size={u[1]} learning_rate={u[2]:g} alpha={u[3]:g}"):
        params = {"learning_rate": learning_rate, "batch_size": batch_size, "max_iter": args.tune_max_iter,
                  "alpha": alpha}
        result = run(problem, 0, args.n_train, args.n_krr, args.n_srff, "rffnet_plus", params)
        rows.append({k: result[k] for k in fields})
        say(f"{problem} {result['params']} val={result['val_mse']:.4f} fit={result['fit_s']:.0f}s")
        with open(RESULTS / "rffnet_table2.tuning.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    for problem in args.problems:
        sel = [r for r in rows if r["problem"] == problem]
        best = min(sel, key=lambda r: r["val_mse"])
        print(f"{problem}: chosen on validation: {best['params']} (validation MSE {best['val_mse']:.4f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds for krr, bard, gam, RFFNet+ (default 3)")
    parser.add_argument("--slow-seeds", type=int, default=1, help="seeds for srff and rffnet defaults (default 1)")
    parser.add_argument("--n-train", type=int, default=50000)
    parser.add_argument("--n-krr", type=int, default=10000, help="KRR training subsample (50k needs > 20 GB)")
    parser.add_argument("--first-seed", type=int, default=0, help="skip the seeds below this one")
    parser.add_argument("--output", default="rffnet_table2", help="file stem under benchmarks/results/")
    parser.add_argument("--n-srff", type=int, default=10000, help="SRFF training subsample")
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=PROBLEMS)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="start no new fit after this many minutes (the tables say which fits ran)")
    parser.add_argument("--note", action="append", default=[],
                        help="note for the markdown, kept in <output>.notes.json for later runs (repeatable)")
    parser.add_argument("--update", action="store_true",
                        help="keep the rows of the existing CSV and replace only those this run refits")
    parser.add_argument("--markdown-only", action="store_true",
                        help="rewrite the markdown from the existing CSV (with this run's notes), fit nothing")
    parser.add_argument("--tune", action="store_true",
                        help="instead: RFFNet+ validation grid on seed 0, written to rffnet_table2.tuning.csv")
    parser.add_argument("--tune-learning-rates", nargs="+", type=float, default=[1e-3, 3e-3, 1e-2])
    parser.add_argument("--tune-batch-sizes", nargs="+", type=int, default=[256])
    parser.add_argument("--tune-alphas", nargs="+", type=float, default=[1e-4, 0.0])
    parser.add_argument("--tune-max-iter", type=int, default=200)
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    if args.tune:
        RESULTS.mkdir(parents=True, exist_ok=True)
        tune(args)
        return

    notes = [
        f"KRR: the 50,000 x 50,000 float64 kernel matrix is 20 GB (KernelRidge needs about twice that while "
        f"solving; the dissertation reports 38.6 GB), beyond this machine's memory budget, so KRR is fitted on "
        f"the first {args.n_krr} training points, gamma and alpha chosen on validation from "
        "{1e-3, 1e-2, 1e-1}^2 with fits on the first 3,000 points.",
        "RFFNet+ (RFF layer of 300 units, ReLU 20, ReLU 10, linear; alternating Adam, Algorithm 1; early "
        "stopping with patience 10 on 10% of the training points held out by the estimator): learning rate and "
        "alpha chosen on the validation split of seed 0 in development runs with the same data, estimator and "
        "protocol (`--tune` reruns the grid; PLUS_PARAMS in the script: learning_rate in "
        "{1e-3, 3e-3, 1e-2} at alpha=1e-4 (the default), then alpha=0, the dissertation's 'no regularisation', "
        "at the best "
        "rate; batch_size 256, at most 200 epochs). Validation MSE SE1 / SE2: lr 1e-2 0.0489 / 0.354, "
        "3e-3 0.0483 / 0.198, 1e-3 0.0493 / 0.138; alpha=0 0.0438 (lr 3e-3) / 0.146 (lr 1e-3). batch_size 64 "
        "was not tried: four times the steps per epoch would not fit the run's time budget.",
        f"SRFF: fitted on the first {args.n_srff} training points (one SE1 fit on all 50,000 ran for more than "
        "10 minutes here, with the machine shared, and was stopped).",
        "BARD: importances |coef_|; when ARD prunes every coefficient the top-5 column shows ties (0 1 2 3 4).",
    ]
    notes_path = RESULTS / f"{args.output}.notes.json"
    if args.markdown_only:
        print(write(_read_rows(args.output), args, notes + load_notes(notes_path, args.note)))
        return
    rows = _read_rows(args.output) if args.update else []
    if not args.update:  # a new table: the old notes described the old rows
        notes_path.unlink(missing_ok=True)
    described = args.note  # notes that describe the rows, kept with them
    methods = list(args.methods)
    if "gam" in methods:
        problem = _gam_available()
        if problem is not None:
            methods.remove("gam")
            notes.append(f"GAM skipped: pygam does not import here ({problem}).")
        else:
            import pygam

            described = [*described, (
                f"GAM: pygam {pygam.__version__} (declares scipy<1.17, so pip will not install it beside this "
                "environment's scipy; installed with --no-deps into a side directory on PYTHONPATH for this "
                "benchmark only; not an rffkit dependency)."
            )]
    notes += load_notes(notes_path, described)
    started, skipped = time.perf_counter(), []
    fits = [(seed, problem, method) for seed in range(args.first_seed, args.seeds) for problem in args.problems
            for method in methods if not (method in SLOW and seed >= args.slow_seeds)]
    for seed, problem, method in progress(fits, desc="bench_rffnet_table2", quiet=args.quiet,
                                          label=lambda u: f"{u[1]} seed={u[0]} {u[2]}"):
        if args.budget_minutes is not None and time.perf_counter() - started > 60 * args.budget_minutes:
            skipped.append(f"{problem}/{method}/seed {seed}")
            continue
        result = run(problem, seed, args.n_train, args.n_krr, args.n_srff, method)
        rows = [r for r in rows if (r["problem"], r["seed"], r["method"]) != (problem, seed, method)]
        rows.append(result)
        write(rows, args, notes)
        say(
            f"{problem} seed={seed} {method:12s} test={result['test_mse']:.4f} val={result['val_mse']:.4f} "
            f"fit={result['fit_s']:.1f}s peak={result['peak_mb']:.0f}MB top={result['top']} "
            f"{result['params']}"
        )
    if skipped:
        budget = f"{args.budget_minutes:g}-minute budget of --budget-minutes reached"
        notes.append(f"Not run ({budget}): " + ", ".join(skipped) + ".")
    print(write(rows, args, notes))


if __name__ == "__main__":
    main()
