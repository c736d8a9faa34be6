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
# The test targets go to every cargo call (--cargo-arg), so a mutant's build
# compiles only them, not every integration test and binary of the package.
core_targets=(--lib --test=sim_findings)
core_skips=()
checker_files="harness/src/checker/checkpoint_monotonic.rs harness/src/checker/faults_bit.rs harness/src/checker/finding.rs harness/src/checker/mod.rs harness/src/checker/no_broken_maintainer.rs harness/src/checker/no_data_loss.rs harness/src/checker/operations.rs harness/src/checker/recovers.rs harness/src/checker/single_coordinator.rs harness/src/checker/workload_floor.rs harness/src/verifier.rs"
checker_targets=(--lib)
# The one slow lib test (about 20 s) validates exported simulator plans and
# runs no checker; every other harness lib test takes under a second.
checker_skips=(-- --skip swarm::export::tests::every_exported_plan_validates)

run() { # run NAME PACKAGE FILES TARGETS-ARRAY SKIPS-ARRAY
  local name=$1 package=$2 files=$3
  local -n targets=$4 skips=$5
  local file_args=() target_args=()
  for f in ${MUTANTS_UNIT_FILES:-$files}; do file_args+=(-f "$f"); done
  for t in "${targets[@]}"; do target_args+=("--cargo-arg=$t"); done
  echo "==> cargo mutants -p $package ${file_args[*]} ${target_args[*]} ${shard_args[*]} ${extra[*]} -o $out/$name -- ${skips[*]}"
  mkdir -p "$out/$name"
  local rc=0
  "$bin" mutants -p "$package" "${file_args[@]}" "${target_args[@]}" "${shard_args[@]}" "${extra[@]}" \
    --no-shuffle --timeout 300 -o "$out/$name" -- "${skips[@]}" || rc=$?
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
  explain "$d/missed.txt"
}

# Survivors with a reason are listed in scripts/mutants-unit-survivors.txt,
# one per line as `file: mutation in function  # reason` (cargo-mutants'
# name without its line:col, so the list outlives edits elsewhere in the
# file). Prints which survivors of this run have no reason yet; any such
# survivor makes the script exit 1 (after every slice ran), so a nightly
# run shows a rule that lost its test.
known=scripts/mutants-unit-survivors.txt
explain() {
  local missed=$1 explained=0 unexplained=()
  while IFS= read -r m; do
    [ -n "$m" ] || continue
    local key
    key=$(sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /' <<<"$m")
    if grep -qF -- "$key  #" "$known"; then
      explained=$((explained + 1))
    else
      unexplained+=("$m")
    fi
  done <"$missed"
  echo "==> survivors with a reason in $known: $explained; without: ${#unexplained[@]}"
  for m in "${unexplained[@]}"; do echo "    no reason yet: $m"; done
  unexplained_total=$((unexplained_total + ${#unexplained[@]}))
}
unexplained_total=0

case $slice in
  core) run core cdc-system "$core_files" core_targets core_skips ;;
  checkers) run checkers harness "$checker_files" checker_targets checker_skips ;;
  all)
    run core cdc-system "$core_files" core_targets core_skips
    run checkers harness "$checker_files" checker_targets checker_skips
    ;;
  *) echo "mutants-unit: MUTANTS_UNIT_SLICE=$slice: give core, checkers or all" >&2; exit 2 ;;
esac
if [ "$unexplained_total" -gt 0 ]; then
  echo "mutants-unit: $unexplained_total survivor(s) without a reason: kill each with a test beside the rule, or list it with its reason in $known" >&2
  exit 1
fi
