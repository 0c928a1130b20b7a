package actuator_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// What a Machine costs: cloud calls and Kubernetes API writes, each a round
// trip on a path that thousands of Machines take.

// Deleting a Machine's server costs the look for its servers and the
// delete: the look is a list that began after the delete was decided, and
// proves the server still the Machine's right before its delete as a read
// of it would (pkg/cloud, owner.go: ProvenOwned); the existence check that
// follows needs no call: the view knows what the provider deleted.
func TestDeletionCostsTwoCalls(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	h.ResetRequests()
	if err := e.Client.Delete(context.Background(), getMachine(t, e, "worker-a")); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "worker-a gone", func() (bool, error) {
		err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: fixture.Namespace, Name: "worker-a"}, &machinev1.Machine{})
		return apierrors.IsNotFound(err), err
	})
	want := map[string]int64{"GET /v1/servers": 1, "DELETE /v1/servers/{uuid}": 1}
	if got := h.Requests(); !maps.Equal(got, want) {
		t.Errorf("deletion made %v, want %v", got, want)
	}
}

// A deleted Machine lets go of its account once its servers are gone: the
// machine controller's existence check after Delete, the last call for the
// Machine, still finds the account (and its view, which knows the server is
// gone) and leaves it released.
func TestDeletedMachineReleasesItsAccount(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	accounts := cloud.NewAccounts(e.Cloud(""), cloud.AccountOptions{})
	act := actuator.New(e.Client, accounts, record.NewFakeRecorder(1000), logr.Discard(), actuator.Options{ClusterID: fixture.ClusterID})
	m := fixture.Machine("worker-a", spec(nil))
	m.Finalizers = []string{machinev1.MachineFinalizer}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// As the machine controller calls them.
	if exists, err := act.Exists(ctx, m); err != nil || exists {
		t.Fatalf("Exists before Create = %v, %v", exists, err)
	}
	if err := act.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = getMachine(t, e, "worker-a")
	if m.DeletionTimestamp == nil || m.Spec.ProviderID == nil {
		t.Fatalf("the Machine is not a deleted one with a server: %+v", m)
	}
	h := e.Emulator.Harness()
	h.ResetRequests()
	if err := act.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	exists, err := act.Exists(ctx, m)
	if err != nil || exists {
		t.Fatalf("Exists after Delete = %v, %v; want false", exists, err)
	}
	if n := accounts.Len(); n != 0 {
		t.Errorf("%d accounts in use after the Machine's last call, want 0", n)
	}
	want := map[string]int64{"GET /v1/servers": 1, "DELETE /v1/servers/{uuid}": 1}
	if got := h.Requests(); !maps.Equal(got, want) {
		t.Errorf("Delete and Exists made %v, want %v", got, want)
	}
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Errorf("%d servers left", n)
	}
}

