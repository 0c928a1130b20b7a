package cloudscale

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

// exchange records what the HTTP layer saw of one API call. The SDK's
// CheckResponse drops the headers (so Retry-After) and, when an error body is
// not a flat JSON object of strings (a proxy's HTML 502, a nested 400), the
// status code too; the classification needs both.
type exchange struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
	body       []byte
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

func (ex *exchange) get() (status int, retryAfter time.Duration, body []byte) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.status, ex.retryAfter, ex.body
}

// recordingTransport fills the exchange found in the request's context. The
// SDK passes the context of each call on to the request, so this is the only
// place where the response headers are still visible.
type recordingTransport struct {
	base http.RoundTripper
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if err != nil || ex == nil {
		return resp, err
	}
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
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

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3);
// anything else, or a date in the past, is no hint.
func parseRetryAfter(v string, now time.Time) time.Duration {
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
