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
	// notYet is a moment before the refused list was answered: the last
	// look that had not counted it. The account's calls are held for 4 s
	// from the answer, so from notYet on too.
	notYet := time.Now()
	e.StartManager(t, manager.Options{})
	for i := range 5 {
		createMachine(t, e, fmt.Sprintf("worker-%d", i), spec(nil))
	}
	fixture.Eventually(t, 30*time.Second, "the rate-limited list", func() (bool, error) {
		now := time.Now()
		if h.Count("GET /v1/servers") >= 1 {
			return true, nil
		}
		notYet = now
		return false, nil
	})
	time.Sleep(time.Until(notYet.Add(3500 * time.Millisecond)))
	n := h.Total()
	// A look that a loaded machine delayed past the Retry-After proves
	// nothing either way: only a call counted within it fails the test.
	switch within := time.Since(notYet); {
	case n == 1:
	case within < 4*time.Second:
		t.Errorf("%d calls within %s of a 429 with Retry-After 4 (%v), want only the refused one", n, within.Round(time.Millisecond), h.Requests())
	default:
		t.Logf("%d calls, looked at only %s after the 429: past its Retry-After, inconclusive", n, within.Round(time.Millisecond))
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
