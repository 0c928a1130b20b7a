package harness

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve listens on addr ("127.0.0.1:0" picks a free port) and serves h until
// ctx ends. It returns the base URL ("http://127.0.0.1:8282/") and a channel
// that yields the server's end.
func Serve(ctx context.Context, addr string, h http.Handler) (string, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
