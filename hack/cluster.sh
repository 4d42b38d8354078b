#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, Flux source-controller and helm-controller, and a Helm
# chart repository of charts-fixtures/, all on 127.0.0.1.
#
#   hack/cluster.sh up      start it (a no-op when it already runs)
#   hack/cluster.sh down    stop it and forget its state
#   hack/cluster.sh status  exit 0 when every component runs
#   hack/cluster.sh stop C  stop one component (an outage, for fault tests)
#   hack/cluster.sh start C start it again and wait until it serves
#
# The binaries are built from the Go modules under hack/controlplane/ by
# hack/controlplane/build.sh (cached outside the work tree). State, the admin
# kubeconfig and every component's log live under target/local-cluster/.
#
# Environment:
#   LOCAL_CLUSTER_DIR        state directory (default: <repo>/target/local-cluster)
#   LOCAL_CLUSTER_PORT_BASE  first of the 13 loopback ports it uses (default: 16440)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${LOCAL_CLUSTER_DIR:-$repo/target/local-cluster}
base=${LOCAL_CLUSTER_PORT_BASE:-16440}
host=127.0.0.1

etcd_port=$((base + 1))
etcd_peer_port=$((base + 2))
apiserver_port=$((base + 3))
kcm_port=$((base + 4))
scheduler_port=$((base + 5))
storage_port=$((base + 6))
sc_metrics_port=$((base + 7))
sc_health_port=$((base + 8))
hc_metrics_port=$((base + 9))
hc_health_port=$((base + 10))
charts_port=$((base + 11))
kwok_port=$((base + 12))

components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok source-controller helm-controller chart-repository)

kubeconfig=$dir/kubeconfig
pki=$dir/pki
logs=$dir/logs
pids=$dir/pids

log() { printf '[cluster] %s\n' "$*" >&2; }

die() {
  log "$*"
  exit 1
}

# The last lines of a component's log, so a failure explains itself.
log_tail() {
  local name=$1
  if [[ -f $logs/$name.log ]]; then
    printf '\n----- last 40 lines of %s -----\n' "$logs/$name.log" >&2
    tail -n 40 "$logs/$name.log" >&2
    printf -- '----- end of %s -----\n\n' "$name" >&2
  fi
}

