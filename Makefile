# PFL-DocVQA Kit. `make demo` and `make test` work as the first command on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo
BENCH_DATA ?= .bench/mini
# The load test's scoring worker: tiny's 46 test questions, so that scores land during a level.
LOAD_BENCH_DATA ?= .bench/tiny
DP_BENCH_DATA ?= .bench/dp
AUDIT_SEED ?= 0
AUDIT_BENCH_DATA ?= .bench/mini-canary10-s$(AUDIT_SEED)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: gpu-wheels gpu-check setup constraints constraints-flower flower-setup demo test test-flower test-slow lint docs bench bench-dp bench-audit bench-audit-power bench-device bench-train bench-api-fuzz clean

setup: $(STAMP)

# torch is installed first and pinned: on this machine 2.13.0 is the local CPU wheel,
# anything else would pull several GB of CUDA packages. Debian's chromium drives the browser
# test (Playwright never downloads a browser of its own here); it is installed when missing and
# apt-get is usable (root), and the browser test says so when it is not there. Debian's
# bubblewrap is the sandbox of `pflkit reproduce` (evaluator/reproduction/sandbox.py), installed
# the same way; its tests are skipped without it. The tutorials (docs/tutorials/, run by
# tests/docs/test_tutorials.py) poll the practice evaluator with curl.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,docs]'
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| echo "chromium could not be installed: the browser test will be skipped"; fi
	@if [ ! -x /usr/bin/bwrap ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
		|| echo "bubblewrap could not be installed: pflkit reproduce and its tests need it"; fi
	@if ! command -v curl >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null) \
		|| echo "curl could not be installed: the tutorials' test needs it"; fi
	touch $(STAMP)

# Rewrite constraints.txt from the current environment (after an upgrade; then re-measure the
# README's figures, which were taken with the versions it names).
constraints: setup
	{ sed -n '1,4p' constraints.txt; $(BIN)/pip freeze --exclude-editable \
		| grep -v -i -e '^torch==' -e '^pfl-docvqa-kit' -e ' @ '; } > constraints.txt.tmp
	mv constraints.txt.tmp constraints.txt

# Flower's engines in an environment of their own (flwr 1.41 pins fastapi 0.138, starlette 1.3,
# uvicorn 0.49, rich 14 and protobuf < 7, which the main environment does not take): the kit
# without its dev tools, plus flwr, ray and pytest, under constraints-flower.txt (as the main
# environment is under constraints.txt). `pflkit train --engine flower` and
# `pflkit flower superlink|supernode` run from `.venv-flower/bin/pflkit`.
FLOWER_VENV := .venv-flower
FLOWER_STAMP := $(FLOWER_VENV)/.installed
# To upgrade flwr: change its range in pyproject.toml, `rm -r .venv-flower`,
# `make flower-setup FLOWER_CONSTRAINTS=` (unconstrained), run `make test-flower`, then
# `make constraints-flower`.
FLOWER_CONSTRAINTS ?= constraints-flower.txt

flower-setup: $(FLOWER_STAMP)

$(FLOWER_STAMP): pyproject.toml $(FLOWER_CONSTRAINTS)
	$(PYTHON) -m venv $(FLOWER_VENV)
	$(FLOWER_VENV)/bin/pip install --quiet --upgrade pip
	$(FLOWER_VENV)/bin/pip install --quiet torch==2.13.0
	$(FLOWER_VENV)/bin/pip install --quiet $(if $(FLOWER_CONSTRAINTS),-c $(FLOWER_CONSTRAINTS)) \
		-e '.[flower]' pytest pytest-timeout
	touch $(FLOWER_STAMP)

# Rewrite constraints-flower.txt from .venv-flower (after `make test-flower` passed in it).
constraints-flower: flower-setup
	{ sed -n '1,5p' constraints-flower.txt; $(FLOWER_VENV)/bin/pip freeze --exclude-editable \
		| grep -v -i -e '^torch==' -e '^pfl-docvqa-kit' -e ' @ '; } > constraints-flower.txt.tmp
	mv constraints-flower.txt.tmp constraints-flower.txt

demo: setup
	$(BIN)/python -m pflkit.demo --out $(DEMO_DIR)

