package cloudscale_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

const unknownUUID = "3f2c9d7e-1b4a-4c5d-8e6f-7a8b9c0d1e2f"

func TestStatusCodes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	resp, body := v.raw("POST", "/v1/servers", testToken, map[string]any{"name": "w", "flavor": "flex-4-1", "image": "debian-12"})
	wantStatus(t, resp, body, http.StatusCreated)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("create Content-Type %q, want application/json", ct)
	}
	var s cloudscale.Server
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	if s.UUID == "" || s.Name != "w" || s.Zone.Slug != "rma1" || s.HREF != v.srv.URL+"/v1/servers/"+s.UUID {
		t.Fatalf("created server %+v: want a uuid, name w, default zone rma1 and href under the server URL", s)
	}
	if s.CreatedAt.IsZero() || !s.CreatedAt.Equal(v.clock.Now()) {
		t.Errorf("created_at %v, want the emulator's clock %v", s.CreatedAt, v.clock.Now())
	}

	noBody := func(method, path string, payload any, want int) {
		t.Helper()
		resp, body := v.raw(method, path, testToken, payload)
		wantStatus(t, resp, body, want)
		if len(body) != 0 {
			t.Fatalf("%s %s answered a body %q, want none", method, path, body)
		}
	}
	noBody("PATCH", "/v1/servers/"+s.UUID, map[string]any{"name": "w2"}, http.StatusNoContent)
	noBody("POST", "/v1/servers/"+s.UUID+"/stop", nil, http.StatusNoContent)
	noBody("POST", "/v1/servers/"+s.UUID+"/start", nil, http.StatusNoContent)
	noBody("POST", "/v1/servers/"+s.UUID+"/reboot", nil, http.StatusNoContent)

	resp, body = v.raw("GET", "/v1/servers/"+s.UUID, testToken, nil)
	wantStatus(t, resp, body, http.StatusOK)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got["name"] != "w2" || got["status"] != "running" {
		t.Fatalf("after PATCH and actions: name %v status %v", got["name"], got["status"])
	}
	for _, field := range []string{"href", "uuid", "name", "status", "zone", "flavor", "image", "volumes", "interfaces", "ssh_fingerprints", "ssh_host_keys", "anti_affinity_with", "server_groups", "created_at", "tags"} {
		if _, ok := got[field]; !ok {
			t.Errorf("server JSON lacks %q", field)
		}
	}

	noBody("DELETE", "/v1/servers/"+s.UUID, nil, http.StatusNoContent)
	resp, body = v.raw("GET", "/v1/servers/"+s.UUID, testToken, nil)
	wantStatus(t, resp, body, http.StatusNotFound)
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/servers/" + unknownUUID},
		{"PATCH", "/v1/servers/" + unknownUUID},
		{"DELETE", "/v1/servers/" + unknownUUID},
		{"POST", "/v1/servers/" + unknownUUID + "/start"},
		{"GET", "/v1/server-groups/" + unknownUUID},
		{"GET", "/v1/volumes/" + unknownUUID},
		{"GET", "/v1/networks/" + unknownUUID},
		{"GET", "/v1/subnets/" + unknownUUID},
		{"GET", "/v1/volume-snapshots/" + unknownUUID},
		{"GET", "/v1/custom-images/" + unknownUUID},
		{"GET", "/v1/floating-ips/192.0.2.1"},
		{"GET", "/v1/nonexistent"},
		{"GET", "/v2/servers"},
		{"GET", "/"},
	} {
		var payload any
		if tc.method == "PATCH" {
			payload = map[string]any{"name": "x"}
		}
		resp, body := v.raw(tc.method, tc.path, testToken, payload)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404", tc.method, tc.path, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q, want application/json", tc.method, tc.path, ct)
		}
		if got := strings.TrimSuffix(string(body), "\n"); got != `{"detail":"Not found."}` {
			t.Errorf("%s %s: body %q, want exactly {\"detail\":\"Not found.\"}", tc.method, tc.path, got)
		}
	}
	// The SDK sees a 404 ErrorResponse.
	_, err := v.client.Servers.Get(v.ctx, unknownUUID)
	er := apiError(t, err, http.StatusNotFound)
	if er.Message["detail"] != "Not found." {
		t.Fatalf("SDK 404 message %v", er.Message)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, tc := range []struct{ method, path string }{
		{"PUT", "/v1/servers"},
		{"DELETE", "/v1/servers"},
		{"POST", "/v1/flavors"},
		{"PUT", "/v1/servers/" + unknownUUID},
		{"GET", "/v1/servers/" + unknownUUID + "/start"},
	} {
		resp, body := v.raw(tc.method, tc.path, testToken, nil)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405; body %s", tc.method, tc.path, resp.StatusCode, body)
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(body, &m); err != nil || !strings.Contains(m["detail"], tc.method) {
			t.Errorf("%s %s: body %q, want JSON {\"detail\": ...} naming the method", tc.method, tc.path, body)
		}
	}
}

