// oci-registry is an OCI distribution registry, go-containerregistry's
// reference implementation (pkg/registry), for Helm charts pushed to the
// local control plane with `helm push`, which Flux then pulls through OCI
// HelmRepositories and OCIRepositories. It serves plain HTTP without
// authentication, so it must listen on loopback, and it keeps everything in
// memory: a restart empties it, and whoever starts it pushes again.
//
//	oci-registry --addr=127.0.0.1:PORT
//
// GET /v2/ answers 200 once it serves.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "address to listen on")
	flag.Parse()

	// The registry logs a line a request to stderr, so that a failed push
	// or pull explains itself.
	server := &http.Server{
		Addr:              *addr,
		Handler:           registry.New(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("oci-registry: serving on http://%s (in memory)", *addr)
	log.Fatal(server.ListenAndServe())
}
