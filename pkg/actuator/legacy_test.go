package actuator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// synID is a fleet cluster's Project Syn ID, the Terraform modules'
// cluster_id, which its Machines carry; the cluster's infrastructureName
// (fixture.ClusterID) is another.
const synID = "c-green-1234"

// appuioMachine is a Machine as appuio's provider leaves it on a fleet
// cluster: labelled with the Syn ID, its server recorded in the provider
// ID and in the status (instanceId), with the machine controller's
// finalizer.
func appuioMachine(t *testing.T, e *fixture.Env, name, clusterID, serverID string) {
	t.Helper()
	ctx := context.Background()
	m := fixture.Machine(name, spec(nil))
	m.Labels[actuator.ClusterIDLabel] = clusterID
	m.Finalizers = []string{machinev1.MachineFinalizer}
	m.Spec.ProviderID = ptrTo("cloudscale://" + serverID)
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	base := m.DeepCopy()
	m.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","instanceId":%q,"status":"running"}`, serverID))}
	if err := e.Client.Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// A Machine whose label names a cluster ID this cluster does not own, and
// whose status records a server (held), is never let go while its server
// runs: its deletion waits, with the condition ClusterOwned=False and an
// event saying how to release it, and deletes nothing of the other ID.
// Released by declaring the ID, its deletion deletes the server after
// the ownership read; released by the abandon annotation, the server is
// recorded as an orphan; a server that is gone lets it go.
func TestDeletingAHeldMachineNeverLeaksItsServer(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	servers := map[string]*cloudscale.Server{}
	for _, name := range []string{"held-a", "held-b", "held-gone"} {
		servers[name] = foreignServer(t, e, name, map[string]string{v1beta1.TagClusterID: synID, v1beta1.TagMachineName: name})
		appuioMachine(t, e, name, synID, servers[name].UUID)
	}
	if err := sdk(e).Servers.Delete(ctx, servers["held-gone"].UUID); err != nil {
		t.Fatal(err)
	}
	stop := e.StartManager(t, manager.Options{})
	e.Harness().ResetRequests()
	for name := range servers {
		deleteMachine(t, e, name)
	}
	for _, name := range []string{"held-a", "held-b"} {
		id := servers[name].UUID
		waitEvent(t, e, name, actuator.ReasonHeldDelete, id, "keeps running", `"`+synID+`"`, clusterid.DeclareCommand(synID), actuator.AbandonServerAnnotation+"=true")
		m := getMachine(t, e, name)
		if c := condition(t, m, actuator.ConditionClusterOwned); c == nil || c.Status != metav1.ConditionFalse || c.Reason != actuator.ReasonHeldDelete || !strings.Contains(c.Message, id) {
			t.Errorf("%s: condition %s %+v, want False/%s naming the server", name, actuator.ConditionClusterOwned, c, actuator.ReasonHeldDelete)
		}
		untouched(t, e, servers[name])
	}
	if n := e.Harness().Count("DELETE /v1/servers/{uuid}"); n != 0 {
		t.Errorf("%d server deletes while the Machines were held, want none", n)
	}
	// A held Machine whose server is gone goes.
	waitGone(t, e, "held-gone", time.Minute)
	waitEvent(t, e, "held-gone", "NothingDeleted", "is gone")

	// A person lets held-b go: its server is recorded, never forgotten.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+actuator.AbandonServerAnnotation+`":"true"}}}`))
	if err := e.Client.Patch(ctx, getMachine(t, e, "held-b"), patch); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "held-b", time.Minute)
	untouched(t, e, servers["held-b"])
	var cm corev1.ConfigMap
	if err := e.Client.Get(ctx, objKey(orphans.ConfigMapName("cloudscale")), &cm); err != nil || !strings.Contains(cm.Data[servers["held-b"].UUID], synID) {
		t.Errorf("orphan record %v (%v): want held-b's server %s, of cluster %s", cm.Data, err, servers["held-b"].UUID, synID)
	}

	// The admin declares the Syn ID: held-a's deletion deletes its server,
	// under the Node veto as any delete: while a Node that is not held-a's
	// runs on it (by name and address), it waits, saying so.
	node := nodeOn(t, e, "held-a", servers["held-a"])
	stop()
	e.StartManager(t, manager.Options{LegacyClusterIDs: []string{synID}})
	waitEvent(t, e, "held-a", "DeleteRefused", servers["held-a"].UUID, "Node held-a (by name and address)")
	untouched(t, e, servers["held-a"])
	if err := e.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "held-a", 3*time.Minute)
	if n := len(serversOf(t, e, "held-a")); n != 0 {
		t.Errorf("%d servers of held-a left after its deletion under the declared ID", n)
	}
	waitEvent(t, e, "held-a", "Deleted", servers["held-a"].UUID)
	if n := e.Harness().Count("DELETE /v1/servers/{uuid}"); n != 1 {
		t.Errorf("%d server deletes, want held-a's only", n)
	}
	assertNoCanary(t, e)
}

