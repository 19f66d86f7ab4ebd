"""RFFRidge vs scikit-learn's RBFSampler + RidgeCV on Gregorova SE1 and SE2.

Both pipelines use the same number of random features D, the same Gaussian length
scale (RBFSampler's ``gamma = 1 / (2 l^2)``), the same alpha grid and one thread of
BLAS and torch. RidgeCV's default (``gcv_mode='auto'``, ``n > D``) takes an SVD of the
centred n x D feature matrix and scores every alpha by efficient exact leave-one-out;
RFFRidge forms the D x D Gram matrix once and eigendecomposes it once, scoring every
alpha by GCV (O(D) per alpha) or exact LOO (O(nD) per alpha). Timings include drawing
and applying the random features. For seed 0 RidgeCV is also run on RFFRidge's own
features, to separate the solver from the random draw: it must then pick the same
alpha as RFFRidge(LOO) and predict the same values.

Writes ``benchmarks/results/rffridge_se.md`` and ``benchmarks/results/rffridge_se.png``.
Run: ``python benchmarks/bench_rffridge_se.py`` (about 5 minutes on one core).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from threadpoolctl import threadpool_limits

from _common import add_quiet_argument, progress, say
from rffkit import RandomFourierFeatures, RFFRidge
from rffkit.datasets import make_gregorova_se1, make_gregorova_se2

RESULTS = Path(__file__).resolve().parent / "results"
PROBLEMS = {  # name: (generator, isotropic length scale, picked by a pilot run on seed 99)
    "SE1": (make_gregorova_se1, 3.0),
    "SE2": (make_gregorova_se2, 6.0),
}
N_TRAIN = (10_000, 50_000)
N_TEST = 2_000
SEEDS = (0, 1, 2)
N_COMPONENTS = 500
ALPHAS = np.logspace(-4, 4, 17)
METHODS = ("RFFRidge (GCV)", "RFFRidge (LOO)", "RFFRidge (GCV, float32)", "RBFSampler + RidgeCV")


def load(problem, n_train, seed):
    generator, _ = PROBLEMS[problem]
    X, y = generator(n_train + N_TEST, random_state=seed)
    X_train, X_test, y_train, y_test = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    return (X_train - mean) / std, (X_test - mean) / std, y_train, y_test


def build(method, length_scale, seed):
    if method.startswith("RFFRidge"):
        selection = "gcv" if "GCV" in method else "loo"
        features = RandomFourierFeatures(n_components=N_COMPONENTS, length_scale=length_scale)
        return RFFRidge(features=features, alphas=ALPHAS, alpha_selection=selection, random_state=seed)
    sampler = RBFSampler(gamma=1.0 / (2.0 * length_scale**2), n_components=N_COMPONENTS, random_state=seed)
    return make_pipeline(sampler, RidgeCV(alphas=ALPHAS))


def chosen_alpha(model):
    return model.alpha_ if isinstance(model, RFFRidge) else model[-1].alpha_


def timed_fit(model, X, y):
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start


def run(quiet=False):
    rows, checks = [], []
    splits = [(problem, n_train, seed) for problem in PROBLEMS for n_train in N_TRAIN for seed in SEEDS]
    for problem, n_train, seed in progress(splits, desc="bench_rffridge_se", unit="split", quiet=quiet,
                                           label=lambda u: f"{u[0]} n={u[1]} seed={u[2]}"):
        length_scale = PROBLEMS[problem][1]
        X_train, X_test, y_train, y_test = load(problem, n_train, seed)
        for method in METHODS:
            model = build(method, length_scale, seed)
            dtype = np.float32 if "float32" in method else np.float64  # cast outside the timing
            seconds = timed_fit(model, X_train.astype(dtype), y_train.astype(dtype))
            mse = float(np.mean((model.predict(X_test.astype(dtype)) - y_test) ** 2))
            rows.append(dict(problem=problem, n=n_train, seed=seed, method=method, seconds=seconds,
                             mse=mse, alpha=chosen_alpha(model), var=float(np.var(y_test))))
            say(f"{problem} n={n_train} seed={seed} {method:22s} {seconds:8.2f} s  MSE {mse:.4f}")
        if seed == 0:
            checks.append(same_features_check(problem, n_train, length_scale, X_train, X_test, y_train))
    return rows, checks


def same_features_check(problem, n_train, length_scale, X_train, X_test, y_train):
    """RidgeCV on exactly RFFRidge's features: same alpha, same predictions, solver time only."""
    ours = build("RFFRidge (LOO)", length_scale, 0).fit(X_train, y_train)
    Z_train, Z_test = ours.features_.transform(X_train), ours.features_.transform(X_test)
    reference = RidgeCV(alphas=ALPHAS)
    reference_seconds = timed_fit(reference, Z_train, y_train)
    start = time.perf_counter()
    RFFRidge(features=FunctionTransformer(), alphas=ALPHAS, alpha_selection="loo").fit(Z_train, y_train)
    ours_seconds = time.perf_counter() - start
    difference = float(np.max(np.abs(reference.predict(Z_test) - ours.predict(X_test))))
    return dict(problem=problem, n=n_train, ridgecv_alpha=reference.alpha_, ours_alpha=ours.alpha_,
                max_prediction_difference=difference, ridgecv_seconds=reference_seconds, ours_seconds=ours_seconds)


