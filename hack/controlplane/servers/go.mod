// Small servers of the local control plane, written here: a Git server
// (smart HTTP, Git's own http-backend) and an OCI registry
// (go-containerregistry's). Built by ../build.sh.
module nodepool-fanout.local/controlplane/servers

go 1.26.0

tool (
	nodepool-fanout.local/controlplane/servers/cmd/git-server
	nodepool-fanout.local/controlplane/servers/cmd/oci-registry
)

require github.com/google/go-containerregistry v0.22.1
