package adopt

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// The cluster of these tests: its identity (the installer's
// infrastructureName) and the cluster_id the Terraform module tagged its
// servers with, which differ as they do on real clusters.
const (
	idInfraName = "c-green-1234-x7k2p"
	idModuleID  = "c-green-1234"
	idDomain    = "green.example.com"
)

// planEnv is a control plane with the Machine API and the Infrastructure,
// the cloudscale.ch emulator with a node group the module made (its
// servers tagged with the module's cluster_id), and their Nodes.
type planEnv struct {
	t       *testing.T
	ctx     context.Context
	kube    client.Client
	cloud   *cscloud.Cloud
	servers map[string]*sdk.Server
}

func startPlanEnv(t *testing.T, workers ...string) *planEnv {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(testenv.InfrastructureCRD(t)))
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := &planEnv{t: t, ctx: ctx, kube: kube, servers: map[string]*sdk.Server{}}
	e.must(kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}))
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	e.must(kube.Create(ctx, infra))
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: idInfraName,
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	e.must(kube.Status().Update(ctx, infra))
	e.must(kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker-user-data", Namespace: testNamespace}, StringData: map[string]string{"userData": "{}"}}))

	emu, err := emucs.New(emucs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	e.cloud = cscloud.New(cscloud.Options{BaseURL: srv.URL + "/", DefaultToken: "t"})
	c := sdk.NewClient(nil)
	c.BaseURL, _ = c.BaseURL.Parse(srv.URL + "/")
	c.AuthToken = "t"
	for _, name := range workers {
		tags := sdk.TagMap{v1beta1.TagClusterID: idModuleID, v1beta1.TagMachineName: name}
		req := &sdk.ServerRequest{Name: name + "." + idDomain, Zone: "rma1", Flavor: "plus-16-4", Image: "custom:rhcos-4.19", VolumeSizeGB: 100, SSHKeys: []string{}}
		req.Tags = &tags
		s, err := c.Servers.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for s.Status != sdk.ServerRunning && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			if s, err = c.Servers.Get(ctx, s.UUID); err != nil {
				t.Fatal(err)
			}
		}
		e.servers[name] = s
	}
	return e
}

func (e *planEnv) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// node registers the server's Node, as the cloud controller manager left it.
func (e *planEnv) node(name string) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
		Spec: corev1.NodeSpec{ProviderID: "cloudscale://" + e.servers[name].UUID}}
	e.must(e.kube.Create(e.ctx, n))
}

func (e *planEnv) adopter(o Options) (*Adopter, error) {
	o.Namespace, o.UserDataSecret, o.Log = testNamespace, "worker-user-data", logr.Discard()
	return New(e.ctx, e.kube, e.cloud, o)
}

