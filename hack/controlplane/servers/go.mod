// Small servers of the local control plane, written here: a Git server
// (smart HTTP, Git's own http-backend), an OCI registry
// (go-containerregistry's) and an S3-compatible object store (gofakes3's).
// Built by ../build.sh.
module nodepool-fanout.local/controlplane/servers

go 1.26.0

tool (
	nodepool-fanout.local/controlplane/servers/cmd/git-server
	nodepool-fanout.local/controlplane/servers/cmd/oci-registry
	nodepool-fanout.local/controlplane/servers/cmd/s3-server
)

require (
	github.com/google/go-containerregistry v0.22.1
	github.com/johannesboyne/gofakes3 v1.2.0
	github.com/spf13/afero v1.2.1
)

require (
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/text v0.9.0 // indirect
	golang.org/x/tools v0.49.0 // indirect
)
