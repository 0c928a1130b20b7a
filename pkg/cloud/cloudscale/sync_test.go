package cloudscale

import (
	"maps"
	"slices"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestSyncServerTags(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Tags = map[string]string{"team": "a", "gone": "soon"}
		p.RootVolumeTags = map[string]string{"backup": "daily"}
	})
	s := v.create("m", spec)
	root := s.Detail.(*sdk.Server).Volumes[0].UUID

	// Right after the create, only the new root volume needs its tags,
	// without reading it first.
	if _, r := v.calls(func() {
		if drift, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil || drift != nil {
			t.Errorf("sync after create: %v, %v", drift, err)
		}
	}); !maps.Equal(r, map[string]int64{"PATCH /v1/volumes/{uuid}": 1}) {
		t.Errorf("sync after create made %v, want one volume PATCH", r)
	}
	if n, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil {
			t.Error(err)
		}
	}); n != 0 {
		t.Errorf("second sync made %v", r)
	}

	changed := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Tags = map[string]string{"team": "b", "new": "1"}
		p.RootVolumeTags = map[string]string{"backup": "weekly"}
	})
	_, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), changed, s); err != nil {
			t.Fatal(err)
		}
	})
	// The server is read right before the first write: is it still this
	// Machine's?
	want := map[string]int64{"GET /v1/servers/{uuid}": 1, "PATCH /v1/servers/{uuid}": 1, "GET /v1/volumes/{uuid}": 1, "PATCH /v1/volumes/{uuid}": 1}
	if !maps.Equal(r, want) {
		t.Errorf("sync with new tags made %v, want %v", r, want)
	}
	wantTags := map[string]string{"team": "b", "new": "1", v1beta1.TagMachineName: "m", v1beta1.TagClusterID: testCluster}
	if got := v.server(s.ID).Tags; !maps.Equal(got, wantTags) {
		t.Errorf("server tags %v, want %v (removed spec tags go, provider tags stay)", got, wantTags)
	}
	if !maps.Equal(s.Tags, wantTags) {
		t.Errorf("s.Tags %v not updated", s.Tags)
	}
	wantRoot := map[string]string{"backup": "weekly", v1beta1.TagMachineName: "m", v1beta1.TagClusterID: testCluster}
	if got := v.volume(root).Tags; !maps.Equal(got, wantRoot) {
		t.Errorf("root volume tags %v, want %v", got, wantRoot)
	}

	// Steady state: nothing to do, nothing asked.
	if n, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), changed, s); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("resync without changes made %v", r)
	}

	// Only rootVolumeTags changed: the volume alone.
	volOnly := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Tags = map[string]string{"team": "b", "new": "1"}
		p.RootVolumeTags = map[string]string{"backup": "never"}
	})
	_, r = v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), volOnly, s); err != nil {
			t.Fatal(err)
		}
	})
	if want := map[string]int64{"GET /v1/volumes/{uuid}": 1, "GET /v1/servers/{uuid}": 1, "PATCH /v1/volumes/{uuid}": 1}; !maps.Equal(r, want) {
		t.Errorf("sync with new rootVolumeTags made %v, want %v", r, want)
	}
}

// A new process (a restart, a new leader) checks each root volume once.
func TestSyncServerFirstSyncOfAProcess(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	spec := v.spec(nil)
	s := v.create("m", spec)
	root := s.Detail.(*sdk.Server).Volumes[0].UUID
	// Someone strips the volume's tags.
	req := &sdk.VolumeUpdateRequest{}
	req.Tags = &sdk.TagMap{}
	if err := v.sdk.Volumes.Update(v.ctx, root, req); err != nil {
		t.Fatal(err)
	}

	cl := newTestClient(t, New(Options{BaseURL: v.url}), testToken)
	found, err := cl.ListServers(v.ctx, sel("m"))
	if err != nil || len(found) != 1 {
		t.Fatalf("ListServers: %v, %v", found, err)
	}
	_, r := v.calls(func() {
		if _, err := cl.SyncServer(v.ctx, ref("m"), spec, &found[0]); err != nil {
			t.Fatal(err)
		}
	})
	if want := map[string]int64{"GET /v1/volumes/{uuid}": 1, "GET /v1/servers/{uuid}": 1, "PATCH /v1/volumes/{uuid}": 1}; !maps.Equal(r, want) {
		t.Errorf("first sync made %v, want %v", r, want)
	}
	if got := v.volume(root).Tags; got[v1beta1.TagMachineName] != "m" {
		t.Errorf("root volume tags %v not restored", got)
	}
	if n, r := v.calls(func() {
		if _, err := cl.SyncServer(v.ctx, ref("m"), spec, &found[0]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("second sync made %v", r)
	}
}

func TestSyncServerWithoutDetailReadsTheServer(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	spec := v.spec(nil)
	s := v.create("m", spec)
	if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil {
		t.Fatal(err)
	}
	_, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, &cloud.Server{ID: s.ID}); err != nil {
			t.Fatal(err)
		}
	})
	if want := map[string]int64{"GET /v1/servers/{uuid}": 1}; !maps.Equal(r, want) {
		t.Errorf("sync made %v, want %v", r, want)
	}
}

