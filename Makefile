# Everything runs inside .venv, created on first use from nothing but Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned here (not in the package) so that set-up takes the local CPU wheel
# instead of pulling several GB of CUDA packages; override with TORCH_SPEC=... elsewhere, and
# where pip sees only PyPI (whose torch wheels for Linux are CUDA builds) name PyTorch's CPU
# index: TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu".
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
STAMP := $(VENV)/.installed

.PHONY: demo test test-all bench bench-core clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[test,bench]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m rffkit demo

# The default run leaves out the tests marked slow; test-all runs every test. Both spread
# the tests over one pytest-xdist worker per core (each fit inside runs on rffkit's
# 'auto' threads, so the workers do not oversubscribe the cores).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n auto

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n auto

# Benchmarks are not tests: they take long and write into benchmarks/results/.
# `make bench` runs every benchmarks/bench_*.py with the options its committed results
# were made with (the ablation tunes each solver's learning rate); the two tables built
# up from many runs (rffnet_table2, srff_tables) merge the rows a run refits into the
# committed CSV instead of replacing it; bench_settings also runs its se1_5k and params
# suites (its default run is the 50k sweep, whose prepared tables the params suite reads).
# `make bench-core` runs only the SE1/SE2 table of RFFNet at its defaults (bench_rffnet_se).
bench-core: $(STAMP)
	$(BIN)/python benchmarks/bench_rffnet_se.py
	$(BIN)/python benchmarks/update_readme.py

bench: $(STAMP)
	set -e; for script in benchmarks/bench_*.py; do \
	  case $$script in \
	    */bench_ablation.py) options=--tune ;; \
	    */bench_rffnet_table2.py) options=--update ;; \
	    *) options= ;; \
	  esac; \
	  echo "== $$script $$options"; $(BIN)/python $$script $$options; \
	done
	$(BIN)/python benchmarks/bench_settings.py run --suite se1_5k
	$(BIN)/python benchmarks/bench_settings.py run --suite params --workers 1
	$(BIN)/python benchmarks/update_readme.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
