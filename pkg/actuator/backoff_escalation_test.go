package actuator_test

import (
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// One failed list of the cluster's servers is one failure. The machine
// controller retries a failed existence check at once, and the shared view,
// with no earlier list to fall back on (a manager that just started: a new
// leader), answers those retries with the same error until it may list
// again. They must not each count as a failure of their own, or one 503
// doubles the Machine's backoff many times over and holds it for minutes.
// Found by `make chaos` (seed 9, Exoscale: a Machine held for 5 minutes
// after one 503).
func TestOneFailedListIsOneStepOfBackoff(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: "GET /v1/servers", ErrorRate: 1, ErrorStatus: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	fixture.Eventually(t, 30*time.Second, "the failed list", func() (bool, error) {
		return h.Rules()[0].Fired == 1, nil
	})
	// The first step of the backoff is 5 s, the next 10 s: well within
	// 30 s of the single failure the Machine has its server.
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for phase(getMachine(t, e, "worker-a")) != machinev1.PhaseProvisioned {
		if time.Now().After(deadline) {
			t.Fatalf("worker-a not Provisioned within 30s of one failed list; its events:\n%s", fixture.EventText(e.Events(t, "worker-a")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("Provisioned %s after the failed list", time.Since(start).Round(100*time.Millisecond))
}
