#!/usr/bin/env bash
# Generates the CustomResourceDefinitions that the local control plane
# installs but that no pinned module ships as YAML, into a cache outside the
# work tree, and prints the directory that holds them. Today that is
# SuperEdge's NodeUnit in site.superedge.io/v1alpha2: the YAML in the SuperEdge
# module (pkg/site-manager/crd/) declares only v1alpha1, and site-manager
# installs v1alpha2 at start-up from a Go string template that needs its
# conversion webhook. So, as SuperEdge's own
# hack/generate-site-crd-manifests.sh does, controller-gen generates it from
# the module's v1alpha2 Go types.
#
# controller-gen is built from the wrapper module controller-gen/ into a
# directory keyed by a hash of its go.mod, go.sum and the Go version; the CRDs
# go into a directory keyed by that, by crds/go.mod and go.sum (the SuperEdge
# version) and by this script, so a second run builds and generates nothing.
# This is not part of build.sh because build.sh's content is in the cache key
# of every control-plane binary: an edit there rebuilds them all. Progress
# goes to stderr; the only line on stdout is the CRD directory.
#
# Environment:
#   NODEPOOL_FANOUT_CACHE  cache root (default: ${XDG_CACHE_HOME:-~/.cache}/nodepool-fanout)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${NODEPOOL_FANOUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodepool-fanout}

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off

log() { printf '[crds] %s\n' "$*" >&2; }

die() {
  log "$*"
  exit 1
}

command -v go >/dev/null || die "go is not on PATH: install Go 1.26 or newer"
go_version=$(go env GOVERSION)

hash16() { sha256sum | cut -c1-16; }

controller_gen_key=$(cat "$here/controller-gen/go.mod" "$here/controller-gen/go.sum" <(echo "$go_version") | hash16)
crds_key=$(cat <(echo "$controller_gen_key") "$here/crds/go.mod" "$here/crds/go.sum" "$here/generate-crds.sh" | hash16)
out=$cache/crds/generated-$crds_key

if [[ -f $out/.complete ]]; then
  log "cached in $out"
  echo "$out"
  exit 0
fi

# Prints the path of the controller-gen binary, building it first if needed.
controller_gen() {
  local bin=$cache/bin/controller-gen-$controller_gen_key
  if [[ -f $bin/.complete ]]; then
    log "controller-gen: cached in $bin"
    echo "$bin/controller-gen"
    return
  fi
  log "controller-gen: building $(cd "$here/controller-gen" && go list -m -f '{{.Version}}' sigs.k8s.io/controller-tools) (a few minutes with a cold Go build cache)"
  local start=$SECONDS
  rm -rf "$bin.tmp"
  mkdir -p "$bin.tmp"
  (cd "$here/controller-gen" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp/" tool) ||
    die "controller-gen: go build failed in $here/controller-gen"
  touch "$bin.tmp/.complete"
  rm -rf "$bin"
  mv "$bin.tmp" "$bin"
  log "controller-gen: built in $((SECONDS - start))s"
  echo "$bin/controller-gen"
}

cg=$(controller_gen)

# The module directory in the module cache, as hack/cluster.sh finds the
# modules whose CRDs it applies as shipped.
superedge=$(cd "$here/crds" && go mod download -json github.com/superedge/superedge |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -n $superedge && -d $superedge ]] || die "could not locate the SuperEdge module pinned in $here/crds/go.mod"

log "generating SuperEdge's NodeUnit CRD (site.superedge.io/v1alpha2) from $superedge"
start=$SECONDS
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
# Run inside the SuperEdge module, so that its Go types are type-checked
# against the Kubernetes API modules its own go.mod and go.sum pin. Go only
# reads there (-mod=readonly); the output goes to the cache. Only v1alpha2's
# package is given: v1alpha1 names its fields differently (setnode,
# readyrate) and needs site-manager's conversion webhook to be served beside
# it, which this cluster does not run. The types carry every marker the CRD
# needs (scope Cluster, short name nu, storage version, status subresource,
# printer columns), so nothing is post-processed.
(cd "$superedge" && "$cg" crd paths=./pkg/site-manager/apis/site.superedge.io/v1alpha2 output:crd:dir="$out.tmp") ||
  die "controller-gen failed on $superedge/pkg/site-manager/apis/site.superedge.io/v1alpha2"
# The package also holds SuperEdge's own NodeGroup, whose short name `ng`
# would clash with KubeEdge's NodeGroup, and which nothing here uses.
rm -f "$out.tmp/site.superedge.io_nodegroups.yaml"

# The package declares three different +groupName markers (doc.go,
# register.go, groupversion_info.go), and controller-gen uses the first file's:
# make sure that still gives the group SuperEdge's clients use.
nodeunit=$out.tmp/site.superedge.io_nodeunits.yaml
if ! { [[ -f $nodeunit ]] && grep -qx '  name: nodeunits.site.superedge.io' "$nodeunit" &&
  grep -qx '    name: v1alpha2' "$nodeunit" && grep -qx '    storage: true' "$nodeunit"; }; then
  die "controller-gen did not generate nodeunits.site.superedge.io in v1alpha2; see $out.tmp"
fi

touch "$out.tmp/.complete"
rm -rf "$out"
mv "$out.tmp" "$out"
log "generated in $((SECONDS - start))s into $out"
echo "$out"
