package actuator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/record"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The machine controller reconciles from its cache, which can be behind
// the actuator's own record of a new server: a reconcile queued by the
// create intent's write runs after the create, from a copy of the Machine
// without the provider ID. That server is the Machine's own, just recorded:
// no Adopted event says otherwise. A process that did not record it (a
// restarted manager) given the same copy does adopt it.
func TestUpdateFromACacheBehindTheRecordAdoptsNothing(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	newActuator := func() (*actuator.Actuator, *record.FakeRecorder) {
		rec := record.NewFakeRecorder(100)
		return actuator.New(e.Client, cloud.NewAccounts(e.Cloud(""), cloud.AccountOptions{}), rec, logr.Discard(), actuator.Options{ClusterID: fixture.ClusterID}), rec
	}
	adoptions := func(rec *record.FakeRecorder) (n int) {
		for {
			select {
			case ev := <-rec.Events:
				if strings.Contains(ev, " Adopted ") {
					n++
				}
			default:
				return n
			}
		}
	}
	act, rec := newActuator()
	m := fixture.Machine("worker-a", spec(nil))
	m.Finalizers = []string{machinev1.MachineFinalizer}
	if err := e.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	stale := m.DeepCopy()
	// As the machine controller calls them.
	if exists, err := act.Exists(ctx, m); err != nil || exists {
		t.Fatalf("Exists before Create = %v, %v", exists, err)
	}
	if err := act.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.ProviderID == nil {
		t.Fatal("Create recorded no provider ID")
	}
	restarted, restartedRec := newActuator()
	for _, a := range []struct {
		name  string
		act   *actuator.Actuator
		rec   *record.FakeRecorder
		adopt int
	}{
		{"the process that recorded the server", act, rec, 0},
		{"a restarted process", restarted, restartedRec, 1},
	} {
		adoptions(a.rec)
		m := stale.DeepCopy()
		if exists, err := a.act.Exists(ctx, m); err != nil || !exists {
			t.Fatalf("%s: Exists from the stale copy = %v, %v; want true", a.name, exists, err)
		}
		if err := a.act.Update(ctx, m); err != nil {
			t.Fatalf("%s: Update from the stale copy: %v", a.name, err)
		}
		if n := adoptions(a.rec); n != a.adopt {
			t.Errorf("%s: %d Adopted events, want %d", a.name, n, a.adopt)
		}
	}
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers, want 1", n)
	}
}
