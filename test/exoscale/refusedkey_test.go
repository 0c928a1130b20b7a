package exoscale

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestRefusedKeyIsCredentialsRefused: an API key the API does not know, or
// a wrong secret (the signature refused), is refused by every zone alike.
// That is the credentials, never a zone's outage: the Machines get
// CredentialsRefused events naming the secret, no ZoneUnavailable event or
// condition, and the account's gate backs off: after the first refusals
// (one list of the zones asked at once) no request reaches the cloud for
// the gate's 30 s, however many reconciles come.
func TestRefusedKeyIsCredentialsRefused(t *testing.T) {
	for _, tc := range []struct{ name, key, secret string }{
		{"unknown key", "EXO0deadbeef00000000000000", canarySecret},
		{"wrong secret", canaryKey, "cnry-wrong-secret-Pq72Lr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env(t, emu.Config{})
			secret(t, e, "refused-credentials", map[string]string{"api-key": tc.key, "api-secret": tc.secret})
			h := e.Harness()
			// notYet is a time no later than the first refusal: before
			// the manager starts, then each time no request was made yet
			// (taken before the count is read), so that the window below
			// ends before the gate opens however late a poll runs.
			notYet := time.Now()
			startManager(t, e, manager.Options{ServerViewRefresh: time.Second})
			for i := range 3 {
				createMachine(t, e, fmt.Sprintf("worker-%d", i), spec(func(s map[string]any) {
					s["credentialsSecret"] = map[string]string{"name": "refused-credentials"}
					if i == 1 {
						s["zone"] = "de-fra-1"
					}
				}))
			}
			fixture.Eventually(t, 60*time.Second, "a CredentialsRefused event on every Machine", func() (bool, error) {
				if now := time.Now(); h.Total() == 0 {
					notYet = now
				}
				for i := range 3 {
					if !strings.Contains(fixture.EventText(e.Events(t, fmt.Sprintf("worker-%d", i))), "CredentialsRefused") {
						return false, nil
					}
				}
				return true, nil
			})
			sent, from := h.Total(), time.Now()
			// Reconciles go on (the machine controller retries every
			// Machine); the cloud hears nothing until the gate opens, 30 s
			// after the first refusal (the window ends before that).
			time.Sleep(min(10*time.Second, max(0, time.Until(notYet.Add(29*time.Second)))))
			if n := h.Total() - sent; n > 0 {
				t.Errorf("%d requests in the %s after the key was refused (%v), want none: the account's gate holds them",
					n, time.Since(from).Round(time.Millisecond), h.Requests())
			}
			for i := range 3 {
				name := fmt.Sprintf("worker-%d", i)
				text := fixture.EventText(e.Events(t, name))
				if strings.Contains(text, "ZoneUnavailable") {
					t.Errorf("%s: a refused key reported as a zone outage:\n%s", name, text)
				}
				if !strings.Contains(text, "refused-credentials") {
					t.Errorf("%s: the event does not name the secret:\n%s", name, text)
				}
				if c := meta.FindStatusCondition(providerConditions(t, getMachine(t, e, name)), actuator.ConditionZone); c != nil && c.Status == "False" {
					t.Errorf("%s: condition %s=False (%s) for a refused key", name, actuator.ConditionZone, c.Message)
				}
			}
			if n := e.Exoscale.CountInstances(); n != 0 {
				t.Errorf("%d instances made with refused credentials", n)
			}
			assertNoCanary(t, e)
		})
	}
}
