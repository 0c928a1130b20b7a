package cloudscale_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Every write route is audited, whatever it is: each route of the route
// table that is not a GET is called once, on an object of its collection
// where the test has one, and the audit must hold that call with the
// object's tags as they were before it. A route added to the table is
// called too; one that bypassed the audit fails here.
func TestEveryWriteRouteIsAudited(t *testing.T) {
	v := newEnv(t, emu.Config{})
	tags := func(id string) *cloudscale.TagMap {
		return &cloudscale.TagMap{"owner": "cluster-" + id}
	}
	net, err := v.client.Networks.Create(v.ctx, &cloudscale.NetworkCreateRequest{ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "rma1"}, Name: "net",
		TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: tags("net")}})
	if err != nil {
		t.Fatal(err)
	}
	subnets, err := v.client.Subnets.List(v.ctx)
	if err != nil || len(subnets) == 0 {
		t.Fatalf("subnets: %v, %v", subnets, err)
	}
	group, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "rma1"}, Name: "g", Type: "anti-affinity",
		TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: tags("group")}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := v.client.Servers.Create(v.ctx, &cloudscale.ServerRequest{Name: "s", Zone: "rma1", Flavor: "flex-8-4", Image: "custom:rhcos-4.19", SSHKeys: []string{},
		ServerGroups: []string{group.UUID}, TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: tags("server")}})
	if err != nil {
		t.Fatal(err)
	}
	vol, err := v.client.Volumes.Create(v.ctx, &cloudscale.VolumeCreateRequest{ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "rma1"}, Name: "v", SizeGB: 10,
		TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: tags("volume")}})
	if err != nil {
		t.Fatal(err)
	}
	fip, err := v.client.FloatingIPs.Create(v.ctx, &cloudscale.FloatingIPCreateRequest{IPVersion: 4, Server: srv.UUID,
		TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: tags("fip")}})
	if err != nil {
		t.Fatal(err)
	}
	images, err := v.client.CustomImages.List(v.ctx)
	if err != nil || len(images) == 0 {
		t.Fatalf("custom images: %v, %v", images, err)
	}
	// An object of each collection, by the collection's path.
	objects := map[string]string{
		"servers": srv.UUID, "server-groups": group.UUID, "volumes": vol.UUID, "networks": net.UUID, "subnets": subnets[0].UUID,
		"floating-ips": fip.IP(), "custom-images": images[0].UUID,
	}
	// Deletes last, so that every other route finds its object.
	routes := v.emu.Routes()
	slices.SortStableFunc(routes, func(a, b string) int {
		return boolInt(strings.HasPrefix(a, "DELETE ")) - boolInt(strings.HasPrefix(b, "DELETE "))
	})
	writes := 0
	for _, route := range routes {
		method, pattern, _ := strings.Cut(route, " ")
		if method == http.MethodGet {
			continue
		}
		writes++
		path, id := pattern, ""
		if i := strings.Index(pattern, "/{"); i >= 0 {
			collection := strings.TrimPrefix(pattern[:i], "/v1/")
			id = objects[collection]
			if id == "" {
				// A collection the test makes nothing of: an ID the
				// account does not hold, audited all the same.
				id = "00000000-0000-4000-8000-000000000000"
			}
			end := strings.Index(pattern[i:], "}")
			path = pattern[:i+1] + id + pattern[i+end+1:]
		}
		var want map[string]string
		if id != "" {
			want = tagsOf(t, v, id)
		}
		before := v.emu.Harness().Audit().Len()
		resp, _ := v.raw(method, path, testToken, map[string]any{"tags": map[string]string{"owner": "someone-else"}})
		got := v.emu.Harness().Audit().Since(before)
		if len(got) != 1 || got[0].Route != route || got[0].Status != resp.StatusCode || got[0].Caller != harness.CallerToken(testToken) {
			t.Errorf("%s %s (%d): audited %+v, want one write of route %s", method, path, resp.StatusCode, got, route)
			continue
		}
		if want == nil && got[0].Target != nil {
			t.Errorf("%s %s: target %+v, want none", method, path, got[0].Target)
		}
		if want != nil && (got[0].Target == nil || got[0].Target.ID != id || !maps.Equal(got[0].Target.Identity, want)) {
			t.Errorf("%s %s: target %+v, want %s with its tags before the write, %v", method, path, got[0].Target, id, want)
		}
	}
	if writes < 20 {
		t.Errorf("only %d write routes called: the route table lost some", writes)
	}
}

