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

.PHONY: mutants-unit explore-nightly all setup packages test unit fresh-check chaos bench bench-scale bench-catalog reap up fmt lint clippy sim \
	actionlint nightly-shard nightly-merge nightly-local mutants explore

all: test

## setup: Debian packages, actionlint, the Docker engine, and the pinned images (idempotent).
setup:
	@bash scripts/setup.sh

## packages: only setup's Debian packages (what a build needs; no engine, no images).
packages:
	@bash scripts/setup.sh --packages

## test: setup, then the whole test suite: formatting and lints, the workflows' lint, unit tests
## (no Docker) and real-container tests.
test: setup lint actionlint
	@echo "==> cargo build --workspace --all-targets"
	@$(CARGO) build --workspace --all-targets --locked
	@echo "==> system image (the workspace's binaries)"
	@bash scripts/build-system-image.sh
	@echo "==> unit tests (no Docker)"
	@$(CARGO) test --workspace --locked --lib --bins
	@echo "==> the mutant matrix's cheap slice: the simulator-tier mutants and the canary (no Docker)"
	@$(CARGO) test --locked -p cdc-system --features mutants --lib -- mutant:: sim::detect:: data_plane_bugs
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
	@echo "==> cargo test -p harness --test import_rules (no Docker: no import cycle, the product never imports the simulator)"
	@$(CARGO) test --locked -p harness --test import_rules

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
	@echo "==> scenario catalog: chaos run $(if $(SCENARIOS),$(SCENARIOS),--all) $(if $(PROFILE),--profile $(PROFILE)) --seed $(SEED) $(CHAOS_RUN_FLAGS) (each scenario x profile on fresh containers, several at once)"
	@./target/debug/chaos run $(if $(SCENARIOS),$(SCENARIOS),--all) $(if $(PROFILE),--profile $(PROFILE)) --seed $(SEED) $(CHAOS_RUN_FLAGS) --report-dir $(REPORT_DIR); \
	  rc=$$?; echo "==> report: $(REPORT_DIR)/report.html, JUnit: $(REPORT_DIR)/junit.xml; the measurements entry (make bench-catalog writes it):"; \
	  ./target/debug/chaos measured $(REPORT_DIR)/summary.json; exit $$rc

## bench: data-plane throughput vs a raw rdkafka producer, checkpoint lag (real Kafka), message-center throughput, report rendering (release build).
bench: setup
	@echo "==> cargo bench -p harness --bench data_plane (release build; BENCH_ROWS, BENCH_LAG_SECS, BENCH_LAG_ROWS_PER_SEC tune it)"
	@$(CARGO) bench -p harness --bench data_plane --locked
	@echo "==> cargo bench -p cdc-system --bench message_center (two nodes on loopback)"
	@$(CARGO) bench -p cdc-system --bench message_center --locked
	@echo "==> cargo bench -p reports --bench render (a 30-minute, 10,000-sample run rendered; budget < 2 s, < 5 MB)"
	@$(CARGO) bench -p reports --bench render --locked

## bench-scale: the control plane's cost curve on the simulator (a benchmark, no Docker):
## tables 10^2..10^6, changefeeds 10..10^4, nodes 3..100; the growth exponent of each event's
## cost, reports/out/bench-scale.json, and its entry in docs/measurements.md.
## BENCH_SCALE_PROFILE=fix, BENCH_SCALE_MAX_TABLES=100000 tune it.
bench-scale:
	@echo "==> cargo bench -p harness --bench scale (release build; each shape in a process of its own)"
	@BENCH_SCALE_DOC=docs/measurements.md $(CARGO) bench -p harness --bench scale --locked

