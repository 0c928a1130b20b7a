package cloud

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// sharedRunTimeout bounds a run that several callers share (a list of a
// cluster's servers, a cleanup of its groups, a catalogue fetch). Each of
// its calls has its own timeout already; this is the backstop for the run.
const sharedRunTimeout = 5 * time.Minute

// runShared runs fn for every caller it serves: in a goroutine of its own,
// with a context of its own (ctx's values, the logger among them, but not
// its cancellation), so that the first caller giving up does not end it for
// the others; each caller waits with its own context. done runs when fn has
// returned, deferred: a panic in fn ends the run with an error instead of
// leaving its waiters hanging for good (and the panic is logged with its
// stack, not lost).
func runShared(ctx context.Context, what string, fn func(ctx context.Context) error, done func(err error)) {
	go func() {
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = &PanicError{What: what, Value: fmt.Sprint(r)}
				logf.FromContext(ctx).Error(err, "a shared cloud call panicked; its waiters get an error", "stack", string(debug.Stack()))
			}
			done(err)
		}()
		runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedRunTimeout)
		defer cancel()
		err = fn(runCtx)
	}()
}

// PanicError is a shared run that panicked: a bug, reported to every
// caller it served as an error of their own.
type PanicError struct {
	What  string
	Value string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: panicked: %s", e.What, e.Value)
}
