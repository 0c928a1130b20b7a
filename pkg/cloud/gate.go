package cloud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is how many calls per second an account makes at most, with
// bursts of Burst.
type RateLimit struct {
	QPS   float64
	Burst int
}

// How long an account's gate stays closed after the cloud refused its
// credentials, and an operation is held back after the cloud refused it
// to them: the first refusal waits authBackoffMin, each further one twice
// as long, up to authBackoffMax. Nothing the provider does can fix
// credentials or grant a permission; it must not hammer the cloud while a
// person does.
const (
	authBackoffMin = 30 * time.Second
	authBackoffMax = 10 * time.Minute
	// minRateLimitedWait is how long a 429 without Retry-After closes the
	// gate.
	minRateLimitedWait = time.Second
)

// Gate is the door every API call of one account passes (Call does it): a
// client-side rate limit, so that many concurrent reconciles never turn into
// a storm of 429s, and a latch that the cloud's own signals close: a 429
// closes it for its Retry-After, a refusal of the credentials themselves
// (AuthError) for a growing backoff. While it is closed, calls fail at once
// without reaching the cloud, whichever Machine, controller or path makes
// them: the machine controller does not honour requeue delays from Exists,
// so only the provider itself can hold those calls back.
//
// A refused permission (PermissionError: a 403 for one operation, the key
// accepted) closes nothing for the others: it holds back that operation
// alone, with the same growing backoff, so that a role lacking the right
// to delete a group still creates and deletes servers. A refusal by one
// zone's endpoint (the call's context names the zone: WithZone) holds that
// operation in that zone only: a policy that leaves one zone out must not
// stop the same operation in the zones it allows.
type Gate struct {
	cloud   string
	limiter *rate.Limiter
	now     func() time.Time

	mu          sync.Mutex
	closedUntil time.Time
	// cause is what closed the gate: a *RetryableError for a 429, an
	// *AuthError for refused credentials.
	cause       error
	authBackoff time.Duration
	// ops holds back operations the cloud refused to these credentials,
	// by opKey: the operation, and the zone when a zone refused it.
	ops map[string]*opHold
	// answered is when each operation last succeeded, by zone ("" for
	// the account's endpoint): a refusal confined to one zone says which
	// other zones allow the operation.
	answered map[string]map[string]time.Time
}

// opKey is the key of an operation's hold: in one zone, or everywhere.
func opKey(op, zone string) string {
	if zone == "" {
		return op
	}
	return op + "@" + zone
}

// opHold is one operation held back after a refused permission.
type opHold struct {
	until   time.Time
	backoff time.Duration
	cause   *PermissionError
}

// NewGate returns an open gate with the rate limit (QPS <= 0: unlimited).
func NewGate(cloudName string, rl RateLimit) *Gate {
	g := &Gate{cloud: cloudName, limiter: rate.NewLimiter(rate.Inf, 0), now: time.Now}
	if rl.QPS > 0 {
		burst := max(rl.Burst, 1)
		g.limiter = rate.NewLimiter(rate.Limit(rl.QPS), burst)
	}
	return g
}

// GateClosedError is a call the gate held back.
type GateClosedError struct {
	Cloud string
	Until time.Time
	Cause error
}

func (e *GateClosedError) Error() string {
	return fmt.Sprintf("%s: not calling the API until %s: %v", e.Cloud, e.Until.UTC().Format(time.RFC3339), e.Cause)
}

func (e *GateClosedError) Unwrap() error { return e.Cause }

// Admit lets one call through: at once with an error while the gate is
// closed, else after the rate limit's wait (which ends with ctx), unless
// the call was paid for in advance (Prepay).
func (g *Gate) Admit(ctx context.Context) error {
	if err := g.closed(); err != nil {
		return err
	}
	if p, ok := ctx.Value(prepaidKey{}).(*prepaid); ok && p.gate == g && p.take() {
		return nil
	}
	if err := g.wait(ctx, 1); err != nil {
		if ctx.Err() != nil {
			// The caller gave up; that is its own business.
			return fmt.Errorf("%s: waiting for the client-side rate limit: %w", g.cloud, ctx.Err())
		}
		return &RetryableError{Err: fmt.Errorf("%s: waiting for the client-side rate limit: %w", g.cloud, err), NotPerformed: true}
	}
	// Waiting may have taken a while: the gate may have closed meanwhile.
	return g.closed()
}

