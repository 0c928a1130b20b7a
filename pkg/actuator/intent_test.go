package actuator_test

import (
	"net/http"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A create slower than the manager's life: the manager dies while its
// create is in flight, and the cloud carries the create out afterwards. The
// next manager finds the intent on the Machine, waits for the server
// instead of creating another, and adopts it.
func TestCreateOutlivingItsManagerMakesOneServer(t *testing.T) {
	e := env(t)
	opts, _ := managerDiesMidCreate(t, e, "worker-a", 6*time.Second)
	m := getMachine(t, e, "worker-a")
	if m.Spec.ProviderID != nil {
		t.Fatal("the first manager recorded the server; the test wants it to die first")
	}
	if m.Annotations[actuator.CreateIntentAnnotation] == "" {
		t.Fatalf("no %s on the Machine before the create", actuator.CreateIntentAnnotation)
	}
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Fatalf("%d servers before the slow create landed; the test wants it still in flight", n)
	}
	e.StartManager(t, opts)
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers, want 1", n)
	}
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d create calls, want 1: the second manager must wait for the first create", n)
	}
	e.AwaitEvent(t, "worker-a", "CreatePending")
	e.AwaitEvent(t, "worker-a", "Adopted")
	if _, ok := getMachine(t, e, "worker-a").Annotations[actuator.CreateIntentAnnotation]; ok {
		t.Error("the create intent stayed after the server was recorded")
	}
}

// A create slower than the client's timeout: the client gives up, the cloud
// does not. The same manager waits for the server rather than sending a
// second create.
func TestCreateSlowerThanTheClientTimeoutMakesOneServer(t *testing.T) {
	e := env(t)
	if err := e.Emulator.Harness().AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(3 * time.Second), Committed: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	impatient := cscloud.New(cscloud.Options{BaseURL: e.APIURL, DefaultToken: "default-token", HTTPClient: &http.Client{Timeout: time.Second}})
	e.StartManager(t, manager.Options{Cloud: impatient, Actuator: actuator.Options{CreateGrace: time.Minute}})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers, want 1", n)
	}
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d create calls, want 1", n)
	}
}

// Two managers acting on one Machine at once (a leader that lost its lease
// but does not know it yet, and the new one): the intent is written with an
// optimistic lock, so only one of them sends a create.
func TestTwoManagersAtOnceMakeOneServer(t *testing.T) {
	e := env(t)
	if err := e.Emulator.Harness().AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(2 * time.Second), Committed: true}); err != nil {
		t.Fatal(err)
	}
	opts := manager.Options{Actuator: actuator.Options{CreateGrace: time.Minute}}
	e.StartManager(t, opts)
	e.StartManager(t, opts)
	for _, name := range []string{"worker-a", "worker-b", "worker-c"} {
		createMachine(t, e, name, spec(nil))
	}
	for _, name := range []string{"worker-a", "worker-b", "worker-c"} {
		waitPhase(t, e, name, machinev1.PhaseProvisioned)
		if n := len(serversOf(t, e, name)); n != 1 {
			t.Errorf("%s: %d servers, want 1", name, n)
		}
	}
	if n := e.Emulator.Harness().Count(createPOST); n != 3 {
		t.Errorf("%d create calls for 3 Machines, want 3", n)
	}
}

// managerDiesMidCreate runs a manager until the create of a new Machine
// (name) is in flight, and stops it there; the cloud, which takes slow for
// the create, carries it out all the same. It returns the options to start
// the next manager with, and when the create was seen sent.
func managerDiesMidCreate(t *testing.T, e *fixture.Env, name string, slow time.Duration) (manager.Options, time.Time) {
	t.Helper()
	if err := e.Emulator.Harness().AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(slow), Committed: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	opts := manager.Options{Actuator: actuator.Options{CreateGrace: time.Minute}}
	stop := e.StartManager(t, opts)
	createMachine(t, e, name, spec(nil))
	fixture.Eventually(t, 60*time.Second, "the create call in flight", func() (bool, error) {
		return e.Emulator.Harness().Count(createPOST) >= 1, nil
	})
	sent := time.Now()
	stop()
	return opts, sent
}

// cloudTimingOut is the environment's cloud whose calls give up after
// timeout: a test's create grace must be longer (manager.New refuses it
// otherwise), and a short grace needs a short timeout.
func cloudTimingOut(e *fixture.Env, timeout time.Duration) *cscloud.Cloud {
	return cscloud.New(cscloud.Options{BaseURL: e.APIURL, DefaultToken: "default-token", HTTPClient: &http.Client{Timeout: timeout}})
}
