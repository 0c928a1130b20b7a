package harness

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ServeOptions bound what one client may take of the server: each
// connection has its own goroutine, but a client that never finishes its
// request would hold its connection (and a file descriptor) forever.
type ServeOptions struct {
	// ReadHeaderTimeout bounds sending the request line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds sending the whole request, body included.
	ReadTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
}

// DefaultServeOptions are what Serve uses. No write timeout: injected
// latency may hold a response for as long as a rule says.
var DefaultServeOptions = ServeOptions{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	IdleTimeout:       2 * time.Minute,
	MaxHeaderBytes:    64 << 10,
}

// Serve listens on addr ("127.0.0.1:0" picks a free port) and serves h until
// ctx ends. It returns the base URL ("http://127.0.0.1:8282/") and a channel
// that yields the server's end.
func Serve(ctx context.Context, addr string, h http.Handler) (string, <-chan error, error) {
	return ServeWith(ctx, addr, h, DefaultServeOptions)
}

// ServeWith is Serve with other bounds; zero fields take the defaults.
func ServeWith(ctx context.Context, addr string, h http.Handler, o ServeOptions) (string, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := NewServer(h, o)
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	return "http://" + ln.Addr().String() + "/", done, nil
}

// NewServer is an http.Server for h with o's bounds (zero fields take the
// defaults), for callers that listen themselves.
func NewServer(h http.Handler, o ServeOptions) *http.Server {
	d := DefaultServeOptions
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	maxHeader := o.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = d.MaxHeaderBytes
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: pick(o.ReadHeaderTimeout, d.ReadHeaderTimeout),
		ReadTimeout:       pick(o.ReadTimeout, d.ReadTimeout),
		IdleTimeout:       pick(o.IdleTimeout, d.IdleTimeout),
		MaxHeaderBytes:    maxHeader,
	}
}
