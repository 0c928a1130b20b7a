package actuator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A Machine waiting for a create slot when its manager dies had sent
// nothing: the next manager creates its server at once, not a grace period
// later. (Its intent used to be written before the wait: every Machine
// queued behind the slots waited out the grace after each restart.) The
// Machine whose create was in flight waits for it, and sends no second one.
func TestMachineQueuedForACreateIsNotHeldAfterARestart(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	// worker-a's create outlives its manager, and its request with it
	// (not committed): the cloud makes nothing.
	if err := h.AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(time.Minute), Times: 1}); err != nil {
		t.Fatal(err)
	}
	opts := manager.Options{MaxConcurrentCreates: 1, Actuator: actuator.Options{CreateGrace: 10 * time.Minute}}
	stop := e.StartManager(t, opts)
	createMachine(t, e, "worker-a", spec(nil))
	fixture.Eventually(t, 60*time.Second, "worker-a's create in flight", func() (bool, error) {
		return h.Count(createPOST) >= 1, nil
	})
	createMachine(t, e, "worker-b", spec(nil))
	// worker-b is reconciled and waits for the only slot.
	waitPhase(t, e, "worker-b", machinev1.PhaseProvisioning)
	time.Sleep(time.Second)
	stop()
	if _, ok := getMachine(t, e, "worker-b").Annotations[actuator.CreateIntentAnnotation]; ok {
		t.Errorf("worker-b carries a create intent, but it never got a slot: a restart makes it wait the grace")
	}

	e.StartManager(t, opts)
	start := time.Now()
	waitPhase(t, e, "worker-b", machinev1.PhaseProvisioned)
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("worker-b took %s after the restart", took)
	}
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Errorf("worker-a has %d servers: its create in flight must be waited for, not repeated", n)
	}
	if n := h.Count(createPOST); n != 2 {
		t.Errorf("%d creates, want 2: worker-a's, once, and worker-b's", n)
	}
	// worker-a says it waits for its earlier create.
	e.AwaitEvent(t, "worker-a", "CreatePending")
}

// The Machines waiting for creates in flight after a restart look for their
// servers through the shared view: one list per refresh for all of them,
// not one list of each every 10 s.
func TestMachinesWaitingForTheirCreatesShareOneList(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	names := []string{"worker-a", "worker-b", "worker-c", "worker-d", "worker-e", "worker-f"}
	// Every create outlives its manager and is lost with it.
	if err := h.AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(time.Minute), Times: len(names)}); err != nil {
		t.Fatal(err)
	}
	opts := manager.Options{ServerViewRefresh: 10 * time.Second, Actuator: actuator.Options{CreateGrace: 10 * time.Minute}}
	stop := e.StartManager(t, opts)
	for _, name := range names {
		createMachine(t, e, name, spec(nil))
	}
	fixture.Eventually(t, 60*time.Second, "every create in flight", func() (bool, error) {
		return h.Count(createPOST) >= int64(len(names)), nil
	})
	stop()

	e.StartManager(t, opts)
	// Every Machine says it waits, then they go on waiting for a while.
	for _, name := range names {
		fixture.Eventually(t, 60*time.Second, name+" waiting", func() (bool, error) {
			return strings.Contains(fixture.EventText(e.Events(t, name)), "CreatePending"), nil
		})
	}
	h.ResetRequests()
	time.Sleep(25 * time.Second)
	lists := h.Count("GET /v1/servers")
	// At most one list per refresh (10 s) and one more at the start of
	// the window; a list of each Machine every 10 s would be 12 and more.
	if lists > 4 {
		t.Errorf("%d lists in 25 s while %d Machines wait: they did not share the view's", lists, len(names))
	}
	if n := h.Count(createPOST); n != 0 {
		t.Errorf("%d creates while waiting", n)
	}
}

// An intent that is not a time (damaged, or written by something else)
// holds its Machine for one grace period from when it is first seen, with
// an event, and not for ever: then the Machine is created, and once
// deleted, let go.
func TestUnreadableIntentExpiresAfterTheGrace(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	m := fixture.Machine("worker-a", spec(nil))
	m.Annotations = map[string]string{actuator.CreateIntentAnnotation: "soon"}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{Cloud: cloudTimingOut(e, 4*time.Second), Actuator: actuator.Options{CreateGrace: 5 * time.Second}})
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	// Events are sent apart from the status writes: awaited, not read once.
	e.AwaitEvent(t, "worker-a", "CreateIntentUnreadable")
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers, want 1", n)
	}

	// Deleted with an unreadable intent and no server: let go after the
	// grace.
	m2 := fixture.Machine("worker-b", spec(nil))
	m2.Annotations = map[string]string{actuator.CreateIntentAnnotation: "soon"}
	m2.Finalizers = []string{machinev1.MachineFinalizer}
	if err := e.Client.Create(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, m2); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "worker-b gone", func() (bool, error) {
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: fixture.Namespace, Name: "worker-b"}, &machinev1.Machine{})
		return err != nil, nil
	})
}
