package exoscale

import (
	"errors"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// TestListNamesEveryZoneItCouldNotSee: a list across zones says which zones
// it could not see, also a zone no Machine is known to use, and nothing
// takes a server there for absent. An orphan of the cluster runs in
// de-fra-1 (its Machine is gone; another process made it, so no spec this
// process parsed names the zone and no instance was seen there), and
// de-fra-1 fails: the cluster's list, which sweeps every zone, names it as
// a PartialListError, and so does the shared view's list of the whole
// cluster (the janitor's), which goes on answering for the Machines of the
// zones that answered.
func TestListNamesEveryZoneItCouldNotSee(t *testing.T) {
	x := newEnv(t, emu.Config{})
	elsewhere := New(Options{APIEndpoint: x.url + "v2", DefaultAPIKey: testKey, DefaultAPISecret: testSecret})
	cl, err := elsewhere.NewClient(*elsewhere.DefaultCredentials(), cloud.NewGate(Name, cloud.RateLimit{}))
	if err != nil {
		t.Fatal(err)
	}
	spec, errs := elsewhere.ParseSpec(machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(specJSON(map[string]any{"zone": "de-fra-1"}))}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	orphan, _, err := cl.CreateServer(x.ctx, ref("gone"), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	// worker-a runs in ch-gva-2, this process's zone.
	own, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.emu.Harness().AddRule(harness.Rule{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 503}); err != nil {
		t.Fatal(err)
	}

	servers, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
	var partial *cloud.PartialListError
	if !errors.As(err, &partial) || !partial.Has("de-fra-1") || len(partial.Zones()) != 1 {
		t.Fatalf("list of every zone: %v, want a PartialListError naming de-fra-1 alone", err)
	}
	if len(servers) != 1 || servers[0].ID != own.ID {
		t.Errorf("listed %v, want worker-a's server", servers)
	}

	view := cloud.NewView(x.c, clusterID, cloud.ViewOptions{})
	all, err := view.All(x.ctx, 0)
	if !errors.As(err, &partial) || !partial.Has("de-fra-1") {
		t.Errorf("the view's list of the cluster: %v, want it to name de-fra-1 as unseen (the orphan %s may be there)", err, orphan.ID)
	}
	if len(all) != 1 {
		t.Errorf("the view lists %d servers, want worker-a's", len(all))
	}
	if found, err := view.MachineIn(x.ctx, "worker-a", "ch-gva-2"); err != nil || len(found) != 1 {
		t.Errorf("worker-a in ch-gva-2: %v, %v: the Machines of a zone that answered are answered", found, err)
	}
}
