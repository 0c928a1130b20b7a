package cloud

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// readRetries is how often a read (an op named "….get" or "….list") is
// tried again at once after a transient failure the cloud gave no
// Retry-After for (a 5xx, a reset connection, a timeout). A Machine's
// reconcile makes several reads; were each blip to fail the whole
// reconcile, one in five calls failing (a bad minute of a real cloud)
// would fail most reconciles and push Machines into minutes of backoff.
// A read has no effect, so trying it again is always safe. Writes are
// never retried here: a create is retried only through its intent, a
// delete by the next reconcile.
var readRetries = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// ReadAttempts is how often Call tries a read that keeps failing
// transiently: once, and once per readRetries.
var ReadAttempts = 1 + len(readRetries)

// Call runs one API call of a cloud's client: it passes the account's gate
// (which may hold it back or wait for the rate limit), records the HTTP
// exchange for classify, lets the outcome close or reset the gate, and
// observes the call's metrics. classify turns the SDK's error into this
// package's errors, with what the exchange saw; it runs only on failure.
// A read failing transiently is tried again (readRetries).
//
// Every cloud call of a client goes through Call, so the rate limit,
// Retry-After and the backoff after refused credentials hold on every path.
func Call(ctx context.Context, cloudName string, gate *Gate, op string, fn func(ctx context.Context) error, classify func(ctx context.Context, ex *Exchange, err error) error) error {
	err := callOnce(ctx, cloudName, gate, op, fn, classify)
	if !isRead(op) {
		return err
	}
	for _, pause := range readRetries {
		if !retryAtOnce(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		err = callOnce(ctx, cloudName, gate, op, fn, classify)
	}
	return err
}

func callOnce(ctx context.Context, cloudName string, gate *Gate, op string, fn func(ctx context.Context) error, classify func(ctx context.Context, ex *Exchange, err error) error) error {
	if gate != nil {
		if err := gate.AdmitOp(ctx, op); err != nil {
			observeHeld(cloudName, op, err)
			return err
		}
	}
	start := time.Now()
	ex := &Exchange{}
	err := fn(WithExchange(ctx, ex))
	if err != nil {
		err = classify(ctx, ex, err)
	}
	if gate != nil {
		zone := ZoneOfContext(ctx)
		gate.ObserveOpIn(op, zone, err)
		var (
			auth *AuthError
			perm *PermissionError
		)
		switch {
		case errors.As(err, &auth):
			if until := gate.ClosedUntil(); !until.IsZero() {
				auth.RetryAfter = time.Until(until)
			}
		case errors.As(err, &perm):
			if until := gate.OpHeldUntilIn(op, zone); !until.IsZero() {
				perm.RetryAfter = time.Until(until)
			}
		}
	}
	observeCall(ctx, cloudName, op, start, err)
	return err
}

// isRead tells the reads by their op names ("server.get", "instance.list").
func isRead(op string) bool {
	return strings.HasSuffix(op, ".get") || strings.HasSuffix(op, ".list")
}

// retryAtOnce reports whether a failure may be tried again without waiting:
// transient, not rate limited (a 429 asks for fewer calls, and its
// Retry-After holds the account's gate) and no other hint to wait.
func retryAtOnce(err error) bool {
	var r *RetryableError
	if !errors.As(err, &r) || r.RetryAfter > 0 {
		return false
	}
	var api *APIError
	return !errors.As(err, &api) || api.Status != http.StatusTooManyRequests
}
