package exoscale

import (
	"testing"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// Deleting an instance reads it right before the delete, also one this
// process made (whose anti-affinity groups it knows): only the read says
// whether the instance is still the Machine's at that moment
// (owner_test.go), and its full record names the groups to delete after
// it.
func TestDeleteReadsTheInstanceFirst(t *testing.T) {
	x := newEnv(t, emu.Config{})
	spec := x.spec(specJSON(map[string]any{"antiAffinityKey": "worker"}))
	for _, name := range []string{"worker-a", "worker-b"} {
		if _, created, err := x.c.CreateServer(x.ctx, ref(name), spec, nil); err != nil || !created {
			t.Fatalf("%s: %v %v", name, created, err)
		}
	}
	listed, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
	if err != nil || len(listed) != 2 {
		t.Fatalf("listed %v, %v", listed, err)
	}
	h := x.emu.Harness()
	// This client made the instance; another client of the account knows
	// nothing of the other one. Either reads it once.
	other, err := x.cloud.NewClient(*x.cloud.DefaultCredentials(), x.gate)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []cloud.Client{x.c, other} {
		before := h.Count("GET /v2/instance/{id}")
		if err := c.DeleteServer(x.ctx, ref(listed[i].Machine), &listed[i], noNodes); err != nil {
			t.Fatal(err)
		}
		if n := h.Count("GET /v2/instance/{id}") - before; n != 1 {
			t.Errorf("deleting %s read it %d times first, want 1", listed[i].Machine, n)
		}
	}
	if left := x.emu.AntiAffinityGroups(); len(left) != 0 {
		t.Errorf("groups left after both instances are gone: %+v", left)
	}
}

// The record of a create is read for its addresses only when the account
// has calls to spare: in a burst of creates the sync makes no call, and a
// later one reads it.
func TestSyncOfANewInstanceWaitsForSpareCalls(t *testing.T) {
	x := newEnv(t, emu.Config{})
	spec := x.spec(specJSON(nil))
	s, created, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, nil)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	busy := cloud.NewGate(Name, cloud.RateLimit{QPS: 0.001, Burst: 4})
	for range 3 {
		if err := busy.Admit(x.ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The same client (its catalogue cached), its account busy.
	x.c.gate = busy
	h := x.emu.Harness()
	before := h.Total()
	stub := *s
	if drift, err := x.c.SyncServer(x.ctx, ref("worker-a"), spec, &stub); err != nil || len(drift) != 0 {
		t.Fatalf("sync of the create's record with no calls to spare: %v, %v", drift, err)
	}
	if n := h.Total() - before; n != 0 {
		t.Errorf("the sync made %d calls with none to spare (%v)", n, h.Requests())
	}
	x.c.gate = x.gate
	before = h.Count("GET /v2/instance/{id}")
	if _, err := x.c.SyncServer(x.ctx, ref("worker-a"), spec, s); err != nil {
		t.Fatal(err)
	}
	if n := h.Count("GET /v2/instance/{id}") - before; n != 1 {
		t.Errorf("a sync with calls to spare read the instance %d times, want 1", n)
	}
	external := false
	for _, a := range s.Addresses {
		external = external || a.Type == "ExternalIP"
	}
	if !external {
		t.Errorf("addresses after the read: %v, want the public one", s.Addresses)
	}
}
