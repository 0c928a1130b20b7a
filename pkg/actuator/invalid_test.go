package actuator_test

import (
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

func TestInvalidSpecsFailTheMachine(t *testing.T) {
	e := env(t)
	secret(t, e, "no-user-data", map[string]string{"something-else": "x"})
	e.StartManager(t, manager.Options{})
	cases := []struct {
		name, spec, wantInMessage string
		// cloud is whether only the cloud can tell (one refused create).
		cloud bool
	}{
		{"missing-zone", spec(func(s map[string]any) { delete(s, "zone") }), "spec.providerSpec.value.zone", false},
		{"unknown-flavor", spec(func(s map[string]any) { s["flavor"] = "flex-999-1" }), "spec.providerSpec.value.flavor", false},
		{"unknown-image", spec(func(s map[string]any) { s["image"] = "windows-3.11" }), "spec.providerSpec.value.image", true},
		{"malformed", `{"zone": "rma1", "flavor": ["flex-8-4"], "image": {"slug": "debian-12"}}`, "spec.providerSpec.value", false},
		{"wrong-type", spec(func(s map[string]any) { s["rootVolumeSizeGB"] = "fifty" }), "rootVolumeSizeGB", false},
		{"other-api-version", spec(func(s map[string]any) { s["apiVersion"] = "machine.appuio.io/v2" }), `spec.providerSpec.value.apiVersion: Unsupported value: "machine.appuio.io/v2"`, false},
		{"user-data-without-key", spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": "no-user-data"} }), "spec.providerSpec.value.userDataSecret", false},
	}
	for _, c := range cases {
		createMachine(t, e, c.name, c.spec)
	}
	wantCreates := int64(0)
	for _, c := range cases {
		m := waitPhase(t, e, c.name, machinev1.PhaseFailed)
		if m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, c.wantInMessage) {
			t.Errorf("%s: error message %v does not name %s", c.name, m.Status.ErrorMessage, c.wantInMessage)
		}
		if m.Status.ErrorReason == nil || *m.Status.ErrorReason != machinev1.InvalidConfigurationMachineError {
			t.Errorf("%s: error reason %v, want InvalidConfiguration", c.name, m.Status.ErrorReason)
		}
		if c.cloud {
			wantCreates++
		}
	}
	// Failed Machines are left alone: no retries hammer the cloud.
	time.Sleep(2 * time.Second)
	if n := e.Emulator.Harness().Count(createPOST); n != wantCreates {
		t.Errorf("%d server create calls for invalid specs, want %d (only the image needs the cloud to tell)", n, wantCreates)
	}
	assertNoCanary(t, e)
}

func TestMissingTokenSecretIsRetriedUntilItExists(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) { s["tokenSecret"] = map[string]string{"name": "later-token"} }))
	fixture.Eventually(t, 30*time.Second, "a SecretNotFound event", func() (bool, error) {
		return strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "SecretNotFound"), nil
	})
	if msg := fixture.EventText(e.Events(t, "worker-a")); !strings.Contains(msg, "later-token") || !strings.Contains(msg, "tokenSecret") {
		t.Errorf("the event does not say which secret is missing:\n%s", msg)
	}
	if p := phase(getMachine(t, e, "worker-a")); p == machinev1.PhaseFailed {
		t.Fatalf("a missing secret failed the Machine; it should be retried")
	}
	secret(t, e, "later-token", map[string]string{"token": canaryToken})
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	assertNoCanary(t, e)
}

func TestRefusedTokenNeverLeaks(t *testing.T) {
	e := env(t)
	const wrongToken = "canary-wrong-token-77aa31"
	secret(t, e, "wrong-token", map[string]string{"token": wrongToken})
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) { s["tokenSecret"] = map[string]string{"name": "wrong-token"} }))
	fixture.Eventually(t, 30*time.Second, "a warning event about the refused token", func() (bool, error) {
		return strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "Warning"), nil
	})
	text := e.Logs.String() + fixture.EventText(e.Events(t, "worker-a"))
	if strings.Contains(text, wrongToken) {
		t.Errorf("the refused token appears in logs or events")
	}
}