def summarise(rows, checks):
    lines = [
        "# RFFRidge vs RBFSampler + RidgeCV on Gregorova SE1 / SE2",
        "",
        f"Produced by `benchmarks/bench_rffridge_se.py`. D = {N_COMPONENTS} Gaussian random features, "
        f"isotropic length scale (SE1: {PROBLEMS['SE1'][1]}, SE2: {PROBLEMS['SE2'][1]}; RBFSampler gamma = 1/(2 l^2)), "
        f"{len(ALPHAS)} alphas in [1e-4, 1e4], inputs standardised with training statistics, "
        f"{N_TEST} test points, seeds {list(SEEDS)}; mean +- sd over seeds. One BLAS / torch thread "
        f"({platform.processor() or platform.machine()}, shared machine: timings carry noise). "
        "Fit time includes drawing and applying the random features. Everything runs in float64 except "
        "the float32 row (inputs cast to float32 before timing; the whole fit then stays in float32).",
        "",
        "| problem | n train | method | fit time (s) | speed-up vs RidgeCV | test MSE | test R^2 | alpha chosen |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for problem in PROBLEMS:
        for n_train in N_TRAIN:
            base = [r["seconds"] for r in rows if r["problem"] == problem and r["n"] == n_train
                    and r["method"] == METHODS[-1]]
            for method in METHODS:
                sel = [r for r in rows if r["problem"] == problem and r["n"] == n_train and r["method"] == method]
                seconds = np.array([r["seconds"] for r in sel])
                mse = np.array([r["mse"] for r in sel])
                r2 = 1 - mse / np.array([r["var"] for r in sel])
                ratio = np.array(base) / seconds
                alphas = ", ".join(f"{r['alpha']:.3g}" for r in sel)
                lines.append(
                    f"| {problem} | {n_train:,} | {method} | {seconds.mean():.2f} +- {seconds.std():.2f} | "
                    f"{ratio.mean():.1f}x | {mse.mean():.4f} +- {mse.std():.4f} | {r2.mean():.4f} | {alphas} |"
                )
    lines += [
        "",
        "## Same features, solver only (seed 0)",
        "",
        "RidgeCV fitted on exactly the features of RFFRidge(LOO): both score alphas by exact leave-one-out.",
        "",
        "| problem | n train | RidgeCV alpha | RFFRidge alpha | max abs prediction difference | RidgeCV solve (s) | RFFRidge solve (s) | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in checks:
        lines.append(
            f"| {c['problem']} | {c['n']:,} | {c['ridgecv_alpha']:.3g} | {c['ours_alpha']:.3g} | "
            f"{c['max_prediction_difference']:.2e} | {c['ridgecv_seconds']:.2f} | {c['ours_seconds']:.2f} | "
            f"{c['ridgecv_seconds'] / c['ours_seconds']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 * len(PROBLEMS), figsize=(16, 3.8))
    for k, problem in enumerate(PROBLEMS):
        time_ax, mse_ax = axes[2 * k], axes[2 * k + 1]
        for method, marker in zip(METHODS, "osd^"):
            sel = lambda n: [r for r in rows if r["problem"] == problem and r["n"] == n and r["method"] == method]
            seconds = [np.mean([r["seconds"] for r in sel(n)]) for n in N_TRAIN]
            r2 = [np.mean([1 - r["mse"] / r["var"] for r in sel(n)]) for n in N_TRAIN]
            time_ax.plot(N_TRAIN, seconds, marker=marker, label=method)
            mse_ax.plot(N_TRAIN, r2, marker=marker, label=method)
        mse_ax.axhline(0.0, color="grey", ls=":", label="predicting the mean")
        time_ax.set(xscale="log", yscale="log", xlabel="n train", ylabel="fit time (s)", title=f"{problem}: fit time")
        mse_ax.set(xscale="log", xlabel="n train", ylabel="test R^2 (1 - MSE / Var(y_test))", title=f"{problem}: test R^2")
        time_ax.legend(fontsize=7)
        mse_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args = add_quiet_argument(parser).parse_args(argv)
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        rows, checks = run(quiet=args.quiet)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "rffridge_se.md").write_text(summarise(rows, checks))
    plot(rows, RESULTS / "rffridge_se.png")
    print((RESULTS / "rffridge_se.md").read_text())


if __name__ == "__main__":
    main()
