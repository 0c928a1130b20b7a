package cloud

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func rateLimited(after time.Duration) error {
	return Classify(Answer{Cloud: "x", Op: "op", Status: http.StatusTooManyRequests, RetryAfter: after})
}
func refused(status int) error {
	return Classify(Answer{Cloud: "x", Op: "op", Status: status, CredentialsSource: "secret ns/s"})
}

func TestGateHoldsCallsForRetryAfter(t *testing.T) {
	g := NewGate("x", RateLimit{})
	c := newClock()
	g.now = c.now
	g.Observe(rateLimited(5 * time.Second))
	err := g.Admit(context.Background())
	var re *RetryableError
	if !errors.As(err, &re) || !re.NotPerformed || re.RetryAfter != 5*time.Second {
		t.Fatalf("Admit in the window = %v, want a not-performed RetryableError with 5s", err)
	}
	c.add(4 * time.Second)
	if err := g.Admit(context.Background()); !errors.As(err, &re) || re.RetryAfter != time.Second {
		t.Fatalf("Admit 4s later = %v, want 1s to go", err)
	}
	c.add(time.Second)
	if err := g.Admit(context.Background()); err != nil {
		t.Fatalf("Admit after the window = %v", err)
	}
	// A 429 without a hint still closes the gate for a moment.
	g.Observe(rateLimited(0))
	if g.ClosedUntil().IsZero() {
		t.Error("a 429 without Retry-After left the gate open")
	}
	// Other failures do not close it.
	c.add(time.Minute)
	g.Observe(Classify(Answer{Cloud: "x", Op: "op", Status: 503}))
	g.Observe(&InvalidConfigError{Message: "no"})
	if !g.ClosedUntil().IsZero() {
		t.Error("a 503 or a refused spec closed the gate")
	}
}

