#!/usr/bin/env bash
# `make test`: lints, then runs every unit and end-to-end test against the
# local control plane. Starts the control plane when it is not running and
# stops it afterwards only if it started it, so a developer's running cluster
# survives a test run.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

export KUBECONFIG=$repo/target/local-cluster/kubeconfig

cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings

started=false
if ! hack/cluster.sh status >/dev/null 2>&1; then
  hack/cluster.sh up
  started=true
fi
stop() { if $started; then hack/cluster.sh down; fi; }
trap stop EXIT

# The console's browser tests drive Debian's headless Chromium.
hack/browser-deps.sh

# Unit tests and end-to-end tests alike (not the benchmark: `make
# bench-fanout`); the end-to-end tests find the
# cluster through KUBECONFIG and fail (never skip) when it is unreachable.
# A failure's message, not forty frames of the async runtime, is what the
# tail of a long run must show: backtraces are off, whatever the shell
# exports, unless asked for here (`TEST_BACKTRACE=1 make test`).
export RUST_BACKTRACE=${TEST_BACKTRACE:-0}
cargo test --lib --bins --tests --locked -- --test-threads="${E2E_PARALLELISM:-4}"