## bench-catalog: the whole catalog as a benchmark (not a test): per-run verdict, wall time,
## mode and -j in reports/out/bench-catalog.json, totals printed. JOBS= and FULL=1 as for chaos.
bench-catalog: setup
	@echo "==> building the workspace"
	@$(CARGO) build --workspace --bins --locked
	@bash scripts/build-system-image.sh
	@./target/debug/chaos reap
	@echo "==> chaos run --all $(CHAOS_RUN_FLAGS) --report-dir reports/out/bench-catalog"
	@./target/debug/chaos run --all --seed $(SEED) $(CHAOS_RUN_FLAGS) --report-dir reports/out/bench-catalog --summary reports/out/bench-catalog.json; \
	  rc=$$?; echo "==> per-run figures: reports/out/bench-catalog.json (exit $$rc)"; \
	  ./target/debug/chaos measured reports/out/bench-catalog.json --write docs/measurements.md; exit $$rc

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

## actionlint: lint .github/workflows with the pinned actionlint `make setup` installs (part of make test).
## Without shellcheck and pyflakes, so the verdict does not depend on what else the host has.
ACTIONLINT = .build/bin/actionlint
actionlint:
	@test -x $(ACTIONLINT) || { echo "actionlint: $(ACTIONLINT) is missing; run make setup (it go-installs the pinned version)" >&2; exit 1; }
	@echo "==> actionlint .github/workflows/*.yml"
	@$(ACTIONLINT) -shellcheck= -pyflakes= .github/workflows/*.yml

## The nightly (.github/workflows/nightly-chaos.yml runs these targets; nightly-local runs them here).
## Shard k of N writes $(NIGHTLY_DIR)/shard-k; the merge reads every shard-*, the earlier nights in
## $(NIGHTLY_DIR)/history, and writes $(NIGHTLY_DIR)/merged (scripts/nightly-merge.sh).
NIGHTLY_DIR ?= reports/out/nightly
SHARDS ?= 2

## nightly-shard: SHARD=k/N: shard k of the nightly's catalog runs on fresh containers.
nightly-shard: setup
	@case "$(SHARD)" in */*) ;; *) echo "nightly-shard: give SHARD=k/N, e.g. make nightly-shard SHARD=1/4" >&2; exit 2 ;; esac
	@echo "==> building the workspace"
	@$(CARGO) build --workspace --bins --locked
	@bash scripts/build-system-image.sh
	@./target/debug/chaos reap
	@rm -rf $(NIGHTLY_DIR)/shard-$(firstword $(subst /, ,$(SHARD)))
	@echo "==> chaos run --all --shard $(SHARD) --seed $(SEED) $(CHAOS_RUN_FLAGS) --report-dir $(NIGHTLY_DIR)/shard-$(firstword $(subst /, ,$(SHARD)))"
	@./target/debug/chaos run --all --shard $(SHARD) --seed $(SEED) $(CHAOS_RUN_FLAGS) --report-dir $(NIGHTLY_DIR)/shard-$(firstword $(subst /, ,$(SHARD)))

## nightly-merge: the shards into one report.html, junit.xml and run set with the history's trends;
## the merged set joins the history (newest NIGHTLY_KEEP nights kept). Needs no Docker.
nightly-merge: packages
	@echo "==> cargo build -p harness --bin chaos"
	@$(CARGO) build -p harness --bin chaos --locked
	@NIGHTLY_DIR=$(NIGHTLY_DIR) bash scripts/nightly-merge.sh

## nightly-local: SHARDS=N: the nightly here: shards 1..N one after another, then merged exactly as
## the workflow merges them. Exit 0 when every shard met its expectations and the merge succeeded.
nightly-local:
	@rm -rf $(NIGHTLY_DIR)/shard-* $(NIGHTLY_DIR)/merged
	@rc=0; for k in $$(seq 1 $(SHARDS)); do \
	  $(MAKE) --no-print-directory nightly-shard SHARD=$$k/$(SHARDS) || rc=1; \
	done; \
	$(MAKE) --no-print-directory nightly-merge || rc=1; \
	exit $$rc

