// Package requestlog logs one line per HTTP request, so that a server of
// the local control plane explains a failed clone, push or download in its
// log.
package requestlog

import (
	"log"
	"net/http"
	"time"
)

// statusWriter remembers the status code, for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Handler logs every request next serves but those quiet says to leave
// out (readiness checks).
func Handler(next http.Handler, quiet func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if quiet(r) {
			return
		}
		if sw.status == 0 { // nothing written: net/http sends 200
			sw.status = http.StatusOK
		}
		log.Printf("%s %s %d %s", r.Method, r.URL.RequestURI(), sw.status, time.Since(start).Round(time.Millisecond))
	})
}
