"""Cost of the SRFF solver's inner loop, now against the form it had before commit c82cb92.

SRFF at SE3 scale (d = 1000 inputs, D = 300 features, tens of thousands of rows) spends
its time in the FISTA steps on gamma. Two changes made them cheaper; this script times
both against a reimplementation of the previous code, on the same data and in the same
run, and checks that they compute the same thing:

* ``gradient``: ``df/dgamma`` as the row sums of ``(X^T W) * E`` (current) against the
  column sums of ``X * (W E^T)`` (previous). The flops are the same, but the previous
  form builds an ``(n, d)`` temporary.
* ``FISTA``: :func:`rffkit._srff_solver.fista_gamma`, which forms the phases
  ``U(gamma) = X diag(gamma) E + b`` of the extrapolated point from the two it has
  (they are affine in gamma), against the previous loop, which recomputed ``U`` from
  ``X`` for the extrapolated point and for every trial point and used the previous
  gradient. Per iteration that is two ``(n, d) x (d, D)``-sized products against three,
  plus one per extra backtracking trial in both.

Data: SE3 (``make_gregorova_se3``), standardised; Gaussian frequencies over the median
neighbour distance, gamma uniform on the simplex (all 1000 scales non-zero, the dense
case that dominates at 50k), coefficients from the ridge step at alpha = n / 100.
Both loops start from the same point and step and run ``--iterations`` steps (tol = 0).
Seconds are medians over ``--repeats`` runs on ``--threads`` torch threads.
Writes ``benchmarks/results/srff_solver.md`` and ``.csv``.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from pathlib import Path

import numpy as np
import torch

from _common import add_quiet_argument, code_version, load_average, progress, say, write_csv_atomically
from rffkit._srff_solver import (
    _ridge_step as _srff_ridge,
    _SQRT2,
    _phases,
    fista_gamma,
    gamma_loss,
    gamma_loss_and_gradient,
    project_onto_simplex,
    srff_features,
)
from rffkit.datasets import make_gregorova_se3
from rffkit.srff import median_neighbour_distance

RESULTS = Path(__file__).resolve().parent / "results"
FIELDS = ["n", "d", "D", "dtype", "threads", "gradient_previous_s", "gradient_current_s", "gradient_ratio",
          "gradient_rel_diff", "fista_iterations", "fista_previous_s_per_iter", "fista_current_s_per_iter",
          "fista_ratio", "history_rel_diff", "load"]  # fmt: skip


def previous_loss_and_gradient(X, y, coef, gamma, frequencies, offsets):
    """The gradient as before c82cb92: column sums of ``X * (W E^T)`` (an (n, d) temporary)."""
    phases = _phases(X, gamma, frequencies, offsets)
    residual = y - _SQRT2 * (torch.cos(phases) @ coef)
    residual = residual - residual.mean()
    weighted = torch.sin(phases).mul_(residual.unsqueeze(1) * coef.unsqueeze(0))
    return residual @ residual, (2.0 * _SQRT2) * torch.sum(X * (weighted @ frequencies.T), dim=0)


def previous_fista(X, y, coef, gamma, frequencies, offsets, *, radius, step, iterations):
    """FISTA as before c82cb92: every phase recomputed from X, the previous gradient."""
    current, extrapolated, momentum = gamma, gamma, 1.0
    current_value = float(gamma_loss(X, y, coef, current, frequencies, offsets))
    history = [current_value]
    for _ in range(iterations):
        base_value, gradient = previous_loss_and_gradient(X, y, coef, extrapolated, frequencies, offsets)
        base_value = float(base_value)
        while True:
            candidate = project_onto_simplex(extrapolated - step * gradient, radius)
            difference = candidate - extrapolated
            value = float(gamma_loss(X, y, coef, candidate, frequencies, offsets))
            bound = base_value + float(gradient @ difference) + float(difference @ difference) / (2.0 * step)
            if value <= bound + 1e-12 * abs(base_value) or step < 1e-20:
                break
            step *= 0.5
        if value > current_value:
            if momentum == 1.0:
                break
            extrapolated, momentum = current, 1.0
            continue
        next_momentum = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum))
        extrapolated = candidate + ((momentum - 1.0) / next_momentum) * (candidate - current)
        current, current_value, momentum = candidate, value, next_momentum
        history.append(value)
    return current, history


def problem(n, dtype, n_components=300, seed=0):
    X, y = make_gregorova_se3(n, random_state=seed)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    width = median_neighbour_distance(X)
    generator = torch.Generator().manual_seed(seed)
    d = X.shape[1]
    frequencies = (torch.randn(d, n_components, generator=generator, dtype=torch.float64) / width).to(dtype)
    offsets = (2 * math.pi * torch.rand(n_components, generator=generator, dtype=torch.float64)).to(dtype)
    X, y = torch.as_tensor(X, dtype=dtype), torch.as_tensor(y - y.mean(), dtype=dtype)
    gamma = torch.ones(d, dtype=dtype)  # uniform on the simplex of size d
    coef, _ = _srff_ridge(srff_features(X, gamma, frequencies, offsets), y, n / 100.0)
    return X, y, coef, gamma, frequencies, offsets


def median_seconds(function, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def relative_difference(a, b):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def measure(n, dtype, iterations, repeats, threads):
    X, y, coef, gamma, E, b = problem(n, dtype)
    d, n_components = E.shape
    args = (X, y, coef, gamma, E, b)
    previous_s, (_, previous_gradient) = median_seconds(lambda: previous_loss_and_gradient(*args), repeats)
    current_s, (_, current_gradient) = median_seconds(lambda: gamma_loss_and_gradient(*args), repeats)
    options = dict(radius=float(d), step=10.0 / n)
    previous_fista_s, (_, previous_history) = median_seconds(
        lambda: previous_fista(*args, **options, iterations=iterations), repeats
    )
    current_fista_s, (_, _, current_history) = median_seconds(
        lambda: fista_gamma(*args, **options, max_iter=iterations, tol=0.0), repeats
    )
    steps = min(len(previous_history), len(current_history)) - 1
    if steps < 1:
        raise RuntimeError(f"FISTA took no step at n={n}; the benchmark's problem is degenerate")
    previous_per_step = previous_fista_s / (len(previous_history) - 1)
    current_per_step = current_fista_s / (len(current_history) - 1)
    return {
        "n": n, "d": d, "D": n_components, "dtype": str(dtype).removeprefix("torch."), "threads": threads,
        "gradient_previous_s": previous_s, "gradient_current_s": current_s,
        "gradient_ratio": previous_s / current_s,
        "gradient_rel_diff": relative_difference(current_gradient, previous_gradient),
        "fista_iterations": steps,
        "fista_previous_s_per_iter": previous_per_step, "fista_current_s_per_iter": current_per_step,
        "fista_ratio": previous_per_step / current_per_step,
        "history_rel_diff": relative_difference(current_history[: steps + 1], previous_history[: steps + 1]),
    }  # fmt: skip


def write_markdown(rows, path, args):
    lines = [
        "# SRFF solver: cost of the FISTA steps on gamma, current against previous (before c82cb92)",
        "",
        f"Produced by `benchmarks/bench_srff_solver.py` at {code_version()} on {platform.machine()}, "
        f"torch {torch.__version__}, {args.threads} thread(s), medians of {args.repeats} runs. SE3 data "
        "(d = 1000), D = 300, gamma uniform on the simplex. *ratio* = previous seconds / current seconds "
        "in the same run; *rel. diff* = ||current - previous|| / ||previous|| (gradient; objective history). "
        "The machine may be shared: the load average (1, 5, 15 minutes) after each size is beside it.",
        "",
        "| n | dtype | gradient previous s | gradient current s | ratio | rel. diff | FISTA steps "
        "| previous s / step | current s / step | ratio | history rel. diff | load average after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['dtype']} | {r['gradient_previous_s']:.3f} | {r['gradient_current_s']:.3f} "
            f"| {r['gradient_ratio']:.2f}x | {r['gradient_rel_diff']:.1e} | {r['fista_iterations']} "
            f"| {r['fista_previous_s_per_iter']:.3f} | {r['fista_current_s_per_iter']:.3f} "
            f"| {r['fista_ratio']:.2f}x | {r['history_rel_diff']:.1e} | {r['load']} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000], help="numbers of rows")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--iterations", type=int, default=10, help="FISTA steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per timing (median)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    for name in ("iterations", "repeats", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if any(n < 100 for n in args.sizes):
        parser.error(f"--sizes must be at least 100 rows each, got {args.sizes}")
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    rows = []
    for n in progress(args.sizes, desc="bench_srff_solver", unit="size", quiet=args.quiet, label=lambda n: f"n={n}"):
        rows.append({**measure(n, dtype, args.iterations, args.repeats, args.threads), "load": load_average()})
        r = rows[-1]
        say(f"n={n}: gradient {r['gradient_ratio']:.2f}x, FISTA step {r['fista_ratio']:.2f}x "
            f"({r['fista_previous_s_per_iter']:.3f} s -> {r['fista_current_s_per_iter']:.3f} s)")
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomically(RESULTS / "srff_solver.csv", FIELDS, rows)
    write_markdown(rows, RESULTS / "srff_solver.md", args)
    print(f"wrote {RESULTS / 'srff_solver.md'}")


if __name__ == "__main__":
    main()
