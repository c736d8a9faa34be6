#!/usr/bin/env bash
# Builds cdc-chaos/system:<workspace version> from the binaries cargo built
# (target/debug by default; pass a profile directory to change it, and an
# image name as the second argument, e.g. `target/mutants/debug
# system-mutants` for the mutant matrix's build). Rebuilds only when a
# binary or the Dockerfile changed (label cdc-chaos.inputs-hash).
set -euo pipefail
cd "$(dirname "$0")/.."
source images/versions.env
profile_dir=${1:-target/debug}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name=${2:-system}
tag=$IMAGE_PREFIX/$name:$version
bins=(upstream cdc-server)
ctx=.build/$name-context
for b in "${bins[@]}"; do
  [ -x "$profile_dir/$b" ] || { echo "build-system-image: $profile_dir/$b is missing: run cargo build --workspace first" >&2; exit 1; }
done
hash=$( { sha256sum images/system/Dockerfile images/system/cdc-supervise; for b in "${bins[@]}"; do sha256sum "$profile_dir/$b"; done; docker image inspect -f '{{.Id}}' "$BASE_IMAGE"; } | sed 's/ .*//' | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{index .Config.Labels "cdc-chaos.inputs-hash"}}' "$tag" 2>/dev/null || true)" = "$hash" ]; then
  echo "    $tag up to date"
  exit 0
fi
rm -rf "$ctx" && mkdir -p "$ctx/bin"
cp images/system/Dockerfile images/system/cdc-supervise "$ctx/"
for b in "${bins[@]}"; do cp "$profile_dir/$b" "$ctx/bin/"; done
t=$SECONDS
mkdir -p .build && DOCKER_BUILDKIT=0 docker build --force-rm -q -t "$tag" --label "cdc-chaos.inputs-hash=$hash" "$ctx" >.build/build-system.log 2>&1 \
  || { tail -20 .build/build-system.log >&2; exit 1; }
echo "    built $tag in $((SECONDS - t)) s"
