package adopt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/adopt"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/demo"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

// The cluster as appuio/terraform-openshift4-cloudscale names it: cluster_id
// (the Project Syn ID, which the module tags adoptable servers with), and
// nodes named <role>-<4 hex>.<cluster_name>.<base_domain>; and its identity,
// the installer's infrastructureName (<cluster name>-<5 random>), which the
// provider is pinned to. The cluster declares the Syn ID as its legacy
// cluster ID (pkg/clusterid): the Machines adopt makes carry it, as the
// servers do.
const (
	csClusterID = "c-green-1234"
	csInfraName = "c-green-1234-x7k2p"
	csDomain    = "green.example.com"
	fakeCA      = "-----BEGIN CERTIFICATE-----\nMIIBfakeCAforTheTest\n-----END CERTIFICATE-----\n"
)

// csWorld is what the module made, by the cloudscale.ch SDK.
type csWorld struct {
	c       *sdk.Client
	network string
	subnet  string
	groups  map[string]string // role -> server group UUID
	servers map[string]*sdk.Server
}

// moduleUserData is the user data the module's node-group gives a node.
func moduleUserData(config, hex string) string {
	b, _ := json.Marshal(map[string]any{
		"ignition": map[string]any{
			"version": "3.1.0",
			"config":  map[string]any{"merge": []any{map[string]any{"source": "https://api-int." + csDomain + ":22623/config/" + config}}},
		},
		"storage": map[string]any{"files": []any{map[string]any{"filesystem": "root", "path": "/etc/hostname", "mode": 420, "contents": map[string]any{"source": "data:," + hex}}}},
	})
	return string(b)
}

