package janitor_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	csv1 "github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	exov1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// world is a cluster and its account on one cloud, with a janitor that
// starts as a restarted manager's does: its client has synced nothing, so
// it knows no Exoscale instance's private addresses.
type world struct {
	t         *testing.T
	ctx       context.Context
	e         *fixture.Env
	cloudName string
	accounts  *cloud.Accounts
	registry  *orphans.Registry
	adoptions *orphans.Adoptions
	events    *record.FakeRecorder
	clock     *clock
	cs        *cloudscale.Client
	exo       *v3.Client
	// network is the private network orphans are attached to.
	network string
}

// onEachCloud runs test in a world of its own on each cloud.
func onEachCloud(t *testing.T, test func(*testing.T, *world)) {
	for _, cloudName := range []string{fixture.Cloudscale, fixture.Exoscale} {
		t.Run(cloudName, func(t *testing.T) { test(t, startWorld(t, cloudName)) })
	}
}

func startWorld(t *testing.T, cloudName string) *world {
	t.Helper()
	ctx := context.Background()
	e := fixture.Start(t, fixture.Options{Cloud: cloudName})
	w := &world{t: t, ctx: ctx, e: e, cloudName: cloudName, events: record.NewFakeRecorder(1000), clock: &clock{t: time.Now().Add(5 * time.Minute)}}
	var c cloud.Cloud
	switch cloudName {
	case fixture.Cloudscale:
		c = e.Cloud(token)
		w.cs = cloudscale.NewClient(nil)
		w.cs.BaseURL, _ = w.cs.BaseURL.Parse(e.APIURL)
		w.cs.AuthToken = token
		// A network without a subnet: the servers on it configure their
		// addresses themselves, and the API knows none of them.
		noSubnet := false
		n, err := w.cs.Networks.Create(ctx, &cloudscale.NetworkCreateRequest{ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "rma1"}, Name: "cluster", AutoCreateIPV4Subnet: &noSubnet})
		if err != nil {
			t.Fatal(err)
		}
		w.network = n.UUID
	case fixture.Exoscale:
		c = e.ExoscaleCloud(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret)
		sdk, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret),
			v3.ClientOptWithEndpoint(v3.Endpoint(e.APIURL+"v2")), v3.ClientOptWithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		w.exo = sdk
		// A managed network: it leases each instance its address.
		op := w.exoDone(sdk.CreatePrivateNetwork(ctx, v3.CreatePrivateNetworkRequest{Name: "cluster",
			StartIP: net.IPv4(172, 18, 200, 101), EndIP: net.IPv4(172, 18, 200, 253), Netmask: net.IPv4(255, 255, 255, 0)}))
		w.network = string(op.Reference.ID)
	}
	w.accounts = cloud.NewAccounts(c, cloud.AccountOptions{View: cloud.ViewOptions{Refresh: time.Millisecond}})
	acc, err := w.accounts.Get("test", *c.DefaultCredentials())
	if err != nil {
		t.Fatal(err)
	}
	acc.View(fixture.ClusterID)
	w.registry = &orphans.Registry{Client: e.Client, Recorder: w.events, Namespace: fixture.Namespace, Cloud: cloudName}
	w.adoptions = &orphans.Adoptions{Client: e.Client, Namespace: fixture.Namespace, Cloud: cloudName}
	return w
}

func (w *world) exoDone(op *v3.Operation, err error) *v3.Operation {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	op, err = w.exo.Wait(w.ctx, op, v3.OperationStateSuccess)
	if err != nil {
		w.t.Fatal(err)
	}
	return op
}

