package actuator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A 429's Retry-After holds every call of the account, on every path: the
// existence checks the machine controller retries at once included.
func TestRetryAfterHoldsEveryCallOfTheAccount(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: "GET /v1/servers", ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 4, Times: 1}); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{})
	for i := range 5 {
		createMachine(t, e, fmt.Sprintf("worker-%d", i), spec(nil))
	}
	fixture.Eventually(t, 30*time.Second, "the rate-limited list", func() (bool, error) { return h.Count("GET /v1/servers") >= 1, nil })
	start := time.Now()
	time.Sleep(3 * time.Second)
	if n := h.Total(); n != 1 {
		t.Errorf("%d calls within %s of a 429 with Retry-After 4 (%v), want only the refused one", n, time.Since(start).Round(time.Millisecond), h.Requests())
	}
	for i := range 5 {
		waitPhase(t, e, fmt.Sprintf("worker-%d", i), machinev1.PhaseProvisioned)
	}
}

// Refused credentials are retried slowly, with an event that says so: the
// provider cannot fix them, and must not hammer the cloud while a person
// does.
func TestRefusedCredentialsAreRetriedSlowly(t *testing.T) {
	e := env(t)
	secret(t, e, "wrong-token", map[string]string{"token": "canary-wrong-token-77aa31"})
	e.StartManager(t, manager.Options{})
	for i := range 3 {
		createMachine(t, e, fmt.Sprintf("worker-%d", i), spec(func(s map[string]any) { s["tokenSecret"] = map[string]string{"name": "wrong-token"} }))
	}
	fixture.Eventually(t, 30*time.Second, "a CredentialsRefused event", func() (bool, error) {
		return strings.Contains(fixture.EventText(e.Events(t, "worker-0")), "CredentialsRefused"), nil
	})
	time.Sleep(5 * time.Second)
	if n := e.Emulator.Harness().Total(); n > 1 {
		t.Errorf("%d calls with refused credentials in over 5s (%v), want 1: the account's calls wait", n, e.Emulator.Harness().Requests())
	}
	if text := fixture.EventText(e.Events(t, "worker-0")); !strings.Contains(text, "wrong-token") {
		t.Errorf("the event does not name the secret:\n%s", text)
	}
}
