package exoscale

import (
	"errors"
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// A lookup by ID of an instance whose zone the client does not know asks
// every zone, but not one whose list just failed (it is left out of lists
// for a while): a zone that hangs would hold each such lookup for its
// call timeout, and more with the read retries. Its failure is the answer
// all the same, never "not found".
func TestLookupByIDSkipsAZoneThatIsDown(t *testing.T) {
	x := newEnv(t, emu.Config{})
	// The clock stands still: de-fra-1 stays down however slow the host.
	frozen := time.Now()
	x.c.now = func() time.Time { return frozen }
	h := x.emu.Harness()
	if err := h.AddRule(harness.Rule{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 503}); err != nil {
		t.Fatal(err)
	}
	// The first list of the cluster sweeps every zone: de-fra-1 fails,
	// and the list says so (zonelist_test.go).
	var partial *cloud.PartialListError
	if _, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID}); !errors.As(err, &partial) || !partial.Has("de-fra-1") {
		t.Fatalf("list: %v, want de-fra-1 named as not listed", err)
	}
	if x.c.zones.downNow("de-fra-1", x.c.now()) == nil {
		t.Fatal("de-fra-1 is not down after its list failed")
	}
	h.ResetRequests()
	_, err := x.c.GetServer(x.ctx, "6a1b4f6e-0000-4000-8000-000000000000")
	if cloud.IsNotFound(err) || cloud.ZoneOf(err) != "de-fra-1" {
		t.Errorf("lookup: %v, want de-fra-1's failure", err)
	}
	if n, want := h.Count("GET /v2/instance/{id}"), int64(len(emu.Zones)-1); n != want {
		t.Errorf("%d lookups, want %d: one per zone that is not down", n, want)
	}
}