// orphan makes a server tagged as the cluster's Machine machine, which does
// not exist, on the cluster's private network, and returns its ID and the
// private address its kubelet reports: on cloudscale.ch one it configured
// itself, on Exoscale the network's lease.
func (w *world) orphan(machine string) (id, privateIP string) {
	w.t.Helper()
	switch w.cloudName {
	case fixture.Cloudscale:
		tags := cloudscale.TagMap{csv1.TagClusterID: fixture.ClusterID, csv1.TagMachineName: machine}
		req := &cloudscale.ServerRequest{Name: machine, Flavor: "flex-4-1", Image: "debian-12", Zone: "rma1", SSHKeys: []string{},
			Interfaces: &[]cloudscale.InterfaceRequest{{Network: "public"}, {Network: w.network, Addresses: &[]cloudscale.AddressRequest{}}}}
		req.Tags = &tags
		s, err := w.cs.Servers.Create(w.ctx, req)
		if err != nil {
			w.t.Fatal(err)
		}
		return s.UUID, "10.99.0.7"
	default:
		op, err := w.exo.CreateInstance(w.ctx, v3.CreateInstanceRequest{
			Name:         machine,
			InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.medium"))},
			Template:     &v3.Template{ID: "188e6dc9-7b29-4db4-a8af-fc6368660738"},
			DiskSize:     20,
			Labels:       v3.Labels{exov1.LabelClusterID: fixture.ClusterID, exov1.LabelMachineName: machine},
		})
		if err != nil || op.Reference == nil {
			w.t.Fatalf("creating %s: %+v, %v", machine, op, err)
		}
		id := op.Reference.ID
		w.exoDone(w.exo.AttachInstanceToPrivateNetwork(w.ctx, v3.UUID(w.network), v3.AttachInstanceToPrivateNetworkRequest{
			Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: id}}))
		inst, _ := w.e.Exoscale.Instance(string(id))
		if len(inst.PrivateIPs) != 1 {
			w.t.Fatalf("instance %s leases %v, want one address", id, inst.PrivateIPs)
		}
		return string(id), inst.PrivateIPs[0]
	}
}

func (w *world) exists(id string) bool {
	w.t.Helper()
	if w.cloudName == fixture.Cloudscale {
		_, err := w.cs.Servers.Get(w.ctx, id)
		return err == nil
	}
	inst, ok := w.e.Exoscale.Instance(id)
	return ok && inst.State != "destroying" && inst.State != "destroyed"
}

