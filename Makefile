# Two commands for a fresh machine: `make serve` (install and start everything) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve worker test lint openapi bench bench-service image

# The virtualenv's bytecode is written by the first process that imports a module (installing
# would otherwise compile all of site-packages, most of which nothing here imports), also where
# the environment sets PYTHONDONTWRITEBYTECODE: without it every worker, API and test process
# would compile the same modules again at each start.
unexport PYTHONDONTWRITEBYTECODE

$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV) || python3 -m venv --without-pip $(VENV)

# The install is redone only when what it installs from changes (the packages themselves are
# installed editable: a change to their code needs no install), the kernels' compilation only
# when the code changes; a later `make serve` on the same tree starts at once.
INSTALLED := $(VENV)/.installed
COMPILED := $(VENV)/.kernels-compiled

install: $(INSTALLED) $(COMPILED)

$(INSTALLED): pyproject.toml constraints.txt | $(BIN)/python
	@# uv installs the packages in seconds where pip takes a minute or more. uv comes from the
	@# system's pip (no pip in the virtualenv), else from the virtualenv's own; pip if uv cannot.
	($(PYTHON) -m pip --python $(BIN)/python install --quiet uv 2>/dev/null \
	  || ($(BIN)/python -m ensurepip --upgrade >/dev/null && $(BIN)/python -m pip install --quiet uv)) \
	  && $(BIN)/python -m uv pip install --quiet --python $(BIN)/python -e '.[dev]' -c constraints.txt \
	  || (($(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade) \
	      && $(BIN)/python -m pip install --quiet --upgrade pip \
	      && $(BIN)/python -m pip install --quiet -e '.[dev]' -c constraints.txt)
	touch $@

$(COMPILED): $(INSTALLED) $(shell find algorithms -name '*.py' 2>/dev/null)
	@# Compile the numba kernels once into their on-disk cache (side by side: tens of seconds the
	@# first time, a second after), so that workers and test processes started together do
	@# not each compile them.
	$(BIN)/python -c "import os; from worker.main import warm_compiled_kernels; warm_compiled_kernels(os.cpu_count() or 1)"
	touch $@

serve: install
	$(BIN)/mmc serve --host $(HOST) --port $(PORT)

worker: install
	$(BIN)/mmc worker

test: install
	@# SCIPY_ARRAY_API=1: scikit-learn's estimator checks run their Array API check (NumPy
	@# inputs with array_api_dispatch on) only with it; NumPy arrays behave the same.
	SCIPY_ARRAY_API=1 OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/python -m pytest -q
	$(BIN)/ruff check .
	$(BIN)/lint-imports

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

openapi: install
	$(BIN)/python -m service.openapi_export

bench: install
	$(BIN)/python -m uv pip install --quiet --python $(BIN)/python -e '.[dev,bench]' -c constraints.txt \
	  || $(BIN)/python -m pip install --quiet -e '.[dev,bench]' -c constraints.txt

bench-service: install
	$(BIN)/python benchmarks/service_load.py

# `make image REGISTRY=registry.example.com/team`: the one image of the API and the workers,
# tagged with pyproject.toml's version, pushed, and named in the production overlay (the other
# overlays build on it), as `kustomize edit set image` would name it.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE = $(REGISTRY)/mmc-service
DOCKER ?= docker
OVERLAY ?= deploy/kubernetes/overlays/production

image:
	@test -n "$(REGISTRY)" || { echo "make image REGISTRY=host[/path]: the registry to push to" >&2; exit 2; }
	$(DOCKER) build -t $(IMAGE):$(VERSION) .
	$(DOCKER) push $(IMAGE):$(VERSION)
	sed -i -e 's|^\(    newName:\).*|\1 $(IMAGE)|' \
	  -e 's|^\(    newTag:\) "[^"]*"|\1 "$(VERSION)"|' $(OVERLAY)/kustomization.yaml
