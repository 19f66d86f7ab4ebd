"""Why RFFNet's search alone stops near 0.067 on SE1 at n = 50k: the landscape off its path.

SE1 is ``y = sin((x1 + x3)^2) sin(x7 x8 x9) + eps``. The gradient search learns
relevances ``a`` for x1, x3 and ``b`` for x7, x8, x9. This script fits
``RFFNetRegressor(rescale_groups=False, align_frequencies=False, prune_relevances=False)``
(the search alone), the search with group rescaling only, and ``RFFNetRegressor()`` (the
default: group rescaling, then frequencies aligned with the target, then small relevances
pruned) on seed 0 of the issue-2 protocol
(50,000 training, 2,000 validation, 2,000 test points), then refits only the ridge head
(same number of random features, penalty chosen on the validation split) at hand-set
relevances ``a`` on x1, x3, ``b`` on x7, x8, x9 and 0 elsewhere, and reports the test
MSE of each. A point far better than the searched one means the search stopped short
(a plateau or a local minimum), not that the ARD model is exhausted.

Writes ``benchmarks/results/se1_landscape.md``.

Usage: python benchmarks/bench_se1_landscape.py [--seed 0] [--n-train 50000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from _common import add_quiet_argument, progress, say
from bench_rffnet_se import _data

RESULTS = Path(__file__).resolve().parent / "results"
A_VALUES = (0.6, 1.0, 1.5, 2.5, 3.5)
B_VALUES = (0.8, 1.2, 2.0)


def _relevance_text(relevances):
    values = np.abs(relevances)
    return (
        f"|relevances| x1 {values[0]:.2f}, x3 {values[2]:.2f}, x7-x9 "
        + ", ".join(f"{v:.2f}" for v in values[6:9])
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=50_000,
                        help="training rows (default 50,000, the issue-2 protocol; fewer for a quick check)")
    add_quiet_argument(parser)
    args = parser.parse_args()

    from rffkit import RFFNetRegressor
    from rffkit._ridge import select_ridge_alpha
    from rffkit._settings import DEFAULT_SETTINGS
    from rffkit.layers import ARDRandomFourierFeatures

    (X_tr, X_va, X_te), (y_tr, y_va, y_te), support = _data("gregorova_se1", args.seed, args.n_train)
    def fit(**params):  # the fitted model, its fit seconds and test MSE
        start = time.perf_counter()
        fitted = RFFNetRegressor(random_state=args.seed, **params).fit(X_tr, y_tr)
        seconds = time.perf_counter() - start
        return fitted, seconds, float(np.mean((fitted.predict(X_te) - y_te) ** 2))

    variants = {
        "relevance search only": dict(rescale_groups=False, align_frequencies=False, prune_relevances=False),
        "rescaled groups": dict(align_frequencies=False, prune_relevances=False),
        "defaults": {},
    }
    fits = {name: fit(**params) for name, params in progress(
        variants.items(), desc="bench_se1_landscape: fits", quiet=args.quiet, label=lambda variant: variant[0])}
    model, fit_s, learned_mse = fits["relevance search only"]
    rescaled, rescaled_s, rescaled_mse = fits["rescaled groups"]
    default, default_s, default_mse = fits["defaults"]

    standardise = lambda X: torch.as_tensor((X - model._x_mean) / model._x_scale, dtype=torch.float32)  # noqa: E731
    y_mean, y_scale = y_tr.mean(), y_tr.std()
    target = lambda y: torch.as_tensor((y - y_mean) / y_scale, dtype=torch.float32).reshape(-1, 1)  # noqa: E731
    train, val, test = standardise(X_tr), standardise(X_va), standardise(X_te)
    layer = ARDRandomFourierFeatures.from_kernel(
        X_tr.shape[1], model.n_components_, random_state=args.seed, dtype=torch.float32,
        variant=model.variant,
    )

    def test_mse(relevances):
        with torch.no_grad():
            layer.relevances.copy_(torch.as_tensor(relevances, dtype=torch.float32))
            head = select_ridge_alpha(layer(train), target(y_tr), layer(val), target(y_va), DEFAULT_SETTINGS.alpha_grid)
            beta, c = head.coef, head.intercept
            prediction = (layer(test) @ beta + c).numpy().ravel() * y_scale + y_mean
        return float(np.mean((prediction - y_te) ** 2))

    refit_learned = test_mse(model.relevances_)
    grid = {}
    cells = [(a, b) for a in A_VALUES for b in B_VALUES]
    for a, b in progress(cells, desc="bench_se1_landscape: grid", unit="cell", quiet=args.quiet,
                         label=lambda cell: f"a={cell[0]} b={cell[1]}"):
        relevances = np.zeros(X_tr.shape[1])
        relevances[[0, 2]], relevances[[6, 7, 8]] = a, b
        grid[a, b] = test_mse(relevances)
        say(f"a={a} b={b}: test MSE {grid[a, b]:.4f}")

    lam = model.relevances_
    best = min(grid, key=grid.get)
    lines = [
        "# SE1 at n = 50k: test MSE over hand-set relevances (seed %d)" % args.seed,
        "",
        "Produced by `benchmarks/bench_se1_landscape.py`. The relevance search alone "
        f"(`RFFNetRegressor(rescale_groups=False, align_frequencies=False, prune_relevances=False)`, {fit_s:.1f} s) learned |relevances| x1 {abs(lam[0]):.2f}, x3 {abs(lam[2]):.2f}, "
        f"x7 {abs(lam[6]):.2f}, x8 {abs(lam[7]):.2f}, x9 {abs(lam[8]):.2f}, largest irrelevant "
        f"{np.max(np.abs(np.delete(lam, support))):.2f}: test MSE {learned_mse:.4f} "
        f"({refit_learned:.4f} when its relevances are refitted with this script's random draw).",
        "",
        f"Below: the same ridge head ({model.n_components_} random features, penalty chosen on the "
        "validation split) at relevance `a` on x1, x3 and `b` on x7, x8, x9, 0 elsewhere. "
        f"The best cell, a = {best[0]}, b = {best[1]}, reaches {grid[best]:.4f}: the ARD model can go well "
        "below the searched point, which the gradient search does not reach: the error is flat "
        "in `a` up to 1 (a kernel that smooth sees sin((x1 + x3)^2) as noise).",
        "",
        f"With group rescaling (`RFFNetRegressor(align_frequencies=False, prune_relevances=False)`, {rescaled_s:.1f} s) the fit ends at "
        + _relevance_text(rescaled.relevances_)
        + f": test MSE {rescaled_mse:.4f}. The default `RFFNetRegressor()` ({default_s:.1f} s) also replaces "
        "the random draw by the frequencies of a larger draw that align best with the target "
        "(`align_frequencies=True`, at a common multiple of the relevances) and may zero small relevances "
        "(`prune_relevances=True`), and ends at "
        + _relevance_text(default.relevances_)
        + f": test MSE {default_mse:.4f}. The hand-set grid below uses iid frequencies, so the "
        "default can beat its best cell.",
        "",
        "| a \\ b | " + " | ".join(str(b) for b in B_VALUES) + " |",
        "|---|" + "---|" * len(B_VALUES),
    ]
    for a in A_VALUES:
        lines.append(f"| {a} | " + " | ".join(f"{grid[a, b]:.4f}" for b in B_VALUES) + " |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "se1_landscape.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
