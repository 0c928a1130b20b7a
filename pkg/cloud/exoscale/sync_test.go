package exoscale

import (
	"slices"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	v1beta1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// TestSyncRepairsAndReportsDrift: a crash between the create and the
// attach leaves the instance without its network and security group; the
// sync attaches them, restores the labels, and reports what only a new
// instance can change.
func TestSyncRepairsAndReportsDrift(t *testing.T) {
	x := newEnv(t, emu.Config{})
	netID := x.network("ch-gva-2", "c1_clusternet")
	sg := x.securityGroup("c1-all-machines")
	base := map[string]any{"labels": map[string]string{"team": "a"}}
	s, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(base)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The spec gains a network and a group the instance is not in, and
	// someone changes the labels (not the provider's: an instance without
	// them is not the Machine's to sync; owner_test.go).
	x.wait(x.raw.UpdateInstance(x.ctx, v3.UUID(s.ID), v3.UpdateInstanceRequest{Labels: v3.Labels{
		"team": "b", v1beta1.LabelClusterID: clusterID, v1beta1.LabelMachineName: "worker-a"}}))
	spec := x.spec(specJSON(map[string]any{
		"labels":          map[string]string{"team": "a"},
		"securityGroups":  []any{map[string]string{"id": sg}},
		"privateNetworks": []any{map[string]string{"name": "c1_clusternet"}},
	}))
	fresh, err := x.c.GetServer(x.ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	drift, err := x.c.SyncServer(x.ctx, ref("worker-a"), spec, fresh)
	if err != nil || len(drift) != 0 {
		t.Fatalf("drift %v, %v", drift, err)
	}
	inst, _ := x.emu.Instance(s.ID)
	if inst.Labels["team"] != "a" || inst.Labels[v1beta1.LabelMachineName] != "worker-a" {
		t.Errorf("labels %v", inst.Labels)
	}
	if !slices.Contains(inst.SecurityGroups, sg) || !slices.Equal(inst.PrivateNetworks, []string{netID}) {
		t.Errorf("groups %v, networks %v", inst.SecurityGroups, inst.PrivateNetworks)
	}
	if len(fresh.Addresses) == 0 || fresh.Addresses[0].Address != inst.PrivateIPs[0] {
		t.Errorf("addresses %v, want %v first", fresh.Addresses, inst.PrivateIPs)
	}
	// In steady state a sync from a list costs nothing.
	list, _ := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID, Machine: "worker-a"})
	x.emu.Harness().ResetRequests()
	if drift, err := x.c.SyncServer(x.ctx, ref("worker-a"), spec, &list[0]); err != nil || len(drift) != 0 {
		t.Fatalf("drift %v, %v", drift, err)
	}
	if n := x.emu.Harness().Total(); n != 0 {
		t.Errorf("a steady-state sync made %d calls: %v", n, x.emu.Harness().Requests())
	}

	changed := x.spec(specJSON(map[string]any{
		"instanceType": "standard.large", "diskSize": 200, "template": map[string]string{"name": "Linux Ubuntu 24.04 LTS 64-bit", "visibility": "public"},
		"labels": map[string]string{"team": "a"}, "securityGroups": []any{map[string]string{"id": sg}},
	}))
	drift, err = x.c.SyncServer(x.ctx, ref("worker-a"), changed, &list[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"instanceType", "template", "diskSize", "privateNetworks"}
	if !slices.Equal(drift, want) {
		t.Errorf("drift %v, want %v", drift, want)
	}
	moved := x.spec(specJSON(map[string]any{"zone": "de-fra-1", "labels": map[string]string{"team": "a"}}))
	if drift, _ := x.c.SyncServer(x.ctx, ref("worker-a"), moved, &list[0]); !slices.Contains(drift, "zone") {
		t.Errorf("drift %v, want zone", drift)
	}
}

func TestFlavor(t *testing.T) {
	x := newEnv(t, emu.Config{})
	f, err := x.c.Flavor(x.ctx, "ch-gva-2", "standard.large")
	if err != nil {
		t.Fatal(err)
	}
	if *f != (cloud.Flavor{Name: "standard.large", VCPUs: 4, MemoryMiB: 8192, Arch: "amd64"}) {
		t.Errorf("standard.large: %+v", f)
	}
	g, err := x.c.Flavor(x.ctx, "de-fra-1", "gpu3.medium")
	if err != nil {
		t.Fatal(err)
	}
	if *g != (cloud.Flavor{Name: "gpu3.medium", VCPUs: 24, MemoryMiB: 120 * 1024, GPUs: 2, GPUType: "NVIDIA A40", Arch: "amd64"}) {
		t.Errorf("gpu3.medium: %+v", g)
	}
	byID, err := x.c.Flavor(x.ctx, "ch-gva-2", emu.InstanceTypeID("standard.micro"))
	if err != nil || byID.Name != "standard.micro" || byID.MemoryMiB != 512 {
		t.Errorf("by ID: %+v %v", byID, err)
	}
	if _, err := x.c.Flavor(x.ctx, "ch-gva-2", "gpu3.medium"); !isInvalid(err, "instanceType", "not available in zone ch-gva-2") {
		t.Errorf("wrong zone: %v", err)
	}
}
