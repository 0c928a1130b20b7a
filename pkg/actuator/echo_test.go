package actuator_test

import (
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// Random throughout, so that any piece of them found is a leak.
const (
	echoToken    = "Tq4Wz9Kx2Lp7Vb3Nm8Rc5HdY"
	echoInUD     = "Jm5Tq8Wc2Lx7Rv4Kp9Zd6FsG"
	echoUserData = `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","passwordHash":"` + echoInUD + `"}]}}`
)

// TestEchoedExcerptsNeverLeak: the API quotes pieces of what it was sent,
// as a parser does ("unexpected token near '…'") and a proxy's error page
// does with a header: a window of the user data in the refused create, a
// window of the token in failed lists. No piece reaches the Machine's
// status, its events, the log or the metrics; the Machine still fails for
// the refused create, saying that the message was withheld.
func TestEchoedExcerptsNeverLeak(t *testing.T) {
	off := strings.Index(echoUserData, echoInUD) + 2
	e := fixture.Start(t, fixture.Options{Emulator: emucs.Config{
		Tokens: map[string]emucs.Access{echoToken: emucs.ReadWrite},
		Faults: []harness.Rule{
			{Route: "POST /v1/servers", ErrorRate: 1, ErrorStatus: 400, Echo: harness.EchoUserData, EchoOffset: off, EchoLength: 20, Times: 1},
			// More than a read's retries: the list fails as a whole.
			{Route: "GET /v1/servers", ErrorRate: 1, ErrorStatus: 503, Echo: harness.EchoCredentials, Times: cloud.ReadAttempts},
		},
	}})
	secret(t, e, "echo-token", map[string]string{"token": echoToken})
	secret(t, e, "echo-user-data", map[string]string{"userData": echoUserData})
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-echo", spec(func(s map[string]any) {
		s["tokenSecret"] = map[string]string{"name": "echo-token"}
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
	e.AssertNoExcerpt(t, 10, echoToken, echoInUD)
	e.AssertNoCanary(t, echoToken, echoInUD)
}
