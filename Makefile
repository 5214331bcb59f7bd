# Parley: `make run` starts a server, `make test` runs the whole suite.
# Both install what is missing first (Debian packages via apt-get; idempotent and quick when
# nothing is missing), so they work on a fresh Debian 12 machine.

SWIFT       ?= swift
APT_PACKAGES = libuv1-dev libssl-dev zlib1g-dev libsqlite3-dev pkg-config netcat-openbsd tmux
# The browser client's tests (Tests/interop/test_browser.py): headless chromium + its driver.
APT_PACKAGES += chromium chromium-driver
# An emoji font, so reactions in the browser tests' screenshots (docs/) are not blank boxes.
APT_PACKAGES += fonts-noto-color-emoji
# Cluster mode's tests start real Redis servers and a local Redis Cluster (redis-cli --cluster).
APT_PACKAGES += redis-server redis-tools
# The rediss:// tests make their certificates with the openssl tool.
APT_PACKAGES += openssl
# Attachments: libvips decodes, rotates, strips and thumbnails images (HEIC via libheif).
APT_PACKAGES += libvips-dev
# Push notifications: outgoing HTTP/2 (APNs, FCM, Web Push) through libcurl with nghttp2.
APT_PACKAGES += libcurl4-openssl-dev
INTEROP_VENV = .venv-interop
# python-socketio 4.x (Engine.IO 3) cannot share a venv with 5.x.
INTEROP_EIO3_VENV = .venv-interop-eio3
BENCH_VENV   = .venv-bench
ARGS        ?=

.PHONY: all deps build release run test check-dependencies unit interop fuzz fuzz-smoke conformance conformance-socketio bench bench-attack bench-failover bench-replicas-ack clean

all: build

# Install only the packages that are missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product parley

# Builds in release mode and serves on 127.0.0.1:8080 (HTTP) and :8081 (line protocol).
run: release
	./.build/release/parley serve $(ARGS)

# The whole suite: the dependency check, release build, Swift unit and end-to-end tests,
# interop tests with real third-party clients when present.
test: deps check-dependencies release unit fuzz-smoke interop

# Package.swift declares exactly what each module imports, and each module imports only what
# the layering allows (the rules are in the script); no file holds a merge-conflict marker.
check-dependencies:
	python3 Tests/tools/check_dependencies.py --self-test
	python3 Tests/tools/check_dependencies.py
	python3 Tests/tools/check_conflict_markers.py --self-test
	python3 Tests/tools/check_conflict_markers.py

# Serial: many end-to-end tests block while they wait on sockets, and on a 2-core machine
# parallel suites could starve each other's timers (about 1 minute in all).
# The bench venv is a prerequisite: SocketIOSmokeTests drives the python-socketio server in it
# (and fails, rather than skipping, without it). On a failure the runner ends its output with a
# summary (failed tests; for a crash, the test that was running and the crashed thread's frames).
unit: $(BENCH_VENV)/.ready
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) python3 Tests/tools/run_unit_tests.py .build/unit-tests.log

# Each suite gets a temporary directory of its own (TMPDIR: servers' data, browser profiles,
# certificates), removed when it ends, pass or fail.
interop: $(INTEROP_VENV)/.ready $(INTEROP_EIO3_VENV)/.ready
	@if ls Tests/interop/test_*.py >/dev/null 2>&1; then \
	  PARLEY_BIN=$${PARLEY_BIN:-$(CURDIR)/.build/release/parley} Tests/tools/with_scratch_tmpdir.sh \
	    $(INTEROP_VENV)/bin/python -m pytest -q Tests/interop --ignore=Tests/interop/eio3; \
	else echo "no interop tests"; fi
	@if ls Tests/interop/eio3/test_*.py >/dev/null 2>&1; then \
	  PARLEY_BIN=$${PARLEY_BIN:-$(CURDIR)/.build/release/parley} Tests/tools/with_scratch_tmpdir.sh \
	    $(INTEROP_EIO3_VENV)/bin/python -m pytest -q Tests/interop/eio3; \
	fi

$(INTEROP_VENV)/.ready: Tests/interop/requirements.txt
	python3 -m venv $(INTEROP_VENV)
	$(INTEROP_VENV)/bin/pip install -q -r Tests/interop/requirements.txt
	touch $@

# libFuzzer campaigns over every parser (FUZZ_SECONDS each, default 60); crashes land in
# Fuzz/crashes/<target>/. `make test` runs each for a few seconds to catch regressions.
FUZZ_SECONDS ?= 60
fuzz: deps
	Fuzz/run.sh $(FUZZ_SECONDS)

fuzz-smoke: deps
	Fuzz/run.sh 3

$(INTEROP_EIO3_VENV)/.ready: Tests/interop/requirements-eio3.txt
	python3 -m venv $(INTEROP_EIO3_VENV)
	$(INTEROP_EIO3_VENV)/bin/pip install -q -r Tests/interop/requirements-eio3.txt
	touch $@

# The Engine.IO v4 / Socket.IO v5 protocol test suites (Node, Debian's mocha and node-ws)
# against the diagnostic endpoints, then Autobahn|Testsuite against the echo endpoint (server
# side) and autobahn-client (client side); Autobahn needs Python 2.7
# (~/.pyenv/versions/2.7.18 or PY27=...). Not part of `make test`.
conformance: deps conformance-socketio
	SWIFT=$(SWIFT) SKIP_BUILD=$${SKIP_BUILD:-0} Tests/conformance/run.sh

conformance-socketio: deps
	SWIFT=$(SWIFT) Tests/conformance/socketio/run.sh

# `parley bench` scenarios (Benchmarks.md) against a release server, plus the python-socketio
# SocketChat reference server for the comparison row; prints one table. Takes a few minutes;
# BENCH_SCALE=0.2 shortens the runs, BENCH_ONLY=fanout-max,idle picks rows. The cluster rows
# (cluster-fanout, cluster-idle, cluster-durable-always, cluster-durable-everysec) start
# redis-server and nodes of their own; BENCH_SMOKE=1 shrinks them to check the harness.
bench: release $(BENCH_VENV)/.ready
	python3 Tests/bench/run_bench.py

# Honest clients on every door, quiet and then under every attack of test_under_attack.py
# (plus an image bomb and fresh channels), on default settings: per-door p99 and loss, the
# server's peak RSS; exits 1 when a target of docs/security.md is missed. BENCH_SCALE=0.3
# shortens it.
bench-attack: release $(INTEROP_VENV)/.ready
	PARLEY_BIN=$(CURDIR)/.build/release/parley $(INTEROP_VENV)/bin/python Tests/bench/under_attack.py

# Acknowledged-but-lost messages across a Redis master SIGKILL under Sentinel, with and without
# --redis-replicas-ack (SentinelFailoverTests, FAILOVER_RUNS times, default 10; docs/cluster.md).
# Refuses on a busy machine (load average above 2.5).
# What --redis-replicas-ack 1 costs in acknowledged publishes/s (a master and a replica on
# 127.0.0.1, parley bench publish-durable with and without it; docs/cluster.md).
bench-replicas-ack: release
	PARLEY_BIN=$(CURDIR)/.build/release/parley python3 Tests/bench/replicas_ack_cost.py

bench-failover:
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) python3 Tests/bench/sentinel_failover.py

$(BENCH_VENV)/.ready: Tests/bench/requirements.txt
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q -r Tests/bench/requirements.txt
	touch $@

clean:
	rm -rf .build $(INTEROP_VENV) $(INTEROP_EIO3_VENV) $(BENCH_VENV)