## mutants: the mutant matrix. Builds the mutants build (target/mutants, --features mutants) and
## its image once, then `chaos mutants`: each mutant against the scenarios that claim it
## (catches = [...]), the simulator (MUTANT_SIM_SEEDS) and the unit tier; the control runs in
## the same invocation. MUTANTS="a b" runs only those, MUTANT_TRIALS=k trials (nightly 10),
## MUTANT_ALL_TRIALS=1 every trial of every cell (rates), MUTANT_JOBS=n container runs at once (3).
MUTANT_TRIALS ?= 3
MUTANT_SIM_SEEDS ?= 2000
MUTANTS ?=
MUTANT_JOBS ?= 3
mutants: setup
	@echo "==> cargo build --workspace --bins (the control's image)"
	@$(CARGO) build --workspace --bins --locked
	@bash scripts/build-system-image.sh
	@echo "==> the mutants build: cargo build --features mutants --target-dir target/mutants"
	@$(CARGO) build --locked --target-dir target/mutants -p cdc-system --features mutants --bins
	@echo "==> chaos itself in release (the simulator tier runs thousands of plans)"
	@$(CARGO) build --release --locked --target-dir target/mutants -p harness --features mutants --bin chaos
	@bash scripts/build-system-image.sh target/mutants/debug system-mutants
	@./target/mutants/release/chaos reap
	@echo "==> chaos mutants -j $(MUTANT_JOBS) --trials $(MUTANT_TRIALS) $(if $(MUTANT_ALL_TRIALS),--all-trials )--sim-seeds $(MUTANT_SIM_SEEDS) $(foreach m,$(MUTANTS),--mutant $(m))"
	@./target/mutants/release/chaos mutants -j $(MUTANT_JOBS) --trials $(MUTANT_TRIALS) $(if $(MUTANT_ALL_TRIALS),--all-trials )--sim-seeds $(MUTANT_SIM_SEEDS) $(foreach m,$(MUTANTS),--mutant $(m)); \
	  rc=$$?; [ -n "$(MUTANTS)" ] || ./target/mutants/release/chaos measured reports/out/mutants/matrix.json --write docs/measurements.md; exit $$rc

## explore-nightly: SHARD=k/N: shard k of the night's exploration under hardened: of the run
## indices 0..EXPLORE_RUNS (default 80) of one exploration whose seed is the night's date
## (EXPLORE_SEED, default today as YYYYMMDD UTC), the ones `chaos explore --shard k/N` holds, so
## the shards never repeat a run and a night replays from its date. Writes $(NIGHTLY_DIR)/explore-k.
EXPLORE_RUNS ?= 80
EXPLORE_SEED ?= $(shell date -u +%Y%m%d)
explore-nightly: setup
	@case "$(SHARD)" in */*) ;; *) echo "explore-nightly: give SHARD=k/N, e.g. make explore-nightly SHARD=1/2" >&2; exit 2 ;; esac
	@$(CARGO) build --workspace --bins --locked
	@bash scripts/build-system-image.sh
	@./target/debug/chaos reap
	@echo "==> chaos explore --profile hardened --seed $(EXPLORE_SEED) --runs $(EXPLORE_RUNS) --shard $(SHARD) -j 3 --out $(NIGHTLY_DIR)/explore-$(firstword $(subst /, ,$(SHARD)))"
	@./target/debug/chaos explore --profile hardened --seed $(EXPLORE_SEED) --runs $(EXPLORE_RUNS) --shard $(SHARD) -j 3 --out $(NIGHTLY_DIR)/explore-$(firstword $(subst /, ,$(SHARD)))

## mutants-unit: the mutant matrix's unit tier: cargo-mutants (pinned, installed into .build/cargo
## on first use) over the sans-IO control plane and the checkers, judged by the Docker-free tests
## (scripts/mutants-unit.sh; MUTANTS_UNIT_SLICE=core|checkers|all, MUTANTS_UNIT_SHARD=k/n).
## Nightly, not in make test: each mutant is a rebuild.
mutants-unit:
	@bash scripts/mutants-unit.sh

## explore: `chaos explore` for an hour under PROFILE (default hardened), -j 3, seed SEED.
explore: setup
	@$(CARGO) build --workspace --bins --locked
	@bash scripts/build-system-image.sh
	@./target/debug/chaos reap
	@./target/debug/chaos explore --profile $(or $(PROFILE),hardened) --seed $(SEED) --budget $(or $(BUDGET),1h) -j 3 --out reports/out/explore-$(or $(PROFILE),hardened)