func TestSyncServerDrift(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	yes := true
	nw, err := v.sdk.Networks.Create(v.ctx, &sdk.NetworkCreateRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "priv", AutoCreateIPV4Subnet: &yes})
	if err != nil {
		t.Fatal(err)
	}
	base := func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Interfaces = []v1beta1.Interface{{Type: v1beta1.InterfaceTypePublic}, {Type: v1beta1.InterfaceTypePrivate, NetworkUUID: nw.UUID}}
	}
	s := v.create("m", v.spec(base))
	custom := v.create("c", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "custom:rhcos-4.19" }))
	// A server made before new servers were named as their Nodes: named
	// <machine>.<baseDomain> by an older release or appuio's provider.
	legacy := v.create("old", v.spec(base))
	if err := v.sdk.Servers.Update(v.ctx, legacy.ID, &sdk.ServerUpdateRequest{Name: "old.example.com"}); err != nil {
		t.Fatal(err)
	}
	if legacy, err = v.client.GetServer(v.ctx, legacy.ID); err != nil || legacy.Name != "old.example.com" {
		t.Fatalf("the renamed server: %+v, %v", legacy, err)
	}

	for _, tc := range []struct {
		name   string
		server *cloud.Server
		change func(p *v1beta1.CloudscaleMachineProviderSpec)
		want   []string
	}{
		{"none", s, func(*v1beta1.CloudscaleMachineProviderSpec) {}, nil},
		{"tags are no drift", s, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Tags = map[string]string{"x": "y"} }, nil},
		{"flavor", s, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Flavor = "flex-8-2" }, []string{"flavor"}},
		{"image", s, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "debian-13" }, []string{"image"}},
		{"image as UUID cannot be compared", s, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Image = "11111111-2222-4333-8444-555555555555"
		}, nil},
		{"zone", s, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Zone = "lpg1" }, []string{"zone"}},
		{"rootVolumeSizeGB", s, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.RootVolumeSizeGB = 150 }, []string{"rootVolumeSizeGB"}},
		{"interfaces dropped", s, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces = []v1beta1.Interface{{Type: v1beta1.InterfaceTypePublic}}
		}, []string{"interfaces"}},
		{"interfaces other network", s, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces[1].NetworkUUID = "11111111-2222-4333-8444-555555555555"
		}, []string{"interfaces"}},
		{"interfaces swapped", s, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Interfaces[0], p.Interfaces[1] = p.Interfaces[1], p.Interfaces[0]
		}, []string{"interfaces"}},
		{"serverGroups", s, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.ServerGroups = []string{"11111111-2222-4333-8444-555555555555"}
		}, []string{"serverGroups"}},
		// baseDomain no longer names new servers: a server named as its
		// Machine (and Node) is in sync with or without it, and one named
		// <machine>.<baseDomain> before is in sync with that baseDomain.
		{"baseDomain", s, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.BaseDomain = "example.com" }, nil},
		{"baseDomain of a server named with it", legacy, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.BaseDomain = "example.com" }, nil},
		{"no baseDomain for a server named with one", legacy, func(*v1beta1.CloudscaleMachineProviderSpec) {}, []string{"baseDomain"}},
		{"another baseDomain", legacy, func(p *v1beta1.CloudscaleMachineProviderSpec) { p.BaseDomain = "example.net" }, []string{"baseDomain"}},
		{"several", s, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Flavor, p.Image, p.RootVolumeSizeGB = "flex-8-2", "ubuntu-24.04", 60
		}, []string{"flavor", "image", "rootVolumeSizeGB"}},
		{"custom image", custom, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Image, p.Interfaces = "custom:rhcos-4.19", []v1beta1.Interface{{Type: v1beta1.InterfaceTypePublic}}
		}, nil},
		{"custom image changed to the public one", custom, func(p *v1beta1.CloudscaleMachineProviderSpec) {
			p.Image, p.Interfaces = "rhcos-4.19", []v1beta1.Interface{{Type: v1beta1.InterfaceTypePublic}}
		}, []string{"image"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
				base(p)
				tc.change(p)
			})
			name := map[*cloud.Server]string{s: "m", custom: "c", legacy: "old"}[tc.server]
			var drift []string
			v.calls(func() {
				drift, err = v.client.SyncServer(v.ctx, ref(name), spec, tc.server)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(drift, tc.want) {
				t.Errorf("drift %v, want %v", drift, tc.want)
			}
		})
	}
}
