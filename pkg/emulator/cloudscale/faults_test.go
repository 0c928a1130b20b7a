package cloudscale_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

func TestLostResponseOnCreateStillCreates(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "POST /v1/servers", LostResponseRate: 1, Times: 1}); err != nil {
		t.Fatal(err)
	}

	s, err := v.client.Servers.Create(v.ctx, serverReq("ghost"))
	if err == nil {
		t.Fatalf("create answered %+v through a lost response, want an error", s)
	}
	var er *cloudscale.ErrorResponse
	if errors.As(err, &er) {
		t.Fatalf("got API error %v, want a transport error (dropped connection)", er)
	}

	// The server exists even though the client never heard of it.
	l := v.listServers()
	if len(l) != 1 || l[0].Name != "ghost" {
		t.Fatalf("servers after the lost response: %v, want exactly [ghost]", serverNames(l))
	}
	if n := len(v.listVolumes()); n != 1 {
		t.Fatalf("%d volumes, want the root volume of ghost", n)
	}
	if r := v.emu.Harness().Rules(); r[0].Fired != 1 {
		t.Fatalf("rule fired %d times, want 1", r[0].Fired)
	}

	// The rule is spent: a retry is answered, and creates a second server,
	// which is exactly why clients must look before they retry.
	if _, err := v.client.Servers.Create(v.ctx, serverReq("ghost")); err != nil {
		t.Fatalf("second create: %v", err)
	}
	if n := len(v.listServers()); n != 2 {
		t.Fatalf("%d servers, want 2", n)
	}
	if got := v.emu.Harness().Count("POST /v1/servers"); got != 2 {
		t.Fatalf("Count(POST /v1/servers) = %d, want 2", got)
	}
}

func TestLostResponseWithStatusFromConfig(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: "DELETE /v1/servers/{uuid}", LostResponseRate: 1, LostResponseStatus: 502}}})
	s := v.createServer(serverReq("doomed"))
	err := v.client.Servers.Delete(v.ctx, s.UUID)
	er := apiError(t, err, http.StatusBadGateway)
	if !strings.Contains(er.Message["detail"], "injected") {
		t.Errorf("502 detail %q, want the emulator's injected message", er.Message["detail"])
	}
	// The delete happened all the same.
	_, err = v.client.Servers.Get(v.ctx, s.UUID)
	apiError(t, err, http.StatusNotFound)
}

func TestInjected503OnCreateCreatesNothing(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "POST /v1/servers", ErrorRate: 1, ErrorStatus: 503}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := v.client.Servers.Create(v.ctx, serverReq("never"))
		er := apiError(t, err, http.StatusServiceUnavailable)
		if len(er.Message) != 1 || er.Message["detail"] == "" {
			t.Fatalf("503 body %v, want the cloudscale shape {\"detail\": ...}", er.Message)
		}
	}
	if n := len(v.listServers()); n != 0 {
		t.Fatalf("%d servers after injected 503s, want 0", n)
	}
	if n := len(v.listVolumes()); n != 0 {
		t.Fatalf("%d volumes after injected 503s, want 0", n)
	}
	if got := v.emu.Harness().Count("POST /v1/servers"); got != 3 {
		t.Fatalf("Count(POST /v1/servers) = %d, want 3", got)
	}
	// Reads are not affected.
	if got := v.emu.Harness().Count("GET /v1/servers"); got != 1 {
		t.Fatalf("Count(GET /v1/servers) = %d, want 1", got)
	}
}

func TestInjected429(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: "* /v1/servers", ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 3}}})

	_, err := v.client.Servers.List(v.ctx)
	er := apiError(t, err, http.StatusTooManyRequests)
	if !strings.Contains(er.Message["detail"], "3 seconds") {
		t.Errorf("429 detail %q does not say when to retry", er.Message["detail"])
	}
	_, err = v.client.Servers.Create(v.ctx, serverReq("x"))
	apiError(t, err, http.StatusTooManyRequests)

	resp, body := v.raw("GET", "/v1/servers", testToken, nil)
	wantStatus(t, resp, body, http.StatusTooManyRequests)
	if got := resp.Header.Get("Retry-After"); got != "3" {
		t.Fatalf("Retry-After %q, want 3", got)
	}
	wantBody(t, body, `{"detail":"Request was throttled. Expected available in 3 seconds."}`)

	// Other routes are not throttled.
	if _, err := v.client.Flavors.List(v.ctx); err != nil {
		t.Fatalf("flavors: %v", err)
	}
}

func TestAdminEndpointOnTheEmulator(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	resp, body := v.raw("POST", "/_emulator/faults", "", `{"route":"POST /v1/server-groups","errorRate":1,"errorStatus":500,"times":1}`)
	wantStatus(t, resp, body, http.StatusCreated)

	_, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g"})
	apiError(t, err, http.StatusInternalServerError)
	if _, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g"}); err != nil {
		t.Fatalf("second create after the spent rule: %v", err)
	}

	resp, body = v.raw("GET", "/_emulator/requests", "", nil)
	wantStatus(t, resp, body, http.StatusOK)
	var counts map[string]int64
	if err := json.Unmarshal(body, &counts); err != nil {
		t.Fatal(err)
	}
	if counts["POST /v1/server-groups"] != 2 {
		t.Fatalf("request counts %v, want POST /v1/server-groups: 2", counts)
	}
}

func TestRequestCountersMatchCalls(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	h := v.emu.Harness()
	var ids []string
	for range 3 {
		ids = append(ids, v.createServer(serverReq("s")).UUID)
	}
	for range 2 {
		v.listServers()
	}
	for _, id := range ids {
		v.getServer(id)
	}
	v.getServer(ids[0])
	if err := v.client.Servers.Stop(v.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := v.client.Servers.Delete(v.ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	// Refused and unknown requests count as well.
	_, err := v.client.Servers.Get(v.ctx, "00000000-0000-4000-8000-000000000000")
	apiError(t, err, http.StatusNotFound)

	want := map[string]int64{
		"POST /v1/servers":             3,
		"GET /v1/servers":              2,
		"GET /v1/servers/{uuid}":       5,
		"POST /v1/servers/{uuid}/stop": 1,
		"DELETE /v1/servers/{uuid}":    1,
	}
	for route, n := range want {
		if got := h.Count(route); got != n {
			t.Errorf("Count(%q) = %d, want %d", route, got, n)
		}
	}
	if got := h.Total(); got != 12 {
		t.Errorf("Total() = %d, want 12; counts %v", got, h.Requests())
	}
	h.ResetRequests()
	v.listServers()
	if got := h.Total(); got != 1 {
		t.Errorf("Total() after reset and one list = %d, want 1", got)
	}
}

func TestInvalidFaultsRefusedByNew(t *testing.T) {
	t.Parallel()
	_, err := emu.New(emu.Config{Faults: []harness.Rule{{Route: "*", ErrorRate: 1, ErrorStatus: 404}}})
	if err == nil || !strings.Contains(err.Error(), "errorStatus") {
		t.Fatalf("New with errorStatus 404: err = %v, want one naming errorStatus", err)
	}
}
