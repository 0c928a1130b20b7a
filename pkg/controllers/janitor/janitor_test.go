package janitor_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

const token = "janitor-token-1234"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	*fixture.Env
	sdk      *cloudscale.Client
	accounts *cloud.Accounts
	registry *orphans.Registry
	clock    *clock
}

func start(t *testing.T) *env {
	t.Helper()
	e := fixture.Start(t, fixture.Options{Emulator: emucs.Config{}})
	c := e.Cloud(token)
	accounts := cloud.NewAccounts(c, cloud.AccountOptions{View: cloud.ViewOptions{Refresh: time.Millisecond}})
	acc, err := accounts.Get("test", *c.DefaultCredentials())
	if err != nil {
		t.Fatal(err)
	}
	acc.View(fixture.ClusterID) // the cluster a Machine's reconcile would have registered
	s := cloudscale.NewClient(nil)
	s.BaseURL, _ = s.BaseURL.Parse(e.APIURL)
	s.AuthToken = token
	return &env{
		Env: e, sdk: s, accounts: accounts, clock: &clock{t: time.Now()},
		registry: &orphans.Registry{Client: e.Client, Recorder: record.NewFakeRecorder(100), Namespace: fixture.Namespace, Cloud: "cloudscale"},
	}
}

func (e *env) janitor(t *testing.T, o janitor.Options) *janitor.Janitor {
	t.Helper()
	o.Log = logr.Discard()
	if o.ClusterID == "" {
		o.ClusterID = fixture.ClusterID
	}
	j, err := janitor.New(e.Client, e.accounts, e.registry, o)
	if err != nil {
		t.Fatal(err)
	}
	j.SetClock(e.clock.now)
	return j
}

func (e *env) server(t *testing.T, name string, tags map[string]string) string {
	t.Helper()
	tm := cloudscale.TagMap(tags)
	req := &cloudscale.ServerRequest{Name: name, Flavor: "flex-4-1", Image: "debian-12", Zone: "rma1", SSHKeys: []string{}}
	req.Tags = &tm
	s, err := e.sdk.Servers.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s.UUID
}

func (e *env) exists(t *testing.T, id string) bool {
	t.Helper()
	_, err := e.sdk.Servers.Get(context.Background(), id)
	return err == nil
}

func ours(machine string) map[string]string {
	return map[string]string{v1beta1.TagClusterID: fixture.ClusterID, v1beta1.TagMachineName: machine}
}

// Servers with the cluster's identity but no Machine are reported, kept
// while only reporting is asked for, and deleted after the grace period when
// it is; a server without the identity, one whose Machine exists and one a
// Node runs on are never touched.
func TestOrphansAreReportedThenDeleted(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if err := e.Client.Create(ctx, fixture.Machine("worker-a", `{}`)); err != nil {
		t.Fatal(err)
	}
	owned := e.server(t, "worker-a", ours("worker-a"))
	orphan := e.server(t, "ghost", ours("ghost"))
	busy := e.server(t, "busy", ours("busy"))
	foreign := e.server(t, "foreign", map[string]string{"team": "other"})
	otherCluster := e.server(t, "other", map[string]string{v1beta1.TagClusterID: "another-cluster", v1beta1.TagMachineName: "ghost"})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: corev1.NodeSpec{ProviderID: "cloudscale://" + busy}}
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}

	// Too young to count yet: a server may be on its way to its Machine.
	if rep, err := e.janitor(t, janitor.Options{OrphanMinAge: time.Hour}).Sweep(ctx); err != nil || len(rep.Orphans) != 0 {
		t.Fatalf("young servers counted as orphans: %+v, %v", rep.Orphans, err)
	}

	e.clock.add(5 * time.Minute)
	reporter := e.janitor(t, janitor.Options{})
	rep, err := reporter.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, o := range rep.Orphans {
		got[o.ServerID] = true
	}
	if len(got) != 2 || !got[orphan] || !got[busy] {
		t.Fatalf("orphans %+v, want %s and %s", rep.Orphans, orphan, busy)
	}
	var cm corev1.ConfigMap
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: fixture.Namespace, Name: orphans.ConfigMapName("cloudscale")}, &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data[orphan], `"ghost"`) || len(cm.Data) != 2 {
		t.Errorf("orphan record %v", cm.Data)
	}
	// Reporting only: nothing is deleted, however old.
	e.clock.add(24 * time.Hour)
	if rep, _ := reporter.Sweep(ctx); len(rep.OrphansDeleted) != 0 || !e.exists(t, orphan) {
		t.Fatalf("a reporting janitor deleted %v", rep.OrphansDeleted)
	}

	if _, err := janitor.New(e.Client, e.accounts, e.registry, janitor.Options{DeleteOrphansAfter: time.Minute}); err == nil {
		t.Error("deleting orphans after a minute was accepted; the minimum is 10 minutes")
	}
	// A janitor that deletes counts the grace from when it first saw the
	// orphan with no Node on it (a restart starts the clock again), not
	// from the record's since.
	deleter := e.janitor(t, janitor.Options{DeleteOrphansAfter: 10 * time.Minute})
	if rep, err = deleter.Sweep(ctx); err != nil || len(rep.OrphansDeleted) != 0 {
		t.Fatalf("a new deleting janitor's first sweep deleted %v (%v)", rep.OrphansDeleted, err)
	}
	e.clock.add(10 * time.Minute)
	rep, err = deleter.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.OrphansDeleted) != 1 || rep.OrphansDeleted[0] != orphan || e.exists(t, orphan) {
		t.Errorf("deleted %v, want only %s", rep.OrphansDeleted, orphan)
	}
	for name, id := range map[string]string{"owned": owned, "busy (a Node runs on it)": busy, "foreign": foreign, "another cluster's": otherCluster} {
		if !e.exists(t, id) {
			t.Errorf("the %s server %s was deleted", name, id)
		}
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: fixture.Namespace, Name: orphans.ConfigMapName("cloudscale")}, &cm); err != nil {
		t.Fatal(err)
	}
	if _, still := cm.Data[orphan]; still || len(cm.Data) != 1 {
		t.Errorf("orphan record after the delete %v, want only the busy server", cm.Data)
	}
}

