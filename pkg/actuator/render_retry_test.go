package actuator_test

import (
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/userdata"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestStarvedRenderIsRetriedNotFailed: a sound template whose render times
// out (a host too busy for the sandbox to finish in time, here a timeout
// of 1 ms) does not fail the Machine: it is retried with backoff, with
// events and a metric, and the Machine gets its server once renders finish
// again (a manager with the default limits).
func TestStarvedRenderIsRetriedNotFailed(t *testing.T) {
	e := env(t)
	secret(t, e, "template-user-data", map[string]string{"userData": `{ ignition: { version: '3.4.0' }, hostname: std.extVar('context').machine.metadata.name }`})
	before := fixture.CounterSum(t, "machine_api_provider_user_data_render_failures_total", map[string]string{"cloud": "cloudscale", "reason": "timeout"})
	stop := e.StartManager(t, manager.Options{UserDataRenderer: &userdata.Renderer{Timeout: time.Millisecond}})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": "template-user-data"} }))
	fixture.Eventually(t, 60*time.Second, "two render failures, or the Machine failed", func() (bool, error) {
		if phase(getMachine(t, e, "worker-a")) == machinev1.PhaseFailed {
			return true, nil
		}
		return fixture.CounterSum(t, "machine_api_provider_user_data_render_failures_total", map[string]string{"cloud": "cloudscale", "reason": "timeout"})-before >= 2, nil
	})
	stop()
	m := getMachine(t, e, "worker-a")
	if p := phase(m); p == machinev1.PhaseFailed {
		t.Fatalf("a render that timed out failed the Machine: %v", *m.Status.ErrorMessage)
	}
	// An event says the render is retried.
	e.AwaitEvent(t, "worker-a", "UserDataRenderFailed")
	e.AwaitEvent(t, "worker-a", "did not finish within 1ms")
	if n := e.Emulator.Harness().Count(createPOST); n != 0 {
		t.Errorf("%d creates without user data", n)
	}
	e.StartManager(t, manager.Options{})
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	assertNoCanary(t, e)
}
