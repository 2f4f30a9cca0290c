# PFL-DocVQA Kit. `make demo` and `make test` work as the first command on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test test-slow lint bench clean

setup: $(STAMP)

# torch is installed first and pinned: on this machine 2.13.0 is the local CPU wheel,
# anything else would pull several GB of CUDA packages.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(BIN)/python -m pflkit.demo --out $(DEMO_DIR)

test: setup
	$(BIN)/python -m pytest

test-slow: setup
	$(BIN)/python -m pytest -m slow

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python -m benchmark.bench

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .ruff_cache