// Empty groups of the cluster are deleted on the next sweep, whatever left
// them behind; groups in use, young ones and the user's stay.
func TestEmptyGroupsAreCleanedUp(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	group := func(name string, tags map[string]string) string {
		req := &cloudscale.ServerGroupRequest{Name: name, Type: "anti-affinity"}
		req.Zone = "rma1"
		tm := cloudscale.TagMap(tags)
		req.Tags = &tm
		g, err := e.sdk.ServerGroups.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return g.UUID
	}
	leaked := group(fixture.ClusterID+"-workers-2", map[string]string{v1beta1.TagClusterID: fixture.ClusterID, v1beta1.TagAntiAffinityKey: "workers"})
	user := group("mine", map[string]string{v1beta1.TagClusterID: fixture.ClusterID})
	rep, err := e.janitor(t, janitor.Options{GroupMinAge: time.Nanosecond}).Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GroupsDeleted) != 1 || rep.GroupsDeleted[0] != fixture.ClusterID+"-workers-2" {
		t.Errorf("groups deleted %v, want the leaked one", rep.GroupsDeleted)
	}
	left, err := e.sdk.ServerGroups.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].UUID != user {
		t.Errorf("groups left %+v, want only the user's %s (leaked was %s)", left, user, leaked)
	}
}

// Each sweep lists the cluster's servers unless they were listed since the
// last sweep ended (by the Machines' reconciles, through the shared view):
// a settled cluster costs the account one list per sweep, not one or none
// depending on which of two lists an interval apart began a moment later.
func TestEachSweepListsUnlessTheViewListedSince(t *testing.T) {
	e := start(t)
	h := e.Emulator.Harness()
	j := e.janitor(t, janitor.Options{Interval: time.Hour})
	acc, err := e.accounts.Get("test", *e.Cloud(token).DefaultCredentials())
	if err != nil {
		t.Fatal(err)
	}
	const list = "GET /v1/servers"
	before := h.Count(list)
	for range 2 {
		if _, err := j.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.Count(list) - before; n != 2 {
		t.Errorf("two sweeps listed the servers %d times, want twice", n)
	}
	// A list of the Machines' since: the next sweep takes it.
	if _, err := acc.View(fixture.ClusterID).MachineNow(context.Background(), "worker-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.Count(list) - before; n != 3 {
		t.Errorf("the sweeps and a Machine's lookup listed the servers %d times, want 3 (the sweep after the lookup takes its list)", n)
	}
}