# The main suite, then (when `make flower-setup` built .venv-flower) `make test-flower`.
# pytest-xdist runs the main suite on TEST_WORKERS processes (2: the CI machine's cores;
# `make test TEST_WORKERS=0` runs it in one process). --dist loadfile keeps each test file on one
# worker, so a module's fixtures (a served leaderboard, a trained run) are built once.
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -m 'not slow and not flower' -n $(TEST_WORKERS) --dist loadfile
	@if [ -f $(FLOWER_STAMP) ]; then $(MAKE) --no-print-directory test-flower; \
	else echo "make test: .venv-flower is missing, Flower's tests were not run (make flower-setup)"; fi

# From .venv-flower: the spiece-only tokenizer, the connection checks, one deployment run (a
# SuperLink, three SuperNodes, two lora-nf4 rounds equal to the in-process run) and one
# simulation run (fedavg-ft with its personalisation); the other Flower runs are in test-slow.
# pytest's exit status 5 (no test collected) is not a failure.
FLOWER_TESTS := tests/benchmark/model/test_spiece_tokenizer.py tests/baselines/test_flower_connection.py \
	tests/baselines/test_flower_deployment.py tests/baselines/test_flower_personalisation.py
test-flower: flower-setup
	$(FLOWER_VENV)/bin/python -m pytest -m 'flower or not slow' $(FLOWER_TESTS) \
		|| [ $$? -eq 5 ]

test-slow: setup
	$(BIN)/python -m pytest -m slow

# ruff, then the import rules of docs/design.md (`[tool.importlinter]` in pyproject.toml).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

# The documentation site from docs/ into site/; --strict fails on a broken link, anchor, snippet
# or API reference.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Speed figures, printed (not asserted): evaluation loop vs the starter kit's, scoring one
# submission, the evaluator's status endpoint under concurrent load during uploads (also with
# wrk when installed), the leaderboard with 10,000 submissions, pflkit's start (every
# --help, `pflkit dp epsilon`; hyperfine when installed), and the peak memory of scoring a
# VT5-base-shaped checkpoint (`pflkit evaluate` and the worker) against its file's size.
bench: setup
	$(BIN)/python -m bench.bench --data $(BENCH_DATA)
	$(BIN)/python -m bench.scorebench --data $(BENCH_DATA) --model base --threads 1
	$(BIN)/python -m bench.loadtest --requests 6000 --concurrency 100,200 --uploaders 2 \
		--endpoints status,page,json --data $(LOAD_BENCH_DATA) --wrk 10
	$(BIN)/python -m bench.loadbench --submissions 10000 --repeat 10 --no-browser
	$(BIN)/python -m bench.startup --runs 10
	$(BIN)/python -m bench.memorybench --data $(BENCH_DATA) --checkpoint .bench/vt5-base

# The GPU check (bench/gpucheck.py, docs/participants/gpu.md): the CUDA tests, every preset's
# short round on the GPU against the CPU, then the kit beside the official starter kit (training
# and scoring throughput, peak memory and the 24 GB configurations, one whole round), all in one
# budget of about 8 minutes. `make gpu-wheels OFFICIAL_REPO=PATH` first fills .gpu/ with what a
# lent GPU machine lacks (wheels, the official code from a local clone); the lent machine then
# runs `bash bench/gpu_check.sh $OUT` (no venv there). `make gpu-check DEVICE=cpu SHAPE=tiny`
# rehearses it here on the CPU.
GPU_CHECK_OUT ?= .bench/gpucheck
OFFICIAL_REPO ?=
gpu-wheels: setup
	$(BIN)/python -m bench.gpu_environment --out .gpu $(if $(OFFICIAL_REPO),--official-repo $(OFFICIAL_REPO))

gpu-check: setup
	GPU_PYTHON=$(BIN)/python bash bench/gpu_check.sh $(GPU_CHECK_OUT)