func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	resp, body := v.raw("POST", "/v1/servers", testToken, `{"name": "x",`)
	wantStatus(t, resp, body, http.StatusBadRequest)
	resp, body = v.raw("POST", "/v1/servers", testToken, `{"name": 7, "flavor": "flex-4-1", "image": "debian-12"}`)
	wantStatus(t, resp, body, http.StatusBadRequest)
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil || m["name"] == "" {
		t.Fatalf("wrong type for name: body %s, want a 400 naming \"name\"", body)
	}
	// Unknown fields are ignored, as by the real API.
	resp, body = v.raw("POST", "/v1/servers", testToken, `{"name": "x", "flavor": "flex-4-1", "image": "debian-12", "favourite_colour": "blue"}`)
	wantStatus(t, resp, body, http.StatusCreated)
	if n := len(v.listServers()); n != 1 {
		t.Fatalf("%d servers, want 1", n)
	}
}

func TestBadCreateNamesTheField(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	cases := []struct {
		name   string
		change func(*cloudscale.ServerRequest)
		field  string
	}{
		{"unknown flavor", func(r *cloudscale.ServerRequest) { r.Flavor = "flex-1000-1" }, "flavor"},
		{"missing flavor", func(r *cloudscale.ServerRequest) { r.Flavor = "" }, "flavor"},
		{"GPU flavor outside rma1", func(r *cloudscale.ServerRequest) { r.Zone = "lpg1"; r.Flavor = "gpu2-128-16-1-200" }, "flavor"},
		{"unknown image", func(r *cloudscale.ServerRequest) { r.Image = "windows-95" }, "image"},
		{"missing image", func(r *cloudscale.ServerRequest) { r.Image = "" }, "image"},
		{"unknown custom image", func(r *cloudscale.ServerRequest) { r.Image = "custom:nope" }, "image"},
		{"unknown zone", func(r *cloudscale.ServerRequest) { r.Zone = "zrh9" }, "zone"},
		{"missing name", func(r *cloudscale.ServerRequest) { r.Name = "" }, "name"},
		{"blank name", func(r *cloudscale.ServerRequest) { r.Name = "   " }, "name"},
		{"root volume too small", func(r *cloudscale.ServerRequest) { r.Image = "rhcos-4.19"; r.VolumeSizeGB = 10 }, "volume_size_gb"},
		{"bulk volume not in 100 GB steps", func(r *cloudscale.ServerRequest) { r.BulkVolumeSizeGB = 150 }, "volumes"},
		{"deprecated private network", func(r *cloudscale.ServerRequest) { r.UsePrivateNetwork = ptr(true) }, "use_private_network"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := serverReq("bad")
			tc.change(req)
			_, err := v.client.Servers.Create(v.ctx, req)
			fieldError(t, err, tc.field)
		})
	}
	if n := len(v.listServers()); n != 0 {
		t.Fatalf("refused creates left %d servers", n)
	}
	if n := len(v.listVolumes()); n != 0 {
		t.Fatalf("refused creates left %d volumes", n)
	}
}

