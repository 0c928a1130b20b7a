package exoscale

import (
	"errors"
	"slices"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	v1beta1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// legacyCluster is a legacy cluster ID the test cluster declares (a fleet
// cluster's Terraform cluster_id, pkg/clusterid).
const legacyCluster = "c1-legacy-syn"

// TestSpecNamingALegacyIDsResourceIsJoined: a security group marked and a
// private network labelled with a legacy cluster ID the cluster declares
// are the cluster's: an instance joins them on create and a sync attaches
// them. Undeclared, they are another cluster's and refused, on create and
// on sync; another cluster's stay refused whatever is declared.
func TestSpecNamingALegacyIDsResourceIsJoined(t *testing.T) {
	x := newEnv(t, emu.Config{})
	legacySG := x.describedSecurityGroup("c1-legacy-syn_worker", groupMarker+" cluster="+legacyCluster)
	legacyNet := x.labelledNetwork("c1-legacy-syn_clusternet", v3.Labels{v1beta1.LabelClusterID: legacyCluster})
	theirSG := x.describedSecurityGroup("other_worker", groupMarker+" cluster="+otherCluster)
	declared := func(name string) cloud.MachineRef {
		m := ref(name)
		m.AlsoOwns = []string{legacyCluster}
		return m
	}
	onLegacy := x.spec(specJSON(map[string]any{
		"securityGroups":  []any{map[string]string{"id": legacySG}},
		"privateNetworks": []any{map[string]string{"id": legacyNet}},
	}))

	// Undeclared: refused, nothing written.
	x.emu.Harness().ResetRequests()
	_, _, err := x.c.CreateServer(x.ctx, ref("worker-undeclared"), onLegacy, nil)
	var foreign *cloud.ForeignResourceError
	if !errors.As(err, &foreign) || foreign.Cluster != legacyCluster {
		t.Errorf("undeclared: create %v, want the legacy ID's resources refused", err)
	}
	if n := x.writes(); n != 0 {
		t.Errorf("undeclared: %d writes before the refusal: %v", n, x.emu.Harness().Requests())
	}

	// Declared: joined on create.
	s, _, err := x.c.CreateServer(x.ctx, declared("worker-a"), onLegacy, nil)
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := x.emu.Instance(s.ID)
	if !slices.Contains(inst.SecurityGroups, legacySG) || !slices.Contains(inst.PrivateNetworks, legacyNet) {
		t.Errorf("instance in groups %v, on networks %v: want the legacy ID's group and network", inst.SecurityGroups, inst.PrivateNetworks)
	}

	// A sync attaches them to an instance made without; undeclared it
	// does not.
	b, _, err := x.c.CreateServer(x.ctx, ref("worker-b"), x.spec(specJSON(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	sync := func(m cloud.MachineRef) error {
		fresh, err := x.c.GetServer(x.ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = x.c.SyncServer(x.ctx, m, onLegacy, fresh)
		return err
	}
	if err := sync(ref("worker-b")); !errors.As(err, &foreign) || foreign.Cluster != legacyCluster {
		t.Errorf("undeclared: sync %v, want the legacy ID's resources refused", err)
	}
	if inst, _ := x.emu.Instance(b.ID); slices.Contains(inst.SecurityGroups, legacySG) || slices.Contains(inst.PrivateNetworks, legacyNet) {
		t.Errorf("undeclared: sync attached groups %v, networks %v", inst.SecurityGroups, inst.PrivateNetworks)
	}
	if err := sync(declared("worker-b")); err != nil {
		t.Errorf("declared: sync %v", err)
	}
	if inst, _ := x.emu.Instance(b.ID); !slices.Contains(inst.SecurityGroups, legacySG) || !slices.Contains(inst.PrivateNetworks, legacyNet) {
		t.Errorf("declared: sync left the instance in groups %v, on networks %v: want the legacy ID's", inst.SecurityGroups, inst.PrivateNetworks)
	}

	// Another cluster's stays refused.
	_, _, err = x.c.CreateServer(x.ctx, declared("worker-c"), x.spec(specJSON(map[string]any{
		"securityGroups": []any{map[string]string{"id": legacySG}, map[string]string{"id": theirSG}},
	})), nil)
	wantForeign(t, "another cluster's security group with a legacy ID declared", "securityGroups[1]", err)
	if n := len(x.emu.Instances()); n != 2 {
		t.Errorf("%d instances, want 2", n)
	}
}
