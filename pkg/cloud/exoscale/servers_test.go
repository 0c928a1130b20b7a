package exoscale

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	v1beta1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

const createRoute = "POST /v2/instance"

func TestCreateMakesTheInstanceTheSpecDescribes(t *testing.T) {
	x := newEnv(t, emu.Config{})
	netID := x.network("ch-gva-2", "c1_clusternet")
	sg := x.securityGroup("c1-all-machines")
	spec := x.spec(specJSON(map[string]any{
		"instanceType": "standard.large", "diskSize": 120,
		"securityGroups":  []any{map[string]string{"name": "c1-all-machines"}},
		"privateNetworks": []any{map[string]string{"name": "c1_clusternet", "ip": "172.18.200.21"}},
		"labels":          map[string]string{"team": "platform"},
	}))
	userData := []byte(`{"ignition":{"version":"3.1.0"},"canary":"ud-canary-7Hq2Lm9Xp"}`)

	s, created, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, userData)
	if err != nil || !created {
		t.Fatalf("created %v, %v", created, err)
	}
	inst, ok := x.emu.Instance(s.ID)
	if !ok {
		t.Fatalf("no instance %s", s.ID)
	}
	want := map[string]string{"team": "platform", v1beta1.LabelClusterID: clusterID, v1beta1.LabelMachineName: "worker-a"}
	if inst.Name != "worker-a" || inst.InstanceType != "standard.large" || inst.TemplateName != "rhcos-4.19" || inst.DiskSizeGiB != 120 || inst.Zone != "ch-gva-2" {
		t.Errorf("instance %+v", inst)
	}
	for k, v := range want {
		if inst.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, inst.Labels[k], v)
		}
	}
	if got, _ := base64.StdEncoding.DecodeString(inst.UserData); string(got) != string(userData) {
		t.Errorf("user data %q", got)
	}
	if len(inst.SecurityGroups) != 1 || inst.SecurityGroups[0] != sg {
		t.Errorf("security groups %v, want [%s]", inst.SecurityGroups, sg)
	}
	if len(inst.PrivateNetworks) != 1 || inst.PrivateNetworks[0] != netID || len(inst.PrivateIPs) != 1 || inst.PrivateIPs[0] != "172.18.200.21" {
		t.Errorf("private networks %v, addresses %v", inst.PrivateNetworks, inst.PrivateIPs)
	}
	if s.Machine != "worker-a" || s.ClusterID != clusterID || s.Zone != "ch-gva-2" || s.InstanceType != "standard.large" {
		t.Errorf("server %+v", s)
	}
	if len(s.Addresses) == 0 || s.Addresses[0].Address != "172.18.200.21" {
		t.Errorf("addresses %v, want the private address first", s.Addresses)
	}

	// Found again by its labels; a second create makes nothing.
	found, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID, Machine: "worker-a"})
	if err != nil || len(found) != 1 || found[0].ID != s.ID {
		t.Fatalf("list: %v %v", found, err)
	}
	again, created, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, userData)
	if err != nil || created || again.ID != s.ID {
		t.Fatalf("second create: %v %v %v", again, created, err)
	}
	if n := x.emu.Harness().Count(createRoute); n != 1 {
		t.Errorf("%d creates", n)
	}
	// No wait for the operation on the hot path.
	if n := x.emu.Harness().Count("GET /v2/operation/{id}"); n != 0 {
		t.Errorf("%d operation polls", n)
	}
}

// TestLostResponseMakesOneInstance: the create is carried out but its answer
// is lost. The SDK would retry the POST by itself; this client must not,
// and must say the create may have happened.
func TestLostResponseMakesOneInstance(t *testing.T) {
	for _, status := range []int{0, 502} {
		x := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: createRoute, LostResponseRate: 1, LostResponseStatus: status, Times: 1}}})
		spec := x.spec(specJSON(nil))
		_, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, nil)
		if err == nil {
			t.Fatalf("status %d: the lost answer was taken for success", status)
		}
		if cloud.NotPerformed(err) {
			t.Errorf("status %d: a lost create is taken for one that made nothing: %v", status, err)
		}
		var re *cloud.RetryableError
		if !errors.As(err, &re) {
			t.Errorf("status %d: not retryable: %v", status, err)
		}
		if n := x.emu.Harness().Count(createRoute); n != 1 {
			t.Fatalf("status %d: %d POSTs: the client retried the create", status, n)
		}
		s, created, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, nil)
		if err != nil || created {
			t.Fatalf("status %d: the next attempt: created %v, %v", status, created, err)
		}
		if n := x.emu.CountInstances(); n != 1 {
			t.Errorf("status %d: %d instances", status, n)
		}
		if inst, _ := x.emu.Instance(s.ID); inst.Name != "worker-a" {
			t.Errorf("status %d: found %+v", status, inst)
		}
	}
}

