#!/usr/bin/env bash
# `make setup`: bring this machine to the point where the chaos tier can run.
#
#   1. Debian packages the build and the engine need, installed only when missing.
#   2. actionlint (the workflows' linter `make test` runs), `go install`ed into
#      .build/bin when missing or of another version.
#   3. A Docker engine: left alone when one answers, started (dockerd) otherwise.
#   4. Pinned images, built only when missing or when their inputs changed:
#      the Debian base (from the mirror), etcd, Apache Kafka, Toxiproxy.
#
# On a host that is not Debian (GitHub's hosted Ubuntu runners) the same steps
# work: apt runs through passwordless sudo when not root, a package whose
# stand-in is present is not installed (see `stand_in`), and the base image is
# pulled from a registry (see step 4).
#
# Idempotent: a second run on a warm machine installs and rebuilds nothing.
# Every image carries a label cdc-chaos.inputs-hash; a build happens only when
# the hash of its inputs (files, pinned versions, parent image id) differs.
#
#   scripts/setup.sh              all three steps
#   scripts/setup.sh --packages   only step 1 (what `make fresh-check` runs in a
#                                 pristine container to prove the list)
# SETUP_WITHOUT="pkg ..." leaves those packages out of step 1, to show that the
# build fails without one (`make fresh-check FRESH_CHECK_WITHOUT=libprotobuf-dev`).
# SETUP_BASE_FROM_REGISTRY=1 pulls the base image from a registry on Debian too.
set -euo pipefail
only_packages=false
for arg in "$@"; do
  case "$arg" in
    --packages) only_packages=true ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) printf 'setup: error: unknown argument %q (known: --packages)\n' "$arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=../images/versions.env
source images/versions.env
build_dir=$root/.build
mkdir -p "$build_dir"
t0=$SECONDS

step() { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
# The host's distribution (debian here; ubuntu on GitHub's hosted runners).
os_id=$( (. /etc/os-release 2>/dev/null && printf '%s' "${ID:-unknown}") || echo unknown)

# --- 1. Debian packages -------------------------------------------------------
step "Debian packages"
# Each package with the reason it is needed (installed with --no-install-recommends,
# so a package that is only *recommended* by another must be listed here itself):
wanted=(
  build-essential      # gcc, g++, make: librdkafka's C build and the cc crate (present on a polyglot machine)
  pkg-config           # how librdkafka's and libz-sys's builds look for system libraries
  docker.io            # the engine (dockerd 20.10, API 1.41) the chaos tier and `make fresh-check` run in
  mmdebstrap           # builds the Debian base image from the mirror (images/base/build.sh)
  protobuf-compiler    # protoc: etcd-client's build script compiles etcd's .proto files
  libprotobuf-dev      # google/protobuf/*.proto, which those files import; protobuf-compiler only recommends it
  cmake                # rdkafka's cmake-build of its bundled librdkafka
  maven                # resolves Apache Kafka's jars from Maven Central (images/kafka/pom.xml)
  curl                 # setup's and the images' downloads and probes
  ca-certificates      # TLS to the package registries
  libcurl4-openssl-dev # only its header, which librdkafka 2.12.1 includes under `#ifdef WITH_OAUTHBEARER_OIDC` even when that is 0
  chromium             # the report's headless browser test (reports/tests/chromium.rs)
)
if [ -n "${SETUP_WITHOUT:-}" ]; then
  kept=()
  for p in "${wanted[@]}"; do
    case " $SETUP_WITHOUT " in *" $p "*) info "left out on purpose (SETUP_WITHOUT): $p" ;; *) kept+=("$p") ;; esac
  done
  wanted=("${kept[@]}")
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# A package that another install already provides on hosts that are not plain
# Debian, so it is not installed over it:
#   docker.io: Docker's own docker-ce (GitHub's Ubuntu runners): installing
#     docker.io there would remove docker-ce and containerd.io;
#   chromium:  a Chromium at /usr/bin/chromium outside apt (GitHub's runners
#     link a Chromium build there).
stand_in() {
  case "$1" in
    docker.io) installed docker-ce && echo "docker-ce" ;;
    chromium) [ -x /usr/bin/chromium ] && echo "/usr/bin/chromium" ;;
  esac
}
# The package's name in this host's apt: Ubuntu ships Chromium as a snap, and
# apt's `chromium-browser` installs it (the browser test then needs
# CHROMIUM=/snap/bin/chromium); every other name is the same on Ubuntu.
apt_name() { case "$os_id:$1" in ubuntu:chromium) echo chromium-browser ;; *) echo "$1" ;; esac; }
missing=()
for p in "${wanted[@]}"; do
  installed "$(apt_name "$p")" && continue
  if by=$(stand_in "$p") && [ -n "$by" ]; then
    info "$p: provided by $by"
    continue
  fi
  missing+=("$(apt_name "$p")")
