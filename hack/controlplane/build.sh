#!/usr/bin/env bash
# Builds every binary of the local control plane from the Go modules pinned
# beside this script, into a cache outside the work tree, and prints the
# directory that holds them all. Beside the control plane it builds
# `kstatus`, Flux's status library as a command, for the tests. The Git
# server and the OCI registry of the plane (module servers/) are small
# programs of this repository, built the same way. Prometheus (module
# prometheus/), which the end-to-end tests read metrics from, is built
# with build tags of its own: see tags_for.
#
# Each wrapper module is built into its own directory keyed by a hash of its
# go.mod, go.sum and the Go version, so a second run builds nothing and a
# version bump rebuilds only the module that changed. Progress goes to
# stderr; the only line on stdout is the binary directory.
#
# Environment:
#   NODEPOOL_FANOUT_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/nodepool-fanout)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${NODEPOOL_FANOUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodepool-fanout}
mkdir -p "$cache/bin"
# One build at a time: a second one (a test that asks for the binaries
# while `make controlplane` runs) would share a module's temporary
# directory with the first, and could link an empty one into the plane.
exec 9>"$cache/bin/.build.lock"
flock 9
modules=(kubernetes source-controller helm-controller kustomize-controller notification-controller kwok kstatus servers oidc-provider
  prometheus)

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

log() { printf '[build] %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is not on PATH: install Go 1.26 or newer"; exit 1; }
go_version=$(go env GOVERSION)

# Every file of the wrapper module counts: go.mod and go.sum pin the
# versions, and a module may hold programs of its own, in its root (kstatus)
# or in subdirectories (servers/cmd/*). This script counts too, so a change
# of a module's flags below (ldflags_for, tags_for) rebuilds it.
module_key() {
  find "$here/$1" -type f | LC_ALL=C sort | xargs cat | cat - <(echo "$go_version") "$0" |
    sha256sum | cut -c1-16
}

# Version stamps, so that `kubectl version` and the API server's /version
# report the release rather than v0.0.0.
ldflags_for() {
  local module=$1 dir=$here/$1
  case $module in
    kubernetes)
      local v
      v=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
      local major=${v#v}; major=${major%%.*}
      local minor=${v#v"$major".}; minor=${minor%%.*}
      local flags=""
      for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
      done
      echo "-s -w$flags"
      ;;
    # Prometheus tags its Go module v0.3MM.P for its release 3.MM.P:
    # /api/v1/status/buildinfo and --version report the release.
    prometheus)
      local v minor
      v=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
      minor=${v#v0.}; minor=${minor%%.*}
      echo "-s -w -X github.com/prometheus/common/version.Version=$((minor / 100)).$((minor % 100)).${v##*.}"
      ;;
    *) echo "-s -w" ;;
  esac
}

# Build tags.
tags_for() {
  case $1 in
    # `remove_all_sd` leaves out Prometheus's optional service discoveries
    # (the cloud providers' SDKs, Kubernetes, Consul, …: about a third of
    # its packages) and keeps static and file-based targets, all that the
    # plane's scrape job uses. `builtinassets` stays off: the web UI's
    # assets are built with npm, and the HTTP API the tests query needs
    # none of them.
    prometheus) echo "remove_all_sd" ;;
    *) echo "" ;;
  esac
}

build_module() {
  local module=$1 key out
  key=$(module_key "$module")
  out=$cache/bin/$module-$key
  if [[ -f $out/.complete ]]; then
    log "$module: cached in $out"
    echo "$out"
    return
  fi
  local tools
  tools=$(cd "$here/$module" && go list tool | tr '\n' ' ')
  log "$module: building $tools"
  log "$module: a cold build of the whole control plane takes 20-40 minutes on 2 cores; progress every 200 packages"
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  local start=$SECONDS ldflags tags
  ldflags=$(ldflags_for "$module")
  tags=$(tags_for "$module")
  # `go build -v` names each package as it compiles it: count them to show progress.
  (cd "$here/$module" && go build -v -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp/" tool) 2>&1 |
    awk -v m="$module" '/^#|\.go:[0-9]+:/ {print > "/dev/stderr"; next}
                        {n++; if (n % 200 == 0) printf "[build] %s: %d packages compiled\n", m, n > "/dev/stderr"}'
  local status=${PIPESTATUS[0]}
  if [[ $status -ne 0 ]]; then
    log "$module: go build failed (exit $status)"
    exit "$status"
  fi
  # go names a binary after the last path element that is not a major
  # version suffix: etcd's main package is go.etcd.io/etcd/server/v3.
  if [[ -f $out.tmp/server ]]; then mv "$out.tmp/server" "$out.tmp/etcd"; fi
  touch "$out.tmp/.complete"
  rm -rf "$out"
  mv "$out.tmp" "$out"
  log "$module: built in $((SECONDS - start))s"
  echo "$out"
}

# One directory of links to every binary, keyed by all module keys together.
dirs=()
for m in "${modules[@]}"; do
  dirs+=("$(build_module "$m")")
done
combined=$cache/bin/all-$(printf '%s\n' "${dirs[@]}" | sha256sum | cut -c1-16)
if [[ ! -d $combined ]]; then
  mkdir -p "$combined.tmp"
  for d in "${dirs[@]}"; do
    for f in "$d"/*; do ln -sf "$f" "$combined.tmp/$(basename "$f")"; done
  done
  rm -rf "$combined"
  mv "$combined.tmp" "$combined"
fi
echo "$combined"
