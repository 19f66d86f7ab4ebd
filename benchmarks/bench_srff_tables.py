"""Reproduce Tables 3, 5 and 6 of Gregorová et al. (2018), seed 002: SE1, SE2, SE3.

Protocol (paper §5.0.1 and Table 1): independent train (n), validation and test sets
(1k each for SE1/SE2, 10k each for SE3), inputs standardised with the training
statistics, test RMSE averaged over repetitions (the paper uses 30; see ``--reps``).
Every method chooses its regularisation from a 50-value grid, on the validation set
where the paper does so:

* Mean       the training mean of ``y``;
* Ridge      ``RidgeCV`` (50 alphas, 1e-4..1e6, efficient leave-one-out on train);
* Lasso      ``LassoCV`` (50 alphas, 3-fold CV on train);
* RFF        ``RBFSampler`` with D = 300 and the kernel width ``sigma`` of the paper
             (median distance among 20 nearest neighbours, ``gamma = 1 / (2 sigma^2)``)
             + ridge, alpha chosen on validation from 50 values (one eigendecomposition);
* SRFF       ``rffkit.SRFFRegressor`` (D = 300, 50-value data-dependent grid, chosen on
             the validation set, ``refit=False`` so the final model is trained on the n
             training points only, as in the paper), in float32 like the authors' code,
             with a fresh draw of epsilon and b per grid value as in the authors' code;
* SRFF-1draw the same with one draw for the whole grid (``draw_per_alpha=False``, the
             estimator's default);
* RFFNet     ``rffkit.RFFNetRegressor()`` at its defaults but ``validation_fraction``,
             fitted like SRFF on train + validation with the validation share held out
             by its own split, so both see the same data (skipped with a note when it
             cannot be imported).

Timings are wall-clock seconds of ``fit`` + test ``predict`` on one thread (BLAS and
torch), all methods in the same run. Peak memory is the largest resident-set size
increase over the value before ``fit``, sampled every 5 ms from ``/proc/self/statm``
by a background thread after ``malloc_trim(0)`` (so it counts numpy and torch
allocations alike; spikes shorter than 5 ms can be missed, and memory the process
still caches from earlier fits is not counted again).

Writes ``benchmarks/results/srff_tables.csv`` and ``benchmarks/results/srff_tables.md``
(``--output`` changes the stem). The tables are built up from many runs: a run merges
its rows into the existing CSV by (problem, n, rep, method), replacing only the rows it
refits, and records the commit that produced each row (``commit`` column; from
``RFFKIT_COMMIT`` or ``git rev-parse``). Notes given with ``--note`` are kept in
``<stem>.notes.json`` and printed under the table on every later run; ``--replace``
starts a fresh CSV and notes file; ``--markdown-only`` rewrites the markdown from the
CSV and notes, fitting nothing. The CSV is rewritten atomically after each fit, so an
interrupted run leaves every finished row and no half-written file. Defaults (n = 1k, 5k for SE1/SE2 with 3 repetitions
at 1k and 1 above; SE3 at n = 1k once) take about 15 minutes on one core; e.g.
``--sizes 1000 5000 10000 50000 --se3-sizes 1000 50000 --reps 5 --reps-large 3
--se3-reps 3`` runs the full tables (many hours: SRFF at 50k takes tens of minutes).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import LassoCV, RidgeCV
from threadpoolctl import threadpool_limits

from _common import PeakRSS, add_quiet_argument, git_commit, load_notes, progress, say, write_csv_atomically
from rffkit.datasets import make_gregorova_se1, make_gregorova_se2, make_gregorova_se3
from rffkit.srff import SRFFRegressor, median_neighbour_distance

RESULTS = Path(__file__).resolve().parent / "results"
PROBLEMS = {  # name: (generator, validation = test size, relevant columns)
    "SE1": (make_gregorova_se1, 1000, [0, 2, 6, 7, 8]),
    "SE2": (make_gregorova_se2, 1000, list(range(10, 15))),
    "SE3": (make_gregorova_se3, 10_000, list(range(10))),
}
# Paper Tables 3, 5, 6: test RMSE mean (sd) over 30 resamples, per n.
PAPER = {
    "SE1": {
        1000: {"Mean": (0.287, 0.009), "Ridge": (0.287, 0.009), "Lasso": (0.287, 0.009), "RFF": (0.287, 0.009), "SRFF": (0.272, 0.009)},
        5000: {"Mean": (0.284, 0.011), "Ridge": (0.284, 0.011), "Lasso": (0.284, 0.011), "RFF": (0.284, 0.011), "SRFF": (0.263, 0.010)},
        10000: {"Mean": (0.285, 0.010), "Ridge": (0.285, 0.010), "Lasso": (0.285, 0.010), "RFF": (0.286, 0.010), "SRFF": (0.261, 0.011)},
        50000: {"Mean": (0.283, 0.010), "Ridge": (0.283, 0.010), "Lasso": (0.283, 0.010), "RFF": (0.283, 0.010), "SRFF": (0.255, 0.009)},
    },
    "SE2": {
        1000: {"Mean": (2.216, 0.105), "Ridge": (2.216, 0.105), "Lasso": (2.216, 0.105), "RFF": (2.216, 0.105), "SRFF": (1.603, 0.104)},
        5000: {"Mean": (2.211, 0.079), "Ridge": (2.211, 0.079), "Lasso": (2.211, 0.079), "RFF": (2.211, 0.079), "SRFF": (1.278, 0.076)},
        10000: {"Mean": (2.224, 0.115), "Ridge": (2.224, 0.115), "Lasso": (2.224, 0.115), "RFF": (2.224, 0.115), "SRFF": (1.272, 0.138)},
        50000: {"Mean": (2.224, 0.082), "Ridge": (2.224, 0.082), "Lasso": (2.224, 0.082), "RFF": (2.224, 0.082), "SRFF": (1.273, 0.080)},
    },
    "SE3": {
        1000: {"Mean": (0.676, 0.002), "Ridge": (0.676, 0.002), "Lasso": (0.676, 0.002), "RFF": (0.676, 0.002), "SRFF": (0.478, 0.031)},
        50000: {"Mean": (0.677, 0.002), "Ridge": (0.677, 0.002), "Lasso": (0.677, 0.002), "RFF": (0.677, 0.002), "SRFF": (0.206, 0.004)},
    },
}
METHODS = ("Mean", "Ridge", "Lasso", "RFF", "SRFF-1draw", "SRFF", "RFFNet")
SRFF_METHODS = ("SRFF-1draw", "SRFF")
PROTOCOL_NOTES = (
    "SRFF follows Algorithm 1 with the paper's settings (D = 300, Gaussian kernel, width = median "
    "distance among the 20 nearest training neighbours, gamma on the simplex of size d, 50-value grid "
    "2 n ||X||^2 10^(-9.8..0) from the authors' code). Deviations: each grid value starts from the "
    "uniform gamma as in the paper, but the search along the grid (largest alpha first) stops after 5 "
    "values without improvement once the model has started to learn (`n_iter_no_change=5`); the "
    "alternation stops at a relative objective decrease of 1e-4 (at most 100 alternations of one ridge "
    "solve and at most 10 FISTA steps); an unpenalised intercept is fitted.",
    "SRFF gives each grid value a fresh draw of epsilon and b (`draw_per_alpha=True`), as the authors' "
    "experiment code does: Algorithm 1 draws them each time it runs, once per penalty, so the validation "
    "error picks a draw as well as a penalty. SRFF-1draw is the same fit with one draw shared by the whole "
    "grid (`draw_per_alpha=False`, the estimator's default; rows before the option existed are this).",
    "Each SRFF fit is one `SRFFRegressor.fit` on train + validation with `validation_fraction` equal to "
    "the validation share and `refit=False`, so alpha is chosen on a validation set of the paper's size "
    "and the model is trained on the n training points. Its time includes the whole grid search.",
    "Mean/Ridge/Lasso/RFF: see the script's docstring. RFFNet: `RFFNetRegressor()` at defaults but "
    "`validation_fraction`, fitted like SRFF on train + validation with the validation share held out by "
    "its own split, so it trains on n points and judges relevances and penalty on the validation share.",
)
N_GRID = 50
N_COMPONENTS = 300
FIELDS = ["problem", "n", "rep", "seed", "method", "rmse", "seconds", "peak_mib", "alpha", "n_iter", "visited",
          "width", "relevant_min", "relevant_max", "irrelevant_max", "top_k_hits", "top", "commit"]  # fmt: skip
NUMERIC = ("rmse", "seconds", "peak_mib", "alpha", "visited", "width", "relevant_min", "relevant_max",
           "irrelevant_max", "top_k_hits")  # fmt: skip


def load(problem, n_train, rep):
    generator, n_held_out, _ = PROBLEMS[problem]
    seed = 10_000 * rep + n_train + {"SE1": 1, "SE2": 2, "SE3": 3}[problem]
    X, y = generator(n_train + 2 * n_held_out, random_state=seed)
    mean, std = X[:n_train].mean(axis=0), X[:n_train].std(axis=0)
    X = (X - mean) / std
    split = np.cumsum([n_train, n_held_out])
    return np.split(X, split), np.split(y, split), seed


class RFFRidgeValidated:
    """RBFSampler features + ridge, alpha chosen on the validation set (one eigh)."""

    def __init__(self, width, seed):
        self.sampler = RBFSampler(gamma=1.0 / (2.0 * width**2), n_components=N_COMPONENTS, random_state=seed)

    def fit(self, X, y, X_val, y_val):
        Z = self.sampler.fit_transform(X)
        z_mean, y_mean = Z.mean(axis=0), y.mean()
        Zc = Z - z_mean
        eigenvalues, V = np.linalg.eigh(Zc.T @ Zc)
        projected = V.T @ (Zc.T @ (y - y_mean))
        top = max(float(eigenvalues[-1]), 1e-12)
        Z_val = self.sampler.transform(X_val) - z_mean
        best = None
        for alpha in top * np.logspace(-8, 1, N_GRID):
            coef = V @ (projected / (eigenvalues + alpha))
            error = np.mean((Z_val @ coef + y_mean - y_val) ** 2)
            if best is None or error < best[0]:
                best = (error, alpha, coef)
        _, self.alpha_, self.coef_ = best
        self.intercept_ = y_mean - z_mean @ self.coef_
        return self

    def predict(self, X):
        return self.sampler.transform(X) @ self.coef_ + self.intercept_


def rffnet_class():
    try:
        from rffkit import RFFNetRegressor
    except ImportError:
        try:
            from rffkit.rffnet import RFFNetRegressor
        except ImportError as exc:  # written in parallel by another engineer
            return None, f"RFFNetRegressor not importable ({exc}); column skipped"
    return RFFNetRegressor, None


def run_method(method, data, rep, srff_dtype):
    (X, X_val, X_test), (y, y_val, y_test), seed = data
    info = {}
    with PeakRSS() as memory:
        start = time.perf_counter()
        if method == "Mean":
            prediction = np.full(y_test.shape, y.mean())
        elif method == "Ridge":
            model = RidgeCV(alphas=np.logspace(-4, 6, N_GRID)).fit(X, y)
            prediction = model.predict(X_test)
        elif method == "Lasso":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = LassoCV(alphas=N_GRID, cv=3, random_state=seed).fit(X, y)
            prediction = model.predict(X_test)
        elif method == "RFF":
            width = median_neighbour_distance(X, rng=np.random.default_rng(seed))
            model = RFFRidgeValidated(width, seed).fit(X, y, X_val, y_val)
            prediction = model.predict(X_test)
        elif method in SRFF_METHODS:
            model = SRFFRegressor(
                n_components=N_COMPONENTS, alphas=N_GRID, refit=False, draw_per_alpha=method == "SRFF",
                validation_fraction=len(y_val) / (len(y) + len(y_val)), random_state=seed,
            )  # fmt: skip
            X_all = np.vstack([X, X_val]).astype(srff_dtype)
            model.fit(X_all, np.concatenate([y, y_val]))
            prediction = model.predict(X_test.astype(srff_dtype)).astype(np.float64)
            info = {"gamma": model.gamma_, "alpha": model.alpha_, "n_iter": model.n_iter_,
                    "visited": len(model.alphas_), "width": model.length_scale_}  # fmt: skip
        elif method == "RFFNet":
            cls, _ = rffnet_class()
            # the same data as SRFF: train + validation, with the validation share held
            # out by the estimator's own split (relevances and penalty judged on it)
            model = cls(random_state=seed, validation_fraction=len(y_val) / (len(y) + len(y_val)))
            model.fit(np.vstack([X, X_val]), np.concatenate([y, y_val]))
            prediction = model.predict(X_test)
            relevances = getattr(model, "relevances_", None)
            if relevances is not None:
                info = {"gamma": np.abs(np.asarray(relevances, dtype=np.float64))}
        seconds = time.perf_counter() - start
    rmse = float(np.sqrt(np.mean((prediction - y_test) ** 2)))
    return rmse, seconds, memory.peak_mb, info


def summarise_support(gamma, relevant):
    gamma = np.asarray(gamma, dtype=np.float64)
    irrelevant = np.setdiff1d(np.arange(gamma.size), relevant)
    top = np.argsort(-gamma)[: len(relevant)]
    return {
        "relevant_min": float(gamma[relevant].min()),
        "relevant_max": float(gamma[relevant].max()),
        "irrelevant_max": float(gamma[irrelevant].max()),
        "top_k_hits": int(np.isin(top, relevant).sum()),
        "top": " ".join(str(int(i)) for i in np.argsort(-gamma)[:8]),
    }


def fmt(values, reps=None):
    """``mean (sd)``, with ``[k]`` appended when only ``k < reps`` repetitions ran."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return "–"
    count = f" [{values.size}]" if reps is not None and values.size < reps else ""
    summary = f"{values.mean():.3f} ({values.std(ddof=1):.3f})" if values.size > 1 else f"{values[0]:.3f}"
    return summary + count


