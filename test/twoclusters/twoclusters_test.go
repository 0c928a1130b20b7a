// Package twoclusters runs two clusters in one cloud account, as real
// accounts are shared, on each cloud's emulator: two control planes (a real
// kube-apiserver and etcd each) and the provider's manager of each, with the
// machine controller, the capacity publisher and the janitor, each pinned to
// its cluster. Cluster A gets what used to make a provider take another
// cluster's servers for its own: a MachineSet copied from cluster B, a
// Machine restored from B's backup (B's label, B's server's provider ID), a
// Machine of its own given B's server's provider ID, and a janitor that
// deletes orphans (--delete-orphans-after at its minimum, its clock run
// fast: the product's bound stays). At the end not one write or delete of
// A's has reached a server of B, counted at the emulator, and B's Machines
// and servers are as they were; A's janitor did delete A's own orphan, so
// it was deleting. `make e2e` runs it (E2E=1), both clouds side by side.
package twoclusters

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	csv1 "github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	exov1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
	"github.com/appuio/machine-api-provider/test/ownaudit"
)

// The two clusters' identities (their infrastructure names).
const (
	clusterA  = "cluster-a-x7k2p"
	clusterB  = "cluster-b-q9w3e"
	namespace = "openshift-machine-api"
	clusterLb = actuator.ClusterIDLabel
)

// speed is how much faster than the wall clock cluster A's janitor's clock
// runs: --delete-orphans-after's minimum (10 minutes, which nothing lowers)
// passes in 10 seconds.
const speed = 60

func TestMain(m *testing.M) {
	// The managers log process-wide; the test says what it checks.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// account is one emulated cloud account, shared by both clusters.
type account struct {
	name string
	// provider is the cloud as cluster who's manager has it: its requests
	// carry fixture.WriterHeader.
	provider func(who string) cloud.Cloud
	// spec is a valid provider spec of the cloud.
	spec string
	// server makes a server of the account, outside of any provider, with
	// the provider's tags or labels of a cluster and a Machine.
	server func(t *testing.T, name, cluster, machine string) string
	// identity is a server's tags or labels, exists whether it is there.
	identity func(id string) (map[string]string, bool)
	writes   *fixture.WriteLog
	// audit is the emulator's audit of every write; caller names the
	// credentials of a cluster's provider in it (each cluster has its
	// own, as a project has a token per cluster).
	audit  *harness.Audit
	caller func(who string) string
}

func cloudscaleAccount(t *testing.T) *account {
	const token = "shared-project-token"
	tokenOf := func(who string) string { return "token-of-" + who }
	emu, err := emucs.New(emucs.Config{Tokens: map[string]emucs.Access{token: emucs.ReadWrite, tokenOf(clusterA): emucs.ReadWrite, tokenOf(clusterB): emucs.ReadWrite}, BootTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &account{name: "cloudscale", writes: &fixture.WriteLog{}, audit: emu.Harness().Audit(),
		caller: func(who string) string { return harness.CallerToken(tokenOf(who)) }}
	srv := httptest.NewServer(a.writes.Wrap(emu))
	t.Cleanup(srv.Close)
	a.provider = func(who string) cloud.Cloud {
		return cscloud.New(cscloud.Options{BaseURL: srv.URL + "/", DefaultToken: tokenOf(who),
			HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: fixture.ByWriter(who, nil)}})
	}
	a.spec = `{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"flex-8-4","image":"custom:rhcos-4.19","rootVolumeSizeGB":50,"interfaces":[{"type":"Public"}]}`
	a.server = func(t *testing.T, name, cluster, machine string) string {
		t.Helper()
		c := cscloudSDK(srv.URL+"/", token)
		return c.create(t, name, map[string]string{csv1.TagClusterID: cluster, csv1.TagMachineName: machine})
	}
	a.identity = cscloudSDK(srv.URL+"/", token).tags
	return a
}

func exoscaleAccount(t *testing.T) *account {
	emu, err := emuexo.New(emuexo.Config{BootTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(who string) string { return "EXO-key-of-" + who }
	for _, who := range []string{clusterA, clusterB} {
		if err := emu.AddKey(emuexo.DefaultAccountName, keyOf(who), "secret-of-"+who, nil); err != nil {
			t.Fatal(err)
		}
	}
	a := &account{name: "exoscale", writes: &fixture.WriteLog{}, audit: emu.Harness().Audit(),
		caller: func(who string) string { return harness.CallerKey(keyOf(who)) }}
	srv := httptest.NewServer(a.writes.Wrap(emu))
	t.Cleanup(srv.Close)
	a.provider = func(who string) cloud.Cloud {
		return exocloud.New(exocloud.Options{APIEndpoint: srv.URL + "/v2", DefaultAPIKey: keyOf(who), DefaultAPISecret: "secret-of-" + who,
			HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: fixture.ByWriter(who, nil)}})
	}
	a.spec = `{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"rhcos-4.19"},"diskSize":120}`
	a.server = func(t *testing.T, name, cluster, machine string) string {
		t.Helper()
		return exoCreate(t, srv.URL+"/v2", emu, name, map[string]string{exov1.LabelClusterID: cluster, exov1.LabelMachineName: machine})
	}
	a.identity = func(id string) (map[string]string, bool) {
		i, ok := emu.Instance(id)
		return i.Labels, ok
	}
	return a
}

// cluster is one control plane with the provider's manager pinned to its
// identity.
type cluster struct {
	id string
	c  client.Client
}

func startCluster(t *testing.T, acc *account, id string, jan janitor.Options) *cluster {
	t.Helper()
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t))
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	startManager(t, cfg, acc.provider(id), id, jan)
	// The ownership audit of the cluster's own credentials' writes and of
	// its Nodes, held to its identity when the test ends.
	rec := ownaudit.Begin(t, ownaudit.Source{Cloud: acc.audit, Config: cfg})
	t.Cleanup(func() {
		rec.Check(t, acc.name+" "+id, ownaudit.Options{ClusterID: id, Callers: []string{acc.caller(id)}})
	})
	return &cluster{id: id, c: c}
}

func startManager(t *testing.T, cfg *rest.Config, c cloud.Cloud, id string, jan janitor.Options) {
	t.Helper()
	mgr, err := manager.New(cfg, manager.Options{
		Cloud: c, ClusterID: id, Namespace: namespace, CapacityPublisher: true,
		ServerViewRefresh: time.Second, SyncPeriod: 5 * time.Second, Janitor: jan,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", AllowManyPerProcess: true, Log: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, mgr)
}

func (cl *cluster) machine(t *testing.T, name, label, providerID, spec string) {
	t.Helper()
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{clusterLb: label}}}
	m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(spec)}
	if providerID != "" {
		m.Spec.ProviderID = &providerID
	}
	if err := cl.c.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func (cl *cluster) get(t *testing.T, name string) *machinev1.Machine {
	t.Helper()
	m := &machinev1.Machine{}
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		t.Fatalf("cluster %s, Machine %s: %v", cl.id, name, err)
	}
	return m
}

