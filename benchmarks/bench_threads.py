"""Two thread pools on an idle machine: RFFNet's default fit on 1 and 2 threads.

rffkit's algebra runs in torch (MKL and torch's OpenMP pool); SciPy's L-BFGS-B and the
``syrk`` that forms Gram matrices run in NumPy's and SciPy's OpenBLAS, which has a pool of
its own. When both pools hold two threads on two cores and calls alternate between them,
each pool's idle threads spin while the other's want the cores. This benchmark fits
``RFFNetRegressor(random_state=0)`` on Gregorová's SE1 at several sizes (2,000 test rows),
each fit in a fresh process, three ways:

- ``1 thread``: ``n_threads=1``;
- ``2 threads, BLAS 2``: torch and the BLAS both on 2 threads (``n_threads='inherit'``
  after ``torch.set_num_threads(2)`` and ``threadpool_limits(2)``), which is what
  ``n_threads=2`` (and ``'auto'`` on an idle two-core machine) did before the BLAS got
  one thread inside rffkit's calls;
- ``2 threads``: ``n_threads=2``: torch on 2 threads, the BLAS on one except for Gram
  matrices of at least ``_SYRK_THREADED_WORK`` multiply-adds.

Wall and CPU seconds of the fit, test MSE and the load average are recorded.

A second table answers how to run several fits at once (a grid search, one model per
target): two fits of ``--pair-rows`` rows (``random_state`` 0 and 1), each on one thread
(``n_threads=1``), run in a row, in two Python threads of one process, and in two worker
processes (joblib's ``loky`` backend, the one behind scikit-learn's ``n_jobs``). It gives
the wall time of the pair, each fit's own wall time, the speed-up over the pair in a row,
and whether each way gave the same predictions as the fits in a row. Run the script
alone, as each fit wants both cores. Writes ``benchmarks/results/threads.md`` and
``.csv`` (and ``threads_pair.csv``).

Usage: python benchmarks/bench_threads.py [--sizes 1500 3000 10000 50000] [--pair-rows 6000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import add_quiet_argument, code_version, in_fresh_process, load_average, progress, say, write_csv_atomically

RESULTS = Path(__file__).resolve().parent / "results"
WAYS = ("1 thread", "2 threads, BLAS 2", "2 threads")
PAIR_WAYS = ("in a row", "two Python threads", "two processes (joblib loky)")


def _fit(way, rows, queue):
    import warnings

    import numpy as np
    import torch
    from threadpoolctl import threadpool_limits

    import rffkit
    from rffkit.datasets import make_gregorova_se1

    X, y = make_gregorova_se1(rows, random_state=0)
    X_test, y_test = make_gregorova_se1(2000, random_state=1)
    if way == "2 threads, BLAS 2":
        torch.set_num_threads(2)
        threadpool_limits(2, user_api="blas")
        setting = "inherit"
    else:
        setting = 1 if way == "1 thread" else 2
    load = load_average()
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(), rffkit.config_context(n_threads=setting):
        warnings.simplefilter("ignore")
        model = rffkit.RFFNetRegressor(random_state=0).fit(X, y)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
    queue.put(dict(rows=rows, way=way, wall_s=round(wall, 2), cpu_s=round(cpu, 2), test_mse=round(mse, 5), load=load))


def _one_of_pair(rows, seed):
    """Fit ``RFFNetRegressor(random_state=seed)`` on SE1 on one thread: ``(wall s, test predictions)``."""
    import warnings

    import rffkit
    from rffkit.datasets import make_gregorova_se1

    X, y = make_gregorova_se1(rows, random_state=0)
    X_test, _ = make_gregorova_se1(2000, random_state=1)
    with warnings.catch_warnings(), rffkit.config_context(n_threads=1):
        warnings.simplefilter("ignore")
        wall = time.perf_counter()
        model = rffkit.RFFNetRegressor(random_state=seed).fit(X, y)
        wall = time.perf_counter() - wall
        return wall, model.predict(X_test)


def _pair(rows):
    """The two fits of the pair in each of ``PAIR_WAYS``: rows of the table.

    Runs in the script's own process, after the fresh processes of the first table (it
    has imported nothing else): joblib pickles ``_one_of_pair``, a function of ``__main__``,
    by value for its workers.
    """
    import threading

    import numpy as np
    from joblib import Parallel, delayed

    _one_of_pair(500, 0)  # imports and first-call costs are paid before any clock starts
    results = []
    reference = None
    for way in PAIR_WAYS:
        load = load_average()
        start = time.perf_counter()
        if way == "in a row":
            fits = [_one_of_pair(rows, seed) for seed in (0, 1)]
        elif way == "two Python threads":
            fits = [None, None]

            def run(seed):
                fits[seed] = _one_of_pair(rows, seed)

            threads = [threading.Thread(target=run, args=(seed,)) for seed in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            fits = Parallel(n_jobs=2, backend="loky")(delayed(_one_of_pair)(rows, seed) for seed in (0, 1))
        wall = time.perf_counter() - start
        predictions = [p for _, p in fits]
        if reference is None:
            reference = predictions
        same = max(float(np.max(np.abs(p - q))) for p, q in zip(predictions, reference))
        results.append(dict(way=way, rows=rows, wall_s=round(wall, 2), fit_0_s=round(fits[0][0], 2),
                            fit_1_s=round(fits[1][0], 2), max_prediction_difference=f"{same:.2g}", load=load))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1500, 3000, 10000, 50000])
    parser.add_argument("--pair-rows", type=int, default=6000, help="rows of each fit of the pair (0: no pair)")
    add_quiet_argument(parser)
    args = parser.parse_args()
    units = [(rows, way) for rows in args.sizes for way in WAYS]
    rows = []
    for size, way in progress(units, desc="threads", quiet=args.quiet, label=lambda u: f"{u[0]} rows, {u[1]}"):
        rows.append(in_fresh_process(_fit, way, size))
        say(rows[-1])
    fields = ["rows", "way", "wall_s", "cpu_s", "test_mse", "load"]
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomically(RESULTS / "threads.csv", fields, rows)
    by = {(r["rows"], r["way"]): r for r in rows}
    lines = [
        "# RFFNet's default fit on 1 and 2 threads (SE1, idle two-core machine)",
        "",
        f"Written by `benchmarks/bench_threads.py` at {code_version()}; each fit in a fresh process, "
        "`RFFNetRegressor(random_state=0)`, 2,000 test rows; wall / CPU seconds of the fit; "
        "load average (1, 5, 15 min) when the fit started.",
        "",
        "| rows | " + " | ".join(f"{w}: wall s (CPU s)" for w in WAYS) + " | BLAS 2 / now (wall) | test MSE (1 thread; now) | load |",
        "|---|" + "---|" * (len(WAYS) + 3),
    ]
    for size in args.sizes:
        cells = [f"{by[size, w]['wall_s']:.1f} ({by[size, w]['cpu_s']:.1f})" for w in WAYS]
        ratio = by[size, "2 threads, BLAS 2"]["wall_s"] / by[size, "2 threads"]["wall_s"]
        mses = f"{by[size, '1 thread']['test_mse']:.4f}; {by[size, '2 threads']['test_mse']:.4f}"
        loads = "; ".join(by[size, w]["load"].split(",")[0] for w in WAYS)
        lines.append(f"| {size:,} | " + " | ".join(cells) + f" | {ratio:.2f} | {mses} | {loads} |")
    if args.pair_rows:
        say(f"two fits of {args.pair_rows} rows, three ways")
        pair = _pair(args.pair_rows)
        write_csv_atomically(RESULTS / "threads_pair.csv", list(pair[0]), pair)
        in_a_row = pair[0]["wall_s"]
        lines += [
            "",
            f"## Two fits at once ({args.pair_rows:,} rows each, one thread each)",
            "",
            "`RFFNetRegressor(random_state=0)` and `(random_state=1)` on SE1, each under "
            "`config_context(n_threads=1)`, in the script's process after the fits above (a first fit "
            "on 500 rows ran before the clocks). Wall s of the pair and of each fit; speed-up over the pair in a "
            "row; the largest difference of the 2,000 test predictions from those of the fits in a row.",
            "",
            "| way | pair: wall s | fit 0 / fit 1: wall s | speed-up | prediction difference | load |",
            "|---|---|---|---|---|---|",
        ]
        for row in pair:
            lines.append(f"| {row['way']} | {row['wall_s']:.1f} | {row['fit_0_s']:.1f} / {row['fit_1_s']:.1f} | "
                         f"{in_a_row / row['wall_s']:.2f} | {row['max_prediction_difference']} | "
                         f"{row['load'].split(',')[0]} |")
    (RESULTS / "threads.md").write_text("\n".join(lines) + "\n")
    say("\n".join(lines))


if __name__ == "__main__":
    main()
