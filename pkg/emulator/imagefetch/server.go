package imagefetch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
)

// Server is a mirror the tests, the demo and the benchmark serve images
// from, as an operator's object storage would: files by path below a
// prefix, replaced or removed while it runs, downloads counted.
type Server struct {
	*httptest.Server
	// URL is the mirror's base URL: the server's with the prefix.
	URL    string
	prefix string
	mu     sync.Mutex
	files  map[string][]byte
	gets   atomic.Int64
}

// NewServer serves files (by path) below prefix ("" or "/rhcos"); Close
// stops it.
func NewServer(prefix string, files map[string][]byte) *Server {
	s := &Server{prefix: strings.TrimSuffix(prefix, "/"), files: map[string][]byte{}}
	s.Set(files)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.gets.Add(1)
		s.mu.Lock()
		b, ok := s.files[strings.TrimPrefix(r.URL.Path, s.prefix)]
		s.mu.Unlock()
		if !ok || !strings.HasPrefix(r.URL.Path, s.prefix+"/") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	s.URL = s.Server.URL + s.prefix
	return s
}

// Set adds or replaces files; a nil content removes the file.
func (s *Server) Set(files map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, b := range files {
		if b == nil {
			delete(s.files, p)
			continue
		}
		s.files[p] = b
	}
}

// Gets counts the requests answered.
func (s *Server) Gets() int64 { return s.gets.Load() }
