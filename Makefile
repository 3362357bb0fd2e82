# One-command setup: `make test` and `make audit PROMPT="..."` install the system packages
# auditor needs (WordNet 3.0 from Debian/Ubuntu, as root; otherwise they say what to run),
# create .venv when missing, install torch ($(TORCH), e.g. TORCH="torch==2.11.0 --index-url URL"
# for a CUDA build), auditor with its extras and the language data, then run.
# A stamp keyed on pyproject.toml and TORCH makes a second call skip the Python installs.
PYTHON ?= python3
TORCH ?= torch==2.13.0
PROMPT ?= a photo of a pharmacist
AUDIT_ARGS ?=
#: Two pytest-xdist workers (CI has two cores); tests/conftest.py keeps some modules on one worker.
PYTEST_ARGS ?= -n 2
#: One torch (OpenMP) thread per process: the two workers and the CLI processes they start already fill
#: two cores, and more threads only contend for them (measured back to back: 9:05 -> 8:08 wall, 20% less CPU).
TEST_THREADS ?= 1
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-$(shell (cat pyproject.toml; echo '$(TORCH)') | sha256sum | cut -c1-16)
#: Debian/Ubuntu packages with the WordNet 3.0 files concept extraction reads offline.
SYSTEM_PACKAGES := wordnet-base wordnet-sense-index

.PHONY: setup system-packages test audit selftest schemas bench bench-gpu gpu-kit clean

setup: $(STAMP)

system-packages:
	@scripts/system-packages.sh $(SYSTEM_PACKAGES)

$(STAMP): pyproject.toml | system-packages
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[ml,providers,trace,amplification,mediapipe,ray,dev]"
	$(BIN)/auditor setup
	rm -f $(VENV)/.stamp-*
	touch $@

test: setup
	OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest $(PYTEST_ARGS)

audit: setup
	$(BIN)/auditor prompt "$(PROMPT)" $(AUDIT_ARGS)

selftest: setup
	$(BIN)/auditor selftest

schemas: setup
	$(BIN)/auditor schemas

bench: setup
	$(BIN)/python benchmarks/bench_scoring.py
	$(BIN)/python benchmarks/bench_bootstrap.py

# The whole audit at paper size on a CUDA GPU, the authors' loop beside auditor (hours; see README).
# Pass a CUDA torch, e.g. TORCH="torch==2.11.0 --index-url https://download.pytorch.org/whl/cu130".
BENCH_ARGS ?=
bench-gpu: setup
	PYTHONUNBUFFERED=1 $(BIN)/python benchmarks/bench_audit.py $(BENCH_ARGS)

# .gpu-kit/: what benchmarks/on-device.sh installs on a lent GPU machine that cannot fetch packages.
gpu-kit: setup
	scripts/gpu-kit.sh $(BIN)/python

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
