package cloud

import "context"

type redactKey struct{}

// WithRedaction adds secrets (the user data of a create) that must be
// scrubbed from the errors of every call made with ctx, not only of the one
// that sends them: an API may echo anything anywhere. A cloud's classify
// passes Redactions(ctx) to Scrub.
func WithRedaction(ctx context.Context, secrets ...string) context.Context {
	prev, _ := ctx.Value(redactKey{}).([]string)
	return context.WithValue(ctx, redactKey{}, append(append([]string{}, prev...), secrets...))
}

// Redactions are the secrets WithRedaction added to ctx.
func Redactions(ctx context.Context) []string {
	r, _ := ctx.Value(redactKey{}).([]string)
	return r
}
