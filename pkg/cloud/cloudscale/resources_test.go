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

const otherCluster = "other-cluster-9q8w"

// TestSpecNamingAnotherClustersResourceIsRefused: the resources a spec
// names are checked before a server joins them. A server group another
// cluster's provider made for its antiAffinityKey, a network, a subnet and
// a custom image tagged as another cluster's are refused, naming the
// field, and nothing is written (no server, no anti-affinity group); the
// cluster's Terraform network and server group, which carry no cluster's
// tag, and the cluster's own are joined as named.
func TestSpecNamingAnotherClustersResourceIsRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{CustomImages: []emucs.CustomImageSeed{
		{Slug: "rhcos-4.19", Name: "RHCOS 4.19", Zones: []string{"rma1"}},
		{Slug: "rhcos-other", Name: "RHCOS of another cluster", Zones: []string{"rma1"}},
	}})
	other := sdk.TagMap{v1beta1.TagClusterID: otherCluster}
	theirGroup := v.serverGroup("other-cluster-9q8w-workers-1", sdk.TagMap{v1beta1.TagClusterID: otherCluster, v1beta1.TagAntiAffinityKey: "workers"})
	theirNet, theirSubnet := v.network("privnet-other", other, other)
	// the cluster's Terraform network, and a subnet in it someone tagged
	// as another cluster's
	tfNet, tfSubnet := v.network("privnet-c-test", nil, nil)
	_, taggedSubnet := v.subnet(tfNet, "172.18.201.0/24", other)
	tfGroup := v.serverGroup("worker-group", nil)
	ownNet, _ := v.network("privnet-own", sdk.TagMap{v1beta1.TagClusterID: testCluster}, nil)
	for _, im := range v.customImages() {
		if im.Slug == "rhcos-other" {
			req := &sdk.CustomImageRequest{}
			req.Tags = &other
			if err := v.sdk.CustomImages.Update(v.ctx, im.UUID, req); err != nil {
				t.Fatal(err)
			}
		}
	}

	private := func(network string, subnets ...string) v1beta1.Interface {
		in := v1beta1.Interface{Type: v1beta1.InterfaceTypePrivate, NetworkUUID: network}
		for _, s := range subnets {
			in.Addresses = append(in.Addresses, v1beta1.Address{SubnetUUID: s})
		}
		return in
	}
	for _, tc := range []struct {
		name, field string
		mutate      func(p *v1beta1.CloudscaleMachineProviderSpec)
	}{
		{"another cluster's anti-affinity group", "serverGroups[1]", func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.ServerGroups = []string{tfGroup, theirGroup}
			p.AntiAffinityKey = "workers"
		}},
		{"another cluster's network", "interfaces[1].networkUUID", func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces = append(p.Interfaces, private(theirNet))
		}},
		{"another cluster's subnet", "interfaces[1].addresses[0].subnetUUID", func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces = append(p.Interfaces, private("", theirSubnet))
		}},
		{"a subnet tagged as another cluster's in the Terraform network", "interfaces[0].addresses[0].subnetUUID", func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces = []v1beta1.Interface{private(tfNet, taggedSubnet)}
		}},
		{"another cluster's custom image", "image", func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Image = "custom:rhcos-other"
		}},
	} {
		spec := v.spec(tc.mutate)
		var err error
		_, calls := v.calls(func() { _, _, err = v.client.CreateServer(v.ctx, ref("worker-refused"), spec, nil) })
		var foreign *cloud.ForeignResourceError
		if !errors.As(err, &foreign) || foreign.Field != tc.field || foreign.Cluster != otherCluster || foreign.Want != testCluster {
			t.Errorf("%s: create %v (%T), want it refused naming %s and cluster %s", tc.name, err, err, tc.field, otherCluster)
		} else if inv := asInvalid(t, err); inv.Field != tc.field {
			t.Errorf("%s: as a spec error it names %q, want %q", tc.name, inv.Field, tc.field)
		}
		for route, n := range calls {
			if !strings.HasPrefix(route, "GET ") {
				t.Errorf("%s: %d × %s before the refusal: nothing may be written", tc.name, n, route)
			}
		}
	}
	if n := len(v.servers()); n != 0 {
		t.Fatalf("%d servers made for specs naming another cluster's resources", n)
	}

	// What carries no cluster's identity, and the cluster's own, is joined.
	s := v.create("worker-a", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Interfaces = []v1beta1.Interface{private(tfNet, tfSubnet), private(ownNet)}
		p.ServerGroups = []string{tfGroup}
		p.Image = "custom:rhcos-4.19"
	}))
	got := v.server(s.ID)
	if len(got.Interfaces) != 2 || len(got.ServerGroups) != 1 || got.ServerGroups[0].UUID != tfGroup {
		t.Errorf("server on %d interfaces in groups %v, want the Terraform and the own network and the Terraform group", len(got.Interfaces), got.ServerGroups)
	}
}

func (v *env) serverGroup(name string, tags sdk.TagMap) string {
	v.t.Helper()
	req := &sdk.ServerGroupRequest{Name: name, Type: "anti-affinity"}
	req.Zone = "rma1"
	if tags != nil {
		req.Tags = &tags
	}
	g, err := v.sdk.ServerGroups.Create(v.ctx, req)
	if err != nil {
		v.t.Fatal(err)
	}
	return g.UUID
}

// network makes a network in rma1 with one subnet, each with the tags.
func (v *env) network(name string, tags, subnetTags sdk.TagMap) (network, subnet string) {
	v.t.Helper()
	auto := false
	req := &sdk.NetworkCreateRequest{Name: name, AutoCreateIPV4Subnet: &auto}
	req.Zone = "rma1"
	if tags != nil {
		req.Tags = &tags
	}
	n, err := v.sdk.Networks.Create(v.ctx, req)
	if err != nil {
		v.t.Fatal(err)
	}
	_, subnet = v.subnet(n.UUID, "172.18.200.0/24", subnetTags)
	return n.UUID, subnet
}

func (v *env) subnet(network, cidr string, tags sdk.TagMap) (string, string) {
	v.t.Helper()
	req := &sdk.SubnetCreateRequest{Network: network, CIDR: cidr}
	if tags != nil {
		req.Tags = &tags
	}
	sn, err := v.sdk.Subnets.Create(v.ctx, req)
	if err != nil {
		v.t.Fatal(err)
	}
	return network, sn.UUID
}

func (v *env) customImages() []sdk.CustomImage {
	v.t.Helper()
	l, err := v.sdk.CustomImages.List(v.ctx)
	if err != nil {
		v.t.Fatal(err)
	}
	return l
}
