package adopt

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	"github.com/go-logr/logr"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	csv1 "github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	exov1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// recordEnv is a cluster Terraform made on one cloud, with servers and
// Nodes as the test makes them, for adopt and the janitor.
type recordEnv struct {
	t     *testing.T
	ctx   context.Context
	e     *fixture.Env
	kube  client.Client
	cloud cloud.Cloud
	cs    *sdk.Client
	exo   *v3.Client
}

func startRecordEnv(t *testing.T, cloudName string) *recordEnv {
	t.Helper()
	e := fixture.Start(t, fixture.Options{Cloud: cloudName})
	r := &recordEnv{t: t, ctx: context.Background(), e: e}
	scheme, err := Scheme()
	r.must(err)
	r.kube, err = client.New(e.Config, client.Options{Scheme: scheme})
	r.must(err)
	switch cloudName {
	case fixture.Cloudscale:
		r.cloud = e.Cloud("t")
		r.cs = sdk.NewClient(nil)
		r.cs.BaseURL, _ = r.cs.BaseURL.Parse(e.APIURL)
		r.cs.AuthToken = "t"
	default:
		r.cloud = e.ExoscaleCloud(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret)
		c, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret),
			v3.ClientOptWithEndpoint(v3.Endpoint(e.APIURL+"v2")), v3.ClientOptWithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		r.exo = c
	}
	r.must(e.Client.Create(r.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker-user-data", Namespace: testNamespace}, StringData: map[string]string{"userData": "{}"}}))
	return r
}

func (r *recordEnv) must(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

// server makes a running server named name (cloudscale.ch: with the
// cluster's domain) with the identity given (none for nil), and returns
// its ID and its address.
func (r *recordEnv) server(name string, cluster, machine string) (id, ip string) {
	r.t.Helper()
	if r.cs != nil {
		req := &sdk.ServerRequest{Name: name + "." + idDomain, Zone: "rma1", Flavor: "plus-16-4", Image: "custom:rhcos-4.19", VolumeSizeGB: 100, SSHKeys: []string{}}
		if cluster != "" {
			req.Tags = &sdk.TagMap{csv1.TagClusterID: cluster, csv1.TagMachineName: machine}
		}
		s, err := r.cs.Servers.Create(r.ctx, req)
		r.must(err)
		fixture.Eventually(r.t, time.Minute, name+" running", func() (bool, error) {
			s, err = r.cs.Servers.Get(r.ctx, s.UUID)
			return err == nil && s.Status == sdk.ServerRunning, err
		})
		return s.UUID, s.Interfaces[0].Addresses[0].Address
	}
	req := v3.CreateInstanceRequest{Name: name, DiskSize: 20,
		InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.medium"))},
		Template:     &v3.Template{ID: "188e6dc9-7b29-4db4-a8af-fc6368660738"}}
	if cluster != "" {
		req.Labels = v3.Labels{exov1.LabelClusterID: cluster, exov1.LabelMachineName: machine}
	}
	op, err := r.exo.CreateInstance(r.ctx, req)
	r.must(err)
	_, err = r.exo.Wait(r.ctx, op, v3.OperationStateSuccess)
	r.must(err)
	id = string(op.Reference.ID)
	fixture.Eventually(r.t, time.Minute, name+" running", func() (bool, error) {
		inst, _ := r.e.Exoscale.Instance(id)
		return inst.State == "running", nil
	})
	inst, _ := r.e.Exoscale.Instance(id)
	return id, inst.PublicIPv4
}

// node registers the Node of a server: by providerID (a cloud controller
// manager's), or without one, by its name and address (a cluster without).
func (r *recordEnv) node(name, providerID, ip, role string) *corev1.Node {
	r.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/" + role: ""}},
		Spec: corev1.NodeSpec{ProviderID: providerID}}
	r.must(r.kube.Create(r.ctx, n))
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	r.must(r.kube.Status().Update(r.ctx, n))
	return n
}

func (r *recordEnv) adopter(o Options) *Adopter {
	r.t.Helper()
	o.Namespace, o.ClusterID, o.UserDataSecret, o.Log = testNamespace, idInfraName, "worker-user-data", logr.Discard()
	o.Wait, o.Poll = 5*time.Second, 100*time.Millisecond
	a, err := New(r.ctx, r.kube, r.cloud, o)
	r.must(err)
	return a
}

// adopt plans and applies, as `adopt --apply` does.
func (r *recordEnv) adopt(o Options) (*Report, error) {
	r.t.Helper()
	a := r.adopter(o)
	p, err := a.Plan(r.ctx)
	r.must(err)
	return a.Apply(r.ctx, p)
}

// adopt acts only on the Nodes it recorded itself, matched again right
// before: an annotation on a MachineSet (what an earlier release read to
// resume a pool replacement), written by anyone who may patch MachineSets,
// naming a server that is gone and the masters' Nodes, deletes no Node;
// nor does an entry for such an eviction written into the adoption record,
// even with the Nodes' UIDs and addresses and a master cordoned for an
// upgrade: a master's Node runs on a server that is there.
func TestAdoptDeletesOnlyNodesItRecorded(t *testing.T) {
	for _, cloudName := range []string{fixture.Cloudscale, fixture.Exoscale} {
		t.Run(cloudName, func(t *testing.T) {
			r := startRecordEnv(t, cloudName)
			m0, ip0 := r.server("master-0", "", "")
			m1, ip1 := r.server("master-1", "", "")
			// master-0 without a providerID (no cloud controller manager),
			// master-1 with one; both cordoned, as for an upgrade.
			n0 := r.node("master-0", "", ip0, "master")
			n1 := r.node("master-1", cloudName+"://"+m1, ip1, "master")
			for _, n := range []*corev1.Node{n0, n1} {
				n.Spec.Unschedulable = true
				r.must(r.kube.Update(r.ctx, n))
			}
			gone := "4f1c9c3e-0d55-4c39-9a37-2f7a4b1b6d01"
			for i, n := range []*corev1.Node{n0, n1} {
				ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "planted-" + n.Name, Namespace: testNamespace,
					Annotations: map[string]string{"machine.appuio.io/evicting-pool-member": gone + " " + n.Name}}}
				ms.Spec.Selector.MatchLabels = map[string]string{"x": n.Name}
				ms.Spec.Template.Labels = map[string]string{"x": n.Name}
				r.must(r.kube.Create(r.ctx, ms))
				ev := orphans.Eviction{Pool: "p", Node: n.Name, NodeUID: string(n.UID), ProviderID: n.Spec.ProviderID, Addresses: []string{[]string{ip0, ip1}[i]}}
				planted := orphans.Adoption{ServerID: []string{gone, gone[:35] + "2"}[i], ServerName: n.Name + "." + idDomain, ClusterID: idInfraName,
					Since: time.Now(), Expires: time.Now().Add(time.Hour), Eviction: &ev}
				r.must((&orphans.Adoptions{Client: r.kube, Namespace: testNamespace, Cloud: cloudName}).Begin(r.ctx, planted))
			}
			rep, err := r.adopt(Options{})
			t.Logf("adopt: %+v, %v", rep, err)
			for _, n := range []*corev1.Node{n0, n1} {
				var got corev1.Node
				if err := r.kube.Get(r.ctx, client.ObjectKeyFromObject(n), &got); apierrors.IsNotFound(err) || got.DeletionTimestamp != nil {
					t.Errorf("adopt deleted the Node %s (its server %s is there) on an annotation or a record it did not write", n.Name, map[string]string{"master-0": m0, "master-1": m1}[n.Name])
				}
			}
			if err == nil || !strings.Contains(err.Error(), "is not deleted") {
				t.Errorf("adopt: %v; want it to say it did not delete the Nodes the record names", err)
			}
		})
	}
}

