package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// APIError is an answer of a cloud API that is neither success nor one of
// the other errors of this package by itself; RetryableError wraps it for
// the transient ones.
type APIError struct {
	Cloud   string
	Op      string
	Status  int
	Message string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Cloud, e.Op, e.Status, msg)
}

// Answer is what a cloud API said about one failed call, as a cloud's
// client has decoded it; Classify turns it into this package's errors.
type Answer struct {
	// Cloud and Op name the call in messages ("cloudscale.ch",
	// "server.create").
	Cloud, Op string
	Status    int
	// RetryAfter is the answer's Retry-After, 0 without one.
	RetryAfter time.Duration
	// Message is the API's explanation, already scrubbed of secrets.
	Message string
	// Field is the provider spec field the API's message is about, when
	// the cloud's client could tell; "" otherwise.
	Field string
	// CredentialsSource says where the credentials came from, for auth
	// errors (never what they are).
	CredentialsSource string
	// IdentityRefused is an answer in which the cloud says, in its own
	// words, that the key itself is invalid (a bad signature, an unknown
	// key or token): an AuthError, as a 401, whatever its status. Any
	// other 403 refuses this operation only.
	IdentityRefused bool
	// Permission is what to grant for a 403 that refuses the operation, in
	// the cloud's terms (short), and Grant says how.
	Permission, Grant string
}

// Classify turns an API's error answer into the errors of this package, the
// same way for every cloud:
//
//   - 404: ErrNotFound;
//   - 400, 409, 422: the request, made from the spec, was refused:
//     InvalidConfigError (terminal);
//   - 401, and any other 4xx but a 429 that the cloud says is about the
//     key (IdentityRefused): AuthError (fix the secret); what the cloud
//     says decides, not the status it chose for it;
//   - any other 403: PermissionError (grant the permission);
//   - 408, 429, 5xx: RetryableError, honouring Retry-After; a 429 was
//     turned away before anything happened;
//   - anything else: APIError.
func Classify(a Answer) error {
	identity := a.IdentityRefused && a.Status >= 400 && a.Status < 500 && a.Status != http.StatusTooManyRequests
	switch s := a.Status; {
	case s == http.StatusUnauthorized || identity:
		return &AuthError{Cloud: a.Cloud, Op: a.Op, Status: s, Source: a.CredentialsSource, Detail: a.Message}
	case s == http.StatusNotFound:
		return fmt.Errorf("%s %s: HTTP 404 (%s): %w", a.Cloud, a.Op, orNoMessage(a.Message), ErrNotFound)
	case s == http.StatusBadRequest || s == http.StatusConflict || s == http.StatusUnprocessableEntity:
		msg := a.Message
		if msg == "" {
			msg = fmt.Sprintf("%s %s: the request was refused without a reason (HTTP %d)", a.Cloud, a.Op, s)
		}
		return &InvalidConfigError{Field: a.Field, Message: msg}
	case s == http.StatusForbidden:
		return &PermissionError{Cloud: a.Cloud, Op: a.Op, Status: s, Source: a.CredentialsSource, Permission: a.Permission, Grant: a.Grant, Detail: a.Message}
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return &RetryableError{
			RetryAfter:   a.RetryAfter,
			Err:          &APIError{Cloud: a.Cloud, Op: a.Op, Status: s, Message: a.Message},
			NotPerformed: s == http.StatusTooManyRequests,
		}
	default:
		return &APIError{Cloud: a.Cloud, Op: a.Op, Status: s, Message: a.Message}
	}
}

func orNoMessage(s string) string {
	if s == "" {
		return "no message"
	}
	return s
}

// ClassifyTransport classifies a call that got no error answer: the request
// or its answer got lost on the way (a timeout, a dropped connection, a
// truncated body after a 2xx). Whether the change was made is unknown, which
// every caller handles by looking again, so it is retryable; a connection
// that could not even be opened changed nothing. A call whose own context
// ended is the caller's business and is returned as it is.
func ClassifyTransport(ctx context.Context, cloudName, op string, err error) error {
	wrapped := fmt.Errorf("%s %s: %w", cloudName, op, err)
	if ctx.Err() != nil {
		return wrapped
	}
	if neverSent(err) {
		return &RetryableError{Err: wrapped, NotPerformed: true}
	}
	var ue *url.Error
	if errors.As(err, &ue) || lostResponse(err) {
		return &RetryableError{Err: wrapped}
	}
	return wrapped
}

// neverSent reports errors of a connection that was never made: nothing
// reached the cloud.
func neverSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// lostResponse reports errors of a response that broke off.
func lostResponse(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