def paired_difference(by_rep, first, second):
    """``first - second`` RMSE over the repetitions where both ran: ``mean ± se (wins/k)``.

    ``by_rep`` maps ``(rep, method)`` to the RMSE.
    """
    common = sorted({rep for rep, _ in by_rep if (rep, first) in by_rep and (rep, second) in by_rep})
    if not common:
        return "–"
    difference = np.array([by_rep[rep, first] - by_rep[rep, second] for rep in common])
    spread = f" ± {difference.std(ddof=1) / np.sqrt(difference.size):.4f}" if difference.size > 1 else ""
    return f"{difference.mean():+.4f}{spread} ({int(np.sum(difference < 0))}/{difference.size})"


def write_markdown(rows, path, args, notes):
    lines = [
        "# SRFF: Gregorová et al. (2018) Tables 3, 5, 6 reproduced",
        "",
        f"Produced by `benchmarks/bench_srff_tables.py` on {platform.machine()}, one thread, torch"
        f" {torch.__version__}. Test RMSE mean (sd) over the repetitions in the *reps* column (paper: 30;"
        " a single repetition shows no sd; `[k]` marks a cell over only k of them); *paper* rows are the"
        " published values. SRFF runs in float32 (as the authors' code). *RFFNet − SRFF* is the paired"
        " difference over the repetitions where both ran, ± its standard error (RFFNet lower in w of k).",
        "",
    ]
    lines += [f"- {note}" for note in (*PROTOCOL_NOTES, *notes)]
    lines.append("")
    for problem in PROBLEMS:
        sizes = sorted({r["n"] for r in rows if r["problem"] == problem})
        if not sizes:
            continue
        table = {"SE1": "Table 3", "SE2": "Table 5", "SE3": "Table 6"}[problem]
        lines += [f"## {problem} ({table}): test RMSE", ""]
        lines.append(
            "| n | reps | " + " | ".join(METHODS) + " | SRFF / paper SRFF (SRFF-1draw) | SRFF / Mean (paper's)"
            " | RFFNet − SRFF (w/k) | RFFNet − SRFF-1draw (w/k) |"
        )
        lines.append("|---" * (len(METHODS) + 6) + "|")
        for n in sizes:
            chosen = [r for r in rows if r["problem"] == problem and r["n"] == n]
            reps = len({r["rep"] for r in chosen})
            cells = [fmt([r["rmse"] for r in chosen if r["method"] == m], reps) for m in METHODS]
            paper = PAPER[problem].get(n, {})
            ratios = []
            for m in SRFF_METHODS:
                ours = [r["rmse"] for r in chosen if r["method"] == m]
                ratios.append(f"{np.mean(ours) / paper['SRFF'][0]:.3f}" if ours and "SRFF" in paper else "–")
            ratio = f"{ratios[1]} ({ratios[0]})"
            by_rep = {(r["rep"], r["method"]): r["rmse"] for r in chosen}
            relative = [by_rep[rep, "SRFF"] / by_rep[rep, "Mean"] for rep, m in by_rep if m == "SRFF" and (rep, "Mean") in by_rep]
            paper_relative = f" ({paper['SRFF'][0] / paper['Mean'][0]:.3f})" if paper else ""
            relative_cell = f"{np.mean(relative):.3f}{paper_relative}" if relative else "–"
            paired = " | ".join(paired_difference(by_rep, "RFFNet", m) for m in reversed(SRFF_METHODS))
            lines.append(f"| {n} | {reps} | " + " | ".join(cells) + f" | {ratio} | {relative_cell} | {paired} |")
            if paper:
                paper_cells = [f"{paper[m][0]:.3f} ({paper[m][1]:.3f})" if m in paper else "–" for m in METHODS]
                lines.append(f"| *paper* {n} | 30 | " + " | ".join(paper_cells) + " | | | | |")
        lines += ["", f"### {problem}: fit + predict seconds (mean) / peak RSS increase MiB (max)", ""]
        lines.append("| n | " + " | ".join(METHODS) + " |")
        lines.append("|---" * (len(METHODS) + 1) + "|")
        for n in sizes:
            cells = []
            for m in METHODS:
                chosen = [r for r in rows if r["problem"] == problem and r["n"] == n and r["method"] == m]
                cells.append(
                    f"{np.mean([r['seconds'] for r in chosen]):.2f} s / {max(r['peak_mib'] for r in chosen):.0f}"
                    if chosen else "–"
                )
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines += ["", f"### {problem}: variable selection", ""]
        lines += [
            "SRFF: `gamma_ / sigma` (sum d / sigma), the scale of the frequencies in the paper's units"
            " (its text reports medians over 30 resamples: SE2 1k relevant 0.92–1.04, irrelevant max 0.06;"
            " SE3 1k 0.37–0.71 and 0.05; SE3 50k 1.19–1.64 and 0.03). RFFNet: |relevances_|.",
            "",
        ]
        lines.append("| n | method | relevant min–max (median over reps) | max irrelevant | relevant in top-k | top 8 (first rep) | alpha / n | alphas visited |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for n in sizes:
            for m in (*SRFF_METHODS, "RFFNet"):
                chosen = [r for r in rows if r["problem"] == problem and r["n"] == n and r["method"] == m and r.get("relevant_min") != ""]
                if not chosen:
                    continue
                k = len(PROBLEMS[problem][2])
                srff = m in SRFF_METHODS
                unit = [float(r["width"]) if srff else 1.0 for r in chosen]
                alpha = f"{np.median([r['alpha'] / n for r in chosen]):.3g}" if srff else "–"
                visited = f"{np.median([r['visited'] for r in chosen]):.0f}" if srff else "–"
                lines.append(
                    f"| {n} | {m} | {np.median([r['relevant_min'] / u for r, u in zip(chosen, unit)]):.2f}–"
                    f"{np.median([r['relevant_max'] / u for r, u in zip(chosen, unit)]):.2f} | "
                    f"{np.median([r['irrelevant_max'] / u for r, u in zip(chosen, unit)]):.2f} | "
                    f"{np.mean([r['top_k_hits'] for r in chosen]):.1f} / {k} | {chosen[0]['top']} | {alpha} | {visited} |"
                )
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def current_commit():
    """The commit being benchmarked: ``RFFKIT_COMMIT`` (for runs from a snapshot), else git's."""
    return os.environ.get("RFFKIT_COMMIT") or git_commit() or ""


def row_key(row):
    return row["problem"], int(row["n"]), int(row["rep"]), row["method"]


def _sort_key(row):
    problem, n, rep, method = row_key(row)
    return list(PROBLEMS).index(problem), n, rep, METHODS.index(method)


def read_rows(csv_path):
    """Rows of a CSV written by this script (older files lack the ``commit`` column)."""
    if not csv_path.exists():
        return []
    with open(csv_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["n"], row["rep"] = int(row["n"]), int(row["rep"])
        row.setdefault("commit", "")
        for key in NUMERIC:
            if row[key] != "":
                row[key] = float(row[key])
    return rows


def merge_rows(rows, new):
    """``rows`` with ``new`` added, replacing the row of the same (problem, n, rep, method)."""
    merged = {row_key(row): row for row in rows}
    merged[row_key(new)] = new
    return sorted(merged.values(), key=_sort_key)


def write_rows(rows, csv_path):
    """Write the CSV atomically: a temporary file renamed over the old one."""
    write_csv_atomically(csv_path, FIELDS, rows)


def provenance_note(rows):
    """One line saying which commit produced how many rows of the table."""
    counts = {}
    for row in rows:
        counts[row["commit"] or "unrecorded"] = counts.get(row["commit"] or "unrecorded", 0) + 1
    parts = [f"{commit}: {count}" for commit, count in counts.items()]
    return ("Rows per commit (the CSV's `commit` column; `unrecorded`: rows from before the column "
            "existed, whose runs the notes below describe): " + ", ".join(parts) + ".")


def paths(stem):
    return RESULTS / f"{stem}.csv", RESULTS / f"{stem}.md", RESULTS / f"{stem}.notes.json"


def rewrite_markdown(args):
    """Regenerate the markdown from the CSV and the persisted notes (e.g. after a merge by hand)."""
    csv_path, md_path, notes_path = paths(args.output)
    rows = read_rows(csv_path)
    if not rows:
        raise SystemExit(f"{csv_path} is missing or empty: nothing to render.")
    notes = [provenance_note(rows), *load_notes(notes_path, args.note)]
    if not any(r["method"] == "RFFNet" for r in rows):
        notes.insert(0, "RFFNet column not run")
    write_markdown(rows, md_path, args, notes)
    print(f"wrote {md_path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000], help="training sizes for SE1 and SE2")
    parser.add_argument("--se3-sizes", type=int, nargs="*", default=[1000], help="training sizes for SE3 (50000 is slow)")
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--reps", type=int, default=3, help="repetitions at n <= --large")
    parser.add_argument("--reps-large", type=int, default=1, help="repetitions at n > --large")
    parser.add_argument("--large", type=int, default=1000)
    parser.add_argument("--se3-reps", type=int, default=1, help="repetitions for SE3 (any n)")
    parser.add_argument("--start-rep", type=int, default=0, help="first repetition index (to add repetitions)")
    parser.add_argument("--srff-dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 keeps the methods' seconds comparable; say so in a --note otherwise)")
    parser.add_argument("--output", default="srff_tables", help="file stem under benchmarks/results/")
    parser.add_argument("--markdown-only", action="store_true", help="rewrite the .md from the .csv and notes, fit nothing")
    parser.add_argument("--note", action="append", default=[],
                        help="note for the markdown, kept in <stem>.notes.json for later runs (repeatable)")
    parser.add_argument("--replace", action="store_true",
                        help="start a new CSV and notes file instead of merging into the existing ones")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    if args.markdown_only:
        return rewrite_markdown(args)

    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    methods = list(args.methods)
    run_notes = []
    if "RFFNet" in methods:
        cls, message = rffnet_class()
        if cls is None:
            methods.remove("RFFNet")
            run_notes.append(message)
            print(message)
    RESULTS.mkdir(parents=True, exist_ok=True)
    csv_path, md_path, notes_path = paths(args.output)
    if args.replace:
        notes_path.unlink(missing_ok=True)
    rows = [] if args.replace else read_rows(csv_path)
    notes = load_notes(notes_path, args.note) + run_notes
    commit = current_commit()
    repetitions = [
        (problem, n, rep)
        for problem in args.problems
        for n in (args.se3_sizes if problem == "SE3" else args.sizes)
        for rep in range(args.start_rep, args.start_rep + (
            args.se3_reps if problem == "SE3" else args.reps if n <= args.large else args.reps_large))
    ]
    with threadpool_limits(limits=1):
        for problem, n, rep in progress(repetitions, desc="bench_srff_tables", unit="repetition", quiet=args.quiet,
                                        label=lambda u: f"{u[0]} n={u[1]} rep={u[2]}"):
            data = load(problem, n, rep)
            for method in methods:
                rmse, seconds, peak, info = run_method(method, data, rep, np.dtype(args.srff_dtype))
                row = dict.fromkeys(FIELDS, "")
                row.update(problem=problem, n=n, rep=rep, seed=data[2], method=method, rmse=rmse,
                           seconds=seconds, peak_mib=peak, commit=commit)  # fmt: skip
                for key in ("alpha", "n_iter", "visited", "width"):
                    if key in info:
                        row[key] = info[key]
                if "gamma" in info:
                    row.update(summarise_support(info["gamma"], PROBLEMS[problem][2]))
                rows = merge_rows(rows, row)
                write_rows(rows, csv_path)
                say(f"{problem} n={n} rep={rep} {method:6s} rmse={rmse:.4f} {seconds:7.2f}s {peak:7.1f}MiB"
                    + (f" top={row['top']}" if row["top"] else ""))  # fmt: skip
            write_markdown(rows, md_path, args, [provenance_note(rows), *notes])
    print(f"wrote {csv_path} and {md_path}")


if __name__ == "__main__":
    main()
