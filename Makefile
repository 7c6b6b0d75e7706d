# Anneal's entry points. `make demo` and `make test` do all their own set-up on a fresh Debian machine (as root).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3.11
export PYTHON  # scripts/setup-system.sh checks that this one can make a venv
VENV := .venv
# Touched after a successful install: the venv is rebuilt only when pyproject.toml is newer than this.
STAMP := $(VENV)/.installed

.PHONY: venv system system-test sandbox-image demo run test chaos compose-up compose-smoke compose-down test-services lint layers gpu-resolve gpu-smoke clean

venv: $(STAMP)

$(STAMP): pyproject.toml client/pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: Anneal needs Python 3.11 (PYTHON=... to choose one)"; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	$(VENV)/bin/pip install --quiet -e ./client  # the Python client and `anneal` CLI (its own package)
	touch $@

# Debian packages the platform runs with (bubblewrap); installs only what is missing.
system:
	@scripts/setup-system.sh runtime

# Embedded everything (SQLite, Redis child, bubblewrap); seeds a demo job and prints where to watch it.
demo: system venv
	$(VENV)/bin/python scripts/demo.py

# The same processes without the demo data.
run: system venv
	$(VENV)/bin/python scripts/demo.py --no-seed

# What the tests use on top: chromium for the browser tests, docker-compose to validate the compose file.
system-test:
	@scripts/setup-system.sh test

# PostgreSQL and Redis on 127.0.0.1: those running, or installed and started from Debian's packages.
test-services:
	@scripts/test-services.sh

# The docker sandbox backend on this machine: Podman's Docker API on unix:///run/anneal-podman.sock (started
# when it does not answer) and the sandbox image from Debian packages (debootstrap, ~1.5 min once; cached).
sandbox-image: system-test
	@scripts/sandbox-image.sh all

# The whole suite against PostgreSQL and Redis on 127.0.0.1. Extra pytest options: make test PYTEST_ARGS='-k foo'
test: system-test test-services sandbox-image venv
	$(VENV)/bin/pytest tests $(PYTEST_ARGS)

# Only the chaos drills (tests/chaos, also part of `make test`): services restarted and killed, ~5 min.
chaos: system-test test-services sandbox-image venv
	$(VENV)/bin/pytest tests/chaos $(PYTEST_ARGS)

# docker-compose.yml for real on this machine's Docker API (Podman's), the image built from the Dockerfile on
# a base made from Debian's packages (scripts/compose-up.sh); then the whole path through it; then down.
# Not part of `make test` (the first build takes minutes). Extra `up` flags: make compose-up UP_ARGS='--scale sandbox=2'
compose-up: system-test venv
	@scripts/compose-up.sh up $(UP_ARGS)

compose-smoke: venv
	@scripts/compose-up.sh smoke

compose-down:
	@scripts/compose-up.sh down

lint: venv layers
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The design's arrows as import contracts (import-linter: no cycles, the engines never import Django or the
# platform, verifiers and sandboxes never torch, apps meet through services) and mypy on the engines; both
# are configured in pyproject.toml.
layers: venv
	PYTHONPATH=platform $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

# Checks that the GPU host's set (vLLM) resolves, without installing it: pip downloads every wheel to read
# its metadata (about 2 GB, ~30 s here). The resolution is written to var/gpu-resolve.json.
gpu-resolve: venv
	@mkdir -p var
	@start=$$(date +%s); \
	$(VENV)/bin/pip install --dry-run --ignore-installed --quiet --report var/gpu-resolve.json \
	  -r requirements/gpu.txt 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }; \
	echo "requirements/gpu.txt resolves ($$(( $$(date +%s) - start )) s); the full set is in var/gpu-resolve.json"

# A short GRPO job on one CUDA GPU (vLLM colocate rollouts, bf16, gradient checkpointing): SmolLM2-135M-Instruct
# with LoRA on one reasoning-gym domain, bench/learning_smollm.py's job unchanged (GPU_SMOKE_ARGS='--model tiny'
# for the demo spec); prints step time, tokens/s and held-out accuracy before and after. Exits 2 with a message on
# a host without CUDA or vLLM. More GPUs: accelerate launch (see script).
gpu-smoke: venv
	$(VENV)/bin/python scripts/gpu_smoke.py $(GPU_SMOKE_ARGS)

# Build output and caches; var/ (database, models, checkpoints) only with `make clean ALL=1`.
clean:
	rm -rf .pytest_cache .ruff_cache *.egg-info build dist
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	$(if $(ALL),rm -rf var $(VENV))
