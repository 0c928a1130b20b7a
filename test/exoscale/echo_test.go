package exoscale

import (
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

// TestEchoedExcerptsNeverLeak: the API quotes pieces of what it was sent,
// as a parser does ("unexpected token near '…'") and a proxy's error page
// does with a header: a window of the (decoded) user data in the refused
// create, a window of the API key in failed lists. No piece reaches the
// Machine's status, its events, the log or the metrics; the Machine still
// fails for the refused create, saying that the message was withheld.
func TestEchoedExcerptsNeverLeak(t *testing.T) {
	// Random throughout, so that any piece of them found is a leak.
	const (
		key      = "EXOk7Qv2Zp9Lx4Tw8Nb3Rm6Hc"
		secretV  = "Wd83Kq19ZpXv5Lm2Tc7Rb4Ny0Hs6Jf1Gq8Pe3Ua9Yt"
		inUD     = "Lm47TxQ9vK2pW8zR5nB3cJ6d"
		userData = `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","passwordHash":"` + inUD + `"}]}}`
	)
	e := env(t, emu.Config{
		Accounts: []emu.Account{{Name: "openshift", Key: key, Secret: secretV}},
		Faults: []harness.Rule{
			{Route: "POST /v2/instance", ErrorRate: 1, ErrorStatus: 400, Echo: harness.EchoUserData, EchoOffset: strings.Index(userData, inUD) + 2, EchoLength: 20, Times: 1},
			// More than a read's retries: the list fails as a whole.
			{Route: "GET /v2/instance", ErrorRate: 1, ErrorStatus: 503, Echo: harness.EchoCredentials, Times: cloud.ReadAttempts},
		},
	})
	secret(t, e, "echo-credentials", map[string]string{"api-key": key, "api-secret": secretV})
	secret(t, e, "echo-user-data", map[string]string{"userData": userData})
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-echo", spec(func(s map[string]any) {
		s["credentialsSecret"] = map[string]string{"name": "echo-credentials"}
		s["userDataSecret"] = map[string]string{"name": "echo-user-data"}
	}))
	m := waitPhase(t, e, "worker-echo", machinev1.PhaseFailed)
	if m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, cloud.Withheld) {
		t.Errorf("error message %v does not say the API's message was withheld", m.Status.ErrorMessage)
	}
	for _, r := range e.Harness().Rules() {
		if r.Fired == 0 {
			t.Errorf("the echo rule %s never fired: the test proves nothing", r.Route)
		}
	}
	if n := e.Exoscale.CountInstances(); n != 0 {
		t.Errorf("%d instances after a refused create", n)
	}
	e.AssertNoExcerpt(t, 10, key, secretV, inUD)
	e.AssertNoCanary(t, key, secretV, inUD)
}