// The Machines carry the cluster's identity, the Infrastructure's
// infrastructureName; a --cluster-id that is another is refused, saying how
// servers tagged with it are taken over. They are only with
// TakeOverClusterID: without it, the module's tags leave them alone.
func TestAdoptTakesOverAnotherClusterIDOnlyWhenTold(t *testing.T) {
	e := startPlanEnv(t, "worker-0a1b", "worker-2c3d")
	e.node("worker-0a1b")
	e.node("worker-2c3d")
	if _, err := e.adopter(Options{ClusterID: idModuleID}); err == nil || !strings.Contains(err.Error(), "--take-over-cluster-id "+idModuleID) {
		t.Errorf("--cluster-id %s on cluster %s: %v, want a refusal naming --take-over-cluster-id", idModuleID, idInfraName, err)
	}
	for _, tc := range []struct {
		takeOver, action string
	}{{"", ActMisfit}, {idModuleID, ActAdopt}} {
		a, err := e.adopter(Options{TakeOverClusterID: tc.takeOver})
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Plan(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.ClusterID != idInfraName || len(p.Groups) != 1 {
			t.Fatalf("plan for %s with %d groups", p.ClusterID, len(p.Groups))
		}
		g := p.Groups[0]
		for _, m := range g.Members {
			if m.Action != tc.action {
				t.Errorf("take over %q: %s is %q (%v), want %q", tc.takeOver, m.Found.Name, m.Action, m.Misfits, tc.action)
			}
			if tc.action == ActMisfit && !strings.Contains(strings.Join(m.Misfits, ";"), "--take-over-cluster-id "+idModuleID) {
				t.Errorf("misfits %v, want them to say how to take it over", m.Misfits)
			}
			if m.Machine != nil && m.Machine.Labels[clusterLabel] != idInfraName {
				t.Errorf("Machine %s labelled %q, want the cluster's identity %s", m.MachineName, m.Machine.Labels[clusterLabel], idInfraName)
			}
		}
		if tc.action == ActAdopt && (g.MachineSet == nil || g.MachineSet.Labels[clusterLabel] != idInfraName || !strings.HasPrefix(g.Name, idInfraName)) {
			t.Errorf("MachineSet %+v, want it the cluster's", g.MachineSet)
		}
	}
}

// A rerun counts every Machine an earlier run made: here one whose server
// has no Node adopt matches any more (the Node was deleted while the node
// rebooted) and is no member of the plan. The MachineSet it writes owns
// all of them at as many replicas; one of fewer would delete one.
func TestRerunCountsEveryMachineItMade(t *testing.T) {
	e := startPlanEnv(t, "worker-0a1b", "worker-2c3d", "worker-4e5f")
	e.node("worker-0a1b")
	e.node("worker-2c3d")
	group := idInfraName + "-worker-rma1"
	// The servers have a public interface only, and say so: a cloudscale.ch
	// spec without interfaces is refused.
	spec := `{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"plus-16-4","image":"custom:rhcos-4.19","rootVolumeSizeGB":100,"interfaces":[{"type":"Public"}]}`
	for _, name := range []string{"worker-0a1b", "worker-2c3d", "worker-4e5f"} {
		pid := "cloudscale://" + e.servers[name].UUID
		m := &machinev1beta1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Annotations: map[string]string{AdoptedAnnotation: name + "." + idDomain},
				Labels: map[string]string{clusterLabel: idInfraName, machineSetLabel: group, roleLabel: "worker", typeLabel: "worker"}},
			Spec: machinev1beta1.MachineSpec{ProviderID: &pid},
		}
		m.Spec.ProviderSpec.Value = rawSpec(spec)
		e.must(e.kube.Create(e.ctx, m))
	}
	a, err := e.adopter(Options{TakeOverClusterID: idModuleID})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var g *Group
	for _, pg := range p.Groups {
		if pg.Name == group {
			g = pg
		}
	}
	if g == nil || g.MachineSet == nil {
		if g != nil {
			t.Logf("the group: blocked %q", g.Blocked)
		}
		t.Fatalf("no MachineSet planned for %s: %+v", group, p.Groups)
	}
	if n := *g.MachineSet.Spec.Replicas; n != 3 {
		t.Errorf("the MachineSet would own 3 Machines at %d replicas: it would delete %d", n, 3-n)
	}
	// Their servers still carry the module's cluster_id (the earlier run
	// stopped before; or a terraform apply set it again): told to take
	// that over, adopt gives them their Machines' identity back, and only
	// then (the provider leaves them alone meanwhile).
	for _, m := range g.Members {
		if m.Action != ActAdopted || !m.Restore {
			t.Errorf("%s: %q, restore %v; want it adopted already, its identity restored", m.Found.Name, m.Action, m.Restore)
		}
	}
	a, err = e.adopter(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = a.Plan(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, pg := range p.Groups {
		for _, m := range pg.Members {
			if m.Restore {
				t.Errorf("%s: restored without --take-over-cluster-id", m.Found.Name)
			}
		}
	}
}

// Should the MachineSet make a Machine of its own while it takes the
// adopted ones over, adopt deletes none: the extra one is marked as the
// one the MachineSet removes, and every Machine adopt made stays.
func TestAdoptDeletesNoMachine(t *testing.T) {
	e := startPlanEnv(t)
	a, err := e.adopter(Options{ClusterID: idInfraName})
	if err != nil {
		t.Fatal(err)
	}
	a.o.Wait, a.o.Poll = time.Second, 100*time.Millisecond
	labels := map[string]string{clusterLabel: idInfraName, machineSetLabel: "workers"}
	one := int32(1)
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: testNamespace},
		Spec: machinev1beta1.MachineSetSpec{Replicas: &one, Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels}}}}
	e.must(e.kube.Create(e.ctx, ms))
	owned := func(name string, adopted bool) {
		pid := "cloudscale://" + name
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet"))}},
			Spec: machinev1beta1.MachineSpec{ProviderID: &pid}}
		if adopted {
			m.Annotations = map[string]string{AdoptedAnnotation: name}
		}
		e.must(e.kube.Create(e.ctx, m))
	}
	owned("worker-0a1b", true)
	owned("workers-x7k2p", false)
	// The MachineSet controller is not running here: adopt waits in
	// vain, and must have deleted nothing meanwhile.
	_ = a.awaitMachineSet(e.ctx, &Group{Name: "workers"}, []*Member{{MachineName: "worker-0a1b"}})
	for _, name := range []string{"worker-0a1b", "workers-x7k2p"} {
		var m machinev1beta1.Machine
		if err := e.kube.Get(e.ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, &m); err != nil || m.DeletionTimestamp != nil {
			t.Errorf("Machine %s: %v, deleting %v; adopt must delete no Machine", name, err, m.DeletionTimestamp != nil)
		}
		if want := name == "workers-x7k2p"; (m.Annotations[deleteMachineAnnotation] == "true") != want {
			t.Errorf("Machine %s: annotations %v, want the MachineSet's extra one marked for deletion", name, m.Annotations)
		}
	}
}

func rawSpec(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
