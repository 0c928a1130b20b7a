package janitor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A declared legacy cluster ID is swept like the cluster's own: a server
// tagged with it and a Machine name is the Machine's only when a Machine of
// that name carries that ID (a Machine of the same name under the other ID
// does not keep it), the others are orphans, deleted after the grace. A
// held Machine (its label names a cluster ID not declared, its status a
// server) is reported with its server, which is never deleted: no provider
// acts on it, and nobody would know it runs.
func TestJanitorSweepsDeclaredLegacyIDsAndReportsHeldServers(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const syn, other = "c-green-1234", "c-other-9876"
	acc := e.accounts.All()[0]
	acc.View(syn) // a Machine or MachineSet labelled with it registered it
	acc.View(other)
	machine := func(name, cluster, serverID string) {
		m := fixture.Machine(name, `{}`)
		m.Labels[janitor.ClusterIDLabel] = cluster
		if err := e.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if serverID == "" {
			return
		}
		base := m.DeepCopy()
		m.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"instanceId":%q}`, serverID))}
		if err := e.Client.Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	tags := func(cluster, machine string) map[string]string {
		return map[string]string{v1beta1.TagClusterID: cluster, v1beta1.TagMachineName: machine}
	}
	kept := e.server(t, "syn-worker", tags(syn, "syn-worker"))
	machine("syn-worker", syn, kept)
	ghost := e.server(t, "syn-ghost", tags(syn, "syn-ghost"))
	twin := e.server(t, "twin", tags(syn, "twin"))
	machine("twin", fixture.ClusterID, "")
	held := e.server(t, "held-worker", tags(other, "held-worker"))
	machine("held-worker", other, held)
	rec := record.NewFakeRecorder(100)
	e.registry.Recorder = rec

	j := e.janitor(t, janitor.Options{LegacyClusterIDs: []string{syn}, DeleteOrphansAfter: janitor.MinDeleteOrphansAfter, OrphanMinAge: time.Nanosecond})
	e.clock.add(time.Minute) // the clock began before the servers
	rep, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for _, o := range rep.Orphans {
		orphans = append(orphans, o.ServerID)
	}
	if slices.Sort(orphans); !slices.Equal(orphans, sorted(ghost, twin)) {
		t.Errorf("orphans %v, want syn-ghost's %s and twin's %s (its Machine of that name is of the cluster's own ID)", orphans, ghost, twin)
	}
	if got := acc.Clusters(); !slices.Equal(got, sorted(fixture.ClusterID, syn)) {
		t.Errorf("the account has views of %v, want the cluster's own and the declared %s", got, syn)
	}
	if len(rep.Held) != 1 || rep.Held[0].ServerID != held || rep.Held[0].ClusterID != other || rep.Held[0].Machine != fixture.Namespace+"/held-worker" {
		t.Errorf("held %+v, want held-worker's server %s of cluster %s", rep.Held, held, other)
	}
	events := drain(rec)
	if !strings.Contains(events, "HeldServer") || !strings.Contains(events, held) || !strings.Contains(events, clusterid.DeclareCommand(sorted(other, syn)...)) {
		t.Errorf("events:\n%s\nwant a HeldServer event naming %s and how to declare %s", events, held, other)
	}
	e.clock.add(time.Hour)
	for range 3 {
		if _, err := j.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if events := drain(rec); strings.Contains(events, "HeldServer") {
		t.Errorf("the held server was reported again at every sweep:\n%s", events)
	}
	for id, want := range map[string]bool{kept: true, held: true, ghost: false, twin: false} {
		if e.exists(t, id) != want {
			t.Errorf("server %s exists: %v, want %v", id, !want, want)
		}
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }
