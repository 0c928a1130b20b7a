package janitor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The janitor sweeps the cluster it is pinned to, whatever the labels of
// the Machines and MachineSets say: an account with a view of another
// cluster (a MachineSet copied from it used to make one, and a Machine
// labelled with it) has that view dropped, and that cluster's servers are
// neither reported nor deleted, however long a deleting janitor runs.
func TestJanitorSweepsOnlyItsOwnCluster(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const other = "other-cluster-b1"
	acc := e.accounts.All()[0]
	acc.View(other)
	copied := fixture.Machine("their-worker", `{}`)
	copied.Labels["machine.openshift.io/cluster-api-cluster"] = other
	if err := e.Client.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	theirs := e.server(t, "their-worker-2", map[string]string{v1beta1.TagClusterID: other, v1beta1.TagMachineName: "their-worker-2"})
	ghost := e.server(t, "ghost", ours("ghost"))
	j := e.janitor(t, janitor.Options{DeleteOrphansAfter: janitor.MinDeleteOrphansAfter, OrphanMinAge: time.Nanosecond})
	e.clock.add(time.Minute) // the clock began before the servers
	rep, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Orphans) != 1 || rep.Orphans[0].ServerID != ghost {
		t.Errorf("orphans %+v, want only this cluster's %s", rep.Orphans, ghost)
	}
	if got := acc.Clusters(); !slices.Equal(got, []string{fixture.ClusterID}) {
		t.Errorf("the account has views of %v, want only %s", got, fixture.ClusterID)
	}
	e.clock.add(time.Hour)
	for range 3 {
		if _, err := j.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !e.exists(t, theirs) {
		t.Errorf("another cluster's server %s was deleted", theirs)
	}
	if e.exists(t, ghost) {
		t.Errorf("this cluster's orphan %s outlived --delete-orphans-after", ghost)
	}
}

// A Node vetoes an orphan's deletion however it runs on the server: by
// provider ID, or by name and address (a Node without a provider ID, in a
// cluster without a cloud controller manager, or one Terraform made that
// adopt left alone); the refusal is an event naming the Node.
func TestNodeByNameAndAddressVetoesAnOrphansDeletion(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	id := e.server(t, "worker-ffff.green.example.com", ours("worker-ffff"))
	s, err := e.sdk.Servers.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-ffff"}}
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: s.Interfaces[0].Addresses[0].Address}}
	if err := e.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	e.registry.Recorder = rec
	j := e.janitor(t, janitor.Options{DeleteOrphansAfter: janitor.MinDeleteOrphansAfter, OrphanMinAge: time.Nanosecond})
	e.clock.add(time.Minute) // the clock began before the server
	if _, err := j.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	e.clock.add(time.Hour)
	rep, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.OrphansDeleted) != 0 || !e.exists(t, id) {
		t.Fatalf("deleted %v: the server a Node runs on", rep.OrphansDeleted)
	}
	events := drain(rec)
	if !strings.Contains(events, "OrphanNotDeleted") || !strings.Contains(events, "Node worker-ffff (by name and address)") {
		t.Errorf("events %q, want an OrphanNotDeleted naming the Node", events)
	}
	// Once the Node is gone, it goes, after a full grace without it.
	if err := e.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	if rep, err = j.Sweep(ctx); err != nil || len(rep.OrphansDeleted) != 0 {
		t.Fatalf("deleted %v (%v) at the first sweep without its Node", rep.OrphansDeleted, err)
	}
	e.clock.add(janitor.MinDeleteOrphansAfter)
	rep, err = j.Sweep(ctx)
	if err != nil || len(rep.OrphansDeleted) != 1 || e.exists(t, id) {
		t.Errorf("deleted %v (%v), want the orphan once no Node ran on it for the grace", rep.OrphansDeleted, err)
	}
}

// While an adoption takes servers over (pkg/orphans, Adoptions), those
// tagged for the cluster without their Machine yet are no orphans: not
// reported, not deleted, and a recorded one is forgotten. Once adopt is
// done with them, they count again.
func TestServersBeingAdoptedAreNoOrphans(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	adopting := e.server(t, "worker-0a1b", ours("worker-0a1b"))
	adoptions := &orphans.Adoptions{Client: e.Client, Namespace: fixture.Namespace, Cloud: "cloudscale"}
	j := e.janitor(t, janitor.Options{DeleteOrphansAfter: janitor.MinDeleteOrphansAfter, OrphanMinAge: time.Nanosecond, Adoptions: adoptions})
	e.clock.add(time.Minute) // the clock began before the server
	// Recorded as an orphan before the adoption began.
	if rep, err := j.Sweep(ctx); err != nil || len(rep.Orphans) != 1 {
		t.Fatalf("orphans %+v, %v", rep.Orphans, err)
	}
	if err := adoptions.Begin(ctx, orphans.Adoption{ServerID: adopting, Machine: "worker-0a1b", ClusterID: fixture.ClusterID, Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.clock.add(time.Hour)
	for range 2 {
		rep, err := j.Sweep(ctx)
		if err != nil || len(rep.Orphans) != 0 || len(rep.OrphansDeleted) != 0 {
			t.Fatalf("during the adoption: orphans %+v, deleted %v, %v", rep.Orphans, rep.OrphansDeleted, err)
		}
	}
	if !e.exists(t, adopting) {
		t.Fatal("a server being adopted was deleted")
	}
	if recorded, err := e.registry.List(ctx); err != nil || len(recorded) != 0 {
		t.Errorf("orphan record %+v (%v), want the server being adopted forgotten", recorded, err)
	}
	if err := adoptions.Done(ctx, adopting); err != nil {
		t.Fatal(err)
	}
	if rep, err := j.Sweep(ctx); err != nil || len(rep.Orphans) != 1 {
		t.Errorf("after the adoption: orphans %+v, %v; want it reported again", rep.Orphans, err)
	}
}

func drain(rec *record.FakeRecorder) string {
	var b strings.Builder
	for {
		select {
		case ev := <-rec.Events:
			b.WriteString(ev + "\n")
		default:
			return b.String()
		}
	}
}
