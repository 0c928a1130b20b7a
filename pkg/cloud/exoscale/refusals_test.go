package exoscale

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// A zone that refuses an operation the other zones allow (a policy rule
// that leaves it out) holds that operation in that zone only: the lists of
// the other zones go on, also when the refusal is the last answer of a
// list, and the error says that the credentials may do it elsewhere rather
// than to grant what they have.
func TestZoneRefusalHoldsThatZoneOnly(t *testing.T) {
	x := newEnv(t, emu.Config{})
	// A Machine's spec names de-fra-1, so its failures count.
	x.spec(specJSON(map[string]any{"zone": "de-fra-1"}))
	s, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// de-fra-1 refuses list-instances, and answers after ch-gva-2.
	h := x.emu.Harness()
	if err := h.AddRule(harness.Rule{Route: "GET /v2/instance", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: http.StatusForbidden,
		Latency: harness.Duration(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		servers, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
		var partial *cloud.PartialListError
		if !errors.As(err, &partial) || !slices.Equal(partial.Zones(), []string{"de-fra-1"}) {
			t.Fatalf("list %d: %v, want the servers of the other zones and de-fra-1's refusal", i+1, err)
		}
		if !slices.ContainsFunc(servers, func(sv cloud.Server) bool { return sv.ID == s.ID }) {
			t.Fatalf("list %d: %v lacks ch-gva-2's instance %s", i+1, servers, s.ID)
		}
		var perm *cloud.PermissionError
		if !errors.As(err, &perm) || perm.Zone != "de-fra-1" || !slices.Contains(perm.AllowedIn, "ch-gva-2") {
			t.Fatalf("list %d: %v, want a PermissionError of de-fra-1 that says ch-gva-2 allows it", i+1, err)
		}
		if msg := perm.Error(); !strings.Contains(msg, "in zone de-fra-1") || !strings.Contains(msg, "they may in zones ") || !strings.Contains(msg, "ch-gva-2") || strings.Contains(msg, "grant them") {
			t.Errorf("list %d: %q should say where it is refused and where not, not to grant what the key has", i+1, msg)
		}
	}
	if !x.gate.OpHeldUntil("instance.list").IsZero() || !x.gate.OpHeldUntilIn("instance.list", "ch-gva-2").IsZero() {
		t.Error("instance.list is held beyond de-fra-1")
	}
	if x.gate.OpHeldUntilIn("instance.list", "de-fra-1").IsZero() {
		t.Error("de-fra-1's instance.list is not held after its refusal")
	}
	if fired := h.Rules()[0].Fired; fired != 1 {
		t.Errorf("de-fra-1 was asked %d times, want once: the refusal holds it back", fired)
	}
	if !x.gate.ClosedUntil().IsZero() {
		t.Error("a zone's refusal of one operation closed the account's gate")
	}
}

// An unknown key or a wrong secret is refused by every zone alike: that is
// the credentials, never a zone's outage. The account's gate closes with an
// AuthError (CredentialsRefused) and backs off: no zone is taken for down,
// and no further call reaches the cloud while the gate is closed.
func TestRefusedKeyIsNoZoneOutage(t *testing.T) {
	for _, tc := range []struct{ name, key, secret string }{
		{"unknown key", "EXO000000000000000000000000", testSecret},
		{"wrong secret", testKey, "not-the-secret-Kx81Zb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newEnv(t, emu.Config{})
			x.spec(specJSON(map[string]any{"zone": "de-fra-1"}))
			gate := cloud.NewGate(Name, cloud.RateLimit{})
			cl, err := x.cloud.NewClient(cloud.Credentials{Values: map[string]string{KeyAPIKey: tc.key, KeyAPISecret: tc.secret}, Source: "secret ns/wrong"}, gate)
			if err != nil {
				t.Fatal(err)
			}
			c := cl.(*Client)
			h := x.emu.Harness()
			h.ResetRequests()
			_, err = c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
			var auth *cloud.AuthError
			if !errors.As(err, &auth) || cloud.ZoneOf(err) != "" || errors.As(err, new(*cloud.PartialListError)) {
				t.Fatalf("list with refused credentials: %v (%T), want an AuthError of no zone", err, err)
			}
			if gate.ClosedUntil().IsZero() {
				t.Fatal("the account's gate is open after the key was refused")
			}
			for _, z := range emu.Zones {
				if c.zones.downNow(z, c.now()) != nil {
					t.Errorf("zone %s is taken for down", z)
				}
			}
			sent := h.Total()
			// Every call now waits for the gate, whichever zone it is for.
			for range 5 {
				_, err := c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
				if !errors.As(err, &auth) || auth.RetryAfter <= 0 {
					t.Fatalf("list while the gate is closed: %v, want the AuthError with its wait", err)
				}
				if _, err := c.GetServer(x.ctx, "6a1b4f6e-0000-4000-8000-000000000000"); !errors.As(err, &auth) || cloud.ZoneOf(err) != "" {
					t.Fatalf("lookup while the gate is closed: %v, want the AuthError", err)
				}
			}
			if n := h.Total(); n != sent {
				t.Errorf("%d more requests reached the cloud while the gate was closed", n-sent)
			}
		})
	}
}

// What the cloud says decides, not the status it chose: a message that
// refuses the key is an AuthError whatever the 4xx, on both clouds' words.
func TestIdentityRefusedWhateverTheStatus(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound} {
		err := cloud.Classify(cloud.Answer{Cloud: "Exoscale", Op: "instance.list", Status: status, Message: "Invalid request signature",
			IdentityRefused: identityRefused("Invalid request signature")})
		if !errors.As(err, new(*cloud.AuthError)) {
			t.Errorf("HTTP %d Invalid request signature: %v (%T), want an AuthError", status, err, err)
		}
	}
	if identityRefused("Forbidden by role policy for compute") {
		t.Error("a role's refusal taken for a refused key")
	}
	if identityRefused("Invalid value in template: Template has expired") {
		t.Error("an expired template taken for a refused key")
	}
	// A 429 is a rate limit, whatever it says.
	if err := cloud.Classify(cloud.Answer{Status: http.StatusTooManyRequests, IdentityRefused: true}); errors.As(err, new(*cloud.AuthError)) {
		t.Errorf("a 429 classified as refused credentials: %v", err)
	}
}

