# `make run`: set up and start a single-node platform on localhost:9092.
# `make test`: set up (Python venv, Debian packages the tests need) and run every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
DEB_PACKAGES := kcat postgresql-15 openjdk-17-jre-headless strace iptables gcc libc6-dev python3-dev prometheus chromium libpostgresql-jdbc-java
# every install builds odradek's C extension (the request metrics, issue 18): gcc and the
# headers of the interpreter; a change of its source reinstalls
BUILD_DEB := gcc libc6-dev python3-dev
C_SOURCES := setup.py src/odradek/broker/metrics/_record.c

.PHONY: run test lint bench bench-node bench-tools clean setup setup-test setup-bench deb faults build-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# the compiler and the Python headers for the C extension, checked for the venv's own
# interpreter (a Python not from Debian brings its headers itself; Debian's python3 needs
# python3-dev)
build-deps: | $(BIN)/python
	@$(MAKE) --no-print-directory deb DEB_PACKAGES="$(BUILD_DEB)"
	@$(BIN)/python -c "import os, sys, sysconfig; h = os.path.join(sysconfig.get_path('include'), 'Python.h'); os.path.exists(h) or sys.exit(f'{h} is missing: odradek builds a C extension and needs the headers of {sys.base_prefix}')"

$(STAMP): pyproject.toml $(C_SOURCES) | build-deps
	$(BIN)/pip install -q -e .
	touch $@

$(TEST_STAMP): pyproject.toml $(C_SOURCES) | build-deps
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(STAMP)

$(BENCH_STAMP): pyproject.toml $(C_SOURCES) | build-deps
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@ $(STAMP) $(TEST_STAMP)

setup: $(STAMP)

setup-test: $(TEST_STAMP) deb

# Debian packages the tests drive (kcat); installed only when missing.
deb:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

run: setup
	$(BIN)/odradek serve --data-dir ./data

test: setup-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadscope --no-loadscope-reorder --durations=30 tests

lint: setup-test
	$(BIN)/ruff check src tests bench examples

setup-bench: $(BENCH_STAMP)

# bench/c/rdkafka_produce and rdkafka_consume: librdkafka C clients of our own for the C rows,
# built against Debian's librdkafka-dev (installed here, for the benchmarks only); the peers
# link the same sources against confluent-kafka's bundled librdkafka on first use. linux-perf
# and strace: bench/c_consume_ab.py --perf / --perf-stat / --strace profile the C consumer.
BENCH_TOOLS := bench/c/rdkafka_consume bench/c/rdkafka_produce

bench-tools: $(BENCH_TOOLS)

bench/c/rdkafka_%: bench/c/rdkafka_%.c bench/c/common.h
	@$(MAKE) --no-print-directory deb DEB_PACKAGES="librdkafka-dev gcc pkg-config linux-perf strace"
	$(CC) -O2 -Wall -Wextra -o $@ $< $$(pkg-config --cflags --libs rdkafka)

# The side-by-side comparison with the peers (installs and starts them itself).
bench: setup-bench bench-tools
	$(BIN)/python -m bench.compare
	$(BIN)/python -m bench.cluster_perf

# One node alone: the issue-2 producer and consumer perf run.
bench-node: setup-test
	$(BIN)/python -m bench.run

# Issue 15: SEEDS seeded runs (as root: namespaces, iptables, tmpfs), each family alone and
# then all mixed, FAULT_TIME seconds of faults each; histories kept under jepsen-runs/.
# All four workloads by default (WORKLOADS=w1,w4 for the lighter pair).
SEEDS ?= 10
FAULT_TIME ?= 60
WORKLOADS ?= w1,w2,w3,w4
faults: setup-test
	$(BIN)/python -m tests.system.jepsen --seeds 0:$(SEEDS) --each --time $(FAULT_TIME) \
	  --workloads $(WORKLOADS) --out jepsen-runs/each
	$(BIN)/python -m tests.system.jepsen --seeds 0:$(SEEDS) --time $(FAULT_TIME) \
	  --workloads $(WORKLOADS) --out jepsen-runs/mixed

clean:
	rm -rf $(VENV) data build src/*.egg-info $(BENCH_TOOLS)
	find src -name '*.so' -delete