done
if [ ${#missing[@]} -eq 0 ]; then
  info "all present: ${wanted[*]}"
else
  # As root, or through passwordless sudo (GitHub's runners run as `runner`).
  if [ "$(id -u)" = 0 ]; then as_root=(); elif sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    die "missing packages ${missing[*]} and not root; install them with: sudo apt-get install -y ${missing[*]}"
  fi
  info "installing: ${missing[*]}${as_root[*]:+ (through sudo)}"
  # openjdk-17-jre-headless (maven's JRE) fails in its postinst where the image
  # excludes man pages and this directory is missing (slim images, the base image).
  "${as_root[@]}" mkdir -p /usr/share/man/man1
  "${as_root[@]}" apt-get update -q >"$build_dir/apt-update.log" 2>&1 || { tail -20 "$build_dir/apt-update.log" >&2; die "apt-get update failed (log: $build_dir/apt-update.log)"; }
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >"$build_dir/apt-install.log" 2>&1 \
    || { tail -20 "$build_dir/apt-install.log" >&2; die "apt-get install failed (log: $build_dir/apt-install.log)"; }
fi
if $only_packages; then
  step "packages done in $((SECONDS - t0)) s"
  exit 0
fi
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || die "no Go toolchain found: Toxiproxy is built with 'go install'; install Go (>= 1.22)"
command -v go >/dev/null 2>&1 || export PATH=$PATH:/usr/local/go/bin
command -v cargo >/dev/null 2>&1 || die "no cargo found: install Rust (rustup) first"

# --- 2. actionlint --------------------------------------------------------------
step "actionlint"
actionlint_version=v1.7.12
actionlint_bin=$build_dir/bin/actionlint
have=$("$actionlint_bin" -version 2>/dev/null | head -1 || true)
if [ "$have" = "$actionlint_version" ]; then
  info "$actionlint_bin $have present"
else
  info "go install github.com/rhysd/actionlint/cmd/actionlint@$actionlint_version (found: ${have:-none})"
  t=$SECONDS
  # go install will not replace a file it did not build.
  rm -f "$actionlint_bin"
  GOBIN=$(dirname "$actionlint_bin") CGO_ENABLED=0 go install \
      "github.com/rhysd/actionlint/cmd/actionlint@$actionlint_version" \
    >"$build_dir/go-install-actionlint.log" 2>&1 || { tail -20 "$build_dir/go-install-actionlint.log" >&2; die "go install of actionlint failed (log: $build_dir/go-install-actionlint.log)"; }
  have=$("$actionlint_bin" -version | head -1)
  [ "$have" = "$actionlint_version" ] || die "go install built actionlint $have, not $actionlint_version"
  info "built actionlint $have in $((SECONDS - t)) s"
fi

# --- 3. Docker engine ---------------------------------------------------------
step "Docker engine"
if timeout 10 docker info >/dev/null 2>&1; then
  info "an engine answers ($(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}'))"
else
  info "no engine answers; starting dockerd (log: $build_dir/dockerd.log)"
  # setsid + redirections: the daemon must not hold this script's output open.
  setsid dockerd >"$build_dir/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    timeout 5 docker info >/dev/null 2>&1 && break
    sleep 1
  done
  timeout 10 docker info >/dev/null 2>&1 || { tail -20 "$build_dir/dockerd.log" >&2; die "dockerd did not answer within 60 s (log: $build_dir/dockerd.log)"; }
  info "engine up ($(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}'))"
fi

# --- 4. Images ----------------------------------------------------------------
label_of() { docker image inspect -f '{{index .Config.Labels "cdc-chaos.inputs-hash"}}' "$1" 2>/dev/null || true; }
image_id() { docker image inspect -f '{{.Id}}' "$1"; }
hash_inputs() { # hash_inputs FILE... -- STRING...
  { for a in "$@"; do if [ -f "$a" ]; then sha256sum "$a" | cut -c1-64; else printf '%s\n' "$a"; fi; done; } | sha256sum | cut -c1-16
}
# up_to_date TAG HASH: true when TAG exists with our label equal to HASH.
up_to_date() { [ "$(label_of "$1")" = "$2" ]; }
docker_build() { # docker_build TAG HASH CONTEXT [build args...]
  local tag=$1 hash=$2 ctx=$3; shift 3
  local log="$build_dir/build-${tag//[\/:]/_}.log"
  local t=$SECONDS
  info "building $tag (inputs $hash; log: $log)"
  DOCKER_BUILDKIT=0 docker build --force-rm -q -t "$tag" --label "cdc-chaos.inputs-hash=$hash" "$@" "$ctx" >"$log" 2>&1 \
    || { tail -30 "$log" >&2; die "building $tag failed (log: $log)"; }
  info "built $tag in $((SECONDS - t)) s"
}

step "Base image $BASE_IMAGE"
sources_file=/etc/apt/sources.list.d/debian.sources
[ -s "$sources_file" ] || sources_file=/etc/apt/sources.list
base_hash=$(hash_inputs images/base/build.sh "$DEBIAN_SUITE" "$sources_file")
existing=$(label_of "$BASE_IMAGE")
# Off Debian there is no Debian mirror for mmdebstrap: the official image is
# pulled from a registry instead (also on Debian with SETUP_BASE_FROM_REGISTRY=1);
# it carries no inputs-hash label, which the check below accepts as official.
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 \
    && { [ "$os_id" != debian ] || [ "${SETUP_BASE_FROM_REGISTRY:-0}" = 1 ]; }; then
  info "docker pull $BASE_IMAGE (host $os_id$( [ "$os_id" = debian ] && echo ', SETUP_BASE_FROM_REGISTRY=1'))"
  if timeout 300 docker pull -q "$BASE_IMAGE" >"$build_dir/pull-base.log" 2>&1; then
    info "pulled $BASE_IMAGE"
    existing=""
  else
    [ "$os_id" = debian ] || { tail -5 "$build_dir/pull-base.log" >&2; die "no registry answered for $BASE_IMAGE (log: $build_dir/pull-base.log) and this $os_id host has no Debian mirror to build it from; pull or load $BASE_IMAGE, then run make setup again"; }
    info "no registry answered (log: $build_dir/pull-base.log); building from the mirror"
  fi
fi
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && { [ -z "$existing" ] || [ "$existing" = "$base_hash" ]; }; then
  info "up to date ($( [ -z "$existing" ] && echo 'an official image' || echo "inputs $base_hash"))"
else
  info "building from the Debian mirror with mmdebstrap (about 30 s)"
  t=$SECONDS
  BASE_IMAGE=$BASE_IMAGE DEBIAN_SUITE=$DEBIAN_SUITE INPUTS_HASH=$base_hash images/base/build.sh \
    >"$build_dir/build-base.log" 2>&1 || { tail -30 "$build_dir/build-base.log" >&2; die "building $BASE_IMAGE failed (log: $build_dir/build-base.log)"; }
  info "built $BASE_IMAGE in $((SECONDS - t)) s"
fi
base_id=$(image_id "$BASE_IMAGE")

step "etcd image"
etcd_tag=$IMAGE_PREFIX/etcd:$ETCD_DEB_VERSION
etcd_hash=$(hash_inputs images/etcd/Dockerfile "$ETCD_DEB_VERSION" "$base_id")
if up_to_date "$etcd_tag" "$etcd_hash"; then info "$etcd_tag up to date"; else
  docker_build "$etcd_tag" "$etcd_hash" images/etcd --build-arg "ETCD_DEB_VERSION=$ETCD_DEB_VERSION"
fi

step "Toxiproxy image"
toxi_tag=$IMAGE_PREFIX/toxiproxy:${TOXIPROXY_VERSION#v}
toxi_ctx=$build_dir/toxiproxy-context
toxi_bin=$build_dir/toxiproxy/$TOXIPROXY_VERSION-v2/server
if [ ! -x "$toxi_bin" ]; then
  info "go install github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  t=$SECONDS
  # -X ...Version: so the API's /version answers the pinned version, not "git".
  GOBIN=$(dirname "$toxi_bin") CGO_ENABLED=0 go install \
      -ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION" \
      "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
    >"$build_dir/go-install-toxiproxy.log" 2>&1 || { tail -20 "$build_dir/go-install-toxiproxy.log" >&2; die "go install of Toxiproxy failed"; }
  info "built toxiproxy server in $((SECONDS - t)) s"
fi
toxi_hash=$(hash_inputs images/toxiproxy/Dockerfile "$TOXIPROXY_VERSION" "$toxi_bin" "$base_id")
if up_to_date "$toxi_tag" "$toxi_hash"; then info "$toxi_tag up to date"; else
  rm -rf "$toxi_ctx" && mkdir -p "$toxi_ctx/bin"
  cp images/toxiproxy/Dockerfile "$toxi_ctx/" && cp "$toxi_bin" "$toxi_ctx/bin/toxiproxy-server"
  docker_build "$toxi_tag" "$toxi_hash" "$toxi_ctx"
fi

step "Apache Kafka image"
kafka_tag=$IMAGE_PREFIX/kafka:$KAFKA_VERSION
kafka_ctx=$build_dir/kafka-context
kafka_lib=$build_dir/kafka/$KAFKA_VERSION/lib
kafka_hash=$(hash_inputs images/kafka/Dockerfile images/kafka/entrypoint.sh images/kafka/log4j2.properties images/kafka/pom.xml "$KAFKA_VERSION" "$KAFKA_SCALA" "$base_id")
if up_to_date "$kafka_tag" "$kafka_hash"; then info "$kafka_tag up to date"; else
  if [ ! -f "$kafka_lib/kafka_${KAFKA_SCALA}-${KAFKA_VERSION}.jar" ]; then
    info "resolving Kafka $KAFKA_VERSION jars from Maven Central (mvn dependency:copy-dependencies)"
    t=$SECONDS
    rm -rf "$kafka_lib"
    (cd images/kafka && mvn -B -q -Dkafka.version="$KAFKA_VERSION" -Dscala.binary="$KAFKA_SCALA" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$kafka_lib") \
      >"$build_dir/mvn-kafka.log" 2>&1 || { tail -30 "$build_dir/mvn-kafka.log" >&2; die "resolving Kafka jars failed"; }
    info "resolved $(ls "$kafka_lib" | wc -l) jars in $((SECONDS - t)) s"
  fi
  rm -rf "$kafka_ctx" && mkdir -p "$kafka_ctx"
  cp images/kafka/Dockerfile images/kafka/entrypoint.sh images/kafka/log4j2.properties "$kafka_ctx/"
  cp -r "$kafka_lib" "$kafka_ctx/lib"
  docker_build "$kafka_tag" "$kafka_hash" "$kafka_ctx" --build-arg "KAFKA_VERSION=$KAFKA_VERSION"
fi

step "setup done in $((SECONDS - t0)) s"