func buildCloudscale(t *testing.T, e *env) *csWorld {
	t.Helper()
	ctx := context.Background()
	c := sdk.NewClient(http.DefaultClient)
	c.BaseURL, _ = url.Parse(e.APIURL)
	c.AuthToken = "terraform"
	w := &csWorld{c: c, groups: map[string]string{}, servers: map[string]*sdk.Server{}}
	no := false
	net, err := c.Networks.Create(ctx, &sdk.NetworkCreateRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "privnet-" + csClusterID, AutoCreateIPV4Subnet: &no})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subnets.Create(ctx, &sdk.SubnetCreateRequest{Network: net.UUID, CIDR: "172.18.200.0/24", GatewayAddress: "172.18.200.1"})
	if err != nil {
		t.Fatal(err)
	}
	w.network, w.subnet = net.UUID, sub.UUID
	for _, role := range []string{"master", "worker", "infra"} {
		g, err := c.ServerGroups.Create(ctx, &sdk.ServerGroupRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: role + "-group", Type: "anti-affinity"})
		if err != nil {
			t.Fatal(err)
		}
		w.groups[role] = g.UUID
	}
	type node struct {
		hex, role, flavor string
		adoptable         bool
	}
	// Every node as the module makes it with make_master_adoptable_by_provider
	// and make_worker_adoptable_by_provider = true: tagged with the
	// provider's keys and the module's cluster_id, which is not the
	// cluster's identity. adopt --take-over-cluster-id retags the workers
	// and infra nodes (handed over to the provider); the masters stay
	// Terraform's (docs/adopt.md: Terraform keeps them, and would set the
	// module's cluster_id back).
	for _, n := range []node{
		{"master-1a2b", "master", "plus-16-4", true}, {"master-3c4d", "master", "plus-16-4", true}, {"master-5e6f", "master", "plus-16-4", true},
		{"worker-0a1b", "worker", "plus-16-4", true}, {"worker-2c3d", "worker", "plus-16-4", true}, {"worker-4e5f", "worker", "plus-16-4", true},
		// Resized by hand in the control panel since: left alone.
		{"worker-ffff", "worker", "flex-8-4", true},
		{"infra-7a8b", "infra", "plus-16-4", true}, {"infra-9c0d", "infra", "plus-16-4", true},
	} {
		config := "worker"
		if n.role == "master" {
			config = "master"
		}
		req := &sdk.ServerRequest{
			Name: n.hex + "." + csDomain, Zone: "rma1", Flavor: n.flavor, Image: "custom:rhcos-4.19", VolumeSizeGB: 100,
			Interfaces:   &[]sdk.InterfaceRequest{{Network: net.UUID, Addresses: &[]sdk.AddressRequest{{Subnet: sub.UUID}}}},
			ServerGroups: []string{w.groups[n.role]}, UserData: moduleUserData(config, n.hex), SSHKeys: []string{},
		}
		if n.adoptable {
			req.Tags = &sdk.TagMap{v1beta1.TagMachineName: n.hex, v1beta1.TagClusterID: csClusterID}
		}
		s, err := c.Servers.Create(ctx, req)
		if err != nil {
			t.Fatalf("creating %s: %v", n.hex, err)
		}
		w.servers[n.hex] = s
		// Its Node. The cloud controller manager set the provider ID of
		// the masters and workers; the infra nodes have none (they are
		// found by name and address).
		ip := s.Interfaces[0].Addresses[0].Address
		switch n.role {
		case "master":
			e.node(n.hex, "cloudscale://"+s.UUID, []string{"master", "control-plane"}, ip)
		case "worker":
			e.node(n.hex, "cloudscale://"+s.UUID, []string{"worker", "app"}, ip)
		default:
			e.node(n.hex, "", []string{"infra", "worker"}, ip)
		}
	}
	// The bootstrap node, gone from the cluster but not from the account,
	// with the module's bootstrap user data (bootstrap.tf), which sets no
	// hostname.
	boot, err := c.Servers.Create(ctx, &sdk.ServerRequest{Name: "bootstrap." + csDomain, Zone: "rma1", Flavor: "plus-16-4", Image: "custom:rhcos-4.19", VolumeSizeGB: 100,
		Interfaces: &[]sdk.InterfaceRequest{{Network: net.UUID, Addresses: &[]sdk.AddressRequest{{Subnet: sub.UUID}}}}, SSHKeys: []string{},
		UserData: `{"ignition":{"version":"3.1.0","config":{"merge":[{"source":"https://bootstrap-ignition.example.com/bootstrap.ign"}]}}}`})
	if err != nil {
		t.Fatal(err)
	}
	w.servers["bootstrap"] = boot
	e.eventually(time.Minute, "the servers to run", func() (bool, string) {
		for name, s := range w.servers {
			got, err := c.Servers.Get(ctx, s.UUID)
			if err != nil {
				return false, err.Error()
			}
			if got.Status != "running" {
				return false, name + " is " + got.Status
			}
			w.servers[name] = got
		}
		return true, ""
	})
	// The bootstrap server's Node, which the boot simulation registered as
	// for any server (named as RHCOS names itself on cloudscale.ch without
	// a hostname in its user data), went: the bootstrap node never joins
	// for good.
	e.eventually(time.Minute, "the bootstrap node to register", func() (bool, string) {
		var nodes corev1.NodeList
		if err := e.Client.List(ctx, &nodes); err != nil {
			return false, err.Error()
		}
		for i := range nodes.Items {
			if n := &nodes.Items[i]; n.Spec.ProviderID == "cloudscale://"+boot.UUID {
				err := e.Client.Delete(ctx, n)
				return err == nil, fmt.Sprint(err)
			}
		}
		return false, "no Node with the bootstrap server's provider ID"
	})
	e.dropSimulatedTwins()
	// What OpenShift has: the root CA the machine config server's
	// certificate chains to.
	if err := e.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "root-ca"}, Data: map[string]string{"ca.crt": fakeCA}}); err != nil {
		t.Fatal(err)
	}
	e.beginAudit()
	return w
}

