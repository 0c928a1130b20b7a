package cloud

import (
	"context"
	"errors"
	"time"
)

// Call runs one API call of a cloud's client: it passes the account's gate
// (which may hold it back or wait for the rate limit), records the HTTP
// exchange for classify, lets the outcome close or reset the gate, and
// observes the call's metrics. classify turns the SDK's error into this
// package's errors, with what the exchange saw; it runs only on failure.
//
// Every cloud call of a client goes through Call, so the rate limit,
// Retry-After and the backoff after refused credentials hold on every path.
func Call(ctx context.Context, cloudName string, gate *Gate, op string, fn func(ctx context.Context) error, classify func(ctx context.Context, ex *Exchange, err error) error) error {
	if gate != nil {
		if err := gate.Admit(ctx); err != nil {
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
		gate.Observe(err)
		var auth *AuthError
		if errors.As(err, &auth) {
			if until := gate.ClosedUntil(); !until.IsZero() {
				auth.RetryAfter = time.Until(until)
			}
		}
	}
	observeCall(cloudName, op, start, err)
	return err
}
