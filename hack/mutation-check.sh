#!/usr/bin/env bash
# `make mutation-check`: breaks one guard of the controller at a time, on
# purpose (each patch in hack/mutants/), and runs the fault soak against
# the broken controller until its first violation. A guard the soak does
# not catch within DURATION is a promise no test defends: the check fails.
# Prints, per mutant, whether it was caught, by which invariant, and how
# long after the first fault.
#
# It patches the work tree in place (and puts it back, whatever happens),
# so it refuses to run on a tree with changes to src/.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

seed=${SEED:-41}
duration=${DURATION:-5m}
only=${MUTANTS:-}
export KUBECONFIG=$repo/target/local-cluster/kubeconfig

if ! git diff --quiet -- src; then
  echo "mutation-check: src/ has changes; commit or stash them first (the check patches src/ in place)" >&2
  exit 2
fi

hack/cluster.sh up >/dev/null

applied=""
restore() {
  if [[ -n $applied ]]; then
    git apply -R "$applied" || git checkout -- src
    applied=""
  fi
}
trap restore EXIT

logs=$repo/target/mutation-check
mkdir -p "$logs"
results=()
missed=0
for patch in hack/mutants/*.patch; do
  name=$(basename "$patch" .patch)
  if [[ -n $only && ",$only," != *",$name,"* ]]; then
    continue
  fi
  if ! git apply --check "$patch" 2>/dev/null; then
    echo "mutation-check: $patch no longer applies to src/; bring it up to date with the guard it breaks" >&2
    exit 2
  fi
  # A guard the soak cannot reach (a situation it cannot make) names, in
  # the patch's first line, the test that makes it:
  # `# caught by: <test binary> <test filter>`, the binary `lib` for the
  # unit tests of the library.
  caught_by=$(sed -n '1s/^# caught by: //p' "$patch")
  test_binary=(--test "${caught_by%% *}")
  [[ ${caught_by%% *} == lib ]] && test_binary=(--lib)
  git apply "$patch"
  applied=$patch
  log=$logs/$name.log
  start=$(date +%s)
  set +e
  if [[ -n $caught_by ]]; then
    echo "== $name: cargo test ${test_binary[*]} ${caught_by#* }"
    cargo test --locked "${test_binary[@]}" "${caught_by#* }" >"$log" 2>&1
  else
    echo "== $name: seed $seed, at most $duration"
    STOP_AT_FIRST=1 SEED=$seed DURATION=$duration cargo test --locked --test soak >"$log" 2>&1
  fi
  rc=$?
  set -e
  restore
  took=$(( $(date +%s) - start ))
  first=$(grep -m1 -o 'first violation [0-9.]* s after' "$log" | grep -o '[0-9.]*' || true)
  invariant=$(grep -m1 -o 'VIOLATION [a-zA-Z ]* (docs/' "$log" | sed 's/^VIOLATION //; s/ (docs\/$//' || true)
  # The named test caught it when it ran and failed (a build error is no catch).
  if [[ -n $caught_by ]] && grep -q '^test result: FAILED' "$log"; then
    invariant="test ${caught_by#* }"
    first=-
  fi
  if [[ $rc -ne 0 && -n $invariant ]]; then
    results+=("$(printf '%-32s %-8s %-18s %12s %10s' "$name" caught "$invariant" "${first:-after}" "$took")")
  else
    # Exit 0: the soak found nothing. Any other failure without a
    # violation (a build error, a broken cluster) is no catch either.
    results+=("$(printf '%-32s %-8s %-18s %12s %10s' "$name" MISSED - - "$took")")
    missed=$((missed + 1))
    echo "   not caught; its soak: $log" >&2
    tail -5 "$log" >&2
  fi
done

if [[ ${#results[@]} -eq 0 ]]; then
  echo "mutation-check: no mutant ran (MUTANTS=$only matches none of hack/mutants/)" >&2
  exit 2
fi
# The controller as it is, built again for whatever runs next.
cargo build --locked --bins >/dev/null 2>&1 || true
echo
printf '%-32s %-8s %-18s %12s %10s\n' mutant verdict invariant "caught at s" "run s"
printf '%s\n' "${results[@]}"
[[ $missed -eq 0 ]]
