package cloud

import (
	"context"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

type warnKey struct{}

// WithWarnings makes the failures that calls made with ctx survive reach
// warn: a server deleted whose empty group could not be, a new server
// whose root volume could not be tagged. The call succeeds all the same;
// warn tells the Machine (an event) what was left undone, above all what
// a missing permission left undone, which only a person can fix.
func WithWarnings(ctx context.Context, warn func(err error)) context.Context {
	return context.WithValue(ctx, warnKey{}, warn)
}

// Warn logs a failure the call survives, with keysAndValues, and passes it
// to the warn function of ctx (WithWarnings), if any.
func Warn(ctx context.Context, msg string, err error, keysAndValues ...any) {
	logf.FromContext(ctx).Info(msg, append(keysAndValues, "error", err.Error())...)
	if warn, ok := ctx.Value(warnKey{}).(func(error)); ok && warn != nil {
		warn(err)
	}
}