// A zone outage is only ever reported for a zone that fails while others
// answer the same credentials: when every zone asked fails alike, that is
// the cloud's failure (or the network's), and no zone is named as down.
func TestZoneOutageOnlyWhileOthersAnswer(t *testing.T) {
	x := newEnv(t, emu.Config{})
	// Machines in two zones, so that lists ask both.
	x.spec(specJSON(map[string]any{"zone": "de-fra-1"}))
	x.spec(specJSON(nil))
	h := x.emu.Harness()
	// Every zone fails.
	if err := h.AddRule(harness.Rule{Route: "GET /v2/instance", ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	_, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
	if err == nil || cloud.ZoneOf(err) == "" {
		t.Fatalf("list with every zone failing: %v, want a zone's failure", err)
	}
	if z := cloud.ZoneOutage(err); z != "" {
		t.Errorf("every zone failed, and zone %s is reported as down: %v", z, err)
	}
	if _, err := x.c.GetServer(x.ctx, "6a1b4f6e-0000-4000-8000-000000000000"); cloud.ZoneOutage(err) != "" {
		t.Errorf("lookup with every zone failing: %v reported as zone %s's outage", err, cloud.ZoneOutage(err))
	}

	// Now de-fra-1 alone fails: the other zone answers the same
	// credentials, so that is de-fra-1's outage.
	if err := h.SetRules([]harness.Rule{{Route: "GET /v2/instance", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable}}); err != nil {
		t.Fatal(err)
	}
	// Past the zones' wait after their failure, so that both are asked.
	later := time.Now().Add(2 * time.Minute)
	x.c.now = func() time.Time { return later }
	servers, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
	var partial *cloud.PartialListError
	if !errors.As(err, &partial) || !slices.Equal(partial.Zones(), []string{"de-fra-1"}) || servers == nil {
		t.Fatalf("list with de-fra-1 failing: %v, want ch-gva-2's servers and de-fra-1's failure", err)
	}
	if z := cloud.ZoneOutage(err); z != "de-fra-1" {
		t.Errorf("de-fra-1 failed while ch-gva-2 answered: %v reported as zone %q's outage, want de-fra-1's", err, z)
	}
}
