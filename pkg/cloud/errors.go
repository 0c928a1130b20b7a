package cloud

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is wrapped by errors about things the cloud does not have.
var ErrNotFound = errors.New("not found")

// InvalidConfigError is the cloud refusing a request because of what the
// provider spec says: retrying cannot help, the spec must change.
type InvalidConfigError struct {
	// Field is the provider spec field at fault, as in the spec's JSON
	// ("flavor", "interfaces[0].networkUUID"); "" when the cloud did not say.
	Field string
	// Message is the cloud's explanation.
	Message string
}

func (e *InvalidConfigError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// RetryableError is a failure that goes away by itself: rate limiting,
// server errors, timeouts. RetryAfter is the cloud's hint, 0 without one.
type RetryableError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// IsNotFound reports whether err says the thing is not there.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
