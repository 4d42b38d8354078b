// Pins the modules whose CustomResourceDefinitions the local control plane
// installs but whose code it does not build: OpenYurt, for the NodePool CRD.
// Flux's CRDs come from the source-controller and helm-controller modules
// beside this one. Nothing here is compiled.
module nodepool-fanout.local/controlplane/crds

go 1.26.0

require github.com/openyurtio/openyurt v1.7.0