// What adopt leaves alone on purpose (here a role it is told to leave to
// Terraform, whose server the module tagged for the cluster) stays in the
// adoption record after a complete run, as left alone: the janitor never
// takes it for an orphan, however long, while a server of the cluster's no
// run recorded is reported.
func TestLeftAloneServersStayRecorded(t *testing.T) {
	for _, cloudName := range []string{fixture.Cloudscale, fixture.Exoscale} {
		t.Run(cloudName, func(t *testing.T) {
			r := startRecordEnv(t, cloudName)
			infra, ip := r.server("infra-4e5f", idInfraName, "infra-4e5f")
			r.node("infra-4e5f", cloudName+"://"+infra, ip, "infra")
			stray, _ := r.server("ghost-9a9a", idInfraName, "ghost-9a9a")
			if _, err := r.adopt(Options{LeaveRoles: []string{"infra"}}); err != nil {
				t.Fatalf("adopt: %v", err)
			}
			adoptions := &orphans.Adoptions{Client: r.kube, Namespace: testNamespace, Cloud: cloudName}
			recorded, err := adoptions.List(r.ctx)
			r.must(err)
			if a, ok := recorded[infra]; !ok || !strings.Contains(a.LeftAlone, "--leave-role infra") {
				t.Errorf("the adoption record after a complete run: %+v; want %s left alone (--leave-role infra)", recorded, infra)
			}
			accounts := cloud.NewAccounts(r.cloud, cloud.AccountOptions{})
			acc, err := accounts.Get("default", *r.cloud.DefaultCredentials())
			r.must(err)
			acc.View(idInfraName)
			later := time.Now().Add(30 * 24 * time.Hour)
			j, err := janitor.New(r.kube, accounts, &orphans.Registry{Client: r.kube, Recorder: record.NewFakeRecorder(100), Namespace: testNamespace, Cloud: cloudName},
				janitor.Options{ClusterID: idInfraName, Adoptions: adoptions, Now: func() time.Time { return later }, Log: logr.Discard()})
			r.must(err)
			rep, err := j.Sweep(r.ctx)
			r.must(err)
			ids := []string{}
			for _, o := range rep.Orphans {
				ids = append(ids, o.ServerID)
			}
			if slices.Contains(ids, infra) || !slices.Contains(ids, stray) {
				t.Errorf("orphans %v a month after: want %s (no one's), not %s (left alone)", ids, stray, infra)
			}
		})
	}
}