// A declared legacy cluster ID is the cluster's like its infrastructureName:
// a Machine labelled with it (appuio's, on a fleet cluster) is found with
// its server as appuio's provider tagged it and synced, a new one gets a
// server tagged with it (which appuio's provider finds after a rollback:
// the name and the Machine's label), and deleting either deletes its
// server. An ID not declared stays another cluster's.
func TestDeclaredLegacyClusterIDIsTheClusters(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	old := foreignServer(t, e, "appuio-worker", map[string]string{v1beta1.TagClusterID: synID, v1beta1.TagMachineName: "appuio-worker"})
	appuioMachine(t, e, "appuio-worker", synID, old.UUID)
	e.StartManager(t, manager.Options{LegacyClusterIDs: []string{synID}})

	m := waitPhase(t, e, "appuio-worker", machinev1.PhaseProvisioned)
	if m.Spec.ProviderID == nil || *m.Spec.ProviderID != "cloudscale://"+old.UUID {
		t.Errorf("appuio-worker: provider ID %v, want its server %s", m.Spec.ProviderID, old.UUID)
	}
	if c := condition(t, m, actuator.ConditionServerOwned); c != nil && c.Status == metav1.ConditionFalse {
		t.Errorf("appuio-worker: %+v, want its server its own", c)
	}
	m = fixture.Machine("new-worker", spec(nil))
	m.Labels[actuator.ClusterIDLabel] = synID
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, e, "new-worker", machinev1.PhaseProvisioned)
	created := serversOf(t, e, "new-worker")
	if len(created) != 1 || created[0].Tags[v1beta1.TagClusterID] != synID {
		t.Fatalf("new-worker's servers %v, want one tagged as cluster %s's", created, synID)
	}
	other := fixture.Machine("other-worker", spec(nil))
	other.Labels[actuator.ClusterIDLabel] = "c-other-9876"
	if err := e.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	failedSaying(t, waitPhase(t, e, "other-worker", machinev1.PhaseFailed), `names cluster "c-other-9876"`, clusterid.DeclareCommand(synID, "c-other-9876"))
	if n := e.Harness().Count(createPOST); n != 2 {
		t.Errorf("%d creates, want the test's own and new-worker's", n)
	}
	for _, name := range []string{"appuio-worker", "new-worker", "other-worker"} {
		deleteMachine(t, e, name)
		waitGone(t, e, name, time.Minute)
	}
	for _, name := range []string{"appuio-worker", "new-worker"} {
		if n := len(serversOf(t, e, name)); n != 0 {
			t.Errorf("%d servers of %s left", n, name)
		}
	}
	assertNoCanary(t, e)
}

// nodeOn makes a Node without a provider ID of the name that runs on the
// server by its address, as in a cluster without a cloud controller
// manager.
func nodeOn(t *testing.T, e *fixture.Env, name string, s *cloudscale.Server) *corev1.Node {
	t.Helper()
	var ip string
	for _, i := range s.Interfaces {
		for _, a := range i.Addresses {
			ip = a.Address
		}
	}
	if ip == "" {
		t.Fatalf("server %s has no address", s.UUID)
	}
	return fixture.NodeWithoutProviderID(t, e, name, ip)
}
