#!/usr/bin/env bash
# `make demo`: the local control plane, three OpenYurt node pools of kwok
# nodes, the controller, and examples/ingress-per-pool.yaml fanned out to
# every pool. The cluster and the controller keep running afterwards; `make
# cluster-down` stops both.
#
# With SITES=1 it then fans examples/ingress-per-site.yaml out to the local
# plane's two site clusters, each registered in namespace `stores` as a
# cluster manager would: a kubeconfig Secret and a ClusterProfile.
#
# With GITOPS=1 the pools and the application are not applied by kubectl:
# they are committed, in the layout of examples/gitops/, to a repository on
# the local control plane's Git server, and Flux (a GitRepository and
# Kustomizations with health checks) delivers them.
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
if [[ ${GITOPS:-} != 1 ]]; then
  kubectl apply -f examples/pools.yaml
fi
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
# One team, whose chart sources live in flux-system: cross-namespace
# references allowed (a multi-tenant install keeps the default, true).
setsid target/debug/nodepool-fanout run --metrics-addr 127.0.0.1:16480 --no-cross-namespace-refs=false >target/local-cluster/logs/nodepool-fanout.log 2>&1 </dev/null &
echo $! >"$pidfile"

# The fleet console, acting as the kubeconfig's user; `make cluster-down`
# stops it with the rest.
console=${CONSOLE_ADDRESS:-127.0.0.1:8090}
say "Starting the fleet console on http://$console (log: target/local-cluster/logs/nodepool-fanout-ui.log)"
uipid=target/local-cluster/pids/nodepool-fanout-ui.pid
if [[ -f $uipid ]] && kill -0 "$(cat "$uipid")" 2>/dev/null; then
  kill "$(cat "$uipid")"
  sleep 1
fi
setsid target/debug/nodepool-fanout ui --address "$console" >target/local-cluster/logs/nodepool-fanout-ui.log 2>&1 </dev/null &
echo $! >"$uipid"

# The console as a team gets it: each person signs in with the plane's
# OpenID provider and reads and acts with their own RBAC. The provider's
# groups: alice in console-admins (may read and steer edge), bob in
# console-viewers (may read edge).
signin=${SIGNIN_CONSOLE_ADDRESS:-127.0.0.1:8091}
say "Starting the console that signs people in on http://$signin (log: target/local-cluster/logs/nodepool-fanout-ui-oidc.log)"
kubectl create namespace edge --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
kubectl apply --server-side -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: console-admins, namespace: edge }
rules:
  - { apiGroups: [apps.fanout.dev], resources: [nodepoolapplications], verbs: [get, list, watch, patch] }
  - { apiGroups: [helm.toolkit.fluxcd.io], resources: [helmreleases], verbs: [get, list, watch, patch] }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: console-admins, namespace: edge }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: console-admins }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: console-admins }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: console-viewers, namespace: edge }
rules:
  - { apiGroups: [apps.fanout.dev], resources: [nodepoolapplications], verbs: [get, list, watch] }
  - { apiGroups: [helm.toolkit.fluxcd.io], resources: [helmreleases], verbs: [get, list, watch] }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: console-viewers, namespace: edge }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: console-viewers }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: console-viewers }]
YAML
signinpid=target/local-cluster/pids/nodepool-fanout-ui-oidc.pid
if [[ -f $signinpid ]] && kill -0 "$(cat "$signinpid")" 2>/dev/null; then
  kill "$(cat "$signinpid")"
  sleep 1
fi
setsid target/debug/nodepool-fanout ui --address "$signin" --identity oidc \
  --oidc-issuer-url "$(cat target/local-cluster/oidc-issuer)" --oidc-client-id console \
  >target/local-cluster/logs/nodepool-fanout-ui-oidc.log 2>&1 </dev/null &
echo $! >"$signinpid"

