#!/usr/bin/env bash
# `make demo`: the local control plane, three OpenYurt node pools of kwok
# nodes, the controller, and examples/ingress-per-pool.yaml fanned out to
# every pool. The cluster and the controller keep running afterwards; `make
# cluster-down` stops both.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

hack/cluster.sh up >/dev/null
export KUBECONFIG=$repo/target/local-cluster/kubeconfig
PATH=$(hack/controlplane/build.sh 2>/dev/null):$PATH
export PATH

say "Building nodepool-fanout"
cargo build --quiet --locked --bin nodepool-fanout

say "Installing the NodePoolApplication CRD"
kubectl apply --server-side -k crds/
kubectl wait --for=condition=Established crd/nodepoolapplications.apps.fanout.dev --timeout=30s >/dev/null

say "Creating three node pools with two kwok nodes each"
kubectl apply -f examples/pools.yaml
for pool in hangzhou shanghai beijing; do
  for i in 0 1; do
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $pool-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $pool-node-$i
    kubernetes.io/os: linux
    type: kwok
    apps.openyurt.io/nodepool: $pool
EOF
  done
done
kubectl get nodes -L apps.openyurt.io/nodepool

say "Starting the controller (log: target/local-cluster/logs/nodepool-fanout.log)"
pidfile=target/local-cluster/pids/nodepool-fanout.pid
if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  kill "$(cat "$pidfile")"
  sleep 1
fi
setsid target/debug/nodepool-fanout run --metrics-addr 127.0.0.1:16480 >target/local-cluster/logs/nodepool-fanout.log 2>&1 </dev/null &
echo $! >"$pidfile"

say "Applying examples/ingress-per-pool.yaml"
kubectl create namespace edge --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n edge apply -f examples/ingress-per-pool.yaml

say "Waiting for every pool's release to be Ready"
for _ in $(seq 1 120); do
  ready=$(kubectl -n edge get npa ingress -o jsonpath='{.status.ready}' 2>/dev/null || true)
  [[ $ready == 3/3 ]] && break
  sleep 2
done
kubectl -n edge get nodepoolapplications
kubectl -n edge get helmreleases -L apps.fanout.dev/pool

say "Each pool's pods on its own nodes"
kubectl -n edge get pods -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,STATUS:.status.phase'

if [[ $ready != 3/3 ]]; then
  echo "the application did not reach READY 3/3 (it shows '$ready'); see target/local-cluster/logs/" >&2
  exit 1
fi
cat <<EOF

The cluster and the controller keep running:
  export KUBECONFIG=$KUBECONFIG
  kubectl -n edge describe npa ingress
  make cluster-down    # stops everything
EOF