running() {
  local pidfile=$pids/$1.pid
  [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

all_running() {
  local c
  for c in "${components[@]}"; do running "$c" || return 1; done
  apiserver_ready
}

apiserver_ready() {
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://$host:$apiserver_port/readyz" >/dev/null
}

# Starts a component in its own session, so that it outlives this script and
# `down` can stop its whole process group.
start() {
  local name=$1
  shift
  log "starting $name"
  # Appended: a component restarted after an outage keeps its earlier log.
  setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$pids/$name.pid"
}

# Waits until a command succeeds, failing with the component's log tail.
wait_for() {
  local name=$1 timeout=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! running "$name"; then
      log_tail "$name"
      die "$name exited during start-up; its log is $logs/$name.log"
    fi
    if ((SECONDS > deadline)); then
      log_tail "$name"
      die "$name was not ready after ${timeout}s; its log is $logs/$name.log"
    fi
    sleep 0.5
  done
}

make_pki() {
  [[ -f $pki/admin.crt ]] && return
  log "creating certificates in $pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=nodepool-fanout-local-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    # The admin identity: a client certificate in the group system:masters.
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
      -subj "/O=system:masters/CN=admin" 2>/dev/null
    # Extensions make it an X.509 v3 certificate, which rustls requires.
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile admin.ext -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

write_kubeconfig() {
  cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://$host:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
EOF
}

# Module directories, for CRDs and kwok's stages: read from the module cache
# that the build filled, never from copies in this repo.
module_dir() {
  (cd "$repo/hack/controlplane/$1" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$2" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

install_crds() {
  local sc hc oy
  sc=$(module_dir source-controller github.com/fluxcd/source-controller)
  hc=$(module_dir helm-controller github.com/fluxcd/helm-controller)
  oy=$(module_dir crds github.com/openyurtio/openyurt)
  [[ -n $sc && -n $hc && -n $oy ]] || die "could not locate the Flux and OpenYurt modules for their CRDs"
  log "installing the CRDs of Flux (source-controller, helm-controller) and OpenYurt (NodePool)"
  kubectl apply --server-side -f "$sc/config/crd/bases/" -f "$hc/config/crd/bases/" \
    -f "$oy/charts/yurt-manager/crds/apps.openyurt.io_nodepools.yaml" >/dev/null
  # OpenYurt's CRD converts between versions through yurt-manager's webhook,
  # which this cluster does not run: without it every request in a
  # non-storage version fails. The versions share their core fields, so
  # the API server's own `None` conversion (apiVersion rewrite) serves
  # v1beta1 and v1beta2 alike.
  kubectl patch crd nodepools.apps.openyurt.io --type=json \
    -p '[{"op":"replace","path":"/spec/conversion","value":{"strategy":"None"}}]' >/dev/null
  kubectl wait --for=condition=Established --timeout=60s \
    crd/helmreleases.helm.toolkit.fluxcd.io crd/helmrepositories.source.toolkit.fluxcd.io \
    crd/helmcharts.source.toolkit.fluxcd.io crd/nodepools.apps.openyurt.io >/dev/null
}

kwok_stages() {
  local kw
  kw=$(module_dir kwok sigs.k8s.io/kwok)
  [[ -n $kw ]] || die "could not locate the kwok module for its stages"
  local s=$kw/kustomize/stage
  # kwok v0.8 has no built-in stages: nodes turn Ready and keep a lease,
  # pods turn Ready, Jobs' pods complete, deleted pods go away.
  echo "--config=$s/node/fast/node-initialize.yaml --config=$s/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"
  echo "--config=$s/pod/fast/pod-ready.yaml --config=$s/pod/fast/pod-complete.yaml --config=$s/pod/fast/pod-delete.yaml"
}

# Packages every chart of charts-fixtures/ and indexes the repository; the
# index's URLs point at the loopback server below.
package_charts() {
  local out=$dir/charts
  rm -rf "$out"
  mkdir -p "$out"
  local chart version
  for chart in "$repo"/charts-fixtures/*/; do
    helm package "$chart" --destination "$out" >/dev/null
    # Further versions of the same chart, for version resolution and
    # upgrades: one per line of the chart's fixture-versions file.
    if [[ -f $chart/fixture-versions ]]; then
      while read -r version; do
        [[ -n $version ]] && helm package "$chart" --version "$version" --destination "$out" >/dev/null
      done <"$chart/fixture-versions"
    fi
  done
  helm repo index "$out" --url "http://$host:$charts_port" >/dev/null
  log "packaged $(find "$out" -name '*.tgz' | wc -l) fixture charts"
}

create_flux_objects() {
  kubectl apply --server-side -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: fixtures
  namespace: flux-system
spec:
  url: http://$host:$charts_port
  interval: 1m
EOF
}

# Starts one component and, for etcd and kube-apiserver, which the rest
# need, waits until it serves. `up` starts them all; `start` one again after
# `stop` (the fault tests' outages).
launch() {
  case $1 in
  etcd)
    # fsync off: this etcd holds only disposable test state.
    start etcd etcd --name=local --data-dir="$dir/etcd" --unsafe-no-fsync \
      --listen-client-urls="http://$host:$etcd_port" --advertise-client-urls="http://$host:$etcd_port" \
      --listen-peer-urls="http://$host:$etcd_peer_port" --initial-advertise-peer-urls="http://$host:$etcd_peer_port" \
      --initial-cluster="local=http://$host:$etcd_peer_port" --listen-metrics-urls="" --log-level=warn
    wait_for etcd 60 curl -sf "http://$host:$etcd_port/health"
    ;;
  kube-apiserver)
    start kube-apiserver kube-apiserver \
      --etcd-servers="http://$host:$etcd_port" \
      --bind-address=$host --advertise-address=$host --secure-port=$apiserver_port \
      --cert-dir="$dir/cert-dir" \
      --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
      --client-ca-file="$pki/ca.crt" \
      --authorization-mode=RBAC \
      --service-account-issuer=https://kubernetes.default.svc \
      --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
      --service-cluster-ip-range=10.96.0.0/16 \
      --disable-admission-plugins=ServiceAccount \
      --allow-privileged=true \
      --endpoint-reconciler-type=none
    wait_for kube-apiserver 120 apiserver_ready
    ;;
  kube-controller-manager)
    start kube-controller-manager kube-controller-manager \
      --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
      --leader-elect=false --bind-address=$host --secure-port=$kcm_port \
      --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
      --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
      --controllers='*'
    ;;
  kube-scheduler)
    start kube-scheduler kube-scheduler \
      --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
      --leader-elect=false --bind-address=$host --secure-port=$scheduler_port
    ;;
  kwok)
    # shellcheck disable=SC2046 # one word per flag
    start kwok kwok --kubeconfig="$kubeconfig" \
      --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
      --node-lease-duration-seconds=40 --server-address="$host:$kwok_port" \
      --cidr=10.244.0.0/16 --node-ip=$host \
      $(kwok_stages)
    ;;
  chart-repository)
    start chart-repository python3 -m http.server "$charts_port" --bind $host --directory "$dir/charts"
    ;;
  # Flux's controllers run out of cluster: they read KUBECONFIG and need
  # distinct metrics and health ports.
  source-controller)
    start source-controller env RUNTIME_NAMESPACE=flux-system source-controller \
      --enable-leader-election=false --watch-all-namespaces=true \
      --storage-path="$dir/storage" --storage-addr="$host:$storage_port" --storage-adv-addr="$host:$storage_port" \
      --metrics-addr="$host:$sc_metrics_port" --health-addr="$host:$sc_health_port" --log-level=info
    ;;
  helm-controller)
    start helm-controller env RUNTIME_NAMESPACE=flux-system helm-controller \
      --enable-leader-election=false --watch-all-namespaces=true --concurrent=8 \
      --metrics-addr="$host:$hc_metrics_port" --health-addr="$host:$hc_health_port" --log-level=info
    ;;
  *) die "no component $1; the components are: ${components[*]}" ;;
  esac
}

# The readiness check of one component, for `start`.
component_ready() {
  case $1 in
  etcd) curl -sf "http://$host:$etcd_port/health" ;;
  kube-apiserver) apiserver_ready ;;
  kube-controller-manager) curl -skf "https://$host:$kcm_port/healthz" ;;
  kube-scheduler) curl -skf "https://$host:$scheduler_port/healthz" ;;
  kwok) curl -sf "http://$host:$kwok_port/healthz" ;;
  chart-repository) curl -sf "http://$host:$charts_port/index.yaml" ;;
  source-controller) curl -sf "http://$host:$sc_health_port/readyz" ;;
  helm-controller) curl -sf "http://$host:$hc_health_port/readyz" ;;
  esac
}

up() {
  mkdir -p "$dir"
  export KUBECONFIG=$kubeconfig
  local bin
  bin=$("$repo/hack/controlplane/build.sh")
  export PATH=$bin:$PATH
  if all_running; then
    log "already running"
    echo "export KUBECONFIG=$kubeconfig"
    return
  fi
  if ls "$pids"/*.pid >/dev/null 2>&1; then # a partial cluster
    log "some components are not running: restarting the whole cluster"
    down
  fi
  local start_time=$SECONDS
  mkdir -p "$logs" "$pids" "$dir/etcd" "$dir/storage" "$dir/cert-dir"
  rm -f "$logs"/*.log
  make_pki
  write_kubeconfig

  launch etcd
  launch kube-apiserver
  launch kube-controller-manager
  launch kube-scheduler
  launch kwok
  install_crds
  package_charts
  launch chart-repository
  create_flux_objects
  launch source-controller
  launch helm-controller

  local c
  for c in chart-repository kube-controller-manager kube-scheduler source-controller helm-controller kwok; do
    wait_for "$c" 60 component_ready "$c"
  done
  wait_for source-controller 120 kubectl -n flux-system wait --for=condition=Ready --timeout=5s helmrepository/fixtures

  log "up in $((SECONDS - start_time))s; logs in $logs"
  echo "export KUBECONFIG=$kubeconfig"
}

# Stops one component (its whole process group), leaving the rest running.
stop_component() {
  local c=$1 pidfile pid
  pidfile=$pids/$c.pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

down() {
  local i pidfile
  for ((i = ${#components[@]} - 1; i >= 0; i--)); do
    # Each component leads its own process group (setsid): stop it whole.
    stop_component "${components[i]}"
  done
  # Whatever else was started beside the cluster (the demo's controller).
  for pidfile in "$pids"/*.pid; do
    [[ -f $pidfile ]] || continue
    kill -TERM -- "-$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
  # Disposable state goes; certificates stay so a kubeconfig stays valid.
  rm -rf "$dir/etcd" "$dir/storage" "$dir/charts"
  log "stopped"
}

status() {
  export KUBECONFIG=$kubeconfig
  local c ok=0
  for c in "${components[@]}"; do
    if running "$c"; then echo "$c: running"; else echo "$c: stopped"; ok=1; fi
  done
  return $ok
}

is_component() {
  local c
  for c in "${components[@]}"; do [[ $c == "$1" ]] && return 0; done
  die "no component '$1'; the components are: ${components[*]}"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  stop)
    is_component "${2:-}"
    stop_component "$2"
    log "stopped $2"
    ;;
  start)
    is_component "${2:-}"
    export KUBECONFIG=$kubeconfig
    PATH=$("$repo/hack/controlplane/build.sh"):$PATH
    if running "$2"; then
      log "$2 already runs"
    else
      launch "$2"
      wait_for "$2" 120 component_ready "$2"
      log "started $2"
    fi
    ;;
  *) die "usage: $0 up|down|status|stop <component>|start <component>" ;;
esac
