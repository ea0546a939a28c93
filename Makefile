# kopf-scheduler: every target sets up what it needs on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
BENCH_ARGS ?=

.PHONY: demo simulate-demo test venv lock lint unit fuzz e2e controlplane image release cluster bench bench-small clean

# The local control plane, the operator, profiles/, a few pods, and a live profile switch.
demo: venv controlplane
	hack/demo.sh

# The same scheduler offline: the example cluster through `kopf-scheduler simulate`, explained.
simulate-demo: venv
	$(VENV)/bin/kopf-scheduler simulate --cluster examples/cluster --explain

# The tiers that need no cluster in random order (as `make unit`), then the e2e tier in file order (its
# modules share one control plane; tests/e2e/test_image*.py run the image `make image` built).
test: venv lint controlplane image
	$(PY) -m pytest -q -p randomly $(UNIT_ARGS) tests/unit tests/integration tests/scenarios tests/profiles tests/poison
	$(PY) -m pytest -q tests/e2e

# Installs from constraints.txt: the same versions on every machine until `make lock` moves them.
venv: $(STAMP)
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Re-resolves constraints.txt: the newest versions pyproject.toml allows, from a fresh virtualenv.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q --upgrade pip
	.lock-venv/bin/pip install -q '.[dev,bench]'
	{ sed -n '1,2p' constraints.txt; .lock-venv/bin/pip freeze --exclude-editable | grep -v '^kopf-scheduler=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	.lock-venv/bin/python hack/image/lock.py
	rm -rf .lock-venv build

lint: venv
	$(VENV)/bin/ruff check operator tests
	$(VENV)/bin/ruff format --check operator tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Every tier that needs no cluster, in random order (pytest-randomly): the order of the previous run
# comes back with `make unit UNIT_ARGS=--randomly-seed=last`, that of seed N with `--randomly-seed=N`.
unit: venv
	$(PY) -m pytest -q -p randomly $(UNIT_ARGS) tests/unit tests/integration tests/scenarios tests/profiles tests/poison

# The poison tier at length: thousands of random objects per kind instead of the 200 fixed ones `make unit`
# tries (tests/poison/conftest.py). A failure prints the object; pin it in REGRESSIONS there.
fuzz: venv
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q tests/poison

# Builds kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and etcd from the Go module proxy
# into a cache outside the repository (rebuilt only when the pinned versions or the Go version change).
controlplane:
	hack/controlplane/build.sh

# The operator's OCI image, dist/image/image.tar (with its SBOM), from Debian's packages and the wheels of
# hack/image/requirements.lock: no base image is pulled (hack/image/build.sh; about 2 minutes on 2 cores the
# first time, a no-op while its inputs are unchanged). Installs its tools with apt-get when missing (as root).
image:
	hack/image/build.sh

# A release in dist/release/, of the commit checked out (uncommitted changes are not in it): the wheel and
# sdist, the krew plugin's archive and its manifest with the archive's sha256, SHA256SUMS; the same commit
# gives the same bytes (hack/release/build.py; RELEASE_ARGS="--base-url URL" names where the archive goes).
RELEASE_ARGS ?=
release:
	$(PYTHON) hack/release/build.py $(RELEASE_ARGS)

e2e: venv controlplane image
	$(PY) -m pytest -q tests/e2e

cluster: venv controlplane
	$(VENV)/bin/kopf-scheduler dev-cluster up

# Side-by-side benchmark on scheduler_perf-shaped workloads: kube-scheduler, kopf-scheduler and a raw binder
# (the API server's ceiling), each against a fresh kube-apiserver + etcd. Writes bench/results/<time>.json
# and bench/RESULTS.md. Full size: 5,000 nodes, plus p99 latency at 100 pods/s (an hour or more on 2 cores);
# bench-small: 500 nodes (CI runs one small workload as a smoke test: tests/e2e/test_bench_smoke.py).
bench: $(BENCH_STAMP) controlplane
	$(PY) -m bench run --size full --latency-rate 100 $(BENCH_ARGS)

bench-small: $(BENCH_STAMP) controlplane
	$(PY) -m bench run --size small $(BENCH_ARGS)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist/image dist/release