// AdmitOp is Admit for one operation: at once with the PermissionError
// while the cloud's refusal of that operation holds it back (in the zone
// the context names, WithZone, when a zone refused it).
func (g *Gate) AdmitOp(ctx context.Context, op string) error {
	if err := g.opHeld(opKey(op, ZoneOfContext(ctx))); err != nil {
		return err
	}
	return g.Admit(ctx)
}

func (g *Gate) opHeld(key string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.ops[key]
	now := g.now()
	if h == nil || !now.Before(h.until) {
		return nil
	}
	p := *h.cause
	p.Detail = fmt.Sprintf("%s (not asking again until %s)", p.Detail, h.until.UTC().Format(time.RFC3339))
	p.RetryAfter = h.until.Sub(now)
	return &p
}

// ObserveOp is Observe for one operation of the account's endpoint: a
// refused permission holds that operation back for a growing backoff, a
// success lets it go again.
func (g *Gate) ObserveOp(op string, err error) { g.ObserveOpIn(op, "", err) }

// ObserveOpIn is ObserveOp for a call to one zone's endpoint (zone "":
// the account's): a refusal holds the operation back in that zone only. A
// zone's refusal of an operation other zones allow says so
// (PermissionError.Zone, AllowedIn): the role has the permission, and
// what refuses it is confined to that zone.
func (g *Gate) ObserveOpIn(op, zone string, err error) {
	g.Observe(err)
	var perm *PermissionError
	g.mu.Lock()
	defer g.mu.Unlock()
	key, now := opKey(op, zone), g.now()
	switch {
	case err == nil:
		delete(g.ops, key)
		if g.answered == nil {
			g.answered = map[string]map[string]time.Time{}
		}
		if g.answered[op] == nil {
			g.answered[op] = map[string]time.Time{}
		}
		g.answered[op][zone] = now
	case errors.As(err, &perm):
		if zone != "" {
			perm.Zone = zone
			perm.AllowedIn = nil
			for z, at := range g.answered[op] {
				if z != "" && z != zone && now.Sub(at) < authBackoffMax {
					perm.AllowedIn = append(perm.AllowedIn, z)
				}
			}
			slices.Sort(perm.AllowedIn)
		}
		if g.ops == nil {
			g.ops = map[string]*opHold{}
		}
		h := g.ops[key]
		if h == nil {
			h = &opHold{}
			g.ops[key] = h
		}
		h.backoff = min(max(h.backoff*2, authBackoffMin), authBackoffMax)
		h.until, h.cause = now.Add(h.backoff), perm
	}
}

// OpHeldUntil returns until when the operation is held back after a
// refused permission (zero when it is not), for tests and callers;
// OpHeldUntilIn is the same for the operation in one zone.
func (g *Gate) OpHeldUntil(op string) time.Time { return g.OpHeldUntilIn(op, "") }

// OpHeldUntilIn: see OpHeldUntil.
func (g *Gate) OpHeldUntilIn(op, zone string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.ops[opKey(op, zone)]; h != nil && g.now().Before(h.until) {
		return h.until
	}
	return time.Time{}
}

type zoneKey struct{}

// WithZone marks the calls made with the context as calls to one zone's
// endpoint: the gate holds a refused operation back in that zone only.
func WithZone(ctx context.Context, zone string) context.Context {
	return context.WithValue(ctx, zoneKey{}, zone)
}

// ZoneOfContext names the zone WithZone set, "" for none.
func ZoneOfContext(ctx context.Context) string {
	z, _ := ctx.Value(zoneKey{}).(string)
	return z
}

type prepaidKey struct{}

type prepaid struct {
	gate *Gate
	mu   sync.Mutex
	n    int
}

func (p *prepaid) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n <= 0 {
		return false
	}
	p.n--
	return true
}

