package cloudscale_test

import (
	"io"
	"net/http"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestNoCredentials(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, tc := range []struct{ method, path, auth string }{
		{"GET", "/v1/servers", ""},
		{"POST", "/v1/servers", ""},
		{"GET", "/v1/flavors", ""},
		{"GET", "/v1/servers", "Bearer "},
		{"GET", "/v1/servers", "Bearer    "},
		{"GET", "/v1/servers", "Token abc"},
		{"GET", "/v1/servers", "abc"},
	} {
		req, err := http.NewRequest(tc.method, v.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s %s with Authorization %q: status %d, want 401", tc.method, tc.path, tc.auth, resp.StatusCode)
		}
		wantBody(t, body, `{"detail":"Authentication credentials were not provided."}`)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
	}
	// The SDK without a token gets the same.
	_, err := v.sdk("").Servers.List(v.ctx)
	er := apiError(t, err, http.StatusUnauthorized)
	if er.Message["detail"] != "Authentication credentials were not provided." {
		t.Fatalf("SDK error message %v", er.Message)
	}
	if n := len(v.listServers()); n != 0 {
		t.Fatalf("unauthenticated POST created %d servers", n)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Tokens: map[string]emu.Access{"rw": emu.ReadWrite, "ro": emu.ReadOnly}})
	rw, ro := v.sdk("rw"), v.sdk("ro")

	// An unknown token is refused, reading or writing.
	_, err := v.sdk("test-token").Servers.List(v.ctx)
	er := apiError(t, err, http.StatusUnauthorized)
	if er.Message["detail"] == "" {
		t.Fatalf("401 without detail: %v", er.Message)
	}
	_, err = v.sdk("RW").Servers.Create(v.ctx, serverReq("x"))
	apiError(t, err, http.StatusUnauthorized)

	// The read-write token works.
	s, err := rw.Servers.Create(v.ctx, serverReq("keep"))
	if err != nil {
		t.Fatalf("create with the read-write token: %v", err)
	}
	g, err := rw.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}

	// The read-only token can read...
	got, err := ro.Servers.Get(v.ctx, s.UUID)
	if err != nil || got.Name != "keep" {
		t.Fatalf("GET with the read-only token: %+v, %v", got, err)
	}
	l, err := ro.Servers.List(v.ctx)
	if err != nil || len(l) != 1 {
		t.Fatalf("list with the read-only token: %d servers, %v", len(l), err)
	}
	// ...but every write is forbidden and changes nothing.
	_, err = ro.Servers.Create(v.ctx, serverReq("nope"))
	apiError(t, err, http.StatusForbidden)
	apiError(t, ro.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Name: "renamed"}), http.StatusForbidden)
	apiError(t, ro.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{TaggedResourceRequest: tagged("a", "b")}), http.StatusForbidden)
	apiError(t, ro.Servers.Stop(v.ctx, s.UUID), http.StatusForbidden)
	apiError(t, ro.Servers.Delete(v.ctx, s.UUID), http.StatusForbidden)
	apiError(t, ro.ServerGroups.Delete(v.ctx, g.UUID), http.StatusForbidden)
	_, err = ro.Volumes.Create(v.ctx, &cloudscale.VolumeCreateRequest{Name: "v", SizeGB: 10})
	apiError(t, err, http.StatusForbidden)

	after, err := rw.Servers.List(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0].UUID != s.UUID || after[0].Name != "keep" || after[0].Status != "running" || len(after[0].Tags) != 0 {
		t.Fatalf("forbidden writes changed the servers: %+v", after)
	}
	if _, err := rw.ServerGroups.Get(v.ctx, g.UUID); err != nil {
		t.Fatalf("forbidden delete removed the server group: %v", err)
	}
	if vols, _ := rw.Volumes.List(v.ctx); len(vols) != 1 {
		t.Fatalf("%d volumes, want only the root volume", len(vols))
	}

	// Wire form of the 403.
	resp, body := v.raw("DELETE", "/v1/servers/"+s.UUID, "ro", nil)
	wantStatus(t, resp, body, http.StatusForbidden)
	wantBody(t, body, `{"detail":"You do not have permission to perform this action."}`)
	resp, body = v.raw("GET", "/v1/servers", "unknown", nil)
	wantStatus(t, resp, body, http.StatusUnauthorized)
	wantBody(t, body, `{"detail":"Invalid token."}`)

	// The read-write token can write all of it.
	if err := rw.Servers.Delete(v.ctx, s.UUID); err != nil {
		t.Fatalf("delete with the read-write token: %v", err)
	}
	if l, _ := rw.Servers.List(v.ctx); len(l) != 0 {
		t.Fatalf("%d servers after delete", len(l))
	}
}

func TestAnyTokenWithoutTokensConfigured(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, token := range []string{"a", "something-else", "x y"} {
		if _, err := v.sdk(token).Servers.Create(v.ctx, serverReq("by-"+token)); err != nil {
			t.Fatalf("token %q: %v", token, err)
		}
	}
	if n := len(v.listServers()); n != 3 {
		t.Fatalf("%d servers, want 3", n)
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Tokens made or revoked while the emulator runs take effect at the next
// request: a read-only token reads and is refused writes with 403.
func TestSetTokens(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	if _, err := v.sdk("anything").Servers.List(v.ctx); err != nil {
		t.Fatalf("without tokens any token reads: %v", err)
	}
	v.emu.SetTokens(map[string]emu.Access{"rw": emu.ReadWrite, "ro": emu.ReadOnly})
	if _, err := v.sdk("ro").Servers.List(v.ctx); err != nil {
		t.Fatalf("the read-only token reads: %v", err)
	}
	_, err := v.sdk("ro").ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g", Type: "anti-affinity"})
	apiError(t, err, http.StatusForbidden)
	_, err = v.sdk("anything").Servers.List(v.ctx)
	apiError(t, err, http.StatusUnauthorized)
	if _, err := v.sdk("rw").ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g", Type: "anti-affinity"}); err != nil {
		t.Fatalf("the read-write token writes: %v", err)
	}
}
