package janitor_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	exov1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// An orphan in a zone that does not answer is not forgotten: a manager
// restarted while the zone is down lists nothing of it, yet its sweep still
// reports the orphan and keeps its record (with its first sighting, from
// which a deletion is timed), also while the lists leave its zone out.
func TestOrphanOfAZoneDownIsKept(t *testing.T) {
	ctx := context.Background()
	e := fixture.Start(t, fixture.Options{Cloud: fixture.Exoscale})
	c := e.ExoscaleCloud(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret)
	// A process's accounts: each restart of the manager starts with views
	// that have listed nothing yet.
	newAccounts := func() *cloud.Accounts {
		accounts := cloud.NewAccounts(c, cloud.AccountOptions{View: cloud.ViewOptions{Refresh: time.Millisecond}})
		acc, err := accounts.Get("test", *c.DefaultCredentials())
		if err != nil {
			t.Fatal(err)
		}
		acc.View(fixture.ClusterID) // the cluster a Machine's reconcile would have registered
		return accounts
	}

	sdk, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret),
		v3.ClientOptWithEndpoint(v3.Endpoint(e.APIURL+"v2")),
		v3.ClientOptWithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := sdk.GetZoneAPIEndpoint(ctx, "de-fra-1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := sdk.WithEndpoint(ep).CreateInstance(ctx, v3.CreateInstanceRequest{
		Name:         "ghost",
		InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.medium"))},
		Template:     &v3.Template{ID: "188e6dc9-7b29-4db4-a8af-fc6368660738"},
		DiskSize:     20,
		Labels:       v3.Labels{exov1.LabelClusterID: fixture.ClusterID, exov1.LabelMachineName: "ghost"},
	})
	if err != nil || op.Reference == nil {
		t.Fatalf("creating the orphan: %+v, %v", op, err)
	}
	orphan := string(op.Reference.ID)
	// and one in another zone, which keeps answering: the list of the
	// cluster is partial, not failed, while de-fra-1 is down
	if _, err := sdk.CreateInstance(ctx, v3.CreateInstanceRequest{
		Name:         "other",
		InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.medium"))},
		Template:     &v3.Template{ID: "188e6dc9-7b29-4db4-a8af-fc6368660738"},
		DiskSize:     20,
		Labels:       v3.Labels{exov1.LabelClusterID: fixture.ClusterID, exov1.LabelMachineName: "other"},
	}); err != nil {
		t.Fatal(err)
	}

	clk := &clock{t: time.Now().Add(5 * time.Minute)}
	registry := &orphans.Registry{Client: e.Client, Recorder: record.NewFakeRecorder(100), Namespace: fixture.Namespace, Cloud: "exoscale"}
	newJanitor := func() *janitor.Janitor {
		j, err := janitor.New(e.Client, newAccounts(), registry, janitor.Options{ClusterID: fixture.ClusterID, Interval: time.Millisecond, Log: logr.Discard()})
		if err != nil {
			t.Fatal(err)
		}
		j.SetClock(clk.now)
		return j
	}
	reported := func(rep janitor.Report) bool {
		return slices.ContainsFunc(rep.Orphans, func(o orphans.Orphan) bool { return o.ServerID == orphan })
	}
	recorded := func() bool {
		var cm corev1.ConfigMap
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: fixture.Namespace, Name: orphans.ConfigMapName("exoscale")}, &cm); err != nil {
			t.Fatal(err)
		}
		_, ok := cm.Data[orphan]
		return ok
	}

	rep, err := newJanitor().Sweep(ctx)
	if err != nil || !reported(rep) || !recorded() {
		t.Fatalf("the orphan before the zone fails: reported %+v, recorded %v, %v", rep.Orphans, recorded(), err)
	}

	// A restart while de-fra-1 is down: the new process's first list has
	// nothing of that zone.
	if err := e.Harness().SetRules([]harness.Rule{{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 503}}); err != nil {
		t.Fatal(err)
	}
	j := newJanitor()
	rep, err = j.Sweep(ctx)
	if err == nil || !strings.Contains(err.Error(), "de-fra-1") {
		t.Errorf("a sweep that could not look into de-fra-1 reported %v", err)
	}
	if !reported(rep) || !recorded() {
		t.Errorf("the orphan of the zone that is down: reported %v (%+v), recorded %v; want both", reported(rep), rep.Orphans, recorded())
	}

	// Once it answers, the list covers the zone again only at the next
	// sweep of every zone; the orphan stays recorded all along.
	if err := e.Harness().SetRules(nil); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, time.Minute, "a sweep without errors, de-fra-1 answering again", func() (bool, error) {
		_, err := j.Sweep(ctx)
		return err == nil, err
	})
	if rep, _ := j.Sweep(ctx); !reported(rep) || !recorded() {
		t.Errorf("the orphan once its zone answers: reported %v (%+v), recorded %v", reported(rep), rep.Orphans, recorded())
	}
}
