# Everything runs inside .venv, created on first use from nothing but Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned here (not in the package) so that set-up takes the local CPU wheel
# instead of pulling several GB of CUDA packages; override with TORCH_SPEC=... elsewhere.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-core clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m rffkit demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Benchmarks are not tests: they take long and write into benchmarks/results/.
# `make bench` runs every benchmarks/bench_*.py; `make bench-core` only issue 2's table.
bench-core: $(STAMP)
	$(BIN)/python benchmarks/bench_rffnet_se.py
	$(BIN)/python benchmarks/update_readme.py

bench: $(STAMP)
	set -e; for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script; done
	$(BIN)/python benchmarks/update_readme.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
