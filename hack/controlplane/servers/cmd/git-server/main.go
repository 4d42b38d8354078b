// git-server serves every bare repository under --root over Git's smart
// HTTP protocol, clone, fetch and push, at http://ADDR/<name>.git, for
// GitRepositories of the local control plane. The protocol is Git's own
// `git http-backend`, run as a CGI program: this is only the HTTP server
// around it. There is no authentication, so it must listen on loopback.
//
//	git-server --addr=127.0.0.1:PORT --root=DIR
//
// GET /healthz answers 200 once it serves.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"nodepool-fanout.local/controlplane/servers/internal/requestlog"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	root := flag.String("root", "", "directory whose bare repositories are served (required)")
	flag.Parse()
	if *root == "" {
		log.Fatal("git-server: --root is required")
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		log.Fatalf("git-server: %v", err)
	}
	if info, err := os.Stat(absRoot); err != nil || !info.IsDir() {
		log.Fatalf("git-server: --root %s is not a directory", absRoot)
	}
	backend, err := httpBackend()
	if err != nil {
		log.Fatalf("git-server: %v", err)
	}

	git := &cgi.Handler{
		Path: backend,
		Dir:  absRoot,
		Env: []string{
			"GIT_PROJECT_ROOT=" + absRoot,
			// Every repository under the root, without a
			// git-daemon-export-ok file in each.
			"GIT_HTTP_EXPORT_ALL=1",
			// http-backend enables pushes only for an authenticated
			// REMOTE_USER unless http.receivepack says otherwise; no
			// request here is authenticated, and a repository created
			// with a plain `git init --bare` must accept pushes.
			"GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http.receivepack",
			"GIT_CONFIG_VALUE_0=true",
		},
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.Handle("/", unchunk(git))

	server := &http.Server{
		Addr:              *addr,
		Handler:           requestlog.Handler(mux, func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("git-server: serving the repositories under %s on http://%s", absRoot, *addr)
	log.Fatal(server.ListenAndServe())
}

// httpBackend is the path of `git http-backend`, which lives in Git's exec
// path rather than on PATH.
func httpBackend() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %v (is git installed?)", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return "", fmt.Errorf("no git http-backend: %v", err)
	}
	return backend, nil
}

// unchunk spools a chunked request body to a temporary file so that the
// request reaches the CGI handler with a Content-Length: net/http/cgi
// refuses chunked bodies, and git sends one for every push or fetch request
// larger than its http.postBuffer (1 MiB by default).
func unchunk(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) == 0 || r.TransferEncoding[0] != "chunked" {
			next.ServeHTTP(w, r)
			return
		}
		spool, err := os.CreateTemp("", "git-server-body-*")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer os.Remove(spool.Name())
		defer spool.Close()
		n, err := io.Copy(spool, r.Body)
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r.Body = spool
		r.ContentLength = n
		r.TransferEncoding = nil
		next.ServeHTTP(w, r)
	})
}