// A change of the Machine's status alone (the addresses a create's answer
// did not have, a server that now runs) is one write, of the status: the
// Machine itself is not written.
func TestStatusChangeAloneWritesOnlyTheStatus(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	base, err := client.NewWithWatch(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := map[string]int{}
	counted := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			mu.Lock()
			writes["machine"]++
			mu.Unlock()
			return c.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			mu.Lock()
			writes[sub]++
			mu.Unlock()
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	act := actuator.New(counted, cloud.NewAccounts(e.Cloud(""), cloud.AccountOptions{}), record.NewFakeRecorder(1000), logr.Discard(), actuator.Options{SecretReader: e.Client, ClusterID: fixture.ClusterID})
	if err := e.Client.Create(ctx, fixture.Machine("worker-a", spec(nil))); err != nil {
		t.Fatal(err)
	}
	m := getMachine(t, e, "worker-a")
	if _, err := act.Exists(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := act.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// Someone (an older provider, a person) left the Machine without its
	// addresses.
	m = getMachine(t, e, "worker-a")
	if len(m.Status.Addresses) == 0 {
		t.Fatal("the create recorded no addresses")
	}
	if err := e.Client.Status().Patch(ctx, m, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"addresses":null}}`))); err != nil {
		t.Fatal(err)
	}
	m = getMachine(t, e, "worker-a")
	mu.Lock()
	writes = map[string]int{}
	mu.Unlock()
	if err := act.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"status": 1}; !maps.Equal(writes, want) {
		t.Errorf("the update wrote %v, want %v", writes, want)
	}
	if len(getMachine(t, e, "worker-a").Status.Addresses) == 0 {
		t.Error("the addresses were not written back")
	}
}

// An Exoscale create answers with the instance's ID only: the instance is
// read before the Machine is written, so that the Machine is written once,
// with its addresses, not once without them and again by the next update.
func TestNewServerIsRecordedComplete(t *testing.T) {
	e := fixture.Start(t, fixture.Options{Cloud: fixture.Exoscale})
	first := firstRecordOf(t, e, "worker-a")
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", `{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.medium","template":{"name":"rhcos-4.19"}}`)
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	m := first()
	if m == nil {
		t.Fatal("no version of the Machine recorded its server")
	}
	types := map[corev1.NodeAddressType]bool{}
	for _, a := range m.Status.Addresses {
		types[a.Type] = true
	}
	if !types[corev1.NodeInternalIP] || !types[corev1.NodeExternalIP] {
		t.Errorf("the first status with the server holds the addresses %v, want its IPs too", m.Status.Addresses)
	}
}

// firstRecordOf watches a Machine and returns the first version of it whose
// status records a server.
func firstRecordOf(t *testing.T, e *fixture.Env, name string) func() *machinev1.Machine {
	t.Helper()
	var mu sync.Mutex
	var first *machinev1.Machine
	watchMachines(t, e, func(m *machinev1.Machine) {
		if m.Name != name || m.Status.ProviderStatus == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = m.DeepCopy()
		}
	})
	return func() *machinev1.Machine {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
}

// Machines deleted together share their lookups: one list of the cluster's
// servers that began after they asked, and one sweep of the cluster's empty
// groups, where each Machine made its own before. Under a storm of 429s
// (each closes the account's gate for every Machine) sequences that long
// rarely got through, and the Machines stayed in Deleting. Calls take
// 200 ms here, as a real cloud's do, so that the deletes overlap.
func TestMachinesDeletedTogetherShareTheirCalls(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	// The janitor's sweep (a list of the servers and one of the groups,
	// every minute) would land among the deletes now and then, on a loaded
	// machine: one more of each, and a flaky count. It is counted apart.
	e.StartManager(t, manager.Options{Janitor: janitor.Options{Interval: time.Hour}})
	const n = 8
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("worker-%d", i)
		createMachine(t, e, names[i], spec(func(s map[string]any) { s["antiAffinityKey"] = "workers" }))
	}
	for _, name := range names {
		waitPhase(t, e, name, machinev1.PhaseProvisioned)
	}
	if err := h.AddRule(harness.Rule{Route: "*", Latency: harness.Duration(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	h.ResetRequests()
	ctx := context.Background()
	if err := e.Client.DeleteAllOf(ctx, &machinev1.Machine{}, client.InNamespace(fixture.Namespace)); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 90*time.Second, "every Machine gone", func() (bool, error) {
		var l machinev1.MachineList
		err := e.Client.List(ctx, &l, client.InNamespace(fixture.Namespace))
		return len(l.Items) == 0, err
	})
	got := h.Requests()
	if d := got["DELETE /v1/servers/{uuid}"]; d != n {
		t.Errorf("%d server deletes, want %d", d, n)
	}
	// The lists of the cluster's servers: shared, fewer than one per
	// Machine (each Machine made its own before). The group listings: one
	// of each server's delete (it looks at the groups it left), and the
	// shared sweeps, fewer than two per Machine. How many deletes overlap
	// depends on the machine's load (3 lists of the servers and 13 of
	// the groups at a load of 13 on 2 cores, 5 and 15 at a load of 28), so the bounds are
	// those that only unshared calls reach, not the idle machine's counts.
	if l := got["GET /v1/servers"]; l >= n {
		t.Errorf("%d lists of the servers for %d Machines deleted together, want fewer than %d: %v", l, n, n, got)
	}
	if l := got["GET /v1/server-groups"]; l >= 2*n {
		t.Errorf("%d lists of the groups for %d Machines deleted together, want fewer than %d: %v", l, n, 2*n, got)
	}
	// A group the deletes emptied together is read and deleted once, not
	// read again by each of them, one after the other under its lock.
	if r := got["GET /v1/server-groups/{uuid}"]; r > n/2 {
		t.Errorf("%d reads of single groups for %d Machines, want at most %d: %v", r, n, n/2, got)
	}
	t.Logf("deleting %d Machines made %v", n, got)
}
