package actuator

import (
	"math/rand/v2"
	"sync"
	"time"

	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	"k8s.io/apimachinery/pkg/types"
)

// The provider's own backoff for a Machine whose cloud calls fail without
// the cloud saying when to come back: 5s, 10s, 20s, … up to 5 minutes.
const (
	backoffMin = 5 * time.Second
	backoffMax = 5 * time.Minute
	// jitterMin is the least spread of the waits of Machines that failed
	// together.
	jitterMin = 500 * time.Millisecond
)

// backoffs hold the cloud calls of Machines whose last ones failed: a
// reconcile that comes early (an unrelated watch event, a requeue the
// machine controller does not delay) returns at once, without a call.
type backoffs struct {
	m sync.Map // types.UID -> *backoff
}

type backoff struct {
	mu    sync.Mutex
	until time.Time
	next  time.Duration
}

// failed records a failure and returns how long to wait: the cloud's hint
// when it gave one, else the next step of the Machine's backoff, with a
// jitter.
func (b *backoffs) failed(uid types.UID, now time.Time, hint time.Duration) time.Duration {
	v, _ := b.m.LoadOrStore(uid, &backoff{})
	bo := v.(*backoff)
	bo.mu.Lock()
	defer bo.mu.Unlock()
	wait := hint
	if wait <= 0 && now.Before(bo.until) {
		// Failed again within the wait: from a path the backoff does not
		// hold (the existence check, which the machine controller retries
		// at once) and often from the same answer (the shared view
		// repeats its failed list until it may list again). That is not a
		// new step.
		return bo.until.Sub(now)
	}
	if wait <= 0 {
		wait = max(bo.next, backoffMin)
		bo.next = min(wait*2, backoffMax)
	}
	wait = jittered(wait)
	bo.until = now.Add(wait)
	return wait
}

// jittered lengthens a wait by up to a quarter (at least jitterMin): the
// Machines one failure held back (a 429 closes the account's gate for all
// of them, a failed list fails every lookup of the cluster) must not all
// come back at the same moment, and fail together again.
func jittered(wait time.Duration) time.Duration {
	spread := max(wait/4, jitterMin)
	return wait + rand.N(spread)
}

// held returns the requeue for a Machine still in its backoff, nil when its
// calls may go ahead.
func (b *backoffs) held(uid types.UID, now time.Time) error {
	v, ok := b.m.Load(uid)
	if !ok {
		return nil
	}
	bo := v.(*backoff)
	bo.mu.Lock()
	defer bo.mu.Unlock()
	if !now.Before(bo.until) {
		return nil
	}
	return &machinecontroller.RequeueAfterError{RequeueAfter: bo.until.Sub(now)}
}

// reset forgets the Machine's failures after a success.
func (b *backoffs) reset(uid types.UID) { b.m.Delete(uid) }