// tagsOf is an object's tags right now, read through the API (nil for an
// object the account does not hold).
func tagsOf(t *testing.T, v *env, id string) map[string]string {
	t.Helper()
	for _, kind := range []string{"servers", "server-groups", "volumes", "networks", "subnets", "floating-ips", "custom-images"} {
		resp, body := v.raw(http.MethodGet, "/v1/"+kind+"/"+id, testToken, nil)
		if resp.StatusCode != http.StatusOK {
			continue
		}
		var obj struct {
			Tags map[string]string `json:"tags"`
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Tags == nil {
			obj.Tags = map[string]string{}
		}
		return obj.Tags
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A write records what it touched as it was: the server a PATCH retags
// with its old tags, the group a create joins, the root volume a delete
// takes along (with the server it belonged to), the server a create made.
func TestAuditRecordsIdentityAtThatMoment(t *testing.T) {
	v := newEnv(t, emu.Config{})
	group, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "rma1"}, Name: "g", Type: "anti-affinity",
		TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: &cloudscale.TagMap{"cluster": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	mark := v.emu.Harness().Audit().Len()
	srv, err := v.client.Servers.Create(v.ctx, &cloudscale.ServerRequest{Name: "s", Zone: "rma1", Flavor: "flex-8-4", Image: "custom:rhcos-4.19", SSHKeys: []string{},
		ServerGroups: []string{group.UUID}, TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: &cloudscale.TagMap{"cluster": "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.client.Servers.Update(v.ctx, srv.UUID, &cloudscale.ServerUpdateRequest{TaggedResourceRequest: cloudscale.TaggedResourceRequest{Tags: &cloudscale.TagMap{"cluster": "c"}}}); err != nil {
		t.Fatal(err)
	}
	if err := v.client.Servers.Delete(v.ctx, srv.UUID); err != nil {
		t.Fatal(err)
	}
	w := v.emu.Harness().Audit().Since(mark)
	if len(w) != 3 {
		t.Fatalf("audited %d writes, want 3: %+v", len(w), w)
	}
	create, patch, del := w[0], w[1], w[2]
	if create.Target != nil || len(create.Used) != 1 || create.Used[0].ID != group.UUID || create.Used[0].Identity["cluster"] != "b" {
		t.Errorf("create: target %+v, used %+v; want no target and the group with its tags", create.Target, create.Used)
	}
	var madeServer, madeVolume bool
	for _, o := range create.Created {
		madeServer = madeServer || o.Kind == "servers" && o.ID == srv.UUID && o.Identity["cluster"] == "a"
		madeVolume = madeVolume || o.Kind == "volumes"
	}
	if !madeServer || !madeVolume {
		t.Errorf("create made %+v, want the server (tags as created) and its root volume", create.Created)
	}
	if patch.Target == nil || patch.Target.ID != srv.UUID || patch.Target.Identity["cluster"] != "a" || patch.Status != http.StatusNoContent {
		t.Errorf("patch: %+v, want the server with the tags it had before (cluster a)", patch)
	}
	if del.Target == nil || del.Target.Identity["cluster"] != "c" {
		t.Errorf("delete: target %+v, want the server with its tags then (cluster c)", del.Target)
	}
	root := false
	for _, o := range del.Changed {
		if o.Kind == "volumes" && len(o.Links) == 1 && o.Links[0].ID == srv.UUID && o.Links[0].Identity["cluster"] == "c" {
			root = true
		}
	}
	if !root {
		t.Errorf("delete changed %+v, want the root volume, linked to its server", del.Changed)
	}
	// A token is named by a digest, never by itself.
	if strings.Contains(del.Caller, testToken) || del.Caller != harness.CallerToken(testToken) {
		t.Errorf("caller %q", del.Caller)
	}
}

// Routes are registered through handle alone, which audits them: a route
// put on the mux directly would be neither in the route table nor audited.
// The only other registration is the fallback, which answers 404 and 405
// without touching the account.
func TestRoutesAreRegisteredThroughHandle(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"mux.HandleFunc(pattern, ", `mux.HandleFunc("/", `}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, ".HandleFunc(") && !strings.Contains(line, ".Handle(") {
				continue
			}
			if !slices.ContainsFunc(allowed, func(a string) bool { return strings.Contains(line, a) }) {
				t.Errorf("%s:%d registers a route around handle, unaudited: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
