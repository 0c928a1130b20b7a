package cloudscale_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

const testToken = "test-token"

// fakeClock is Config.Clock for tests: time stands still until advanced.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is one emulator served over HTTP, with an SDK client on it.
type env struct {
	t      *testing.T
	emu    *emu.Emulator
	srv    *httptest.Server
	clock  *fakeClock
	client *cloudscale.Client
	ctx    context.Context
}

// newEnv starts an emulator with cfg and a fake clock of its own.
func newEnv(t *testing.T, cfg emu.Config) *env {
	t.Helper()
	return newEnvClock(t, cfg, newFakeClock())
}

// newEnvClock is newEnv with a clock shared with other emulators.
func newEnvClock(t *testing.T, cfg emu.Config, clock *fakeClock) *env {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = clock.Now
	}
	if cfg.Seed == 0 {
		cfg.Seed = 42
	}
	e, err := emu.New(cfg)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	v := &env{t: t, emu: e, srv: srv, clock: clock, ctx: context.Background()}
	v.client = v.sdk(testToken)
	return v
}

// sdk returns an official SDK client using token.
func (v *env) sdk(token string) *cloudscale.Client {
	// A connection of its own per client, so a dropped connection in one
	// test cannot be retried on or disturb another.
	client := cloudscale.NewClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
	base, err := url.Parse(v.srv.URL + "/")
	if err != nil {
		v.t.Fatal(err)
	}
	client.BaseURL = base
	client.AuthToken = token
	return client
}

// raw sends a plain HTTP request; body, when not nil, is sent as JSON.
func (v *env) raw(method, path, token string, body any) (*http.Response, []byte) {
	v.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				v.t.Fatal(err)
			}
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, v.srv.URL+path, rd)
	if err != nil {
		v.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, b
}

// serverReq is a valid server request; change what the test is about.
func serverReq(name string) *cloudscale.ServerRequest {
	return &cloudscale.ServerRequest{Name: name, Flavor: "flex-4-1", Image: "debian-12", Zone: "rma1"}
}

func (v *env) createServer(req *cloudscale.ServerRequest) *cloudscale.Server {
	v.t.Helper()
	s, err := v.client.Servers.Create(v.ctx, req)
	if err != nil {
		v.t.Fatalf("creating server %q: %v", req.Name, err)
	}
	return s
}

func (v *env) getServer(id string) *cloudscale.Server {
	v.t.Helper()
	s, err := v.client.Servers.Get(v.ctx, id)
	if err != nil {
		v.t.Fatalf("getting server %s: %v", id, err)
	}
	return s
}

func (v *env) wantServerStatus(id, want string) {
	v.t.Helper()
	if got := v.getServer(id).Status; got != want {
		v.t.Fatalf("server status %q at %v, want %q", got, v.clock.Now().Format(time.TimeOnly), want)
	}
}

func (v *env) listServers(mods ...cloudscale.ListRequestModifier) []cloudscale.Server {
	v.t.Helper()
	l, err := v.client.Servers.List(v.ctx, mods...)
	if err != nil {
		v.t.Fatalf("listing servers: %v", err)
	}
	return l
}

func (v *env) listVolumes(mods ...cloudscale.ListRequestModifier) []cloudscale.Volume {
	v.t.Helper()
	l, err := v.client.Volumes.List(v.ctx, mods...)
	if err != nil {
		v.t.Fatalf("listing volumes: %v", err)
	}
	return l
}

// apiError asserts err is an API error with the given status and returns it.
func apiError(t *testing.T, err error, status int) *cloudscale.ErrorResponse {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want an API error with status %d", status)
	}
	var er *cloudscale.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("error %v (%T) is not a *cloudscale.ErrorResponse", err, err)
	}
	if er.StatusCode != status {
		t.Fatalf("status %d (%v), want %d", er.StatusCode, er.Message, status)
	}
	return er
}

// fieldError asserts err is a 400 whose message names field.
func fieldError(t *testing.T, err error, field string) {
	t.Helper()
	er := apiError(t, err, http.StatusBadRequest)
	if er.Message[field] == "" {
		t.Fatalf("400 %v does not name the field %q", er.Message, field)
	}
}

func wantStatus(t *testing.T, resp *http.Response, body []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

func wantBody(t *testing.T, body []byte, want string) {
	t.Helper()
	if got := strings.TrimSuffix(string(body), "\n"); got != want {
		t.Fatalf("body %q, want exactly %q", got, want)
	}
}

func serverNames(l []cloudscale.Server) []string {
	out := []string{}
	for _, s := range l {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

func uuids[T any](l []T, id func(T) string) []string {
	out := []string{}
	for _, x := range l {
		out = append(out, id(x))
	}
	sort.Strings(out)
	return out
}

func ptr[T any](v T) *T { return &v }

// tagged returns a request part setting the tags given as key, value, ...
func tagged(kv ...string) cloudscale.TaggedResourceRequest {
	m := cloudscale.TagMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return cloudscale.TaggedResourceRequest{Tags: &m}
}
