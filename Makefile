# Two commands for a fresh machine: `make serve` (install and start everything) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve worker test lint openapi bench bench-service

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

install: $(BIN)/python
	@# uv installs the packages in seconds where pip takes a minute or more; pip if uv cannot.
	@# Bytecode is compiled here: with PYTHONDONTWRITEBYTECODE set, no process would write it.
	($(BIN)/python -m pip install --quiet uv \
	  && $(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	       -e '.[dev]' -c constraints.txt) \
	  || ($(BIN)/python -m pip install --quiet --upgrade pip \
	      && $(BIN)/python -m pip install --quiet -e '.[dev]' -c constraints.txt)
	$(BIN)/python -m compileall -q algorithms core service worker mmc mmc_client benchmarks tests
	@# Compile the numba kernels once into their on-disk cache (side by side: tens of seconds the
	@# first time, a second after), so that workers and test processes started together do
	@# not each compile them.
	$(BIN)/python -c "import os; from worker.main import warm_compiled_kernels; warm_compiled_kernels(os.cpu_count() or 1)"

serve: install
	$(BIN)/mmc serve --host $(HOST) --port $(PORT)

worker: install
	$(BIN)/mmc worker

test: install
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/python -m pytest -q
	$(BIN)/ruff check .
	$(BIN)/lint-imports

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

openapi: install
	$(BIN)/python -m service.openapi_export

bench: install
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'

bench-service: install
	$(BIN)/python benchmarks/service_load.py
