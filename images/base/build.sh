#!/usr/bin/env bash
# Builds the Debian base image from the machine's configured Debian mirror with
# mmdebstrap and imports it as $BASE_IMAGE (debian:bookworm-slim), so ordinary
# Dockerfiles work here exactly as on a machine that can pull the official image.
# The mirror is read from the host's apt sources at run time; none is written here.
set -euo pipefail
: "${BASE_IMAGE:?}" "${DEBIAN_SUITE:?}" "${INPUTS_HASH:?}"

sources=""
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  if [ -s "$f" ]; then sources=$f; break; fi
done
[ -n "$sources" ] || { echo "no Debian apt sources found on the host (looked in /etc/apt/sources.list.d/debian.sources, /etc/apt/sources.list)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Only the main Debian suite entries: the image gets the same mirror as the host.
grep -v '^#' "$sources" > "$tmp/sources"

mmdebstrap --variant=apt --mode=root --quiet \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook='printf "#!/bin/sh\nexit 101\n" > "$1/usr/sbin/policy-rc.d"; chmod 755 "$1/usr/sbin/policy-rc.d"' \
  --customize-hook='printf "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true\"; };\nAPT::Update::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true\"; };\nDir::Cache::pkgcache \"\";\nDir::Cache::srcpkgcache \"\";\nAcquire::Languages \"none\";\n" > "$1/etc/apt/apt.conf.d/docker-clean"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
  "$DEBIAN_SUITE" - "$tmp/sources" \
  | docker import \
      -c 'CMD ["bash"]' \
      -c "LABEL cdc-chaos.inputs-hash=$INPUTS_HASH" \
      - "$BASE_IMAGE" >/dev/null
