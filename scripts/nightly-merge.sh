#!/usr/bin/env bash
# The nightly's last step, the same here (`make nightly-local`, through
# `make nightly-merge`) and in CI (.github/workflows/nightly-chaos.yml):
#
#   1. chaos report $NIGHTLY_DIR/shard-* [--history <earlier nights>]
#        --out $NIGHTLY_DIR/merged
#      one report.html (with the trend section once there is history), one
#      junit.xml and the merged run set; refused, with nothing written, when
#      the shards' manifests differ, a shard is missing or a run is in two;
#   2. the merged set (its manifest.json and run.json files) joins the history
#      as $NIGHTLY_DIR/history/<started_at>-<commit>, which keeps the newest
#      $NIGHTLY_KEEP nights (default 30).
#
# CI restores $NIGHTLY_DIR/history from the previous night's cache before this
# and saves it after (see the workflow).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${NIGHTLY_DIR:-reports/out/nightly}
keep=${NIGHTLY_KEEP:-30}
chaos=${CHAOS:-./target/debug/chaos}
die() { printf 'nightly-merge: error: %s\n' "$*" >&2; exit 1; }

[ -x "$chaos" ] || die "$chaos is missing: build it with cargo build -p harness --bin chaos (make nightly-merge does)"
shards=()
for d in "$dir"/shard-*; do [ -d "$d" ] && shards+=("$d"); done
[ ${#shards[@]} -gt 0 ] || die "no shard directories $dir/shard-*: run make nightly-shard SHARD=k/N (or download the shards' artifacts there)"
history=()
for d in "$dir"/history/*; do [ -f "$d/manifest.json" ] && history+=("$d"); done

rm -rf "$dir/merged"
args=(report "${shards[@]}" --out "$dir/merged")
[ ${#history[@]} -eq 0 ] || args+=(--history "${history[@]}")
printf '==> chaos report: %d shard(s), %d earlier night(s)\n' "${#shards[@]}" "${#history[@]}"
"$chaos" "${args[@]}"

# Named by the merged set's start and commit, so a re-run of the merge replaces
# its night (chaos report also drops that night from --history on a re-run).
field() { sed -n "s/^  \"$1\": \"\(.*\)\",\$/\1/p" "$dir/merged/manifest.json" | head -1; }
started=$(field started_at) commit=$(field commit)
[ -n "$started" ] && [ -n "$commit" ] || die "$dir/merged/manifest.json has no started_at or commit"
night=$dir/history/${started//:/-}-$commit
rm -rf "$night" && mkdir -p "$night"
night=$(cd "$night" && pwd) # the copy below runs inside the merged set
(cd "$dir/merged" && find . \( -name manifest.json -o -name run.json \) -print0 | xargs -0 cp --parents -t "$night")
printf '==> history: %s added\n' "$night"
mapfile -t old < <(for d in "$dir"/history/*; do [ -d "$d" ] && printf '%s\n' "$d"; done | sort | head -n "-$keep")
for d in "${old[@]}"; do
  rm -rf "$d"
  printf '    dropped %s (only the newest %s nights are kept)\n' "$d" "$keep"
done
printf '==> report: %s/merged/report.html, JUnit: %s/merged/junit.xml\n' "$dir" "$dir"
