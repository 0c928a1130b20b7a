package actuator_test

import (
	"context"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A failed create and a failed delete count in the machine-api-operator's
// counters, with the class of the failure as the reason (bounded, never
// a cloud's message); the Machines by phase, the oldest of each phase and
// the deletions' durations are exported for the alerts and the dashboard.
func TestMachineMetrics(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	for _, r := range []harness.Rule{
		{Route: createPOST, ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 1, Times: 1},
		{Route: "DELETE /v1/servers/{uuid}", ErrorRate: 1, ErrorStatus: 503, Times: 1},
	} {
		if err := h.AddRule(r); err != nil {
			t.Fatal(err)
		}
	}
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-counted", spec(nil))
	createMachine(t, e, "worker-invalid", spec(func(s map[string]any) { s["rootVolumeSizeGB"] = 1 }))
	waitPhase(t, e, "worker-counted", machinev1.PhaseProvisioned)
	waitPhase(t, e, "worker-invalid", machinev1.PhaseFailed)
	for _, c := range []struct {
		metric, phase string
		min           float64
	}{
		{"machine_api_provider_machines", machinev1.PhaseProvisioned, 1},
		{"machine_api_provider_machines", machinev1.PhaseFailed, 1},
		{"machine_api_provider_machine_phase_oldest_seconds", machinev1.PhaseProvisioned, 0.001},
	} {
		if v := gauge(t, c.metric, map[string]string{"cloud": "cloudscale", "phase": c.phase}); v < c.min {
			t.Errorf("%s{cloud=cloudscale,phase=%s} = %v, want at least %v", c.metric, c.phase, v, c.min)
		}
	}
	if v := gauge(t, "machine_api_provider_machines", map[string]string{"cloud": "cloudscale", "phase": machinev1.PhaseRunning}); v != -1 {
		t.Errorf("machine_api_provider_machines{phase=Running} = %v without a Running Machine", v)
	}
	if err := e.Client.Delete(context.Background(), getMachine(t, e, "worker-counted")); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "worker-counted deleted", func() (bool, error) {
		err := e.Client.Get(context.Background(), objKey("worker-counted"), &machinev1.Machine{})
		return apierrors.IsNotFound(err), err
	})
	if n := histogramCount(t, "machine_api_provider_machine_deletion_duration_seconds"); n < 1 {
		t.Errorf("no deletion observed in machine_api_provider_machine_deletion_duration_seconds")
	}
	for _, c := range []struct{ metric, machine, reason string }{
		{"mapi_instance_create_failed", "worker-counted", "RateLimited"},
		{"mapi_instance_delete_failed", "worker-counted", "CloudUnavailable"},
		{"mapi_instance_create_failed", "worker-invalid", "InvalidConfiguration"},
	} {
		if n := counter(t, c.metric, c.machine, c.reason); n < 1 {
			t.Errorf("%s{name=%s,reason=%s} = %v, want at least 1", c.metric, c.machine, c.reason, n)
		}
	}
}

// counter reads a machine-api-operator counter for a Machine of the
// tests' namespace; -1 without the series.
func counter(t *testing.T, metric, machine, reason string) float64 {
	t.Helper()
	s := fixture.Series(t, metric, map[string]string{"name": machine, "namespace": fixture.Namespace, "reason": reason})
	if len(s) == 0 {
		return -1
	}
	return s[0].GetCounter().GetValue()
}

// gauge reads the series of a gauge with the labels; -1 without it.
func gauge(t *testing.T, metric string, want map[string]string) float64 {
	t.Helper()
	s := fixture.Series(t, metric, want)
	if len(s) == 0 {
		return -1
	}
	return s[0].GetGauge().GetValue()
}

// histogramCount sums the observations of a histogram's series.
func histogramCount(t *testing.T, metric string) uint64 {
	t.Helper()
	return fixture.HistogramCount(t, metric, nil)
}
