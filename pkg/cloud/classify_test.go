package cloud

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	a := Answer{Cloud: "x", Op: "server.create", Message: "msg", Field: "flavor", CredentialsSource: "secret ns/s", RetryAfter: 3 * time.Second}
	for status, check := range map[int]func(error) bool{
		404: IsNotFound,
		400: func(err error) bool { var e *InvalidConfigError; return errors.As(err, &e) && e.Field == "flavor" },
		409: func(err error) bool { var e *InvalidConfigError; return errors.As(err, &e) },
		422: func(err error) bool { var e *InvalidConfigError; return errors.As(err, &e) },
		401: func(err error) bool { var e *AuthError; return errors.As(err, &e) && e.Source == "secret ns/s" },
		403: func(err error) bool {
			var e *PermissionError
			return errors.As(err, &e) && !errors.As(err, new(*AuthError)) && e.Source == "secret ns/s"
		},
		429: func(err error) bool {
			var e *RetryableError
			return errors.As(err, &e) && e.RetryAfter == 3*time.Second && e.NotPerformed
		},
		503: func(err error) bool { var e *RetryableError; return errors.As(err, &e) && !e.NotPerformed },
		500: func(err error) bool { var e *RetryableError; return errors.As(err, &e) && !e.NotPerformed },
		408: func(err error) bool { var e *RetryableError; return errors.As(err, &e) },
		418: func(err error) bool {
			var e *APIError
			return errors.As(err, &e) && !errors.As(err, new(*RetryableError)) && !errors.As(err, new(*InvalidConfigError))
		},
	} {
		a.Status = status
		if err := Classify(a); !check(err) {
			t.Errorf("HTTP %d: %v (%T)", status, err, err)
		}
	}
	a.Status, a.IdentityRefused = 403, true
	if err := Classify(a); !errors.As(err, new(*AuthError)) {
		t.Errorf("a 403 that refuses the key: %v (%T), want an AuthError", err, err)
	}
}

func TestClassifyTransport(t *testing.T) {
	ctx := context.Background()
	dial := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	if err := ClassifyTransport(ctx, "x", "op", dial); !NotPerformed(err) {
		t.Errorf("a refused connection: %v, want not performed", err)
	}
	for _, lost := range []error{
		&url.Error{Op: "Post", URL: "http://x", Err: io.EOF},
		&url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNRESET},
		&url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded},
		io.ErrUnexpectedEOF,
	} {
		err := ClassifyTransport(ctx, "x", "op", lost)
		var re *RetryableError
		if !errors.As(err, &re) || re.NotPerformed {
			t.Errorf("%v: %v, want retryable and maybe performed", lost, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := ClassifyTransport(cancelled, "x", "op", context.Canceled); errors.As(err, new(*RetryableError)) || !errors.Is(err, context.Canceled) {
		t.Errorf("the caller's cancellation: %v", err)
	}
}

func TestNotPerformed(t *testing.T) {
	for err, want := range map[error]bool{
		nil:                          false,
		errors.New("?"):              false,
		&InvalidConfigError{}:        true,
		&AuthError{Status: 401}:      true,
		ErrNotFound:                  true,
		&RetryableError{Err: io.EOF}: false,
		&RetryableError{Err: io.EOF, NotPerformed: true}: true,
	} {
		if got := NotPerformed(err); got != want {
			t.Errorf("NotPerformed(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		" 12 ":                          12 * time.Second,
		"-3":                            0,
		"soon":                          0,
		"99999999999999999999":          0,
		"9999999999":                    maxRetryAfter,
		"Sun, 01 Jun 2025 12:01:00 GMT": time.Minute,
		"Sun, 01 Jun 2025 11:00:00 GMT": 0,
	} {
		if got := ParseRetryAfter(in, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
