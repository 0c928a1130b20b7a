package actuator_test

import (
	"context"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A failed create and a failed delete count in the machine-api-operator's
// counters, with the class of the failure as the reason (bounded, never
// a cloud's message).
func TestFailuresCountInTheOperatorsCounters(t *testing.T) {
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
	if err := e.Client.Delete(context.Background(), getMachine(t, e, "worker-counted")); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "worker-counted deleted", func() (bool, error) {
		err := e.Client.Get(context.Background(), objKey("worker-counted"), &machinev1.Machine{})
		return apierrors.IsNotFound(err), err
	})
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
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] == machine && labels["namespace"] == fixture.Namespace && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
