# Two entry points for a newcomer: `make run` and `make test` (`make check`, then the whole suite).  Both build .venv
# from nothing with pip (no other tool is needed) and reuse it afterwards.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# torch/torchvision pins used to build the dev venv quickly; pyproject.toml only
# declares ranges.  Override with `make TORCH_SPEC="torch torchvision" test`.
ARCH := $(shell uname -m)
ifeq ($(ARCH),aarch64)
TORCH_SPEC ?= torch==2.9.1 torchvision==0.24.1
else
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
endif
EXTRAS ?= dev,all,bench

.PHONY: run test check test-gpu bench venv clean-venv
venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/trickbag train

# the repository's own checks: lint (ruff), types (mypy, files listed in pyproject.toml), function length;
# the import-direction check is a test (tests/test_layers.py)
check: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docs tools
	$(BIN)/mypy
	$(BIN)/python tools/fnlen.py src/trickbag 60

test: check
	$(BIN)/python -m pytest -q -n 2

# the CUDA-only tests (they skip on a machine without CUDA)
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m cuda tests/gpu

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/time_to_accuracy.py
	$(BIN)/python benchmarks/trick_cost.py

clean-venv:
	rm -rf $(VENV)