func TestAdoptCloudscale(t *testing.T) {
	t.Parallel()
	e := start(t, demo.Cloudscale, csInfraName)
	w := buildCloudscale(t, e)
	kept := w.terraformKept(t, e)
	prov := cscloud.New(cscloud.Options{BaseURL: e.APIURL, DefaultToken: "adopt"})

	// adopt's Machines carry the cluster's identity: a --cluster-id of
	// another (the module's cluster_id) is refused, saying how to take
	// the servers it tagged over.
	if _, err := adopt.New(e.ctx, e.kube, prov, adopt.Options{ClusterID: csClusterID}); err == nil || !strings.Contains(err.Error(), "--take-over-cluster-id "+csClusterID) {
		t.Errorf("--cluster-id %s on cluster %s: %v, want a refusal naming --take-over-cluster-id", csClusterID, csInfraName, err)
	}
	// Neither declared nor taken over, the servers the module tagged with
	// its cluster_id are another cluster's: left alone, every one.
	var out bytes.Buffer
	p0, err := e.adopter(prov, "", &out).Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	p0.Print(&out, false)
	for _, g := range p0.Groups {
		for _, m := range g.Members {
			if m.Action != adopt.ActMisfit {
				t.Errorf("without --take-over-cluster-id: %s is %q, want it left alone", m.Found.Name, m.Action)
			}
		}
	}
	for _, how := range []string{clusterid.DeclareCommand(csClusterID), "--take-over-cluster-id " + csClusterID + " takes them over"} {
		if !strings.Contains(out.String(), how) {
			t.Errorf("the plan of undeclared servers does not say how to make them the cluster's (%q):\n%s", how, out.String())
		}
	}

	// The plan alone changes nothing, and needs nothing but reading: a
	// read-only token makes it (least privilege; cloudscale.ch's tokens are
	// read-only or read/write, docs/cloudscale.md#api-token).
	e.declareLegacy(csClusterID)
	e.Cloudscale.SetTokens(map[string]emucs.Access{"demo": emucs.ReadWrite, "terraform": emucs.ReadWrite, "adopt": emucs.ReadWrite, "adopt-read-only": emucs.ReadOnly})
	readOnly := cscloud.New(cscloud.Options{BaseURL: e.APIURL, DefaultToken: "adopt-read-only"})
	e.Harness().ResetRequests()
	out.Reset()
	a := e.adopter(readOnly, "", &out)
	p, err := a.Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Print(&out, false)
	if w := e.writes(); len(w) > 0 {
		t.Fatalf("the dry run wrote to the cloud: %v", w)
	}
	var machines machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &machines); err != nil || len(machines.Items) != 0 {
		t.Fatalf("the dry run made Machines: %d, %v", len(machines.Items), err)
	}
	plan := out.String()
	for _, want := range []string{
		"control plane", csInfraName + "-worker-rma1", csInfraName + "-infra-rma1",
		"Servers tagged as cluster " + csClusterID + "'s are this cluster's (a declared legacy ID): their Machines carry " + csClusterID + ", nothing is retagged",
		"worker-ffff." + csDomain, "left alone: flavor (flex-8-4; the group's plus-16-4)",
		"bootstrap." + csDomain, "no Node runs on it",
		"takes over worker-group (4 servers)", "MachineSet (3 replicas)", "MachineSet (2 replicas)",
		"the masters' group stays Terraform's", `serverGroups=["` + w.groups["master"] + `"]`,
		// The module tagged the masters with its cluster_id, which the
		// cluster declares: they are the provider's as Terraform tagged
		// them, adopted without a write on them.
		"3 Machines, ControlPlaneMachineSet (Inactive)", "adopt: Machine (the server carries its identity)",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan)
		}
	}

	// Apply: 0 creates, 0 deletes, 0 reboots.
	e.Harness().ResetRequests()
	_, _, r := e.run(e.adopter(prov, "", &out))
	// The module tagged every node with its cluster_id, which the cluster
	// declares: no server is retagged, the masters are adopted too (an
	// Inactive ControlPlaneMachineSet), and adopt writes nothing
	// Terraform keeps.
	if r.MachinesCreated != 8 || r.MachineSetsCreated != 2 || r.CPMSCreated != 1 || r.GroupsTakenOver != 2 || r.IdentitiesSet != 0 {
		t.Errorf("report %+v: want 8 Machines (3 masters, 3 workers, 2 infra), 2 MachineSets, a CPMS, 2 groups taken over (the workers' and the infra nodes'), no server retagged", r)
	}
	e.adoptionDone("cloudscale")
	writes := e.writes()
	t.Logf("cloud writes while adopting (the provider's root volume tags included): %v", writes)
	for _, route := range []string{"POST /v1/servers", "DELETE /v1/servers/{uuid}", "POST /v1/servers/{uuid}/reboot", "POST /v1/servers/{uuid}/stop", "POST /v1/servers/{uuid}/start"} {
		if n := writes[route]; n != 0 {
			t.Errorf("%s: %d, want 0", route, n)
		}
	}
	for route := range writes {
		if !strings.HasPrefix(route, "PATCH ") {
			t.Errorf("a write that is no tag change: %s", route)
		}
	}
	for name, s := range w.servers {
		switch {
		case name == "bootstrap", name == "worker-ffff":
			continue
		}
		if m := e.assertAdopted(name, "cloudscale://"+s.UUID, name); m.Labels["machine.openshift.io/cluster-api-cluster"] != csClusterID {
			t.Errorf("Machine %s labelled %v, want the declared %s its server carries", name, m.Labels, csClusterID)
		}
	}
	for _, name := range []string{"master-1a2b", "worker-0a1b", "infra-7a8b"} {
		got, err := w.c.Servers.Get(e.ctx, w.servers[name].UUID)
		// Every server keeps the module's tags.
		if err != nil || got.Tags[v1beta1.TagMachineName] != name || got.Tags[v1beta1.TagClusterID] != csClusterID {
			t.Errorf("server %s tags %v (%v), want cluster %s's", name, got.Tags, err, csClusterID)
		}
		if got.Flavor.Slug != w.servers[name].Flavor.Slug || got.Status != "running" {
			t.Errorf("server %s changed: %s %s", name, got.Flavor.Slug, got.Status)
		}
	}
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: "worker-ffff"}, &machinev1beta1.Machine{}); err == nil {
		t.Errorf("worker-ffff, left alone, got a Machine")
	}
	g, err := w.c.ServerGroups.Get(e.ctx, w.groups["worker"])
	if err != nil || g.Tags[v1beta1.TagAntiAffinityKey] != "worker" || g.Tags[v1beta1.TagClusterID] != csClusterID || len(g.Servers) != 4 {
		t.Errorf("worker-group: %+v, %v: want it the provider's group of key worker, its 4 servers kept", g, err)
	}
	e.machineSetOwns(csInfraName+"-worker-rma1", "worker-0a1b", "worker-2c3d", "worker-4e5f")
	e.machineSetOwns(csInfraName+"-infra-rma1", "infra-7a8b", "infra-9c0d")
	var cpms machinev1.ControlPlaneMachineSetList
	if err := e.kube.List(e.ctx, &cpms, client.InNamespace(demo.Namespace)); err != nil || len(cpms.Items) != 1 ||
		cpms.Items[0].Spec.State != machinev1.ControlPlaneMachineSetStateInactive || cpms.Items[0].Spec.Selector.MatchLabels["machine.openshift.io/cluster-api-cluster"] != csClusterID {
		t.Errorf("ControlPlaneMachineSets: %+v (%v), want one, Inactive, of the declared %s", cpms.Items, err, csClusterID)
	}
	var secret corev1.Secret
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: csInfraName + "-worker-rma1-user-data"}, &secret); err != nil ||
		!strings.Contains(string(secret.Data["baseIgnition"]), "https://api-int."+csDomain+":22623/config/worker") {
		t.Errorf("user data secret: %v, %s", err, secret.Data["baseIgnition"])
	}

	// Again: nothing changes, in the cluster or in the cloud.
	e.Harness().ResetRequests()
	p2, text2, r2 := e.run(e.adopter(prov, "", &out))
	if r2.Changed() {
		t.Errorf("the second run changed something: %+v", r2)
	}
	if w := e.writes(); len(w) > 0 {
		t.Errorf("the second run wrote to the cloud: %v", w)
	}
	for _, g := range p2.Groups {
		for _, m := range g.Members {
			if m.Action != adopt.ActAdopted && m.Found.Name != "worker-ffff."+csDomain && !g.Master {
				t.Errorf("second run: %s is %q", m.Found.Name, m.Action)
			}
		}
	}
	if !strings.Contains(text2, "adopted already") {
		t.Errorf("second plan:\n%s", text2)
	}

	// The adopted MachineSet scales like any other.
	e.scalesLikeAnyOther(csInfraName+"-worker-rma1", 3, "POST /v1/servers", "DELETE /v1/servers/{uuid}", "api-int."+csDomain+":22623", e.cloudscaleUserData)
	if !slices.ContainsFunc(p.Groups, func(g *adopt.Group) bool { return g.Master && g.CPMS != nil && g.Blocked == "" }) {
		t.Errorf("the masters, which Terraform tagged as the provider's under the declared ID, were not planned to be adopted")
	}
	// What Terraform keeps is as the module wrote it.
	kept.agrees(t)

	// Leaving without losing a node: adopt --undo and adopt again, then
	// uninstall, install again and adopt again.
	released := e.release(cscloud.Name, true)
	e.comeBack(prov, "", released, "POST /v1/servers", "DELETE /v1/servers/{uuid}")
	released = e.release(cscloud.Name, false)
	e.comeBack(prov, "", released, "POST /v1/servers", "DELETE /v1/servers/{uuid}")
}
