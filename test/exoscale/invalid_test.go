package exoscale

import (
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestBadSpecsFailWithoutWrites: specs the provider can tell are wrong
// fail their Machine with a message naming the field, and nothing is
// written to the cloud.
func TestBadSpecsFailWithoutWrites(t *testing.T) {
	e := env(t, emu.Config{})
	secret(t, e, "huge-user-data", map[string]string{"userData": `{"ignition":{"version":"3.4.0"},"x":"` + strings.Repeat("a", 24600) + `"}`})
	secret(t, e, "no-secret-key", map[string]string{"api-key": canaryKey})
	startManager(t, e, manager.Options{})
	cases := map[string]struct {
		spec, want string
	}{
		"worker-template":  {spec(func(s map[string]any) { s["template"] = map[string]string{"name": "rhcos-9.99"} }), `spec.providerSpec.value.template: no private template named "rhcos-9.99"`},
		"worker-disk":      {spec(func(s map[string]any) { s["diskSize"] = 5 }), "spec.providerSpec.value.diskSize: Invalid value: 5: must be at least 10"},
		"worker-type":      {spec(func(s map[string]any) { s["instanceType"] = "standard.enormous" }), "spec.providerSpec.value.instanceType"},
		"worker-zone":      {spec(func(s map[string]any) { s["zone"] = "ch-zrh-1" }), `spec.providerSpec.value.zone: zone "ch-zrh-1" does not exist`},
		"worker-key":       {spec(func(s map[string]any) { s["antiAffinityKey"] = "my_workers" }), "spec.providerSpec.value.antiAffinityKey"},
		"worker-version":   {spec(func(s map[string]any) { s["apiVersion"] = "machine.appuio.io/v1alpha1" }), `spec.providerSpec.value.apiVersion: Unsupported value: "machine.appuio.io/v1alpha1"`},
		"worker-user-data": {spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": "huge-user-data"} }), "the rendered user data is 24761 bytes, more than the 24576 bytes"},
		"worker-creds":     {spec(func(s map[string]any) { s["credentialsSecret"] = map[string]string{"name": "no-secret-key"} }), `key "api-secret"`},
	}
	for name, c := range cases {
		createMachine(t, e, name, c.spec)
	}
	for name, c := range cases {
		fixture.Eventually(t, 60*time.Second, name+" to fail naming the field", func() (bool, error) {
			m := getMachine(t, e, name)
			msg := ""
			if m.Status.ErrorMessage != nil {
				msg = *m.Status.ErrorMessage
			}
			if name == "worker-creds" {
				// A credentials secret can be fixed: the Machine waits,
				// and says why in an event.
				msg += fixture.EventText(e.Events(t, name))
			}
			return strings.Contains(msg, c.want), fmt.Errorf("phase %q, message %q, events:\n%s", phase(m), msg, fixture.EventText(e.Events(t, name)))
		})
	}
	for name := range cases {
		if m := getMachine(t, e, name); name != "worker-creds" && phase(m) != machinev1.PhaseFailed {
			t.Errorf("%s is %q, want Failed", name, phase(m))
		}
	}
	if n := writes(e); n != 0 {
		t.Errorf("%d writes to the cloud: %v", n, e.Harness().Requests())
	}
	if n := e.Exoscale.CountInstances(); n != 0 {
		t.Errorf("%d instances", n)
	}
	// The Machines go without a cloud call of their own.
	for name := range cases {
		e.DeleteMachine(t, name)
	}
	assertNoCanary(t, e)
}
