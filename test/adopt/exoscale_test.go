package adopt_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/adopt"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/demo"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// The cluster as appuio/terraform-openshift4-exoscale names it: its
// cluster_id (the Project Syn ID) names the resources the module makes
// (<cluster_id>_<role>, <cluster_id>_clusternet, ...); the module labels no
// instance (modules/node-group/main.tf). The installer's
// infrastructureName, the cluster's identity, is that ID plus five random
// characters, which the Machines adopt makes carry.
const (
	exoClusterID = "c-blue-5678"
	exoInfraName = "c-blue-5678-q9r4t"
	exoDomain    = "blue.example.com"
	exoZone      = "ch-gva-2"
	sshPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE24vb5lOw6UH+utLRZvFRB3zvV+F3tQrELjlDWaavxp admin@terraform"
)

type exoWorld struct {
	c         *v3.Client
	network   v3.UUID
	instances map[string]v3.UUID // hostname -> ID
	pool      v3.UUID
	members   []v3.UUID
	sgs, aags map[string]v3.UUID // security groups, anti-affinity groups: name (role) -> ID
}

// exoUserData is the module's user data: the pointer Ignition, the private
// network's interface files, and (not for pool members) the hostname.
func exoUserData(config, hostname string) string {
	files := []any{map[string]any{"path": "/etc/sysconfig/network-scripts/ifcfg-ens4", "mode": 420,
		"contents": map[string]any{"source": "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte("DEVICE=ens4\nBOOTPROTO=dhcp\n"))}}}
	if hostname != "" {
		files = append(files, map[string]any{"path": "/etc/hostname", "mode": 420, "overwrite": true, "contents": map[string]any{"source": "data:," + hostname}})
	}
	b, _ := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.1.0",
			"config": map[string]any{"merge": []any{map[string]any{"source": "https://api-int." + exoDomain + ":22623/config/" + config}}},
			"security": map[string]any{"tls": map[string]any{"certificateAuthorities": []any{map[string]any{
				"source": "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(fakeCA))}}}}},
		"storage": map[string]any{"files": files, "disks": []any{}},
		"systemd": map[string]any{},
	})
	return base64.StdEncoding.EncodeToString(b)
}

func buildExoscale(t *testing.T, e *env) *exoWorld {
	t.Helper()
	ctx := context.Background()
	c, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret), v3.ClientOptWithEndpoint(v3.Endpoint(e.APIURL+"v2")))
	if err != nil {
		t.Fatal(err)
	}
	w := &exoWorld{c: c, instances: map[string]v3.UUID{}}
	ref := func(op *v3.Operation, err error) v3.UUID {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, op, v3.OperationStateSuccess); err != nil {
			t.Fatal(err)
		}
		return op.Reference.ID
	}
	sg := map[string]v3.UUID{}
	for _, name := range []string{"all_machines", "control_plane", "infra", "worker"} {
		sg[name] = ref(c.CreateSecurityGroup(ctx, v3.CreateSecurityGroupRequest{Name: exoClusterID + "_" + name}))
	}
	aag := map[string]v3.UUID{}
	for _, role := range []string{"master", "infra", "worker"} {
		aag[role] = ref(c.CreateAntiAffinityGroup(ctx, v3.CreateAntiAffinityGroupRequest{Name: exoClusterID + "_" + role, Description: exoClusterID + " " + role + " nodes"}))
	}
	ref(c.RegisterSSHKey(ctx, v3.RegisterSSHKeyRequest{Name: exoClusterID + "-admin", PublicKey: sshPublicKey}))
	w.sgs, w.aags = sg, aag
	w.network = ref(c.CreatePrivateNetwork(ctx, v3.CreatePrivateNetworkRequest{
		Name: exoClusterID + "_clusternet", Description: exoClusterID + " private network",
		StartIP: net.ParseIP("172.18.200.101"), EndIP: net.ParseIP("172.18.200.253"), Netmask: net.ParseIP("255.255.255.0"),
	}))
	tpl := v3.UUID(e.Exoscale.TemplateID(emuexo.DefaultAccountName, exoZone, "rhcos-4.19"))
	xl := &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.extra-large"))}
	for _, n := range []struct {
		hex, role string
		disk      int64
	}{
		{"master-1a2b", "master", 100}, {"master-3c4d", "master", 100}, {"master-5e6f", "master", 100},
		{"infra-7a8b", "infra", 100}, {"infra-9c0d", "infra", 100},
		// Its disk grown by hand since: left alone.
		{"infra-ffff", "infra", 120},
	} {
		groups := []v3.SecurityGroup{{ID: sg["all_machines"]}, {ID: sg["control_plane"]}}
		config := "master"
		if n.role == "infra" {
			groups, config = []v3.SecurityGroup{{ID: sg["all_machines"]}, {ID: sg["infra"]}}, "worker"
		}
		id := ref(c.CreateInstance(ctx, v3.CreateInstanceRequest{
			Name: n.hex + "." + exoDomain, InstanceType: xl, Template: &v3.Template{ID: tpl}, DiskSize: n.disk,
			SecurityGroups: groups, AntiAffinityGroups: []v3.AntiAffinityGroup{{ID: aag[n.role]}},
			SSHKeys: []v3.SSHKey{{Name: exoClusterID + "-admin"}}, UserData: exoUserData(config, n.hex),
		}))
		w.instances[n.hex] = id
		roles := []string{"master", "control-plane"}
		if n.role == "infra" {
			roles = []string{"infra", "worker"}
		}
		// The cloud controller manager set the provider ID.
		e.node(n.hex, "exoscale://"+string(id), roles)
		ref(c.AttachInstanceToPrivateNetwork(ctx, w.network, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: id}}))
	}
	// The workers: an instance pool, as the module makes them by default.
	w.pool = ref(c.CreateInstancePool(ctx, v3.CreateInstancePoolRequest{
		Name: exoClusterID + "_worker-0", Size: 3, InstancePrefix: "worker", InstanceType: xl, Template: &v3.Template{ID: tpl}, DiskSize: 100,
		SecurityGroups:     []v3.SecurityGroup{{ID: sg["all_machines"]}, {ID: sg["worker"]}},
		AntiAffinityGroups: []v3.AntiAffinityGroup{{ID: aag["worker"]}}, PrivateNetworks: []v3.PrivateNetwork{{ID: w.network}},
		SSHKey: &v3.SSHKey{Name: exoClusterID + "-admin"}, UserData: exoUserData("worker", ""),
	}))
	p, err := c.GetInstancePool(ctx, w.pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Instances {
		inst, err := c.GetInstance(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		w.members = append(w.members, m.ID)
		e.node(inst.Name, "exoscale://"+string(m.ID), []string{"worker", "app"})
	}
	// The Nodes' addresses: their private network's.
	pn, err := c.GetPrivateNetwork(ctx, w.network)
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := e.Client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		for _, l := range pn.Leases {
			if "exoscale://"+string(l.InstanceID) == n.Spec.ProviderID {
				base := n.DeepCopy()
				n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: l.IP.String()})
				if err := e.Client.Status().Patch(ctx, n, client.MergeFrom(base)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	e.eventually(time.Minute, "the instances to run", func() (bool, string) {
		for _, i := range e.Exoscale.Instances() {
			if i.State != "running" {
				return false, i.Name + " is " + i.State
			}
		}
		return true, ""
	})
	e.dropSimulatedTwins()
	e.beginAudit()
	return w
}

func TestAdoptExoscale(t *testing.T) {
	t.Parallel()
	// The module's cluster_id is not the cluster's identity, and it
	// labelled no instance: adopt labels them with the infrastructureName.
	e := start(t, demo.Exoscale, exoInfraName)
	w := buildExoscale(t, e)
	kept := w.terraformKept(t, e)
	// From here on Terraform reads with a key of its own, with every
	// permission: the account's first key is the manager's, of the
	// provider's role.
	if err := e.Exoscale.AddKey(emuexo.DefaultAccountName, terraformKey, terraformSecret, nil); err != nil {
		t.Fatal(err)
	}
	c, err := v3.NewClient(credentials.NewStaticCredentials(terraformKey, terraformSecret), v3.ClientOptWithEndpoint(v3.Endpoint(e.APIURL+"v2")))
	if err != nil {
		t.Fatal(err)
	}
	w.c = c

	// Least privilege, as docs/exoscale.md has it: the manager's key with
	// the provider's role, adopt's key with the adopt role, each exactly
	// the policy the docs give.
	managerRole, adoptRole := documentedRole(t, "IAM role"), documentedRole(t, "IAM role for adopt")
	if err := e.Exoscale.SetKeyPolicy(emuexo.DefaultAPIKey, managerRole); err != nil {
		t.Fatal(err)
	}
	if err := e.Exoscale.AddKey(emuexo.DefaultAccountName, adoptKey, adoptSecret, adoptRole); err != nil {
		t.Fatal(err)
	}
	prov := exocloud.New(exocloud.Options{APIEndpoint: e.APIURL + "v2", DefaultAPIKey: adoptKey, DefaultAPISecret: adoptSecret})

	// The dry run with the provider's role alone: the survey is refused the
	// pools, and the plan says so with the pool's group, which it leaves
	// alone; every other group is planned as with adopt's role.
	e.Harness().ResetRequests()
	var narrow bytes.Buffer
	managerKey := exocloud.New(exocloud.Options{APIEndpoint: e.APIURL + "v2", DefaultAPIKey: emuexo.DefaultAPIKey, DefaultAPISecret: emuexo.DefaultAPISecret})
	pn, err := e.adopter(managerKey, exoInfraName, &narrow).Plan(e.ctx)
	if err != nil {
		t.Fatalf("the dry run with the provider's role: %v, want a plan that names the refusal", err)
	}
	pn.Print(&narrow, false)
	for _, want := range []string{"the credentials were refused list-instance-pools", "its instance pool cannot be replaced without adopt's addition", exoInfraName + "-infra-gva2"} {
		if !strings.Contains(narrow.String(), want) {
			t.Errorf("the plan with the provider's role lacks %q:\n%s", want, narrow.String())
		}
	}
	for _, g := range pn.Groups {
		if g.Name == exoInfraName+"-infra-gva2" && (g.Blocked != "" || g.MachineSet == nil) {
			t.Errorf("the infra group with the provider's role: %q, want it planned", g.Blocked)
		}
	}
	if got := e.Exoscale.RoleRefusals(emuexo.DefaultAPIKey); len(got) != 1 || got["list-instance-pools"] == 0 {
		t.Errorf("the dry run with the provider's role was refused %v, want list-instance-pools alone", got)
	}
	narrowRefusals := e.Exoscale.RoleRefusals(emuexo.DefaultAPIKey)["list-instance-pools"]

	e.Harness().ResetRequests()
	var out bytes.Buffer
	p, err := e.adopter(prov, exoInfraName, &out).Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Print(&out, false)
	if w := e.writes(); len(w) > 0 {
		t.Fatalf("the dry run wrote to the cloud: %v", w)
	}
	plan := out.String()
	for _, want := range []string{
		"control plane", exoInfraName + "-infra-gva2", exoInfraName + "-worker-gva2", "rolling replacement",
		"instance pool c-blue-5678_worker-0 owns these servers", "left alone: diskSize (120; the group's 100)",
		"can be neither labelled nor renamed", `antiAffinityGroups=[{"name":"c-blue-5678_master"}]`,
		"Terraform keeps the masters in its state",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan)
		}
	}

	e.Harness().ResetRequests()
	// The first run stops right after it evicted the first pool member
	// (a crash, a ^C, the answer lost): the replacement's Machine and
	// Node are there, the evicted member's Node too, two members are
	// left. The next run must finish the job with the same MachineSet.
	ap := e.adopterWith(&loseNodeDelete{Client: e.kube}, prov, exoInfraName, &out)
	p1, err := ap.Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := ap.Apply(e.ctx, p1)
	if err == nil || r1.Replaced != 0 {
		t.Fatalf("the interrupted run: %+v, %v; want it stopped at the first evicted member's Node", r1, err)
	}
	// Interrupted, the adoption is under way: its servers stay recorded,
	// no orphans to the janitor.
	if n := e.adopting("exoscale"); n == 0 {
		t.Error("no server recorded as being adopted after an interrupted run")
	}
	_, text, r := e.run(e.adopter(prov, exoInfraName, &out))
	// What the servers booted with (its pieces, plain or base64) and the
	// credentials reach neither the plan nor the progress: only the user
	// data secret's name does.
	shown := out.String() + text
	for _, s := range []string{"DEVICE=ens4", base64.StdEncoding.EncodeToString([]byte("DEVICE=ens4\nBOOTPROTO=dhcp\n")), "MIIBfakeCA",
		base64.StdEncoding.EncodeToString([]byte(fakeCA)), emuexo.DefaultAPISecret} {
		if strings.Contains(shown, s) {
			t.Errorf("the plan or the progress shows %q", s)
		}
	}
	r.MachinesCreated += r1.MachinesCreated
	r.MachineSetsCreated += r1.MachineSetsCreated
	r.CPMSCreated += r1.CPMSCreated
	r.IdentitiesSet += r1.IdentitiesSet
	r.Replaced += r1.Replaced
	if r.MachinesCreated != 2 || r.MachineSetsCreated != 2 || r.CPMSCreated != 0 || r.IdentitiesSet != 2 || r.Replaced != 3 {
		t.Errorf("reports %+v: want 2 Machines adopted (the infra nodes; the masters stay Terraform's), 2 MachineSets, no CPMS, 2 instances labelled, 3 pool members replaced", r)
	}
	var sets machinev1beta1.MachineSetList
	if err := e.Client.List(e.ctx, &sets, client.InNamespace(demo.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 2 {
		var names []string
		for _, ms := range sets.Items {
			names = append(names, ms.Name)
		}
		t.Errorf("MachineSets %v, want the infra and the worker one", names)
	}
	writes := e.writes()
	t.Logf("cloud writes while adopting: %v", writes)
	// In place: no create, delete or reboot. The pool: one create per
	// member (its replacement), two evictions and the pool's delete with
	// the last member, no instance deleted directly.
	for route, want := range map[string]int64{
		"POST /v2/instance": 3, "DELETE /v2/instance/{id}": 0,
		"PUT /v2/instance/{id}:reboot": 0, "PUT /v2/instance/{id}:stop": 0, "PUT /v2/instance/{id}:start": 0,
		"PUT /v2/instance-pool/{id}:evict": 2, "DELETE /v2/instance-pool/{id}": 1, "PUT /v2/instance-pool/{id}:scale": 0,
	} {
		if got := writes[route]; got != want {
			t.Errorf("%s: %d, want %d", route, got, want)
		}
	}
	for _, name := range []string{"infra-7a8b", "infra-9c0d"} {
		e.assertAdopted(name, "exoscale://"+string(w.instances[name]), name)
		inst, err := w.c.GetInstance(e.ctx, w.instances[name])
		if err != nil || inst.Labels[v1beta1.LabelMachineName] != name || inst.Labels[v1beta1.LabelClusterID] != exoInfraName || inst.Name != name+"."+exoDomain {
			t.Errorf("instance %s: %+v, %v", name, inst, err)
		}
	}
	e.machineSetOwns(exoInfraName+"-infra-gva2", "infra-7a8b", "infra-9c0d")
	if pools := e.Exoscale.InstancePools(); len(pools) != 0 {
		t.Errorf("instance pools left: %+v", pools)
	}
	for _, id := range w.members {
		if _, found := e.Exoscale.Instance(string(id)); found {
			t.Errorf("pool member %s is still there", id)
		}
	}
	if running, n := e.runningMachines(exoInfraName + "-worker-gva2"); running != 3 || n != 3 {
		t.Errorf("worker MachineSet: %d of %d Machines Running, want 3 of 3", running, n)
	}
	var nodes corev1.NodeList
	if err := e.Client.List(e.ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, "worker-") {
			t.Errorf("the Node %s of a replaced pool member is still there", n.Name)
		}
	}
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: "infra-ffff"}, &machinev1beta1.Machine{}); err == nil {
		t.Errorf("the misfit infra-ffff got a Machine")
	}

	e.adoptionDone("exoscale")

	// Again: nothing changes.
	e.Harness().ResetRequests()
	p2, _, r2 := e.run(e.adopter(prov, exoInfraName, &out))
	if r2.Changed() {
		t.Errorf("the second run changed something: %+v", r2)
	}
	if w := e.writes(); len(w) > 0 {
		t.Errorf("the second run wrote to the cloud: %v", w)
	}
	for _, g := range p2.Groups {
		for _, m := range g.Members {
			if m.Action != adopt.ActAdopted && m.Found.Name != "infra-ffff."+exoDomain && !g.Master {
				t.Errorf("second run: %s is %q", m.Found.Name, m.Action)
			}
		}
	}

	// The adopted MachineSet scales like any other.
	e.scalesLikeAnyOther(exoInfraName+"-infra-gva2", 2, "POST /v2/instance", "DELETE /v2/instance/{id}", "api-int."+exoDomain+":22623", e.exoscaleUserData)

	// What Terraform keeps is as the module wrote it, and no key was
	// refused anything after the dry run with the provider's role alone.
	kept.agrees(t)
	if got := e.Exoscale.RoleRefusals(adoptKey); len(got) != 0 {
		t.Errorf("adopt's key, with the documented adopt role, was refused %v", got)
	}
	if got := e.Exoscale.RoleRefusals(emuexo.DefaultAPIKey); len(got) != 1 || got["list-instance-pools"] != narrowRefusals {
		t.Errorf("the manager's key, with the documented role, was refused %v besides the dry run's", got)
	}

	// Leaving without losing a node: uninstall, install again and adopt
	// again (the replaced pool's workers too, now standalone instances).
	released := e.release(exocloud.Name, false)
	e.comeBack(prov, exoInfraName, released, "POST /v2/instance", "DELETE /v2/instance/{id}")
}

// loseNodeDelete fails the first deletion of a Node, as a run that stops
// right before it.
type loseNodeDelete struct {
	client.Client
	lost atomic.Bool
}

func (l *loseNodeDelete) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, node := obj.(*corev1.Node); node && l.lost.CompareAndSwap(false, true) {
		return errors.New("lost: the run stopped here")
	}
	return l.Client.Delete(ctx, obj, opts...)
}
