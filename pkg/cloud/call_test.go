package cloud

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// failing returns a call that fails with the given answers, in order, then
// succeeds, and counts its attempts.
func failing(answers ...error) (func(context.Context) error, *int) {
	n := 0
	return func(context.Context) error {
		n++
		if n <= len(answers) {
			return answers[n-1]
		}
		return nil
	}, &n
}

func passThrough(_ context.Context, _ *Exchange, err error) error { return err }

func serverError() error {
	return Classify(Answer{Cloud: "x", Op: "op", Status: http.StatusBadGateway})
}

func TestCallRetriesReadsAfterTransientFailures(t *testing.T) {
	fn, n := failing(serverError(), serverError())
	if err := Call(context.Background(), "x", nil, "server.list", fn, passThrough); err != nil {
		t.Fatalf("a read failing twice with a 502 then answering: %v", err)
	}
	if *n != 3 {
		t.Fatalf("attempts = %d, want 3", *n)
	}

	fn, n = failing(serverError(), serverError(), serverError())
	if err := Call(context.Background(), "x", nil, "instance.get", fn, passThrough); err == nil {
		t.Fatal("a read failing three times succeeded")
	}
	if *n != 1+len(readRetries) {
		t.Fatalf("attempts = %d, want %d: a read is tried at most %d more times", *n, 1+len(readRetries), len(readRetries))
	}
}

func TestCallDoesNotRetryWritesOrWhatMustWait(t *testing.T) {
	for _, c := range []struct {
		name, op string
		err      error
	}{
		{"a create", "server.create", serverError()},
		{"a delete", "instance.delete", serverError()},
		{"a read the cloud rate limited (its Retry-After holds the gate)", "server.list", rateLimited(5 * time.Second)},
		{"a read the cloud rate limited without a Retry-After", "server.list", rateLimited(0)},
		{"a read refused for its credentials", "server.list", refused(http.StatusUnauthorized)},
		{"a read of something not there", "server.get", Classify(Answer{Cloud: "x", Op: "op", Status: http.StatusNotFound})},
	} {
		fn, n := failing(c.err)
		if err := Call(context.Background(), "x", nil, c.op, fn, passThrough); err == nil {
			t.Errorf("%s: retried into success", c.name)
		}
		if *n != 1 {
			t.Errorf("%s: attempts = %d, want 1", c.name, *n)
		}
	}
}

func TestCallStopsRetryingWhenTheCallerGivesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	fn, n := failing(serverError(), serverError())
	wrapped := func(ctx context.Context) error {
		err := fn(ctx)
		cancel()
		return err
	}
	err := Call(ctx, "x", nil, "server.list", wrapped, passThrough)
	var r *RetryableError
	if !errors.As(err, &r) || *n != 1 {
		t.Fatalf("after the caller gave up: err %v, attempts %d; want the first failure and 1 attempt", err, *n)
	}
}
