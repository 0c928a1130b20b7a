package cloudscale

import (
	"errors"
	"strings"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

// legacyCluster is a legacy cluster ID the test cluster declares (a fleet
// cluster's Terraform cluster_id, pkg/clusterid).
const legacyCluster = "c-legacy-syn"

// TestSpecNamingALegacyIDsResourceIsJoined: a server group and a network
// tagged with a legacy cluster ID the cluster declares (the Terraform
// module's cluster_id on a fleet cluster) are the cluster's: a server of a
// Machine of the cluster's own ID joins them, and one of a Machine
// labelled with the legacy ID joins what carries the own ID. Undeclared,
// the same resources are another cluster's and refused; another cluster's
// stay refused whatever is declared.
func TestSpecNamingALegacyIDsResourceIsJoined(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	legacy := sdk.TagMap{v1beta1.TagClusterID: legacyCluster}
	legacyGroup := v.serverGroup("c-legacy-syn_worker", legacy)
	legacyNet, _ := v.network("privnet-c-legacy-syn", legacy, nil)
	ownNet, _ := v.network("privnet-own", sdk.TagMap{v1beta1.TagClusterID: testCluster}, nil)
	theirNet, _ := v.network("privnet-other", sdk.TagMap{v1beta1.TagClusterID: otherCluster}, nil)
	private := func(network string) v1beta1.Interface {
		return v1beta1.Interface{Type: v1beta1.InterfaceTypePrivate, NetworkUUID: network}
	}
	declared := func(name string) cloud.MachineRef {
		m := ref(name)
		m.AlsoOwns = []string{legacyCluster}
		return m
	}
	onLegacy := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Interfaces = append(p.Interfaces, private(legacyNet))
		p.ServerGroups = []string{legacyGroup}
	})

	// Undeclared: the legacy ID is another cluster's.
	_, calls := v.calls(func() {
		_, _, err := v.client.CreateServer(v.ctx, ref("worker-undeclared"), onLegacy, nil)
		var foreign *cloud.ForeignResourceError
		if !errors.As(err, &foreign) || foreign.Cluster != legacyCluster {
			t.Errorf("undeclared: create %v, want the legacy ID's resources refused", err)
		}
	})
	for route, n := range calls {
		if !strings.HasPrefix(route, "GET ") {
			t.Errorf("undeclared: %d × %s before the refusal", n, route)
		}
	}

	// Declared: joined, by a Machine of the own ID...
	s := v.createFor(declared("worker-a"), onLegacy)
	got := v.server(s.ID)
	if len(got.Interfaces) != 2 || len(got.ServerGroups) != 1 || got.ServerGroups[0].UUID != legacyGroup {
		t.Errorf("server on %d interfaces in groups %v, want the legacy ID's network and group joined", len(got.Interfaces), got.ServerGroups)
	}
	// ...and by a Machine labelled with the legacy ID, the own ID's.
	m := cloud.MachineRef{Name: "worker-b", ClusterID: legacyCluster, AlsoOwns: []string{testCluster}}
	s = v.createFor(m, v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Interfaces = append(p.Interfaces, private(ownNet))
	}))
	if got := v.server(s.ID); len(got.Interfaces) != 2 || got.Tags[v1beta1.TagClusterID] != legacyCluster {
		t.Errorf("server of the legacy Machine on %d interfaces, tagged %v: want the own ID's network joined, the server tagged with the Machine's ID", len(got.Interfaces), got.Tags)
	}

	// Another cluster's stays refused, whatever is declared.
	_, _, err := v.client.CreateServer(v.ctx, declared("worker-c"), v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Interfaces = append(p.Interfaces, private(legacyNet), private(theirNet))
	}), nil)
	var foreign *cloud.ForeignResourceError
	if !errors.As(err, &foreign) || foreign.Cluster != otherCluster || foreign.Field != "interfaces[2].networkUUID" ||
		!strings.Contains(err.Error(), legacyCluster) {
		t.Errorf("another cluster's network with a legacy ID declared: %v, want it refused, naming the IDs the cluster owns", err)
	}
	if n := len(v.servers()); n != 2 {
		t.Errorf("%d servers, want the 2 joined ones", n)
	}
}
