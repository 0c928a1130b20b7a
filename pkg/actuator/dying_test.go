package actuator_test

import (
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A Machine deleted and made again with the same name gets a new server:
// the old one, which the cloud still shows for a while after its delete,
// is not adopted (it would vanish under the Machine, which would then fail
// as "can't find created instance").
func TestReusedNameDoesNotAdoptTheDyingServer(t *testing.T) {
	e := envWith(t, emucs.Config{DeleteTime: 30 * time.Second})
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	old := *waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned).Spec.ProviderID
	deleteMachine(t, e, "worker-a")
	waitGone(t, e, "worker-a", 60*time.Second)
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Fatalf("%d servers of the deleted Machine shown; the test wants the cloud to show it while it goes", n)
	}

	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if *m.Spec.ProviderID == old {
		t.Fatalf("the new worker-a adopted the server of the deleted one (%s), which is going", old)
	}
	// Once the old server is gone, the new Machine keeps its own.
	fixture.Eventually(t, 90*time.Second, "the old server gone", func() (bool, error) {
		return len(serversOf(t, e, "worker-a")) == 1, nil
	})
	// A reconcile after the old server went: awaited, not slept for.
	before := reconcilesOf(e, "worker-a")
	touch(t, e, "worker-a")
	awaitReconcile(t, e, "worker-a", before)
	if p := phase(getMachine(t, e, "worker-a")); p != machinev1.PhaseProvisioned && p != machinev1.PhaseRunning {
		t.Errorf("worker-a is %s after the old server went", p)
	}
}
