# kopf-scheduler: every target sets up what it needs on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo simulate-demo test venv lint unit e2e controlplane cluster bench clean

# The local control plane, the operator, profiles/, a few pods, and a live profile switch.
demo: venv controlplane
	hack/demo.sh

# The same scheduler offline: the example cluster through `kopf-scheduler simulate`, explained.
simulate-demo: venv
	$(VENV)/bin/kopf-scheduler simulate --cluster examples/cluster --explain

test: venv lint controlplane
	$(PY) -m pytest -q tests

venv: $(STAMP)
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

lint: venv
	$(VENV)/bin/ruff check operator tests
	$(VENV)/bin/ruff format --check operator tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit: venv
	$(PY) -m pytest -q tests/unit tests/profiles

# Builds kube-apiserver, kube-scheduler, kubectl and etcd from the Go module proxy into a cache outside
# the repository (rebuilt only when the pinned versions or the Go version change).
controlplane:
	hack/controlplane/build.sh

e2e: venv controlplane
	$(PY) -m pytest -q tests/e2e

cluster: venv controlplane
	$(VENV)/bin/kopf-scheduler dev-cluster up

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
