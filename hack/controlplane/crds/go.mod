// Pins the modules whose CustomResourceDefinitions the local control plane
// installs but whose code it does not build: OpenYurt, for the NodePool CRD;
// KubeEdge, for the NodeGroup CRD; and SuperEdge, for the NodeUnit CRD, which
// ../generate-crds.sh generates from the module's v1alpha2 Go types because
// the YAML it ships declares only v1alpha1; and SIG-Multicluster's cluster
// inventory API, for the ClusterProfile CRD, which names the site clusters a
// hub reaches. Flux's CRDs come from the source-controller and
// helm-controller modules beside this one. Nothing here is compiled (so `go
// mod tidy`, finding no package that imports them, would drop every pin);
// go.sum is long because SuperEdge's go.mod predates module graph pruning
// (go 1.16), so its whole dependency graph is part of this one.
module nodepool-fanout.local/controlplane/crds

go 1.26.0

require (
	github.com/kubeedge/kubeedge v1.20.0
	github.com/openyurtio/openyurt v1.7.0
	github.com/superedge/superedge v0.9.0
	sigs.k8s.io/cluster-inventory-api v0.1.2
)