func (cl *cluster) waitPhase(t *testing.T, name, phase string) *machinev1.Machine {
	t.Helper()
	var m *machinev1.Machine
	fixture.Eventually(t, 2*time.Minute, fmt.Sprintf("cluster %s: Machine %s %s", cl.id, name, phase), func() (bool, error) {
		m = cl.get(t, name)
		return fixture.Phase(m) == phase, fmt.Errorf("phase %q", fixture.Phase(m))
	})
	return m
}

func (cl *cluster) delete(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cl.c.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 2*time.Minute, fmt.Sprintf("cluster %s: %s gone", cl.id, obj.GetName()), func() (bool, error) {
		err := cl.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return err != nil, nil
	})
}

func serverOf(m *machinev1.Machine, cloudName string) string {
	if m.Spec.ProviderID == nil {
		return ""
	}
	return strings.TrimPrefix(*m.Spec.ProviderID, cloudName+"://")
}

func TestTwoClustersShareOneAccount(t *testing.T) {
	if os.Getenv("E2E") == "" {
		t.Skip("end-to-end test: run `make e2e` (E2E=1)")
	}
	for name, acc := range map[string]func(*testing.T) *account{"cloudscale": cloudscaleAccount, "exoscale": exoscaleAccount} {
		// E2E_CLOUDS (comma separated) narrows the clouds, as in test/e2e.
		if only := os.Getenv("E2E_CLOUDS"); only != "" && !slices.Contains(strings.Split(only, ","), name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			twoClusters(t, acc(t))
		})
	}
}

