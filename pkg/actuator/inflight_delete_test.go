package actuator_test

import (
	"context"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/test/fixture"
)

// A Machine deleted while its create is in flight (a MachineHealthCheck or
// an autoscaler giving up on it), and the manager that sent the create dies:
// the cloud carries the create out all the same. The next manager must not
// let the Machine go before that server can no longer appear, or the server
// is left behind without a Machine, an orphan. Found by `make chaos`
// (seed 8, cloudscale).
func TestMachineDeletedWhileItsCreateIsInFlightLeavesNoServer(t *testing.T) {
	e := env(t)
	const slow = 5 * time.Second
	opts, sent := managerDiesMidCreate(t, e, "worker-a", slow)
	if err := e.Client.Delete(context.Background(), getMachine(t, e, "worker-a")); err != nil {
		t.Fatal(err)
	}
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Fatalf("%d servers before the slow create landed; the test wants it still in flight", n)
	}
	e.StartManager(t, opts)
	fixture.Eventually(t, 90*time.Second, "Machine worker-a gone", func() (bool, error) {
		err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: fixture.Namespace, Name: "worker-a"}, &machinev1.Machine{})
		return apierrors.IsNotFound(err), err
	})
	// Whenever the Machine went, the create has had its time to land.
	time.Sleep(time.Until(sent.Add(slow + time.Second)))
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Errorf("%d server(s) of the deleted Machine left: the Machine went while its create could still land", n)
	}
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d create calls, want 1", n)
	}
	// A DeletePending event says why the Machine waits.
	e.AwaitEvent(t, "worker-a", "DeletePending")
}