func TestInstancesOfSeveralZones(t *testing.T) {
	x := newEnv(t, emu.Config{})
	a, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := x.c.CreateServer(x.ctx, ref("worker-b"), x.spec(specJSON(map[string]any{"zone": "de-fra-1"})), nil)
	if err != nil {
		t.Fatal(err)
	}
	if inst, _ := x.emu.Instance(b.ID); inst.Zone != "de-fra-1" {
		t.Fatalf("instance in %s", inst.Zone)
	}
	// A new client (a restarted manager) lists both zones.
	fresh := New(Options{APIEndpoint: x.url + "v2", DefaultAPIKey: testKey, DefaultAPISecret: testSecret})
	cl, _ := fresh.NewClient(*fresh.DefaultCredentials(), nil)
	all, err := cl.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
	if err != nil || len(all) != 2 {
		t.Fatalf("list: %v %v", all, err)
	}
	// And finds an instance by ID without knowing its zone.
	got, err := cl.GetServer(x.ctx, b.ID)
	if err != nil || got.Zone != "de-fra-1" || got.Machine != "worker-b" {
		t.Fatalf("get: %+v %v", got, err)
	}
	// The first list of a cluster covers every zone, the next only the
	// zones in use.
	x.emu.Harness().ResetRequests()
	if _, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID}); err != nil {
		t.Fatal(err)
	}
	if n := x.emu.Harness().Count("GET /v2/instance"); n != int64(len(emu.Zones)) {
		t.Errorf("first list: %d calls, want one per zone (%d)", n, len(emu.Zones))
	}
	x.emu.Harness().ResetRequests()
	if _, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID}); err != nil {
		t.Fatal(err)
	}
	if n := x.emu.Harness().Count("GET /v2/instance"); n != 2 {
		t.Errorf("second list: %d calls, want 2 (the zones in use)", n)
	}
	if _, err := x.c.GetServer(x.ctx, "6a1b4f6e-0000-4000-8000-000000000000"); !cloud.IsNotFound(err) {
		t.Errorf("unknown instance: %v", err)
	}
	if err := x.c.DeleteServer(x.ctx, ref("worker-a"), a, noNodes); err != nil {
		t.Fatal(err)
	}
	if err := x.c.DeleteServer(x.ctx, ref("worker-b"), b, noNodes); err != nil {
		t.Fatal(err)
	}
	// Deleting what is gone is no error.
	if err := x.c.DeleteServer(x.ctx, ref("worker-b"), b, noNodes); err != nil {
		t.Fatal(err)
	}
	if n := x.emu.CountInstances(); n != 0 {
		t.Errorf("%d instances left", n)
	}
}

// TestSeventeenMachinesThreeGroups: one antiAffinityKey over 17 instances
// makes three groups of the provider, none over eight; the groups go when
// their instances do, and the user's groups are never touched.
func TestSeventeenMachinesThreeGroups(t *testing.T) {
	x := newEnv(t, emu.Config{})
	op := x.wait(x.raw.CreateAntiAffinityGroup(x.ctx, v3CreateGroup("users-group")))
	userGroup := string(op.Reference.ID)
	spec := x.spec(specJSON(map[string]any{"antiAffinityKey": "worker"}))
	var servers []*cloud.Server
	for i := range 17 {
		s, created, err := x.c.CreateServer(x.ctx, ref(machineName(i)), spec, nil)
		if err != nil || !created {
			t.Fatalf("machine %d: %v %v", i, created, err)
		}
		servers = append(servers, s)
	}
	groups := map[string]int{}
	for _, g := range x.emu.AntiAffinityGroups() {
		if g.ID == userGroup {
			continue
		}
		groups[g.Name] = len(g.Members)
		if len(g.Members) > 8 {
			t.Errorf("group %s holds %d", g.Name, len(g.Members))
		}
	}
	want := map[string]int{clusterID + "-worker-1": 8, clusterID + "-worker-2": 8, clusterID + "-worker-3": 1}
	if len(groups) != 3 || groups[clusterID+"-worker-1"] != 8 || groups[clusterID+"-worker-2"] != 8 || groups[clusterID+"-worker-3"] != 1 {
		t.Errorf("groups %v, want %v", groups, want)
	}
	for i, s := range servers {
		if err := x.c.DeleteServer(x.ctx, ref(machineName(i)), s, noNodes); err != nil {
			t.Fatal(err)
		}
	}
	left := x.emu.AntiAffinityGroups()
	if len(left) != 1 || left[0].ID != userGroup {
		t.Errorf("groups left: %+v", left)
	}
}

// TestCleanupKeepsYoungAndForeignGroups: a group looking like the
// provider's but not described as one, and one too young, stay.
func TestCleanupKeepsYoungAndForeignGroups(t *testing.T) {
	x := newEnv(t, emu.Config{})
	x.wait(x.raw.CreateAntiAffinityGroup(x.ctx, v3CreateGroup(clusterID+"-worker-1")))
	spec := x.spec(specJSON(map[string]any{"antiAffinityKey": "worker"}))
	s, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The provider's group skipped the name in use.
	inst, _ := x.emu.Instance(s.ID)
	var mine string
	for _, g := range x.emu.AntiAffinityGroups() {
		if len(inst.AntiAffinityGroups) == 1 && g.ID == inst.AntiAffinityGroups[0] {
			mine = g.Name
		}
	}
	if mine != clusterID+"-worker-2" {
		t.Fatalf("the instance is in group %q", mine)
	}
	// Empty it without the provider's delete (as if that had failed after
	// the instance was gone).
	x.wait(x.raw.DeleteInstance(x.ctx, v3UUID(s.ID)))
	deleted, err := x.c.CleanupGroups(x.ctx, clusterID, 1<<40)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("young group: deleted %v, %v", deleted, err)
	}
	deleted, err = x.c.CleanupGroups(x.ctx, clusterID, 0)
	if err != nil || len(deleted) != 1 || deleted[0] != clusterID+"-worker-2" {
		t.Fatalf("deleted %v, %v", deleted, err)
	}
	if left := x.emu.AntiAffinityGroups(); len(left) != 1 || left[0].Name != clusterID+"-worker-1" {
		t.Errorf("left %+v", left)
	}
}

func machineName(i int) string { return "worker-" + strings.Repeat("x", i%3) + string(rune('a'+i)) }
