"""Splice the benchmark results into README.md (between the results markers).

Every table in the README's results section is copied from a file that a script in
``benchmarks/`` wrote into ``benchmarks/results/``; nothing there is typed by hand.
Run after the benchmarks: ``python benchmarks/update_readme.py`` (``make bench`` does).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
START, END = "<!-- results:start -->", "<!-- results:end -->"

# (results file, script that writes it); the first heading and first table are shown,
# and for the files in MORE_TABLES also every table under a heading containing the text
MORE_TABLES = {"srff_tables.md": "test RMSE"}
SECTIONS = [
    ("rffnet_se.md", "bench_rffnet_se.py"),
    ("se1_landscape.md", "bench_se1_landscape.py"),
    ("srff_tables.md", "bench_srff_tables.py"),
    ("srff_solver.md", "bench_srff_solver.py"),
    ("rffnet_table2.md", "bench_rffnet_table2.py"),
    ("ablation.md", "bench_ablation.py"),
    ("classification.md", "bench_classification.py"),
    ("relevance_paths.md", "bench_relevance_paths.py"),
    ("kernel_approximation.md", "bench_kernel_approximation.py"),
    ("rffridge_se.md", "bench_rffridge_se.py"),
    ("krr_diabetes.md", "bench_krr_diabetes.py"),
    ("excess_risk.md", "bench_excess_risk.py"),
]


def first_table(text):
    """The first heading (demoted to ###) and the first markdown table of a file."""
    lines = text.splitlines()
    heading = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    table, inside = [], False
    for line in lines:
        if line.startswith("|"):
            table.append(line)
            inside = True
        elif inside:
            break
    return heading, "\n".join(table)


def tables_under(text, marker):
    """Each table that follows a heading containing ``marker``, with that heading as ####."""
    parts, lines = [], text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("#") and marker in line:
            table = []
            for following in lines[index + 1 :]:
                if following.startswith("|"):
                    table.append(following)
                elif table or following.startswith("#"):
                    break
            if table:
                parts.append(f"#### {line.lstrip('#').strip()}\n\n" + "\n".join(table))
    return parts


def build():
    parts = []
    for name, script in SECTIONS:
        path = RESULTS / name
        if not path.exists():
            continue
        text = path.read_text()
        heading, table = first_table(text)
        tables = tables_under(text, MORE_TABLES[name]) if name in MORE_TABLES else [table]
        body = "\n\n".join(tables)
        parts.append(
            f"### {heading}\n\nFrom `benchmarks/{script}` "
            f"(full output: [`benchmarks/results/{name}`](benchmarks/results/{name})).\n\n{body}\n"
        )
    return "\n".join(parts)


def main():
    readme = ROOT / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"README.md lacks the {START} / {END} markers")
    section = f"{START}\n{build()}\n{END}"
    text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: section, text, flags=re.S)
    readme.write_text(text)
    print(f"README.md results section rebuilt from {RESULTS}")


if __name__ == "__main__":
    main()
