#!/usr/bin/env bash
# The mutant matrix's unit tier (issue 16): cargo-mutants over the sans-IO
# control plane (coordinator and its operators, maintainer and its manager,
# scheduling) and over the harness's checkers and verifier, each judged by
# the Docker-free tests only. Nightly, not in `make test` (hundreds of
# mutants, each a rebuild).
#
#   MUTANTS_UNIT_SLICE  core | checkers | all (default all)
#   MUTANTS_UNIT_FILES  overrides the slice's files (space-separated globs)
#   MUTANTS_UNIT_SHARD  k/n: only shard k of n (cargo-mutants' --shard, 0-based k)
#   MUTANTS_UNIT_OUT    where mutants.out goes (default reports/out/mutants-unit)
#   MUTANTS_UNIT_ARGS   more cargo-mutants flags (e.g. --in-place in a scratch worktree)
#
# The pinned cargo-mutants is installed into .build/cargo on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

version=27.1.0
root=.build/cargo
bin=$root/bin/cargo-mutants
have=$("$bin" mutants --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$version" ]; then
  echo "==> cargo install cargo-mutants $version into $root (found: ${have:-none})"
  cargo install --locked --root "$root" cargo-mutants --version "$version"
else
  echo "==> cargo-mutants $have present ($bin)"
fi

slice=${MUTANTS_UNIT_SLICE:-all}
out=${MUTANTS_UNIT_OUT:-reports/out/mutants-unit}
shard_args=()
[ -n "${MUTANTS_UNIT_SHARD:-}" ] && shard_args=(--shard "$MUTANTS_UNIT_SHARD")
# shellcheck disable=SC2206
extra=(${MUTANTS_UNIT_ARGS:-})

# Per package: the files whose mutants count, and the tests that judge them.
core_files="system/src/coordinator/*.rs system/src/maintainer/*.rs"
core_tests=(--lib --test sim_findings)
checker_files="harness/src/checker/checkpoint_monotonic.rs harness/src/checker/faults_bit.rs harness/src/checker/finding.rs harness/src/checker/mod.rs harness/src/checker/no_broken_maintainer.rs harness/src/checker/no_data_loss.rs harness/src/checker/recovers.rs harness/src/checker/single_coordinator.rs harness/src/checker/workload_floor.rs harness/src/verifier.rs"
checker_tests=(--lib)

run() { # run NAME PACKAGE FILES TESTS...
  local name=$1 package=$2 files=$3
  shift 3
  local file_args=()
  for f in ${MUTANTS_UNIT_FILES:-$files}; do file_args+=(-f "$f"); done
  echo "==> cargo mutants -p $package ${file_args[*]} ${shard_args[*]} ${extra[*]} -o $out/$name -- $*"
  mkdir -p "$out/$name"
  local rc=0
  "$bin" mutants -p "$package" "${file_args[@]}" "${shard_args[@]}" "${extra[@]}" \
    --no-shuffle --timeout 300 -o "$out/$name" -- "$@" || rc=$?
  # cargo-mutants: 0 every mutant caught, 2 some missed, 3 some timed out, 4 the baseline failed.
  case $rc in
    0 | 2 | 3) ;;
    *) echo "mutants-unit: cargo mutants exited $rc for $name (4: the unmutated tests fail; see $out/$name/mutants.out)" >&2; return "$rc" ;;
  esac
  local d=$out/$name/mutants.out
  local caught missed timeout unviable
  caught=$(wc -l <"$d/caught.txt"); missed=$(wc -l <"$d/missed.txt")
  timeout=$(wc -l <"$d/timeout.txt"); unviable=$(wc -l <"$d/unviable.txt")
  echo "==> $name: caught $caught, missed $missed, timeout $timeout, unviable $unviable;" \
    "caught share $(( (caught + timeout) * 100 / (caught + timeout + missed > 0 ? caught + timeout + missed : 1) )) % (missed: $d/missed.txt)"
}

case $slice in
  core) run core cdc-system "$core_files" "${core_tests[@]}" ;;
  checkers) run checkers harness "$checker_files" "${checker_tests[@]}" ;;
  all)
    run core cdc-system "$core_files" "${core_tests[@]}"
    run checkers harness "$checker_files" "${checker_tests[@]}"
    ;;
  *) echo "mutants-unit: MUTANTS_UNIT_SLICE=$slice: give core, checkers or all" >&2; exit 2 ;;
esac
