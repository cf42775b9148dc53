# Set-up and the two everyday jobs. `make pipeline` and `make test` work from a fresh clone.
# TORCH_SPEC: on a CPU machine the CPU build of torch 2.13.0 (on disk on kernelwright's dev and CI
# machines); on a GPU host set TORCH_SPEC=torch to keep the CUDA build you have.
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
# the test processes (pytest-xdist, a test file per process): 2 took the suite from ~21 to ~12 minutes on 2 cores
TEST_JOBS ?= 2

.PHONY: setup pipeline test lint typecheck clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH_SPEC)" -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

pipeline: $(VENV)/.installed
	$(VENV)/bin/kernelwright pipeline

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check kernelwright tests bench scripts

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

test: lint typecheck
	$(VENV)/bin/pytest -q -n $(TEST_JOBS) --dist loadfile

clean:
	rm -rf .kernelwright .mypy_cache .ruff_cache .pytest_cache
