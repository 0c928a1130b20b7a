package actuator_test

import (
	"fmt"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// rateLimitedCloud makes the emulated API answer 429 beyond 5 calls a
// second, and provisions eight Machines with the client-side limit given.
func rateLimitedCloud(t *testing.T, client cloud.RateLimit) (e *fixture.Env, refused int) {
	t.Helper()
	e = env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: "*", RateLimit: &harness.RateLimit{QPS: 5, Burst: 5}}); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{CloudRateLimit: client})
	var names []string
	for i := range 8 {
		names = append(names, fmt.Sprintf("worker-%d", i))
		createMachine(t, e, names[i], spec(nil))
	}
	for _, name := range names {
		waitPhase(t, e, name, machinev1.PhaseProvisioned)
	}
	// Counted in the emulator: the API would rate-limit the test too.
	servers := map[string]int{}
	for _, s := range e.Emulator.Servers() {
		servers[s.Tags[v1beta1.TagMachineName]]++
	}
	for _, name := range names {
		if servers[name] != 1 {
			t.Errorf("%s has %d servers, want 1", name, servers[name])
		}
	}
	if n := h.Count(createPOST) - int64(h.Rules()[0].Fired); n > int64(len(names)) {
		t.Errorf("%d creates got through for %d Machines", n, len(names))
	}
	return e, h.Rules()[0].Fired
}

// A client-side limit under the cloud's keeps every call under it: eight
// Machines provisioned at once are not answered a single 429.
func TestClientRateLimitKeepsUnderTheClouds(t *testing.T) {
	if _, refused := rateLimitedCloud(t, cloud.RateLimit{QPS: 4, Burst: 4}); refused != 0 {
		t.Errorf("the cloud answered %d calls with 429", refused)
	}
}

// A cloud whose limit is under the client's answers some calls 429: its
// Retry-After holds the account's calls back, and the Machines are
// provisioned all the same, one server each.
func TestCloudRateLimitUnderTheClientsIsHonoured(t *testing.T) {
	if _, refused := rateLimitedCloud(t, cloud.RateLimit{QPS: 50, Burst: 100}); refused == 0 {
		t.Error("the cloud's rate limit never answered 429: this test does not test what it says")
	}
}