func TestCustomImageServer(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	imgs, err := v.client.CustomImages.List(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || imgs[0].Slug != "rhcos-4.19" || imgs[0].UserDataHandling != "pass-through" {
		t.Fatalf("seeded custom images %+v, want rhcos-4.19 with pass-through user data", imgs)
	}

	req := serverReq("master-0")
	req.Image = "custom:rhcos-4.19"
	s := v.createServer(req)
	if s.Image.Slug != "custom:rhcos-4.19" || s.Image.Name != "RHCOS 4.19" {
		t.Fatalf("server image %+v, want slug custom:rhcos-4.19 named RHCOS 4.19", s.Image)
	}
	if len(s.Volumes) != 1 || s.Volumes[0].SizeGB != 16 {
		t.Fatalf("volumes %+v, want a root volume of the image's 16 GB", s.Volumes)
	}
	if got := v.getServer(s.UUID).Image.Slug; got != "custom:rhcos-4.19" {
		t.Fatalf("GET reports image %q", got)
	}

	// By UUID, the image is reported by its slug as well.
	req = serverReq("master-1")
	req.Image = imgs[0].UUID
	if got := v.createServer(req).Image.Slug; got != "custom:rhcos-4.19" {
		t.Fatalf("server created from the image UUID reports image %q", got)
	}

	// A custom image that is not in the zone is refused.
	w := newEnv(t, emu.Config{CustomImages: []emu.CustomImageSeed{{Slug: "only-lpg", Name: "Only LPG", Zones: []string{"lpg1"}}}})
	req = serverReq("x")
	req.Image = "custom:only-lpg"
	_, err = w.client.Servers.Create(w.ctx, req)
	fieldError(t, err, "image")
	req.Zone = "lpg1"
	if got := w.createServer(req).Image.Slug; got != "custom:only-lpg" {
		t.Fatalf("image %q", got)
	}
	// Configured seeds replace the default one.
	if _, err := w.client.Servers.Create(w.ctx, &cloudscale.ServerRequest{Name: "y", Flavor: "flex-4-1", Image: "custom:rhcos-4.19"}); err == nil {
		t.Fatal("custom:rhcos-4.19 exists although CustomImages replaced the defaults")
	}
}

func TestServerVolumes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	// A volume older than the server, attached later, must still list after
	// the root volume.
	data, err := v.client.Volumes.Create(v.ctx, &cloudscale.VolumeCreateRequest{Name: "data", SizeGB: 100})
	if err != nil {
		t.Fatal(err)
	}
	req := serverReq("db")
	req.VolumeSizeGB = 50
	req.Volumes = &[]cloudscale.ServerVolumeRequest{{SizeGB: 200, Type: "bulk"}}
	s := v.createServer(req)
	if len(s.Volumes) != 2 || s.Volumes[0].SizeGB != 50 || s.Volumes[0].Type != "ssd" || s.Volumes[1].SizeGB != 200 || s.Volumes[1].Type != "bulk" {
		t.Fatalf("volumes %+v, want root 50 GB ssd first, then 200 GB bulk", s.Volumes)
	}
	root, extra := s.Volumes[0].UUID, s.Volumes[1].UUID

	if err := v.client.Volumes.Update(v.ctx, data.UUID, &cloudscale.VolumeUpdateRequest{ServerUUIDs: &[]string{s.UUID}}); err != nil {
		t.Fatalf("attaching: %v", err)
	}
	got := v.getServer(s.UUID)
	if len(got.Volumes) != 3 || got.Volumes[0].UUID != root || got.Volumes[0].SizeGB != 50 {
		t.Fatalf("volumes %+v, want 3 with the 50 GB root volume %s first", got.Volumes, root)
	}
	// The root volume stays with its server.
	fieldError(t, v.client.Volumes.Update(v.ctx, root, &cloudscale.VolumeUpdateRequest{ServerUUIDs: &[]string{}}), "server_uuids")
	apiError(t, v.client.Volumes.Delete(v.ctx, root), http.StatusBadRequest)

	// Deleting the server deletes its root volume and detaches the others.
	if err := v.client.Servers.Delete(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	_, err = v.client.Volumes.Get(v.ctx, root)
	apiError(t, err, http.StatusNotFound)
	for _, id := range []string{data.UUID, extra} {
		vol, err := v.client.Volumes.Get(v.ctx, id)
		if err != nil {
			t.Fatalf("volume %s is gone with the server: %v", id, err)
		}
		if vol.ServerUUIDs == nil || len(*vol.ServerUUIDs) != 0 {
			t.Fatalf("volume %s still attached to %v", id, vol.ServerUUIDs)
		}
	}
	if n := len(v.listVolumes()); n != 2 {
		t.Fatalf("%d volumes left, want the 2 detached ones", n)
	}
}

func TestFlavorsAndRegions(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	flavors, err := v.client.Flavors.List(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	bySlug := map[string]cloudscale.Flavor{}
	for _, f := range flavors {
		if len(f.Zones) == 0 {
			t.Errorf("flavor %s lists no zones", f.Slug)
		}
		bySlug[f.Slug] = f
	}
	flex, ok := bySlug["flex-4-1"]
	if !ok {
		t.Fatal("flex-4-1 is missing")
	}
	if flex.VCPUCount != 1 || flex.MemoryGB != 4 || flex.GPU != nil {
		t.Fatalf("flex-4-1 = %+v, want 1 vCPU, 4 GB, no GPU", flex)
	}
	gpu, ok := bySlug["gpu2-128-16-1-200"]
	if !ok {
		t.Fatal("gpu2-128-16-1-200 is missing")
	}
	if gpu.GPU == nil || gpu.GPU.Count != 1 || gpu.GPU.VRAMPerGPUGB <= 0 || gpu.GPU.Name == "" {
		t.Fatalf("gpu2-128-16-1-200 GPU = %+v, want one GPU with VRAM", gpu.GPU)
	}
	if gpu.VCPUCount != 16 || gpu.MemoryGB != 128 {
		t.Fatalf("gpu2-128-16-1-200 = %d vCPU, %d GB; want 16, 128", gpu.VCPUCount, gpu.MemoryGB)
	}
	// gpu must be null, not absent, for flavors without one.
	resp, body := v.raw("GET", "/v1/flavors", testToken, nil)
	wantStatus(t, resp, body, http.StatusOK)
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range raw {
		if string(f["slug"]) == `"flex-4-1"` && string(f["gpu"]) != "null" {
			t.Fatalf("flex-4-1 gpu is %s, want null", f["gpu"])
		}
	}

	regions, err := v.client.Regions.List(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]string{}
	for _, r := range regions {
		for _, z := range r.Zones {
			zones[z.Slug] = r.Slug
		}
	}
	if zones["rma1"] != "rma" || zones["lpg1"] != "lpg" {
		t.Fatalf("zones %v, want rma1 in rma and lpg1 in lpg", zones)
	}
}

func TestPublicHostnameAndKeys(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	a := v.createServer(serverReq("a"))
	b := v.createServer(serverReq("b"))
	if len(a.SSHHostKeys) != 1 || len(a.SSHFingerprints) != 1 {
		t.Fatalf("host keys %v, fingerprints %v", a.SSHHostKeys, a.SSHFingerprints)
	}
	if a.SSHHostKeys[0] == b.SSHHostKeys[0] {
		t.Fatal("two servers share a host key")
	}
	if got := v.getServer(a.UUID).SSHHostKeys[0]; got != a.SSHHostKeys[0] {
		t.Fatal("host key changed between create and GET")
	}
}
