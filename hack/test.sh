#!/usr/bin/env bash
# `make test`: lints, then runs every unit and end-to-end test against the
# local control plane. Starts the control plane when it is not running and
# stops it afterwards only if it started it, so a developer's running cluster
# survives a test run.
#
# What does not share a resource runs side by side, so the run takes the
# time of its longest path rather than the sum of its parts:
# - the control plane starts while clippy runs;
# - the unit tests, and the `private_plane` tests (each on a control plane
#   of its own), run beside the end-to-end tests on the shared plane;
# - the soak, which stops and starts parts of the shared plane, runs alone
#   on it once the end-to-end tests are done.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

export KUBECONFIG=$repo/target/local-cluster/kubeconfig
logs=$repo/target/test-logs
mkdir -p "$logs"

cargo fmt --check

started=false
plane=
if ! hack/cluster.sh status >/dev/null 2>&1; then
  started=true
  hack/cluster.sh up >"$logs/cluster-up.log" 2>&1 &
  plane=$!
fi
private=
# shellcheck disable=SC2317 # called by the trap
stop() {
  # The tests run beside run in a process group of their own: a failure
  # here stops them and the planes they started.
  if [[ -n $private ]]; then kill -- "-$private" 2>/dev/null || true; fi
  if $started; then hack/cluster.sh down; fi
}
trap stop EXIT

cargo clippy --all-targets --locked -- -D warnings

if [[ -n $plane ]]; then
  if ! wait "$plane"; then
    cat "$logs/cluster-up.log"
    echo "make test: the local control plane did not start (above)" >&2
    exit 1
  fi
  cat "$logs/cluster-up.log"
fi

# The console's browser tests drive Debian's headless Chromium.
hack/browser-deps.sh

# Unit tests and end-to-end tests alike (not the benchmarks: `make
# bench-fanout`); the end-to-end tests find the cluster through KUBECONFIG
# and fail (never skip) when it is unreachable.
# A failure's message, not forty frames of the async runtime, is what the
# tail of a long run must show: backtraces are off, whatever the shell
# exports, unless asked for here (`TEST_BACKTRACE=1 make test`).
export RUST_BACKTRACE=${TEST_BACKTRACE:-0}
threads=${E2E_PARALLELISM:-5}
cargo test --lib --bins --tests --locked --no-run

# Every test target but the two that run apart: a target added later is
# found here without a change to this script.
shared=()
for target in tests/*/main.rs tests/*.rs; do
  [[ -e $target ]] || continue
  case $target in
    tests/*/main.rs) name=$(basename "$(dirname "$target")") ;;
    *) name=$(basename "$target" .rs) ;;
  esac
  case $name in
    private_plane | soak) ;;
    *) shared+=(--test "$name") ;;
  esac
done

# Beside the shared plane's tests, in a process group of their own: the
# unit tests, then the private_plane tests.
# shellcheck disable=SC2317 # run by the bash below
beside() {
  local status=0 part
  for part in unit private_plane; do
    case $part in
      unit) cargo test --lib --bins --locked >"$logs/unit.log" 2>&1 ;;
      private_plane) cargo test --locked --test private_plane -- --test-threads="$threads" >"$logs/private_plane.log" 2>&1 ;;
    esac
    echo "$?" >"$logs/$part.status"
    [[ $(<"$logs/$part.status") -eq 0 ]] || status=1
  done
  return "$status"
}
export -f beside
export logs threads
rm -f "$logs"/*.status
setsid bash -c beside &
private=$!

# Each part's output is kept in a log, and its exit status beside it, so
# that the run can end with what failed: a long run is often read from
# its tail alone.
part() {
  local name=$1 code=0
  shift
  "$@" 2>&1 | tee "$logs/$name.log" || code=$?
  echo "$code" >"$logs/$name.status"
  return "$code"
}
status=0
part shared cargo test "${shared[@]}" --locked -- --test-threads="$threads" || status=$?
if [[ $status -eq 0 ]]; then
  part soak cargo test --locked --test soak || status=$?
fi

beside_status=0
wait "$private" || beside_status=$?
private=
for name in unit private_plane; do
  echo "---- the $name tests (run beside the others; log: target/test-logs/$name.log)"
  cat "$logs/$name.log"
done
if [[ $beside_status -ne 0 ]]; then
  status=1
fi

# What failed, named last: each part's exit status, and a test's own
# lines ("test x ... FAILED") or the soak's violations.
if [[ $status -ne 0 ]]; then
  echo "==== make test failed (the tests run beside: exit $beside_status); by part, whole logs in target/test-logs/:"
  for name in shared soak unit private_plane; do
    if [[ ! -e $logs/$name.status ]]; then
      echo "-- $name: not run, or stopped before its end"
      continue
    fi
    echo "-- $name: exit $(<"$logs/$name.status")"
    grep -E '^test .* FAILED$|^error: |panicked at|VIOLATION|violations; replay' "$logs/$name.log" | head -20 || true
  done
fi
exit "$status"