if [[ ${GITOPS:-} == 1 ]]; then
  say "Committing examples/gitops/ (with the pools and the application) to the Git server"
  work=target/local-cluster/demo-fleet
  rm -rf "$work" target/local-cluster/git/fleet.git
  cp -r examples/gitops "$work"
  cp examples/pools.yaml "$work/apps/pools.yaml"
  cp examples/ingress-per-pool.yaml "$work/apps/edge/ingress.yaml"
  url="$(cat target/local-cluster/git-server)/fleet.git"
  sed -i "s|url: http://127.0.0.1:16455/fleet.git|url: $url|" "$work/clusters/local/flux-system.yaml"
  git init --quiet --bare -b main target/local-cluster/git/fleet.git
  (
    cd "$work"
    git init --quiet -b main
    git add --all
    git -c user.name=demo -c user.email=demo@nodepool-fanout.local commit --quiet -m "Fan the ingress gateway out to every pool"
    git push --quiet "$url" HEAD:main
  )
  say "Bootstrapping Flux from $url: kubectl apply -f clusters/local/flux-system.yaml"
  kubectl apply -f "$work/clusters/local/flux-system.yaml"
  say "Waiting for Flux to apply ./apps and judge its health (Kustomization apps, wait: true)"
  for _ in $(seq 1 150); do
    kubectl -n flux-system get kustomization apps >/dev/null 2>&1 && break
    sleep 2
  done
  kubectl -n flux-system wait --for=condition=Ready kustomization/apps --timeout=300s || true
  kubectl get gitrepositories,kustomizations -A
else
  say "Applying examples/ingress-per-pool.yaml"
  kubectl create namespace edge --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n edge apply -f examples/ingress-per-pool.yaml
fi

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
if [[ ${SITES:-} == 1 ]]; then
  say "Registering the site clusters site-1 and site-2 in namespace stores"
  kubectl create namespace stores --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  region=(north south)
  for n in 1 2; do
    site=site-$n
    kubectl -n stores create secret generic "$site-kubeconfig" \
      --from-file=value="target/local-cluster/sites/$site/kubeconfig" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    kubectl apply --server-side -f - >/dev/null <<EOF
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ClusterProfile
metadata:
  name: $site
  namespace: stores
  labels: { fleet: stores, region: ${region[n - 1]} }
spec:
  displayName: $site
  clusterManager: { name: local-plane }
EOF
    # What a cluster manager reports of the site's health.
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    kubectl -n stores patch clusterprofile "$site" --subresource=status --type=merge \
      -p "{\"status\":{\"conditions\":[{\"type\":\"ControlPlaneHealthy\",\"status\":\"True\",\"reason\":\"Healthy\",\"message\":\"demo\",\"lastTransitionTime\":\"$now\"}]}}" >/dev/null
  done
  kubectl -n stores get clusterprofiles -L region

  say "Applying examples/ingress-per-site.yaml in namespace stores"
  kubectl -n stores apply -f examples/ingress-per-site.yaml
  sites_ready=
  for _ in $(seq 1 120); do
    sites_ready=$(kubectl -n stores get npa ingress -o jsonpath='{.status.ready}' 2>/dev/null || true)
    [[ $sites_ready == 2/2 ]] && break
    sleep 2
  done
  kubectl -n stores get nodepoolapplications
  target/debug/nodepool-fanout get -n stores ingress

  say "Each site's gateway in its own cluster"
  for n in 1 2; do
    echo "site-$n:"
    KUBECONFIG=target/local-cluster/sites/site-$n/kubeconfig kubectl -n ingress get pods \
      -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,STATUS:.status.phase'
  done
  if [[ $sites_ready != 2/2 ]]; then
    echo "the site application did not reach READY 2/2 (it shows '$sites_ready'); see target/local-cluster/logs/" >&2
    exit 1
  fi
fi

cat <<EOF

The fleet console: http://$console (it acts as your kubeconfig's user)
As a team gets it: http://$signin (sign in as alice / alice-password, who
  may read and steer edge, or bob / bob-password, who may read it)

The cluster, the controller and the console keep running:
  export KUBECONFIG=$KUBECONFIG
  kubectl -n edge describe npa ingress
  make cluster-down    # stops everything
EOF
