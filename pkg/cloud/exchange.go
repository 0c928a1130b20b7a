package cloud

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxErrorBody bounds how much of an error response is kept: enough for any
// API error, little enough that a proxy's HTML page costs nothing.
const maxErrorBody = 64 << 10

// Exchange records what the HTTP layer saw of one API call. SDKs drop what
// the classification needs: the cloudscale.ch SDK loses the headers (so
// Retry-After) and, for bodies it cannot decode, the status; egoscale's
// error keeps neither. RecordingTransport fills it for calls made with
// WithExchange.
type Exchange struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
	body       []byte
	sent       bool
}

type exchangeKey struct{}

// WithExchange makes the HTTP requests of ctx record into ex.
func WithExchange(ctx context.Context, ex *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// Get returns the last answer's status, Retry-After and (bounded) error body.
func (ex *Exchange) Get() (status int, retryAfter time.Duration, body []byte) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.status, ex.retryAfter, ex.body
}

// Sent reports whether a request of the call reached the transport.
func (ex *Exchange) Sent() bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.sent
}

// RecordingTransport fills the Exchange found in the request's context. The
// SDKs pass the context of each call on to the request, so this is the only
// place where the response headers are still visible.
type RecordingTransport struct {
	Base http.RoundTripper
}

func (t *RecordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ex, _ := req.Context().Value(exchangeKey{}).(*Exchange)
	if ex != nil {
		ex.mu.Lock()
		ex.sent = true
		ex.mu.Unlock()
	}
	resp, err := base.RoundTrip(req)
	if err != nil || ex == nil {
		return resp, err
	}
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	var body []byte
	if resp.StatusCode >= 400 && resp.Body != nil {
		// Read a bounded copy and hand the SDK the same bytes followed by
		// whatever is left, so it decodes exactly what it would have.
		body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	}
	ex.mu.Lock()
	ex.status, ex.retryAfter, ex.body = resp.StatusCode, retryAfter, body
	ex.mu.Unlock()
	return resp, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// maxRetryAfter caps the hint: a bogus header must neither overflow a
// Duration nor park a Machine for longer than a day.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3);
// anything else, or a date in the past, is no hint.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(min(max(secs, 0), int64(maxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = max(at.Sub(now), 0)
	}
	return min(d, maxRetryAfter)
}