# Seconds per DP round at m = 50 providers per client (reference loop, streamed path) against a
# non-private round on the same examples, with a profile of the reference round, on the `dp` scale.
bench-dp: setup $(DP_BENCH_DATA)/benchmark.json
	OMP_NUM_THREADS=1 $(BIN)/python -m bench.dpbench --data $(DP_BENCH_DATA) --preset dp-fedavg-competition
	OMP_NUM_THREADS=1 $(BIN)/python -m bench.dpbench --data $(DP_BENCH_DATA) --preset dp-lora-competition

$(DP_BENCH_DATA)/benchmark.json: | setup
	$(BIN)/pflkit data generate --scale dp --seed 0 --out $(DP_BENCH_DATA) --overwrite

# The prediction loop on CUDA against the CPU (fp32 and bf16), the shipped base on a `mini` val
# split and a random model of the real VT5-base shape: needs a GPU, refuses without one.
bench-device: setup $(BENCH_DATA)/benchmark.json
	$(BIN)/python -m bench.devicebench --data $(BENCH_DATA) --out .bench/devicebench.json

# One client's local round per preset and training setting (fp32, bf16, gradient checkpointing,
# 8-bit AdamW) through the kit's client path: seconds, examples per second, peak memory, on the
# real VT5-base shape (`pflkit model init --shape vt5-base`); TRAIN_DEVICE=cuda on a GPU machine.
TRAIN_DEVICE ?= auto
bench-train: setup $(BENCH_DATA)/benchmark.json .bench/vt5-base/config.json
	$(BIN)/python -m bench.trainbench --data $(BENCH_DATA) --base .bench/vt5-base \
		--device $(TRAIN_DEVICE) --settings fp32,bf16,bf16+gc,bf16+gc+8bit \
		--presets fedavg,lora-qv-r6,dp-lora --providers 2 --out .bench/trainbench.json

.bench/vt5-base/config.json: | setup
	$(BIN)/pflkit model init --shape vt5-base --out .bench/vt5-base

# The privacy audit on `mini` with 100 canaries of 10 invoices (AUDIT_SEED draws the benchmark
# and its coins): non-private FedAvg on every client for 3 rounds of 3 epochs, DP-LoRA at
# epsilon 1/4/8, a false epsilon-1 claim; the audit's cost beside scoring (about an hour and a
# half on 2 cores: the trainings dominate).
# The audit's power over coin draws (bench/audit_power.py): per benchmark seed, a `mini` benchmark
# with 100 reconstruction canaries, non-private FedAvg at rising intensities (each read as a false
# epsilon-1 claim) and DP-LoRA at epsilon 1/4/8, each audited; resumable (what OUT holds is kept).
# Hours on 2 cores: one FedAvg preset run is about 9 minutes, every client every round 5 times that.
AUDIT_POWER_SEEDS ?= 0 1 2 3 4 5 6 7 8 9
bench-audit-power: setup
	$(BIN)/python -m bench.audit_power --out .bench/audit-power --seeds $(AUDIT_POWER_SEEDS)

bench-audit: setup $(AUDIT_BENCH_DATA)/benchmark.json
	$(BIN)/python -m bench.auditbench --data $(AUDIT_BENCH_DATA) --out .bench/audit-runs-s$(AUDIT_SEED)

$(AUDIT_BENCH_DATA)/benchmark.json: | setup
	$(BIN)/pflkit data generate --scale mini --seed $(AUDIT_SEED) --canaries 100 \
		--canary-documents 10 --public-documents 0 --out $(AUDIT_BENCH_DATA) --overwrite

# Schemathesis over the OpenAPI spec as a participant and an organiser: requests and 5xx.
bench-api-fuzz: setup
	$(BIN)/python -m bench.apifuzz --max-examples 100

$(BENCH_DATA)/benchmark.json: | setup
	$(BIN)/pflkit data generate --scale mini --seed 0 --out $(BENCH_DATA) --overwrite

bench: $(BENCH_DATA)/benchmark.json $(LOAD_BENCH_DATA)/benchmark.json .bench/vt5-base/config.json

$(LOAD_BENCH_DATA)/benchmark.json: | setup
	$(BIN)/pflkit data generate --scale tiny --seed 0 --out $(LOAD_BENCH_DATA) --overwrite

clean:
	rm -rf $(VENV) $(DEMO_DIR) site .pytest_cache .ruff_cache