// node registers a Node as a kubelet would: with a providerID, or without
// (a cluster without a cloud controller manager) and the addresses given.
func (w *world) node(name, providerID string, ips ...string) *corev1.Node {
	w.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := w.e.Client.Create(w.ctx, n); err != nil {
		w.t.Fatal(err)
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if err := w.e.Client.Status().Update(w.ctx, n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) deleteNode(n *corev1.Node) {
	w.t.Helper()
	if err := w.e.Client.Delete(w.ctx, n); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) janitor(o janitor.Options) *janitor.Janitor {
	w.t.Helper()
	o.Log = logr.Discard()
	o.ClusterID = fixture.ClusterID
	o.Adoptions = w.adoptions
	j, err := janitor.New(w.e.Client, w.accounts, w.registry, o)
	if err != nil {
		w.t.Fatal(err)
	}
	j.SetClock(w.clock.now)
	return j
}

func (w *world) sweep(j *janitor.Janitor) janitor.Report {
	w.t.Helper()
	rep, err := j.Sweep(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return rep
}

// deletedAfter moves the clock on by d and sweeps: the orphan id must be
// deleted then.
func (w *world) deletedAfter(j *janitor.Janitor, d time.Duration, id, what string) {
	w.t.Helper()
	w.clock.add(d)
	if rep := w.sweep(j); len(rep.OrphansDeleted) != 1 || w.exists(id) {
		w.t.Errorf("%s: deleted %v, want %s", what, rep.OrphansDeleted, id)
	}
}

func reported(rep janitor.Report, id string) bool {
	return slices.ContainsFunc(rep.Orphans, func(o orphans.Orphan) bool { return o.ServerID == id })
}

// A Node vetoes an orphan's deletion by every address it reports, whatever
// the provider has synced: here a Node without a providerID (a cluster
// without a cloud controller manager) that reports only its private
// address, which the janitor of a restarted manager has never read (the
// lease of an Exoscale instance's managed network), or which the cloud
// does not know at all (a cloudscale.ch interface whose server configures
// its own address). Once the Node is gone, the orphan goes after its
// grace.
func TestNodeOnAPrivateAddressVetoesAnOrphansDeletion(t *testing.T) {
	onEachCloud(t, func(t *testing.T, w *world) {
		id, ip := w.orphan("worker-5e6f")
		n := w.node("worker-5e6f", "", ip)
		j := w.janitor(janitor.Options{DeleteOrphansAfter: janitor.MinDeleteOrphansAfter})
		for range 3 {
			if rep := w.sweep(j); !reported(rep, id) || len(rep.OrphansDeleted) > 0 {
				t.Fatalf("orphans %+v, deleted %v; want %s reported and kept", rep.Orphans, rep.OrphansDeleted, id)
			}
			w.clock.add(time.Hour)
		}
		if !w.exists(id) {
			t.Fatalf("the janitor deleted orphan %s, which Node %s runs on (its private address %s)", id, n.Name, ip)
		}
		if ev := drain(w.events); !strings.Contains(ev, "OrphanNotDeleted") || !strings.Contains(ev, "Node worker-5e6f") {
			t.Errorf("events %s, want OrphanNotDeleted naming Node worker-5e6f", ev)
		}
		w.deleteNode(n)
		w.sweep(j)
		w.deletedAfter(j, janitor.MinDeleteOrphansAfter, id, "without its Node, after its grace")
	})
}

// The grace counts from the last moment no Node vetoed: an orphan a Node
// ran on for a month is not deleted at the first sweep that finds its Node
// missing (`oc delete node` before a reboot, a re-registration), and a Node
// back for one sweep starts its grace again.
func TestVetoRestartsTheOrphanGrace(t *testing.T) {
	onEachCloud(t, func(t *testing.T, w *world) {
		cloudName := w.cloudName
		id, _ := w.orphan("infra-7a8b")
		pid := cloudName + "://" + id
		n := w.node("infra-7a8b", pid)
		grace := janitor.MinDeleteOrphansAfter
		j := w.janitor(janitor.Options{DeleteOrphansAfter: grace})
		w.sweep(j)
		w.clock.add(30 * 24 * time.Hour)
		w.sweep(j)
		w.deleteNode(n) // before a reboot
		w.sweep(j)
		if !w.exists(id) {
			t.Fatal("a month's orphan was deleted at the first sweep its Node was missing")
		}
		w.clock.add(grace - time.Minute)
		w.sweep(j)
		n = w.node("infra-7a8b", pid) // registered again
		w.clock.add(time.Minute)
		w.sweep(j)
		w.deleteNode(n)
		w.clock.add(time.Minute)
		w.sweep(j) // the grace starts here
		w.clock.add(grace - time.Minute)
		if rep := w.sweep(j); len(rep.OrphansDeleted) > 0 || !w.exists(id) {
			t.Fatalf("deleted %v %s after its Node came back: the grace did not start again", rep.OrphansDeleted, grace-time.Minute)
		}
		w.deletedAfter(j, time.Minute, id, "a full grace without a Node")
		if ev := drain(w.events); !strings.Contains(ev, "OrphanDeleted") || !strings.Contains(ev, "with no Node on it since") {
			t.Errorf("events %s, want OrphanDeleted saying since when no Node ran on it", ev)
		}
	})
}

// The orphan record is a ConfigMap anyone who may write ConfigMaps of the
// namespace can change: a since written a month back does not shorten the
// grace, which counts from when the janitor itself first saw the orphan
// with no Node on it.
func TestBackdatedOrphanRecordDoesNotShortenTheGrace(t *testing.T) {
	onEachCloud(t, func(t *testing.T, w *world) {
		cloudName := w.cloudName
		id, _ := w.orphan("ghost")
		back := w.clock.now().Add(-30 * 24 * time.Hour).UTC()
		if _, err := w.registry.Record(w.ctx, orphans.Orphan{Cloud: cloudName, ServerID: id, ServerName: "ghost", Machine: "ghost",
			ClusterID: fixture.ClusterID, Account: "default", Reason: "written by hand", Since: back, Verified: true}); err != nil {
			t.Fatal(err)
		}
		j := w.janitor(janitor.Options{DeleteOrphansAfter: janitor.MinDeleteOrphansAfter})
		if rep := w.sweep(j); !reported(rep, id) || len(rep.OrphansDeleted) > 0 || !w.exists(id) {
			t.Fatalf("the first sweep deleted %v: the record's since (%s) shortened the grace", rep.OrphansDeleted, back)
		}
		w.deletedAfter(j, janitor.MinDeleteOrphansAfter, id, "after the janitor's own grace")
	})
}

// The adoption record keeps servers from orphan reporting: an adoption
// under way until its entry expires (an abandoned adopt run does not hide
// its servers for good: the janitor removes the entry with an event and
// reports the server), a server left alone for good (never reported, never
// deleted, however long its Node is missing).
func TestAdoptionRecordExpiresLeftAloneDoesNot(t *testing.T) {
	onEachCloud(t, func(t *testing.T, w *world) {
		abandoned, _ := w.orphan("worker-0a1b")
		older, _ := w.orphan("worker-2c3d")
		left, _ := w.orphan("infra-4e5f")
		now := w.clock.now().UTC()
		if err := w.adoptions.Begin(w.ctx,
			orphans.Adoption{ServerID: abandoned, ServerName: "worker-0a1b", Machine: "worker-0a1b", ClusterID: fixture.ClusterID, Since: now, Expires: now.Add(orphans.AdoptionTTL)},
			// written by an earlier release: no expires
			orphans.Adoption{ServerID: older, ServerName: "worker-2c3d", ClusterID: fixture.ClusterID, Since: now},
			orphans.Adoption{ServerID: left, ServerName: "infra-4e5f", ClusterID: fixture.ClusterID, Since: now, LeftAlone: "adopt left it alone: --leave-role infra"},
		); err != nil {
			t.Fatal(err)
		}
		j := w.janitor(janitor.Options{DeleteOrphansAfter: janitor.MinDeleteOrphansAfter})
		if rep := w.sweep(j); len(rep.Orphans) != 0 || !slices.Contains(rep.LeftAlone, left) {
			t.Fatalf("during the adoption: orphans %+v, left alone %v", rep.Orphans, rep.LeftAlone)
		}
		w.clock.add(orphans.AdoptionTTL + time.Minute)
		rep := w.sweep(j)
		if !reported(rep, abandoned) || !reported(rep, older) || reported(rep, left) {
			t.Fatalf("a day after the adoption was abandoned: orphans %+v, want %s and %s, not the one left alone", rep.Orphans, abandoned, older)
		}
		if ev := drain(w.events); strings.Count(ev, "AdoptionRecordExpired") != 2 || !strings.Contains(ev, "adopt --apply") {
			t.Errorf("events %s, want AdoptionRecordExpired for each, saying how to resume", ev)
		}
		recorded, err := w.adoptions.List(w.ctx)
		if err != nil || len(recorded) != 1 || recorded[left].LeftAlone == "" {
			t.Errorf("the adoption record %+v (%v), want only the server left alone", recorded, err)
		}
		for range 3 {
			w.clock.add(30 * 24 * time.Hour)
			w.sweep(j)
		}
		if !w.exists(left) {
			t.Error("a server left alone was deleted")
		}
		if w.exists(abandoned) || w.exists(older) {
			t.Error("the servers of the abandoned adoption were never deleted as orphans")
		}
	})
}