// Prepay waits for the rate limit of n calls at once and returns a context
// whose next n calls through the gate do not wait again. A sequence that
// must not be split by a wait uses it: a create looks for the Machine's
// servers and then creates one, and the look must not go stale while the
// create queues behind the rate limit.
func (g *Gate) Prepay(ctx context.Context, n int) (context.Context, error) {
	if g == nil || n <= 0 {
		return ctx, nil
	}
	if err := g.closed(); err != nil {
		return ctx, err
	}
	if g.limiter.Limit() != rate.Inf {
		if err := g.wait(ctx, min(n, max(g.limiter.Burst(), 1))); err != nil {
			if ctx.Err() != nil {
				return ctx, fmt.Errorf("%s: waiting for the client-side rate limit: %w", g.cloud, ctx.Err())
			}
			return ctx, &RetryableError{Err: fmt.Errorf("%s: waiting for the client-side rate limit: %w", g.cloud, err), NotPerformed: true}
		}
	}
	return context.WithValue(ctx, prepaidKey{}, &prepaid{gate: g, n: n}), nil
}

// wait waits for n of the rate limit's tokens and observes how long that
// took: the metric says whether a slow scale-up was held by the provider's
// own limit.
func (g *Gate) wait(ctx context.Context, n int) error {
	if g.limiter.Limit() == rate.Inf {
		return nil
	}
	start := time.Now()
	err := g.limiter.WaitN(ctx, n)
	if err == nil {
		rateLimitWait.WithLabelValues(g.cloud).Observe(time.Since(start).Seconds())
	}
	return err
}

func (g *Gate) closed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !now.Before(g.closedUntil) {
		return nil
	}
	held := &GateClosedError{Cloud: g.cloud, Until: g.closedUntil, Cause: g.cause}
	var auth *AuthError
	if errors.As(g.cause, &auth) {
		// Still an auth error to the caller: it is the credentials that
		// need fixing, and the caller reports that.
		a := *auth
		a.Detail = fmt.Sprintf("%s (not asking again until %s)", a.Detail, g.closedUntil.UTC().Format(time.RFC3339))
		a.RetryAfter = g.closedUntil.Sub(now)
		return &a
	}
	return &RetryableError{RetryAfter: g.closedUntil.Sub(now), Err: held, NotPerformed: true}
}

// Observe lets the outcome of a call that Admit let through close or reset
// the gate; errors of Admit itself are not outcomes.
func (g *Gate) Observe(err error) {
	var (
		re   *RetryableError
		auth *AuthError
		api  *APIError
	)
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	switch {
	case err == nil:
		g.authBackoff = 0
	case errors.As(err, &auth):
		// The key itself refused (an unknown key, a bad signature) is
		// the account's, whichever endpoint said so: every zone checks
		// the same key, and a zone cannot be down for one key only. A
		// policy that leaves a zone out refuses operations
		// (PermissionError), not the key.
		g.authBackoff = min(max(g.authBackoff*2, authBackoffMin), authBackoffMax)
		g.close(now.Add(g.authBackoff), err)
	case errors.As(err, &re) && errors.As(err, &api) && api.Status == 429:
		wait := max(re.RetryAfter, minRateLimitedWait)
		g.close(now.Add(wait), err)
	}
}

func (g *Gate) close(until time.Time, cause error) {
	if !g.now().Before(g.closedUntil) {
		observeClosure(g.cloud, cause)
	}
	if until.After(g.closedUntil) {
		g.closedUntil, g.cause = until, cause
	}
}

// Spare reports whether the account has calls to spare: its gate is open
// and at least half of its burst is unused. Work that can wait (tagging a
// new server's root volume) asks first and waits for a later reconcile
// when the answer is no, so that it never takes the calls a burst of
// creates or deletes needs.
func (g *Gate) Spare() bool {
	if g == nil {
		return true
	}
	if g.closed() != nil {
		return false
	}
	if g.limiter.Limit() == rate.Inf {
		return true
	}
	// The limiter keeps its own (real) time.
	return g.limiter.Tokens() >= float64(g.limiter.Burst())/2
}

// ClosedUntil returns when the gate opens again (zero when open), for
// tests and metrics.
func (g *Gate) ClosedUntil() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.now().Before(g.closedUntil) {
		return g.closedUntil
	}
	return time.Time{}
}
