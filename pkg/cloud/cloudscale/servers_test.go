package cloudscale

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestCreateServer(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	v := newEnv(t, emucs.Config{StateFile: state})
	spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Flavor = "flex-8-4"
		p.RootVolumeSizeGB = 80
		p.BaseDomain = "example.com"
		p.Tags = map[string]string{"team": "a"}
		p.RootVolumeTags = map[string]string{"backup": "daily"}
		p.SSHKeys = []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g user@host"}
	})
	userData := []byte(`{"ignition":{"version":"3.4.0"}}`)

	var s *cloud.Server
	_, byRoute := v.calls(func() {
		var err error
		var created bool
		s, created, err = v.client.CreateServer(v.ctx, ref("worker-1"), spec, userData)
		if err != nil || !created {
			t.Fatal(err, created)
		}
	})
	if want := map[string]int64{"GET /v1/flavors": 1, "GET /v1/servers": 1, "POST /v1/servers": 1}; !maps.Equal(byRoute, want) {
		t.Errorf("create made %v, want %v: the flavor list (to refuse unknown flavors without a create), the look for an existing server, the create; nothing else on the critical path", byRoute, want)
	}
	// The root volume is tagged by the first sync, with one call.
	_, byRoute = v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("worker-1"), spec, s); err != nil {
			t.Fatal(err)
		}
	})
	if want := map[string]int64{"PATCH /v1/volumes/{uuid}": 1}; !maps.Equal(byRoute, want) {
		t.Errorf("first sync made %v, want %v", byRoute, want)
	}

	wantTags := map[string]string{"team": "a", v1beta1.TagMachineName: "worker-1", v1beta1.TagClusterID: testCluster}
	// Named as its Machine, with baseDomain too: that is its Node's name,
	// which the cloudscale.ch CCM finds the server by.
	if s.ID == "" || s.Name != "worker-1" || s.InstanceType != "flex-8-4" || s.Zone != "rma1" || s.Region != "rma" ||
		!s.Running || s.Status != "running" || !maps.Equal(s.Tags, wantTags) {
		t.Errorf("returned server %+v", s)
	}
	if _, ok := s.Detail.(*sdk.Server); !ok {
		t.Errorf("Detail is %T, want *cloudscale.Server", s.Detail)
	}

	got := v.server(s.ID)
	if got.Name != "worker-1" || got.Flavor.Slug != "flex-8-4" || got.Image.Slug != "debian-12" || got.Zone.Slug != "rma1" {
		t.Errorf("server in the emulator: name %q flavor %q image %q zone %q", got.Name, got.Flavor.Slug, got.Image.Slug, got.Zone.Slug)
	}
	if !maps.Equal(got.Tags, wantTags) {
		t.Errorf("server tags %v, want %v", got.Tags, wantTags)
	}
	if len(got.Volumes) != 1 || got.Volumes[0].SizeGB != 80 {
		t.Fatalf("volumes %+v, want one of 80 GB", got.Volumes)
	}
	wantRoot := map[string]string{"backup": "daily", v1beta1.TagMachineName: "worker-1", v1beta1.TagClusterID: testCluster}
	if rt := v.volume(got.Volumes[0].UUID).Tags; !maps.Equal(rt, wantRoot) {
		t.Errorf("root volume tags %v, want %v", rt, wantRoot)
	}

	if ws := storedServer(t, state, s.ID); ws.UserData != string(userData) || !slices.Equal(ws.SSHKeys, spec.SSHKeys) {
		t.Errorf("user data %q, ssh keys %v in the emulator", ws.UserData, ws.SSHKeys)
	}
}

func TestCreateServerCustomImage(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "custom:rhcos-4.19" })
	s := v.create("m", spec)
	if img := v.server(s.ID).Image.Slug; img != "custom:rhcos-4.19" {
		t.Errorf("image %q", img)
	}
}

func addressesOf(s *cloud.Server, typ corev1.NodeAddressType) []string {
	var out []string
	for _, a := range s.Addresses {
		if a.Type == typ {
			out = append(out, a.Address)
		}
	}
	return out
}

