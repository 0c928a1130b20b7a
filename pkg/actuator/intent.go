package actuator

import (
	"context"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/metrics"
)

// CreateIntentAnnotation records on a Machine when the provider last sent
// (or was about to send) the create of its server. It is written before the
// call, with an optimistic lock, and removed when the server is recorded.
// While it stands, a create may be in flight: the server may still appear,
// so no other create is sent for the Machine until the grace period has
// passed, the server has appeared, or the first create is known to have made
// nothing. It survives crashes and leader changes, which in-memory state
// does not.
const CreateIntentAnnotation = "machine.appuio.io/create-requested-at"

// intentOf returns the Machine's create intent.
func intentOf(m *machinev1.Machine) (string, bool) {
	v, ok := m.Annotations[CreateIntentAnnotation]
	return v, ok && v != ""
}

// isSettled reports whether this process knows the intent made nothing.
func (a *Actuator) isSettled(m *machinev1.Machine, at string) bool {
	v, ok := a.settled.Load(m.UID)
	return ok && v.(string) == at
}

// mayHaveServer reports whether a server of the Machine may exist: it
// records one, or a create of it was attempted. A Machine that never got
// as far has none, whatever its secrets say.
func (a *Actuator) mayHaveServer(m *machinev1.Machine) bool {
	if a.recordedID(m) != "" {
		return true
	}
	_, ok := intentOf(m)
	return ok
}

// createPoll is how often a Machine whose earlier create may still land
// looks for its server.
const createPoll = 10 * time.Second

// awaitEarlierCreate handles a Machine whose earlier create may still be in
// flight. It looks for the server directly; if it is there, it is recorded
// (done). Within the grace period nothing else happens (done, with a
// requeue). After it, the create is taken to have failed and the caller
// creates anew (not done).
func (a *Actuator) awaitEarlierCreate(ctx context.Context, s *scope, at string) (done bool, err error) {
	m := s.machine
	// Through the shared view: one list per refresh serves every Machine
	// waiting (after a restart, all those whose creates were in flight).
	// Before a create is sent, the Machine's servers are looked up
	// directly all the same (cloud.Create).
	found, err := s.view.MachineIn(ctx, s.ref.Name, s.spec.Zone())
	if err != nil {
		return true, a.fail(ctx, m, "FailedCreate", err)
	}
	if len(found) > 0 {
		server := &found[0]
		s.view.Created(*server)
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Adopted", "Found %s server %s of this Machine, from the create requested at %s", a.cloud.Name(), server.ID, at)
		return true, a.record(ctx, s, server, nil)
	}
	since := a.intentSince(m, at)
	remaining := since.Add(a.o.CreateGrace).Sub(a.now())
	if remaining <= 0 {
		a.log.Info("earlier create made no server within the grace period; creating anew", "machine", machineKey(m), "requestedAt", at)
		return false, nil
	}
	metrics.CreateWait(a.cloud.Name())
	msg := fmt.Sprintf("a create requested at %s may still make a server; looking for it until %s before creating another",
		at, since.Add(a.o.CreateGrace).UTC().Format(time.RFC3339))
	a.recorder.Event(m, corev1.EventTypeNormal, "CreatePending", msg)
	return true, &machinecontroller.RequeueAfterError{RequeueAfter: min(remaining, createPoll)}
}

// awaitCreateBeforeDelete keeps a Machine being deleted, for which no server
// was found, while a create of it may still make one: let go now, the
// Machine would leave that server behind, an orphan. It looks again (the
// caller's next attempt deletes what it finds) until the grace period of
// the intent has passed, unless this process knows the create made nothing.
func (a *Actuator) awaitCreateBeforeDelete(m *machinev1.Machine) error {
	at, ok := intentOf(m)
	if !ok || a.isSettled(m, at) {
		return nil
	}
	until := a.intentSince(m, at).Add(a.o.CreateGrace)
	remaining := until.Sub(a.now())
	if remaining <= 0 {
		return nil
	}
	a.recorder.Eventf(m, corev1.EventTypeNormal, "DeletePending",
		"a create requested at %s may still make a server; looking for it until %s before letting the Machine go", at, until.UTC().Format(time.RFC3339))
	return &machinecontroller.RequeueAfterError{RequeueAfter: min(remaining, createPoll)}
}

// intentSince is the time of the Machine's create intent at. One this
// process cannot read (damaged, or written by something else) counts from
// when this process first saw it, with a Warning event then: a create may
// have been sent under it, so it holds the Machine for a grace period, but
// not for ever. (After a restart it counts from then again: at most one
// grace period more.)
func (a *Actuator) intentSince(m *machinev1.Machine, at string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		return t
	}
	now := a.now()
	v, loaded := a.unreadable.LoadOrStore(m.UID, unreadableIntent{value: at, since: now})
	seen := v.(unreadableIntent)
	if loaded && seen.value == at {
		return seen.since
	}
	if loaded {
		seen = unreadableIntent{value: at, since: now}
		a.unreadable.Store(m.UID, seen)
	}
	a.recorder.Eventf(m, corev1.EventTypeWarning, "CreateIntentUnreadable",
		"the annotation %s=%q is not a time (RFC 3339): a create may have been sent under it, so none is sent and the Machine is not let go before %s",
		CreateIntentAnnotation, cloud.Truncate(at), seen.since.Add(a.o.CreateGrace).UTC().Format(time.RFC3339))
	return seen.since
}

// unreadableIntent is a create intent that is not a time, and when this
// process first saw it.
type unreadableIntent struct {
	value string
	since time.Time
}

// recordIntent writes the create intent on the Machine, with an optimistic
// lock: if another process (a new leader) changed the Machine meanwhile,
// the write fails and nothing is created; the next reconcile sees what it
// did. It returns the intent's time, also when the write failed (it may
// have landed all the same).
func (a *Actuator) recordIntent(ctx context.Context, m *machinev1.Machine) (string, error) {
	original := m.DeepCopy()
	at := a.now().UTC().Format(time.RFC3339Nano)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[CreateIntentAnnotation] = at
	status := m.Status.DeepCopy()
	if err := a.client.Patch(ctx, m, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})); err != nil {
		*m = *original
		return at, fmt.Errorf("recording the create intent on the Machine: %w", err)
	}
	// The patch answered with the stored object; the status the machine
	// controller set in memory stays (it patches it itself).
	m.Status = *status
	return at, nil
}