func twoClusters(t *testing.T, acc *account) {
	began := time.Now()
	ctx := context.Background()
	// Cluster B, as it runs: two Machines, their servers.
	b := startCluster(t, acc, clusterB, janitor.Options{})
	for _, n := range []string{"b-worker-0", "b-worker-1"} {
		b.machine(t, n, clusterB, "", acc.spec)
	}
	bServers := map[string]map[string]string{}
	for _, n := range []string{"b-worker-0", "b-worker-1"} {
		id := serverOf(b.waitPhase(t, n, machinev1.PhaseProvisioned), acc.name)
		tags, ok := acc.identity(id)
		if !ok || tags[tagCluster(acc.name)] != clusterB {
			t.Fatalf("B's server %s: %v", id, tags)
		}
		bServers[id] = maps.Clone(tags)
	}

	// Cluster A, in the same account, with a janitor that deletes orphans
	// and a clock that runs fast.
	start := time.Now()
	fast := func() time.Time { return start.Add(time.Since(start) * speed) }
	a := startCluster(t, acc, clusterA, janitor.Options{
		Interval: time.Second, DeleteOrphansAfter: janitor.MinDeleteOrphansAfter, Now: fast,
	})
	a.machine(t, "a-worker-0", clusterA, "", acc.spec)
	aOwn := serverOf(a.waitPhase(t, "a-worker-0", machinev1.PhaseProvisioned), acc.name)
	ghost := acc.server(t, "a-ghost", clusterA, "a-ghost") // A's orphan
	var bIDs []string
	for id := range bServers {
		bIDs = append(bIDs, id)
	}
	// What used to take B's servers for A's: a MachineSet copied from B
	// (even at 0 replicas), a Machine restored from B's backup, a Machine
	// of A's given B's server.
	zero := int32(0)
	sel := map[string]string{clusterLb: clusterB, "machine.openshift.io/cluster-api-machineset": "b-workers"}
	copied := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "b-workers", Namespace: namespace, Labels: map[string]string{clusterLb: clusterB}},
		Spec: machinev1.MachineSetSpec{Replicas: &zero, Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: sel}}},
	}
	copied.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(acc.spec)}
	if err := a.c.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	a.machine(t, "b-worker-0", clusterB, acc.name+"://"+bIDs[0], acc.spec)
	a.machine(t, "stolen", clusterA, acc.name+"://"+bIDs[1], acc.spec)

	// A's janitor deletes A's orphan once it is 10 (fast) minutes old:
	// it is deleting.
	fixture.Eventually(t, 2*time.Minute, "A's janitor to delete A's orphan", func() (bool, error) {
		_, there := acc.identity(ghost)
		return !there, nil
	})
	// And then for another 10 (fast) minutes: every sweep sees B's
	// servers, were it to take them for A's.
	time.Sleep(janitor.MinDeleteOrphansAfter / speed)
	untouched := func(when string) {
		t.Helper()
		for id, tags := range bServers {
			if w := acc.writes.By(clusterA, id); len(w) > 0 {
				t.Errorf("%s: cluster A wrote to B's server %s: %v", when, id, w)
			}
			now, ok := acc.identity(id)
			if !ok || !maps.Equal(now, tags) {
				t.Errorf("%s: B's server %s: %v (there: %v), want it as it was, %v", when, id, now, ok, tags)
			}
		}
	}
	untouched("after 10 minutes of A's janitor")
	// Failed by A's provider, saying which field names what (not the
	// machine controller's "can't find created instance").
	for n, says := range map[string]string{"b-worker-0": clusterLb, "stolen": "spec.providerID"} {
		m := a.waitPhase(t, n, machinev1.PhaseFailed)
		if m.Status.ErrorReason == nil || *m.Status.ErrorReason != machinev1.InvalidConfigurationMachineError ||
			m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, says) {
			t.Errorf("A's Machine %s failed with %v: %v, want %s naming %s", n, m.Status.ErrorReason, m.Status.ErrorMessage, machinev1.InvalidConfigurationMachineError, says)
		}
	}
	fixture.Eventually(t, time.Minute, "the copied MachineSet left alone (CapacityPublished=False, OtherCluster)", func() (bool, error) {
		ms := &machinev1.MachineSet{}
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(copied), ms); err != nil {
			return false, err
		}
		for _, c := range ms.Status.Conditions {
			if c.Type == capacity.ConditionType && c.Reason == capacity.ReasonOtherCluster {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", ms.Status.Conditions)
	})
	var record corev1.ConfigMap
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: orphans.ConfigMapName(acc.name)}, &record); err == nil {
		for _, id := range bIDs {
			if _, ok := record.Data[id]; ok {
				t.Errorf("A's orphan record lists B's server %s", id)
			}
		}
	}
	// A lets its copies go: nothing of B's goes with them.
	a.delete(t, a.get(t, "b-worker-0"))
	a.delete(t, a.get(t, "stolen"))
	a.delete(t, copied)

	untouched("after A deleted its copies")
	for _, n := range []string{"b-worker-0", "b-worker-1"} {
		if p := fixture.Phase(b.get(t, n)); p != machinev1.PhaseProvisioned {
			t.Errorf("B's Machine %s is %s", n, p)
		}
	}
	if _, there := acc.identity(aOwn); !there {
		t.Errorf("A's own server %s went", aOwn)
	}
	t.Logf("%s: two clusters, %d servers of B, 0 writes of A to them, A's orphan deleted: %s", acc.name, len(bServers), time.Since(began).Round(time.Second))
}

func tagCluster(cloudName string) string {
	if cloudName == "exoscale" {
		return exov1.LabelClusterID
	}
	return csv1.TagClusterID
}
