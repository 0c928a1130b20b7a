package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// DefaultMaxBodyBytes bounds request bodies when Options leave it unset:
// far more than any request of the emulated APIs (user data is a few KiB),
// little enough that no client can make the emulator hold gigabytes.
const DefaultMaxBodyBytes = 1 << 20

// readBody reads the request's body, at most the limit, before any handler
// runs, and hands the handler a copy in memory. Handlers of an emulated
// API work under their world's lock; if they read the body from the
// network, one client sending it slowly would stall every other. A body
// over the limit is refused with 413 and the handler never runs.
func (h *Harness) readBody(w http.ResponseWriter, r *http.Request) bool {
	limit := h.maxBody
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	tooLarge := func() bool {
		// The rest of the body is not read: the connection is closed.
		w.Header().Set("Connection", "close")
		h.writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body too large: at most %d bytes are accepted.", limit))
		return false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	_ = r.Body.Close()
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return tooLarge()
	case err != nil:
		// The client went away or was too slow (the server's read
		// timeout): there is nobody to answer.
		h.writeError(w, http.StatusBadRequest, "Could not read the request body.")
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return true
}

// adminAllowed checks a request to the admin endpoint or /metrics against
// Options.AdminAuth, and answers 401 when it fails.
func (h *Harness) adminAllowed(w http.ResponseWriter, r *http.Request) bool {
	if h.adminAuth == nil || h.adminAuth(r) {
		return true
	}
	h.writeError(w, http.StatusUnauthorized, "The admin endpoint and /metrics need the emulator's credentials.")
	return false
}
