// s3-server is an S3-compatible object store, gofakes3's, for Flux
// Buckets of the local control plane: every folder directly under --root is
// a bucket, and every file below it an object keyed by its path in the
// folder, so whoever needs a bucket creates a folder and copies files into
// it, and the server reads them as they are on the next request. Requests
// are not authenticated (a signature, if any, is not checked), so it must
// listen on loopback. Buckets are reached by path, http://ADDR/<bucket>/<key>,
// as Flux's generic provider (minio-go) does for an endpoint that is not a
// cloud's.
//
//	s3-server --addr=127.0.0.1:PORT --root=DIR
//
// GET / (S3's ListBuckets) answers 200 once it serves.
package main

import (
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"

	"nodepool-fanout.local/controlplane/servers/internal/requestlog"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	root := flag.String("root", "", "directory whose subdirectories are served as buckets (required)")
	flag.Parse()
	if *root == "" {
		log.Fatal("s3-server: --root is required")
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		log.Fatalf("s3-server: %v", err)
	}
	if info, err := os.Stat(absRoot); err != nil || !info.IsDir() {
		log.Fatalf("s3-server: --root %s is not a directory", absRoot)
	}

	s3 := gofakes3.New(newFolders(absRoot),
		// Only what went wrong: the request log below says what was asked.
		gofakes3.WithLogger(gofakes3.GlobalLog(gofakes3.LogErr, gofakes3.LogWarn)))
	server := &http.Server{
		Addr:              *addr,
		Handler:           requestlog.Handler(s3.Server(), func(r *http.Request) bool { return r.Method == http.MethodGet && r.URL.Path == "/" }),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("s3-server: serving the folders under %s as buckets on http://%s", absRoot, *addr)
	log.Fatal(server.ListenAndServe())
}

// folders is a gofakes3 backend whose buckets are the folders under a root,
// each served by the library's single-bucket file system backend.
//
// The library's own multi-bucket file system backend is not used: it keeps
// its buckets in a folder "buckets" of its root, beside its metadata, and it
// fails to read any object it did not write itself (one copied into the
// folder has no stored checksum, and it does not compute one). The
// single-bucket backend serves a folder as it is, computing what it lacks.
type folders struct {
	root afero.Fs

	mu      sync.Mutex
	buckets map[string]*s3afero.SingleBucketBackend
}

var _ gofakes3.Backend = (*folders)(nil)

func newFolders(root string) *folders {
	return &folders{
		root:    afero.NewBasePathFs(afero.NewOsFs(), root),
		buckets: map[string]*s3afero.SingleBucketBackend{},
	}
}

// bucket is the backend of the folder `name`, created on first use and kept
// so that the metadata of objects PUT into it (kept in memory) lasts.
func (f *folders) bucket(name string) (*s3afero.SingleBucketBackend, error) {
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return nil, gofakes3.BucketNotFound(name)
	}
	if exists, err := f.BucketExists(name); err != nil {
		return nil, err
	} else if !exists {
		return nil, gofakes3.BucketNotFound(name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.buckets[name]; ok {
		return b, nil
	}
	b, err := s3afero.SingleBucket(name, afero.NewBasePathFs(f.root, name), nil)
	if err != nil {
		return nil, err
	}
	f.buckets[name] = b
	return b, nil
}

// forget drops a removed bucket's backend, and the metadata it kept.
func (f *folders) forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.buckets, name)
}

func (f *folders) ListBuckets() ([]gofakes3.BucketInfo, error) {
	entries, err := afero.ReadDir(f.root, "/")
	if err != nil {
		return nil, err
	}
	buckets := []gofakes3.BucketInfo{}
	for _, entry := range entries {
		// Anything else under the root is not a bucket an S3 client could
		// name.
		if !entry.IsDir() || gofakes3.ValidateBucketName(entry.Name()) != nil {
			continue
		}
		buckets = append(buckets, gofakes3.BucketInfo{
			Name:         entry.Name(),
			CreationDate: gofakes3.NewContentTime(entry.ModTime()),
		})
	}
	return buckets, nil
}

func (f *folders) BucketExists(name string) (bool, error) {
	info, err := f.root.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return info.IsDir(), nil
}

func (f *folders) CreateBucket(name string) error {
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return err
	}
	if exists, err := f.BucketExists(name); err != nil {
		return err
	} else if exists {
		return gofakes3.ResourceError(gofakes3.ErrBucketAlreadyExists, name)
	}
	return f.root.Mkdir(name, 0o755)
}

func (f *folders) DeleteBucket(name string) error {
	if _, err := f.bucket(name); err != nil {
		return err
	}
	entries, err := afero.ReadDir(f.root, name)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return gofakes3.ResourceError(gofakes3.ErrBucketNotEmpty, name)
	}
	f.forget(name)
	return f.root.Remove(name)
}

func (f *folders) ForceDeleteBucket(name string) error {
	if _, err := f.bucket(name); err != nil {
		return err
	}
	f.forget(name)
	return f.root.RemoveAll(name)
}

func (f *folders) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	b, err := f.bucket(name)
	if err != nil {
		return nil, err
	}
	return b.ListBucket(name, prefix, page)
}

func (f *folders) GetObject(bucket, key string, rangeRequest *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	b, err := f.bucket(bucket)
	if err != nil {
		return nil, err
	}
	obj, err := b.GetObject(bucket, key, rangeRequest)
	if err != nil {
		return nil, err
	}
	return f.withLastModified(bucket, key, obj)
}

func (f *folders) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	b, err := f.bucket(bucket)
	if err != nil {
		return nil, err
	}
	obj, err := b.HeadObject(bucket, key)
	if err != nil {
		return nil, err
	}
	return f.withLastModified(bucket, key, obj)
}

// withLastModified gives an object the Last-Modified header that S3 sends
// with every object, and that minio-go (Flux's client) refuses to do
// without: gofakes3 sends only what was stored with an object PUT through
// it, and a file copied into the folder has nothing stored. It is the
// file's modification time.
func (f *folders) withLastModified(bucket, key string, obj *gofakes3.Object) (*gofakes3.Object, error) {
	if obj.Metadata["Last-Modified"] != "" {
		return obj, nil
	}
	info, err := f.root.Stat(filepath.Join(bucket, filepath.FromSlash(key)))
	if err != nil {
		obj.Contents.Close()
		return nil, err
	}
	meta := make(map[string]string, len(obj.Metadata)+1)
	for k, v := range obj.Metadata {
		meta[k] = v
	}
	meta["Last-Modified"] = info.ModTime().UTC().Format(http.TimeFormat)
	obj.Metadata = meta
	return obj, nil
}

func (f *folders) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	b, err := f.bucket(bucket)
	if err != nil {
		return gofakes3.ObjectDeleteResult{}, err
	}
	return b.DeleteObject(bucket, key)
}

func (f *folders) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	b, err := f.bucket(bucket)
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	return b.PutObject(bucket, key, meta, input, size, conditions)
}

func (f *folders) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	b, err := f.bucket(bucket)
	if err != nil {
		return gofakes3.MultiDeleteResult{}, err
	}
	return b.DeleteMulti(bucket, keys...)
}

// CopyObject goes through this backend, not a bucket's: the source and the
// destination may be different buckets.
func (f *folders) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObject(f, srcBucket, srcKey, dstBucket, dstKey, meta)
}
