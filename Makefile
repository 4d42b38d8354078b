# Everything a developer or CI runs. `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

KUBECONFIG_LOCAL := $(CURDIR)/target/local-cluster/kubeconfig

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

.PHONY: test
test: ## Lint, then every unit and end-to-end test on the local control plane (starts and stops it)
	hack/test.sh

.PHONY: soak
SEED ?=
DURATION ?= 10m
SHARDS ?=
soak: ## Random faults drawn from SEED (random when empty) for DURATION, judged by the invariant checker; SHARDS=2 runs two shards (starts the local control plane)
	hack/cluster.sh up >/dev/null
	SEED=$(SEED) DURATION=$(DURATION) SHARDS=$(SHARDS) KUBECONFIG=$(KUBECONFIG_LOCAL) cargo test --locked --test soak

.PHONY: mutation-check
mutation-check: ## Break each guard in hack/mutants/ on purpose and show the soak (SEED, default 41; DURATION, default 5m) catches it
	SEED=$(if $(SEED),$(SEED),41) DURATION=$(if $(filter command line,$(origin DURATION)),$(DURATION),5m) hack/mutation-check.sh

.PHONY: demo
GITOPS ?=
SITES ?=
demo: ## Bring up the local control plane and fan an example out to three pools of kwok nodes (GITOPS=1: delivered by Flux from Git; SITES=1: then to two site clusters)
	GITOPS=$(GITOPS) SITES=$(SITES) hack/demo.sh

.PHONY: controlplane
controlplane: ## Build the local control plane's binaries (cached; the first build takes 20-40 minutes)
	hack/controlplane/build.sh

.PHONY: cluster-up
cluster-up: ## Start the local control plane (a no-op when it runs) and print its KUBECONFIG
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane and forget its state
	hack/cluster.sh down

.PHONY: crds
crds: ## Regenerate crds/ from the Rust types
	cargo run --quiet -- crd > crds/apps.fanout.dev_nodepoolapplications.yaml

.PHONY: api-reference
api-reference: ## Regenerate docs/reference/api.md, the API reference, from the Rust types
	cargo run --quiet -- crd --reference > docs/reference/api.md

POOLS ?= 50
.PHONY: bench-fanout
bench-fanout: ## Time the fan-out to POOLS pools: shared chart vs a chart per release vs the same releases written directly (starts the local control plane)
	hack/cluster.sh up >/dev/null
	POOLS=$(POOLS) KUBECONFIG=$(KUBECONFIG_LOCAL) cargo bench --locked --bench fanout

# 10 pools unless POOLS is given on the command line (its default above is
# the fan-out's).
.PHONY: bench-rollout
bench-rollout: ## Time one change reaching POOLS (10) pools all at once vs progressively, and a broken one rolled back (starts the local control plane)
	hack/cluster.sh up >/dev/null
	POOLS=$(if $(filter command line,$(origin POOLS)),$(POOLS),10) KUBECONFIG=$(KUBECONFIG_LOCAL) \
	  cargo bench --locked --bench rollout

# 10,000 pools unless POOLS is given on the command line.
.PHONY: bench-scale
bench-scale: ## The controller alone at POOLS (10000) pools: write time vs raw, RSS, CPU, status size, work at rest (starts the local control plane)
	hack/cluster.sh up >/dev/null
	POOLS=$(if $(filter command line,$(origin POOLS)),$(POOLS),10000) KUBECONFIG=$(KUBECONFIG_LOCAL) \
	  cargo bench --locked --bench scale

# 10,000 pools unless POOLS is given on the command line.
.PHONY: bench-rollout-scale
bench-rollout-scale: ## The controller alone rolling a change out over POOLS (10000) pools, AllAtOnce vs Progressive 10% in 3 waves, then judged by a metric check per pool and by site: time, CPU, writes, reconciles, RSS, queries (helm-controller stood in for; starts the local control plane)
	hack/cluster.sh up >/dev/null
	POOLS=$(if $(filter command line,$(origin POOLS)),$(POOLS),10000) KUBECONFIG=$(KUBECONFIG_LOCAL) \
	  cargo bench --locked --bench rollout_scale

.PHONY: bench-console
bench-console: ## The console at 1,000 and 10,000 pools: page size, server render, first paint in headless Chromium, change to open page (no cluster)
	bash hack/browser-deps.sh
	cargo bench --locked --bench console

.PHONY: bench-render
bench-render: ## Time planning an application over 8 pools (hostile templates beside ordinary specs), then over 10,000 (no cluster)
	cargo bench --locked --bench render
