package cloudscale_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "state.json")
	clock := newFakeClock()
	cfg := emu.Config{StateFile: file, BootTime: 10 * time.Second}

	v1 := newEnvClock(t, cfg, clock)
	g, err := v1.client.ServerGroups.Create(v1.ctx, &cloudscale.ServerGroupRequest{Name: "workers", TaggedResourceRequest: tagged("cluster", "c1")})
	if err != nil {
		t.Fatal(err)
	}
	n := v1.createNetwork(&cloudscale.NetworkCreateRequest{Name: "net", TaggedResourceRequest: tagged("cluster", "c1")})
	req := serverReq("running")
	req.ServerGroups = []string{g.UUID}
	req.Interfaces = publicAndPrivate(n.UUID)
	req.TaggedResourceRequest = tagged("cluster", "c1", "role", "worker")
	running := v1.createServer(req)
	clock.Advance(10 * time.Second)
	v1.wantServerStatus(running.UUID, "running")
	running = v1.getServer(running.UUID)

	clock.Advance(time.Minute)
	pendingReq := serverReq("pending")
	pendingReq.TaggedResourceRequest = tagged("cluster", "c1", "role", "master")
	pending := v1.createServer(pendingReq)
	if pending.Status != "changing" {
		t.Fatalf("new server %q, want changing", pending.Status)
	}
	clock.Advance(4 * time.Second)
	imgsBefore, err := v1.client.CustomImages.List(v1.ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1.srv.Close()

	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("state file is not JSON: %.200s", b)
	}

	// A new emulator on the same file has the same world.
	v2 := newEnvClock(t, cfg, clock)
	g2, err := v2.client.ServerGroups.Get(v2.ctx, g.UUID)
	if err != nil {
		t.Fatalf("server group after restart: %v", err)
	}
	if g2.Name != "workers" || !maps.Equal(g2.Tags, g.Tags) || len(g2.Servers) != 1 || g2.Servers[0].UUID != running.UUID {
		t.Fatalf("server group after restart %+v, want workers with tags %v holding %s", g2, g.Tags, running.UUID)
	}
	n2, err := v2.client.Networks.Get(v2.ctx, n.UUID)
	if err != nil {
		t.Fatalf("network after restart: %v", err)
	}
	if n2.Name != "net" || !maps.Equal(n2.Tags, n.Tags) || !reflect.DeepEqual(n2.Subnets, rehref(n.Subnets, v1, v2)) {
		t.Fatalf("network after restart %+v, want %+v", n2, n)
	}

	r2 := v2.getServer(running.UUID)
	if r2.Status != "running" || !maps.Equal(r2.Tags, running.Tags) || r2.Name != "running" {
		t.Fatalf("server after restart: status %q, tags %v, name %q", r2.Status, r2.Tags, r2.Name)
	}
	if !r2.CreatedAt.Equal(running.CreatedAt) {
		t.Fatalf("created_at %v after restart, was %v", r2.CreatedAt, running.CreatedAt)
	}
	p4, p6, priv := addrs(t, r2)
	w4, w6, wpriv := addrs(t, running)
	if !sameAddrs(p4, w4) || !sameAddrs(p6, w6) || !sameAddrs(priv, wpriv) {
		t.Fatalf("addresses changed across the restart:\n%+v\n%+v", r2.Interfaces, running.Interfaces)
	}
	if len(r2.Volumes) != 1 || r2.Volumes[0].UUID != running.Volumes[0].UUID {
		t.Fatalf("volumes %+v after restart, want %+v", r2.Volumes, running.Volumes)
	}

	// The pending server continues its boot on the new emulator.
	v2.wantServerStatus(pending.UUID, "changing")
	clock.Advance(6*time.Second - time.Nanosecond)
	v2.wantServerStatus(pending.UUID, "changing")
	clock.Advance(time.Nanosecond)
	v2.wantServerStatus(pending.UUID, "running")
	if got := v2.getServer(pending.UUID).Tags; !maps.Equal(got, pending.Tags) {
		t.Fatalf("tags %v after restart, want %v", got, pending.Tags)
	}

	// Seeded custom images are not seeded twice.
	imgsAfter, err := v2.client.CustomImages.List(v2.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgsAfter) != len(imgsBefore) || imgsAfter[0].UUID != imgsBefore[0].UUID {
		t.Fatalf("custom images after restart %+v, want the same %+v", imgsAfter, imgsBefore)
	}

	// Addresses handed out before the restart are not handed out again.
	req = serverReq("new")
	req.Interfaces = publicAndPrivate(n.UUID)
	fresh := v2.createServer(req)
	f4, _, fpriv := addrs(t, fresh)
	for _, s := range []*cloudscale.Server{running, pending} {
		o4, _, opriv := addrs(t, s)
		if f4[0].Address == o4[0].Address {
			t.Fatalf("public address %s handed out twice across a restart", f4[0].Address)
		}
		if len(opriv) > 0 && fpriv[0].Address == opriv[0].Address {
			t.Fatalf("private address %s handed out twice across a restart", fpriv[0].Address)
		}
	}

	// Writes are atomic: only the state file is in the directory.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "state.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only state.json (no temporary files)", names)
	}
}

func TestStateKeepsDeletions(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	cfg := emu.Config{StateFile: file}
	v1 := newEnv(t, cfg)
	s := v1.createServer(serverReq("gone"))
	if err := v1.client.Servers.Delete(v1.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	imgs, err := v1.client.CustomImages.List(v1.ctx)
	if err != nil || len(imgs) != 1 {
		t.Fatalf("custom images %+v, %v", imgs, err)
	}
	if err := v1.client.CustomImages.Delete(v1.ctx, imgs[0].UUID); err != nil {
		t.Fatal(err)
	}
	v1.srv.Close()

	v2 := newEnv(t, cfg)
	if l := v2.listServers(); len(l) != 0 {
		t.Fatalf("deleted server back after restart: %v", serverNames(l))
	}
	if l := v2.listVolumes(); len(l) != 0 {
		t.Fatalf("%d volumes after restart, want 0", len(l))
	}
	if l, err := v2.client.CustomImages.List(v2.ctx); err != nil || len(l) != 0 {
		t.Fatalf("deleted custom image back after restart: %+v, %v", l, err)
	}
}

func TestReadsAndRefusalsDoNotWriteState(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	v := newEnv(t, emu.Config{StateFile: file})
	v.listServers()
	_, err := v.client.Servers.Create(v.ctx, &cloudscale.ServerRequest{Name: "bad", Flavor: "nope", Image: "debian-12"})
	fieldError(t, err, "flavor")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("state file written without a successful write (stat: %v)", err)
	}
	v.createServer(serverReq("ok"))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("state file not written after a create: %v", err)
	}
}

func TestCorruptStateFileIsAnError(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := emu.New(emu.Config{StateFile: file}); err == nil {
		t.Fatal("New accepted a corrupt state file")
	}
}

// rehref rewrites the hrefs of subnet stubs from v1's base URL to v2's.
func rehref(l []cloudscale.SubnetStub, from, to *env) []cloudscale.SubnetStub {
	out := []cloudscale.SubnetStub{}
	for _, s := range l {
		s.HREF = to.srv.URL + s.HREF[len(from.srv.URL):]
		out = append(out, s)
	}
	return out
}

func sameAddrs(a, b []cloudscale.Address) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Address != b[i].Address || a[i].PrefixLength != b[i].PrefixLength || a[i].Gateway != b[i].Gateway {
			return false
		}
	}
	return true
}
