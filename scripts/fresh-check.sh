#!/usr/bin/env bash
# `make fresh-check`: proves that `scripts/setup.sh --packages` installs every
# Debian package the build and the Docker-free tests need, on a machine nobody
# prepared. In a pristine container of the project's own base image
# (debian:bookworm-slim, built by `make setup` from the Debian mirror) it runs:
#
#   1. scripts/setup.sh --packages          (apt, from an empty package list)
#   2. cargo build --workspace --all-targets --locked
#   3. the Docker-free tests (`make unit`)
#
# The host's Rust toolchain is mounted read-only (rustup's toolchains and the
# cargo proxies); crates come from the registry into an empty CARGO_HOME, so a
# crate missing from Cargo.lock or a package missing from setup fails here.
# Package traffic passes a TLS proxy whose CA the host trusts and the bare image
# does not: the host's CA bundle is handed in read-only (CARGO_HTTP_CAINFO).
#
# FRESH_CHECK_WITHOUT="pkg ..." leaves packages out of step 1 (SETUP_WITHOUT),
# to show that the check fails without them. The container is removed on
# success, failure, Ctrl-C and SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source images/versions.env
t0=$SECONDS
step() { printf '==> %s\n' "$*"; }
die() { printf 'fresh-check: error: %s\n' "$*" >&2; exit 1; }

docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || die "no $BASE_IMAGE image: run \`make setup\` first"
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$rustup_home/toolchains" ] || die "no rustup toolchains in $rustup_home: install Rust with rustup"
[ -x "$cargo_bin/cargo" ] || die "no cargo in $cargo_bin"
ca=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  [ -s "$f" ] && { ca=$f; break; }
done
[ -n "$ca" ] || die "no CA bundle found on the host (looked for /etc/ssl/certs/ca-certificates.crt)"

# The working tree as git sees it: tracked files plus untracked, unignored ones.
src=$(mktemp -d /tmp/cdc-chaos-fresh.XXXXXX)
name=cdcchaos-fresh-check-$$
cleanup() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$src"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | xargs -0 cp --parents -t "$src"
step "pristine $BASE_IMAGE container $name (source $(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo '+changes'))"
[ -n "${FRESH_CHECK_WITHOUT:-}" ] && step "left out of the package list on purpose: $FRESH_CHECK_WITHOUT"

# Inside: copy the tree (setup writes .build/), then the three steps, each timed.
inner='
set -euo pipefail
cp -a /src /work && cd /work
t=$SECONDS
echo "==> [fresh] scripts/setup.sh --packages"
scripts/setup.sh --packages
echo "    [fresh] packages: $((SECONDS - t)) s"; t=$SECONDS
echo "==> [fresh] cargo build --workspace --all-targets --locked"
cargo build --workspace --all-targets --locked
echo "    [fresh] build: $((SECONDS - t)) s"; t=$SECONDS
echo "==> [fresh] Docker-free tests (make unit)"
make unit
echo "    [fresh] tests: $((SECONDS - t)) s"
'
docker run --rm --init --name "$name" \
  --label cdc-chaos.managed=true --label cdc-chaos.component=fresh-check \
  --shm-size=512m \
  -v "$src:/src:ro" \
  -v "$rustup_home:/opt/rustup:ro" \
  -v "$cargo_bin:/opt/cargo/bin:ro" \
  -v "$ca:/etc/ssl/host-ca.crt:ro" \
  -e RUSTUP_HOME=/opt/rustup -e RUSTUP_AUTO_INSTALL=0 -e CARGO_HOME=/root/.cargo \
  -e PATH=/opt/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  -e CARGO_HTTP_CAINFO=/etc/ssl/host-ca.crt -e SSL_CERT_FILE=/etc/ssl/host-ca.crt \
  -e CARGO_TERM_COLOR=never -e CARGO_INCREMENTAL=0 \
  -e SETUP_WITHOUT="${FRESH_CHECK_WITHOUT:-}" \
  "$BASE_IMAGE" bash -c "$inner" \
  || die "the fresh path failed (above); a package missing from scripts/setup.sh is the usual cause"
step "fresh-check passed in $((SECONDS - t0)) s"