func TestInterfacesAndAddresses(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	yes := true
	nw, err := v.sdk.Networks.Create(v.ctx, &sdk.NetworkCreateRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "priv", AutoCreateIPV4Subnet: &yes})
	if err != nil {
		t.Fatal(err)
	}
	subnet := nw.Subnets[0].UUID

	t.Run("public only", func(t *testing.T) {
		s := v.create("pub", v.spec(nil))
		ext := addressesOf(s, corev1.NodeExternalIP)
		internal := addressesOf(s, corev1.NodeInternalIP)
		if len(ext) != 2 {
			t.Fatalf("external addresses %v, want IPv4 and IPv6", ext)
		}
		// Without a private network the public IPv4 is the internal one.
		if len(internal) != 1 || internal[0] != ext[0] {
			t.Errorf("internal addresses %v, want the public IPv4 %s", internal, ext[0])
		}
		if s.Addresses[0].Type != corev1.NodeInternalIP {
			t.Errorf("addresses %v do not start with the internal one", s.Addresses)
		}
	})

	t.Run("public without IPv6", func(t *testing.T) {
		no := false
		s := v.create("pub4", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) { p.UseIPV6 = &no }))
		if ext := addressesOf(s, corev1.NodeExternalIP); len(ext) != 1 {
			t.Errorf("external addresses %v, want only IPv4", ext)
		}
	})

	t.Run("public and private", func(t *testing.T) {
		s := v.create("both", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces = []v1beta1.Interface{{Type: v1beta1.InterfaceTypePublic}, {Type: v1beta1.InterfaceTypePrivate, NetworkUUID: nw.UUID}}
		}))
		d := v.server(s.ID)
		if len(d.Interfaces) != 2 || d.Interfaces[0].Type != "public" || d.Interfaces[1].Type != "private" || d.Interfaces[1].Network.UUID != nw.UUID {
			t.Fatalf("interfaces %+v", d.Interfaces)
		}
		internal := addressesOf(s, corev1.NodeInternalIP)
		if len(internal) != 1 || internal[0] != d.Interfaces[1].Addresses[0].Address {
			t.Errorf("internal addresses %v, want only the private one", internal)
		}
		if ext := addressesOf(s, corev1.NodeExternalIP); len(ext) != 2 {
			t.Errorf("external addresses %v, want the public IPv4 and IPv6", ext)
		}
	})

	t.Run("private with a fixed address", func(t *testing.T) {
		s := v.create("fixed", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces = []v1beta1.Interface{{Type: v1beta1.InterfaceTypePrivate, Addresses: []v1beta1.Address{{SubnetUUID: subnet, Address: "172.16.0.50"}}}}
		}))
		if !slices.Equal(addressesOf(s, corev1.NodeInternalIP), []string{"172.16.0.50"}) || len(addressesOf(s, corev1.NodeExternalIP)) != 0 {
			t.Errorf("addresses %v, want InternalIP 172.16.0.50 only", s.Addresses)
		}
	})
}

func TestListServers(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	mine := v.create("m1", v.spec(nil))
	v.create("m2", v.spec(nil))
	if _, _, err := v.client.CreateServer(v.ctx, cloud.MachineRef{Name: "m1", ClusterID: "other-cluster"}, v.spec(nil), nil); err != nil {
		t.Fatal(err)
	}
	// A server someone made by hand with the same name, untagged.
	if _, err := v.sdk.Servers.Create(v.ctx, &sdk.ServerRequest{Name: "m1", Flavor: "flex-4-1", Image: "debian-12", Zone: "rma1", SSHKeys: []string{}}); err != nil {
		t.Fatal(err)
	}

	found, err := v.client.ListServers(v.ctx, sel("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ID != mine.ID || found[0].Machine != "m1" || found[0].ClusterID != testCluster || found[0].CreatedAt.IsZero() {
		t.Fatalf("ListServers(m1) = %+v, want exactly %s with its identity and creation time", found, mine.ID)
	}
	none, err := v.client.ListServers(v.ctx, sel("m3"))
	if err != nil || len(none) != 0 {
		t.Errorf("ListServers(m3) = %v, %v; want none", none, err)
	}
	all, err := v.client.ListServers(v.ctx, sel(""))
	if err != nil || len(all) != 2 {
		t.Errorf("ListServers of the cluster = %d servers, %v; want 2", len(all), err)
	}

	n, _ := v.calls(func() {
		if _, err := v.client.ListServers(v.ctx, cloud.Selector{Machine: "m1"}); err == nil {
			t.Error("ListServers without a cluster ID was accepted; it would match every cluster")
		}
	})
	if n != 0 {
		t.Errorf("refused lookups made %d calls", n)
	}
}

// A create for a Machine that has a server finds it and makes no other.
func TestCreateServerFindsTheExistingOne(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	first := v.create("m", v.spec(nil))
	_, r := v.calls(func() {
		s, created, err := v.client.CreateServer(v.ctx, ref("m"), v.spec(nil), nil)
		if err != nil || created || s.ID != first.ID {
			t.Errorf("second create = %v, created %v, %v; want the first server", s, created, err)
		}
	})
	if r["POST /v1/servers"] != 0 {
		t.Errorf("second create made %v", r)
	}
}

func TestGetServer(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	s := v.create("m", v.spec(nil))
	got, err := v.client.GetServer(v.ctx, s.ID)
	if err != nil || got.ID != s.ID || got.Name != "m" {
		t.Fatalf("GetServer = %+v, %v", got, err)
	}
	_, err = v.client.GetServer(v.ctx, "00000000-0000-4000-8000-000000000000")
	if !cloud.IsNotFound(err) {
		t.Fatalf("GetServer of a missing server: %v, want ErrNotFound", err)
	}
}

func TestDeleteServer(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	s := v.create("m", v.spec(nil))
	root := s.Detail.(*sdk.Server).Volumes[0].UUID
	if err := v.client.DeleteServer(v.ctx, ref("m"), s, noNodes); err != nil {
		t.Fatal(err)
	}
	if l := v.servers(); len(l) != 0 {
		t.Fatalf("%d servers left", len(l))
	}
	if _, err := v.sdk.Volumes.Get(v.ctx, root); err == nil {
		t.Error("the root volume outlived its server")
	}
	// Deleting again, with or without the record, is no error.
	if err := v.client.DeleteServer(v.ctx, ref("m"), s, noNodes); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if err := v.client.DeleteServer(v.ctx, ref("m"), &cloud.Server{ID: s.ID}, noNodes); err != nil {
		t.Errorf("delete of a gone server without its record: %v", err)
	}
}
