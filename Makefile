# cdc-chaos: the two commands are `make chaos` and `make test` (see README.md).
SHELL := /bin/bash
# Toolchains installed by rustup and the Go tarball live outside Debian's PATH.
export PATH := $(PATH):$(HOME)/.cargo/bin:/usr/local/go/bin
CARGO ?= cargo
SEED ?= 1
REPORT_DIR ?= reports/out
# Runs at once for `make chaos` / `make bench-catalog` (empty: chaos's default, cores + 1).
JOBS ?=
# FULL=1: every run goes to the end of its timeline and recovery tail (`chaos run --full`).
FULL ?=
CHAOS_RUN_FLAGS = $(if $(JOBS),-j $(JOBS)) $(if $(FULL),--full)

.PHONY: all setup test unit fresh-check chaos bench bench-catalog reap up fmt lint clippy sim

all: test

## setup: Debian packages, the Docker engine, and the pinned images (idempotent).
setup:
	@bash scripts/setup.sh

## test: setup, then the whole test suite: formatting and lints, unit tests (no Docker) and real-container tests.
test: setup lint
	@echo "==> cargo build --workspace --all-targets"
	@$(CARGO) build --workspace --all-targets --locked
	@echo "==> system image (the workspace's binaries)"
	@bash scripts/build-system-image.sh
	@echo "==> unit tests (no Docker)"
	@$(CARGO) test --workspace --locked --lib --bins
	@echo "==> real-container tests (etcd, Kafka, Toxiproxy, upstream in Docker)"
	@$(CARGO) test --workspace --locked --test '*'

## unit: only the tests that need no Docker (what `make fresh-check` runs in a pristine container).
unit:
	@echo "==> cargo test --workspace --lib --bins (no Docker)"
	@$(CARGO) test --workspace --locked --lib --bins
	@echo "==> cargo test -p reports (no Docker; headless Chromium)"
	@$(CARGO) test --locked -p reports
	@echo "==> cargo test -p harness --test scenarios (no Docker)"
	@$(CARGO) test --locked -p harness --test scenarios

## fresh-check: in a pristine container of the base image: setup.sh --packages, a locked
## build of every target, the Docker-free tests. FRESH_CHECK_WITHOUT="pkg" proves a package is needed.
fresh-check: setup
	@bash scripts/fresh-check.sh

## chaos: setup, then the scenario catalog on real containers; reports in $(REPORT_DIR).
## SCENARIOS="a b" runs only those, PROFILE=fix only that profile, SEED=n seeds target choices.
chaos: setup
	@echo "==> building the workspace"
	@$(CARGO) build --workspace --bins --locked
	@echo "==> system image (the workspace's binaries)"
	@bash scripts/build-system-image.sh
	@echo "==> reaping leftovers of earlier runs"
	@./target/debug/chaos reap
	@echo "==> smoke scenario (producer through Toxiproxy, timeout toxic, recovery)"
	@./target/debug/chaos smoke --report-dir $(REPORT_DIR)
	@echo "==> scenario catalog: chaos run $(if $(SCENARIOS),$(SCENARIOS),--all) $(if $(PROFILE),--profile $(PROFILE)) --seed $(SEED) $(CHAOS_RUN_FLAGS) (each scenario x profile on fresh containers, several at once; about 12 min on 2 cores)"
	@./target/debug/chaos run $(if $(SCENARIOS),$(SCENARIOS),--all) $(if $(PROFILE),--profile $(PROFILE)) --seed $(SEED) $(CHAOS_RUN_FLAGS) --report-dir $(REPORT_DIR)
	@echo "==> report: $(REPORT_DIR)/report.html, JUnit: $(REPORT_DIR)/junit.xml"

## bench: data-plane throughput vs a raw rdkafka producer, checkpoint lag (real Kafka), message-center throughput, report rendering (release build).
bench: setup
	@echo "==> cargo bench -p harness --bench data_plane (release build; BENCH_ROWS, BENCH_LAG_SECS, BENCH_LAG_ROWS_PER_SEC tune it)"
	@$(CARGO) bench -p harness --bench data_plane --locked
	@echo "==> cargo bench -p cdc-system --bench message_center (two nodes on loopback)"
	@$(CARGO) bench -p cdc-system --bench message_center --locked
	@echo "==> cargo bench -p reports --bench render (a 30-minute, 10,000-sample run rendered; budget < 2 s, < 5 MB)"
	@$(CARGO) bench -p reports --bench render --locked

## bench-catalog: the whole catalog as a benchmark (not a test): per-run verdict, wall time,
## mode and -j in reports/out/bench-catalog.json, totals printed. JOBS= and FULL=1 as for chaos.
bench-catalog: setup
	@echo "==> building the workspace"
	@$(CARGO) build --workspace --bins --locked
	@bash scripts/build-system-image.sh
	@./target/debug/chaos reap
	@echo "==> chaos run --all $(CHAOS_RUN_FLAGS) --report-dir reports/out/bench-catalog"
	@./target/debug/chaos run --all --seed $(SEED) $(CHAOS_RUN_FLAGS) --report-dir reports/out/bench-catalog --summary reports/out/bench-catalog.json; \
	  rc=$$?; echo "==> per-run figures: reports/out/bench-catalog.json (exit $$rc)"; exit $$rc

## sim: the swarm simulation as a benchmark (no Docker): SIM_SEEDS seeds per profile on every
## core (release build); prints runs/min, events/s and the findings, shrunk plans in reports/out/sim.
SIM_SEEDS ?= 0..20000
sim:
	@echo "==> cargo build --release -p harness --bin chaos"
	@$(CARGO) build --release -p harness --bin chaos --locked
	@for p in pre-fix fix hardened; do \
	  echo "==> chaos sim --profile $$p --seeds $(SIM_SEEDS)"; \
	  ./target/release/chaos sim --profile $$p --seeds $(SIM_SEEDS) --shrink-runs 100 --out reports/out/sim || true; \
	done

## reap: remove containers and networks left by runs whose process is gone.
reap:
	@$(CARGO) run -q -p harness --bin chaos --locked -- reap

## up: start etcd, Kafka and Toxiproxy and hold them until Ctrl-C.
up: setup
	@$(CARGO) run -q -p harness --bin chaos --locked -- up

fmt:
	@$(CARGO) fmt --all

## lint: rustfmt's check and clippy with every warning an error (part of make test).
lint:
	@echo "==> cargo fmt --all --check"
	@$(CARGO) fmt --all --check
	@echo "==> cargo clippy --workspace --all-targets -- -D warnings"
	@$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

clippy:
	@$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
