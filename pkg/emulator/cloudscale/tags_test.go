package cloudscale_test

import (
	"maps"
	"slices"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestTagFilters(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, s := range []struct {
		name string
		tags []string
	}{
		{"a", []string{"role", "worker", "cluster", "c1"}},
		{"b", []string{"role", "master", "cluster", "c1"}},
		{"c", []string{"role", "worker", "cluster", "c2"}},
		{"d", []string{"other", "x"}},
		{"e", nil},
	} {
		req := serverReq(s.name)
		if s.tags != nil {
			req.TaggedResourceRequest = tagged(s.tags...)
		}
		created := v.createServer(req)
		if len(created.Tags) != len(s.tags)/2 {
			t.Fatalf("server %s created with tags %v, want %v", s.name, created.Tags, s.tags)
		}
	}

	cases := []struct {
		name   string
		filter cloudscale.TagMap
		want   []string
	}{
		{"exact value", cloudscale.TagMap{"role": "worker"}, []string{"a", "c"}},
		{"other value", cloudscale.TagMap{"role": "master"}, []string{"b"}},
		{"key present", cloudscale.TagMap{"cluster": ""}, []string{"a", "b", "c"}},
		{"two tags", cloudscale.TagMap{"role": "worker", "cluster": "c1"}, []string{"a"}},
		{"key present and value", cloudscale.TagMap{"role": "", "cluster": "c2"}, []string{"c"}},
		{"no match", cloudscale.TagMap{"role": "db"}, []string{}},
		{"absent key", cloudscale.TagMap{"nope": ""}, []string{}},
		{"value is not a prefix", cloudscale.TagMap{"role": "work"}, []string{}},
	}
	for _, tc := range cases {
		got := serverNames(v.listServers(cloudscale.WithTagFilter(tc.filter)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: filter %v lists %v, want %v", tc.name, tc.filter, got, tc.want)
		}
	}
	if got := serverNames(v.listServers()); len(got) != 5 {
		t.Fatalf("unfiltered list %v, want all 5", got)
	}
}

func TestPatchReplacesTags(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	req := serverReq("s")
	req.TaggedResourceRequest = tagged("old", "1", "keep", "2")
	s := v.createServer(req)

	err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{TaggedResourceRequest: tagged("keep", "3", "new", "4")})
	if err != nil {
		t.Fatal(err)
	}
	got := v.getServer(s.UUID)
	if want := (cloudscale.TagMap{"keep": "3", "new": "4"}); !maps.Equal(got.Tags, want) {
		t.Fatalf("tags after PATCH %v, want exactly %v", got.Tags, want)
	}
	if got.Name != "s" {
		t.Fatalf("a tags-only PATCH renamed the server to %q", got.Name)
	}
	if l := v.listServers(cloudscale.WithTagFilter(cloudscale.TagMap{"old": ""})); len(l) != 0 {
		t.Fatalf("filter on the removed key still lists %v", serverNames(l))
	}
	if l := v.listServers(cloudscale.WithTagFilter(cloudscale.TagMap{"new": "4"})); len(l) != 1 {
		t.Fatalf("filter on the new tag lists %v, want the server", serverNames(l))
	}

	// An empty map removes all tags.
	if err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{TaggedResourceRequest: tagged()}); err != nil {
		t.Fatal(err)
	}
	if got := v.getServer(s.UUID).Tags; len(got) != 0 {
		t.Fatalf("tags after PATCH {} = %v, want none", got)
	}

	// A PATCH without tags keeps them.
	if err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{TaggedResourceRequest: tagged("k", "v")}); err != nil {
		t.Fatal(err)
	}
	if err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Name: "renamed"}); err != nil {
		t.Fatal(err)
	}
	if got := v.getServer(s.UUID); got.Name != "renamed" || !maps.Equal(got.Tags, cloudscale.TagMap{"k": "v"}) {
		t.Fatalf("after a rename: name %q, tags %v; want renamed with k=v", got.Name, got.Tags)
	}
}

func TestInvalidTagsAreRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	req := serverReq("s")
	req.TaggedResourceRequest = tagged("", "empty key")
	_, err := v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "tags")
	if n := len(v.listServers()); n != 0 {
		t.Fatalf("%d servers after a refused create", n)
	}
}

func TestVolumeFilters(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	mk := func(name string, tg cloudscale.TaggedResourceRequest) string {
		vol, err := v.client.Volumes.Create(v.ctx, &cloudscale.VolumeCreateRequest{Name: name, SizeGB: 10, TaggedResourceRequest: tg})
		if err != nil {
			t.Fatal(err)
		}
		return vol.UUID
	}
	d1 := mk("data-1", tagged("pool", "a"))
	mk("data-2", tagged("pool", "b"))
	mk("data-10", tagged())

	names := func(l []cloudscale.Volume) []string {
		return uuids(l, func(x cloudscale.Volume) string { return x.Name })
	}
	l := v.listVolumes(cloudscale.WithNameFilter("data-1"))
	if len(l) != 1 || l[0].UUID != d1 {
		t.Fatalf("name filter data-1 lists %v, want exactly data-1", names(l))
	}
	if l := v.listVolumes(cloudscale.WithNameFilter("data")); len(l) != 0 {
		t.Fatalf("name filter is exact, but \"data\" lists %v", names(l))
	}
	if got := names(v.listVolumes(cloudscale.WithTagFilter(cloudscale.TagMap{"pool": ""}))); !slices.Equal(got, []string{"data-1", "data-2"}) {
		t.Fatalf("tag filter pool= lists %v", got)
	}
	if got := names(v.listVolumes(cloudscale.WithNameFilter("data-2"), cloudscale.WithTagFilter(cloudscale.TagMap{"pool": "a"}))); len(got) != 0 {
		t.Fatalf("name data-2 and tag pool=a lists %v, want nothing", got)
	}

	// Volume tags are replaced by PATCH too.
	if err := v.client.Volumes.Update(v.ctx, d1, &cloudscale.VolumeUpdateRequest{TaggedResourceRequest: tagged("pool", "c")}); err != nil {
		t.Fatal(err)
	}
	got, err := v.client.Volumes.Get(v.ctx, d1)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Tags, cloudscale.TagMap{"pool": "c"}) {
		t.Fatalf("volume tags %v, want pool=c", got.Tags)
	}
}

func TestTagFilterOnNetworksAndGroups(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, n := range []struct{ name, cluster string }{{"n1", "c1"}, {"n2", "c2"}} {
		if _, err := v.client.Networks.Create(v.ctx, &cloudscale.NetworkCreateRequest{Name: n.name, TaggedResourceRequest: tagged("cluster", n.cluster)}); err != nil {
			t.Fatal(err)
		}
		if _, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: n.name, TaggedResourceRequest: tagged("cluster", n.cluster)}); err != nil {
			t.Fatal(err)
		}
	}
	nets, err := v.client.Networks.List(v.ctx, cloudscale.WithTagFilter(cloudscale.TagMap{"cluster": "c2"}))
	if err != nil || len(nets) != 1 || nets[0].Name != "n2" {
		t.Fatalf("networks with cluster=c2: %+v, %v", nets, err)
	}
	groups, err := v.client.ServerGroups.List(v.ctx, cloudscale.WithTagFilter(cloudscale.TagMap{"cluster": "c1"}))
	if err != nil || len(groups) != 1 || groups[0].Name != "n1" {
		t.Fatalf("server groups with cluster=c1: %+v, %v", groups, err)
	}
}