func TestGateBacksOffRefusedCredentials(t *testing.T) {
	g := NewGate("x", RateLimit{})
	c := newClock()
	g.now = c.now
	var waits []time.Duration
	for range 7 {
		g.Observe(refused(http.StatusUnauthorized))
		waits = append(waits, g.ClosedUntil().Sub(c.now()))
		err := g.Admit(context.Background())
		var auth *AuthError
		if !errors.As(err, &auth) || auth.RetryAfter != waits[len(waits)-1] || !NotPerformed(err) {
			t.Fatalf("Admit while refused = %v, want the AuthError with its wait", err)
		}
		c.add(waits[len(waits)-1])
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	g.Observe(nil)
	g.Observe(Classify(Answer{Cloud: "x", Op: "op", Status: http.StatusForbidden, IdentityRefused: true}))
	if d := g.ClosedUntil().Sub(c.now()); d != 30*time.Second {
		t.Errorf("after a success the backoff starts again at 30s, got %v", d)
	}
}

// A 403 for one operation, the key accepted, holds back that operation
// alone: the account's other calls go on.
func TestGateHoldsARefusedOperationOnly(t *testing.T) {
	g := NewGate("x", RateLimit{})
	c := newClock()
	g.now = c.now
	forbidden := Classify(Answer{Cloud: "x", Op: "group.delete", Status: http.StatusForbidden, Permission: "delete-group", CredentialsSource: "secret ns/s"})
	var perm *PermissionError
	if !errors.As(forbidden, &perm) || !NotPerformed(forbidden) {
		t.Fatalf("a 403 = %v (%T), want a PermissionError", forbidden, forbidden)
	}
	var waits []time.Duration
	for range 3 {
		g.ObserveOp("group.delete", forbidden)
		if !g.ClosedUntil().IsZero() {
			t.Fatal("a refused operation closed the whole gate")
		}
		if err := g.AdmitOp(context.Background(), "server.create"); err != nil {
			t.Fatalf("another operation held back: %v", err)
		}
		waits = append(waits, g.OpHeldUntil("group.delete").Sub(c.now()))
		err := g.AdmitOp(context.Background(), "group.delete")
		if !errors.As(err, &perm) || perm.RetryAfter != waits[len(waits)-1] || perm.Permission != "delete-group" {
			t.Fatalf("the refused operation while held: %v, want its PermissionError with the wait", err)
		}
		c.add(waits[len(waits)-1])
		if err := g.AdmitOp(context.Background(), "group.delete"); err != nil {
			t.Fatalf("after its wait: %v", err)
		}
	}
	if want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute}; !slicesEqual(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	g.ObserveOp("group.delete", nil)
	g.ObserveOp("group.delete", forbidden)
	if d := g.OpHeldUntil("group.delete").Sub(c.now()); d != 30*time.Second {
		t.Errorf("after a success the backoff starts again at 30s, got %v", d)
	}
}

func slicesEqual(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGateRateLimit(t *testing.T) {
	g := NewGate("x", RateLimit{QPS: 20, Burst: 2})
	start := time.Now()
	for range 6 {
		if err := g.Admit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// 2 at once, then 4 more at 20/s: at least 200ms.
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("6 calls at 20/s with a burst of 2 took %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := g.Admit(ctx)
	if !errors.Is(err, context.Canceled) || errors.As(err, new(*RetryableError)) {
		t.Errorf("Admit with a cancelled context = %v, want the caller's own error", err)
	}
}

func TestCallObservesAndHolds(t *testing.T) {
	g := NewGate("x", RateLimit{})
	calls := 0
	fail429 := func(context.Context) error { calls++; return errors.New("sdk error") }
	classify := func(ctx context.Context, ex *Exchange, err error) error { return rateLimited(time.Hour) }
	if err := Call(context.Background(), "x", g, "op", fail429, classify); !NotPerformed(err) {
		t.Fatalf("first call: %v", err)
	}
	if err := Call(context.Background(), "x", g, "op", fail429, classify); err == nil || calls != 1 {
		t.Fatalf("second call made %d calls (%v); the gate must hold it", calls, err)
	}
}

// Calls paid for in advance pass at once: the look before a create and the
// create are never split by a rate-limit wait.
func TestGatePrepay(t *testing.T) {
	g := NewGate("x", RateLimit{QPS: 2, Burst: 2})
	ctx, err := g.Prepay(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 2 {
		if err := g.Admit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("prepaid calls waited %v", d)
	}
	// The third is not paid for: it waits for the limit (2/s).
	if err := g.Admit(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("an unpaid call after the burst passed after %v", d)
	}
	// A closed gate holds prepaid calls too.
	g.Observe(rateLimited(time.Hour))
	if err := g.Admit(ctx); !NotPerformed(err) {
		t.Errorf("a closed gate let a call through: %v", err)
	}
}

func TestGateSpareKeepsHalfTheBurst(t *testing.T) {
	g := NewGate("x", RateLimit{QPS: 0.001, Burst: 10})
	ctx := context.Background()
	for i := range 6 {
		if !g.Spare() {
			t.Fatalf("no calls to spare after %d of a burst of 10", i)
		}
		if err := g.Admit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g.Spare() {
		t.Error("calls to spare with 4 of a burst of 10 left; work that can wait must leave them to creates")
	}
	if err := g.Admit(ctx); err != nil {
		t.Errorf("a call that cannot wait is refused: %v", err)
	}
	unlimited := NewGate("x", RateLimit{})
	if !unlimited.Spare() {
		t.Error("an unlimited gate has nothing to spare")
	}
	unlimited.Observe(rateLimited(time.Minute))
	if unlimited.Spare() {
		t.Error("a gate closed by a 429 has calls to spare")
	}
}

// The rate limit's waits are what tells a scale-up held by the provider's
// own limit from one held by the cloud: they are observed, a prepaid
// create's once, and a call that did not wait adds nothing to their sum.
func TestGateObservesRateLimitWaits(t *testing.T) {
	const name = "rate-limit-wait-test"
	g := NewGate(name, RateLimit{QPS: 10, Burst: 2})
	ctx := context.Background()
	count0, sum0 := rateLimitWaits(t, name)
	// Two calls of the burst, then a prepaid pair that waits ~200 ms.
	for range 2 {
		if err := g.Admit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, sum := rateLimitWaits(t, name); sum-sum0 > 0.05 {
		t.Errorf("calls within the burst waited %.3fs by the metric", sum-sum0)
	}
	pctx, err := g.Prepay(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := g.Admit(pctx); err != nil {
			t.Fatal(err)
		}
	}
	count, sum := rateLimitWaits(t, name)
	if count-count0 != 3 {
		t.Errorf("%d waits observed, want 3: two calls of the burst and one prepaid pair", count-count0)
	}
	if sum-sum0 < 0.1 {
		t.Errorf("a prepaid pair after the burst waited %.3fs by the metric; the limit makes it wait ~0.2s", sum-sum0)
	}
	unlimited := NewGate(name, RateLimit{})
	if err := unlimited.Admit(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := rateLimitWaits(t, name); c != count {
		t.Error("a gate without a rate limit observed a wait")
	}
}

func rateLimitWaits(t *testing.T, cloudName string) (count uint64, sum float64) {
	t.Helper()
	var m dto.Metric
	if err := rateLimitWait.WithLabelValues(cloudName).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
