package exoscale_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// Catalogue entries the tests use.
var (
	typeMedium = v3.UUID(emu.InstanceTypeID("standard.medium"))
	typeLarge  = v3.UUID(emu.InstanceTypeID("standard.large"))
	ubuntu     = v3.UUID("188e6dc9-7b29-4db4-a8af-fc6368660738")
)

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

// env is one emulator served over HTTP, checked against the vendor's
// document, with an SDK client on its default endpoint.
type env struct {
	t      *testing.T
	emu    *emu.Emulator
	srv    *httptest.Server
	clock  *fakeClock
	client *v3.Client
	ctx    context.Context
}

func newEnv(t *testing.T, cfg emu.Config) *env {
	t.Helper()
	return newEnvClock(t, cfg, newFakeClock())
}

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
	var h http.Handler = e
	if apiCheck != nil {
		h = apiCheck.Wrap(e, func(v string) { t.Errorf("OpenAPI: %s", v) })
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	v := &env{t: t, emu: e, srv: srv, clock: clock, ctx: context.Background()}
	v.client = v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "")
	if len(cfg.Accounts) > 0 {
		v.client = v.sdk(cfg.Accounts[0].Key, cfg.Accounts[0].Secret, "")
	}
	return v
}

// sdk returns an SDK client of the account with key and secret on a zone's
// endpoint as the emulator lists it ("" is the default endpoint). Its HTTP
// client does not retry, so tests see every answer.
func (v *env) sdk(key, secret, zone string) *v3.Client {
	v.t.Helper()
	c, err := v3.NewClient(credentials.NewStaticCredentials(key, secret),
		v3.ClientOptWithEndpoint(v3.Endpoint(v.srv.URL+"/v2")),
		v3.ClientOptWithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	if err != nil {
		v.t.Fatal(err)
	}
	if zone == "" {
		return c
	}
	ep, err := c.GetZoneAPIEndpoint(v.ctx, v3.ZoneName(zone))
	if err != nil {
		v.t.Fatalf("endpoint of %s: %v", zone, err)
	}
	return c.WithEndpoint(ep)
}

// raw sends a request signed for the default account (unsigned with
// sign false); body, when not nil, is sent as JSON (a string as is).
func (v *env) raw(method, path string, body any, sign bool) (*http.Response, []byte) {
	v.t.Helper()
	var b []byte
	switch x := body.(type) {
	case nil:
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			v.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, v.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		v.t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	if sign {
		if err := emu.SignRequest(req, emu.DefaultAPIKey, emu.DefaultAPISecret, time.Now().Add(time.Minute)); err != nil {
			v.t.Fatal(err)
		}
	}
	return v.do(req)
}

func (v *env) do(req *http.Request) (*http.Response, []byte) {
	v.t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatalf("%s %s: reading body: %v", req.Method, req.URL.Path, err)
	}
	return resp, b
}

// instanceReq is a valid create request; change what the test is about.
func instanceReq(name string) v3.CreateInstanceRequest {
	return v3.CreateInstanceRequest{
		Name:         name,
		InstanceType: &v3.InstanceType{ID: typeMedium},
		Template:     &v3.Template{ID: ubuntu},
		DiskSize:     20,
	}
}

// create creates an instance with c and returns its operation and ID.
func (v *env) create(c *v3.Client, req v3.CreateInstanceRequest) (*v3.Operation, v3.UUID) {
	v.t.Helper()
	op, err := c.CreateInstance(v.ctx, req)
	if err != nil {
		v.t.Fatalf("creating instance %q: %v", req.Name, err)
	}
	if op.Reference == nil || op.Reference.ID == "" {
		v.t.Fatalf("create answered %+v without a reference", op)
	}
	return op, op.Reference.ID
}

func (v *env) getInstance(c *v3.Client, id v3.UUID) *v3.Instance {
	v.t.Helper()
	inst, err := c.GetInstance(v.ctx, id)
	if err != nil {
		v.t.Fatalf("getting instance %s: %v", id, err)
	}
	return inst
}

func (v *env) wantState(c *v3.Client, id v3.UUID, want v3.InstanceState) {
	v.t.Helper()
	if got := v.getInstance(c, id).State; got != want {
		v.t.Fatalf("instance state %q at %v, want %q", got, v.clock.Now().Format(time.TimeOnly), want)
	}
}

// opState fetches an operation with c and asserts its state.
func (v *env) opState(c *v3.Client, op *v3.Operation, want v3.OperationState) *v3.Operation {
	v.t.Helper()
	got, err := c.GetOperation(v.ctx, op.ID)
	if err != nil {
		v.t.Fatalf("getting operation %s: %v", op.ID, err)
	}
	if got.State != want {
		v.t.Fatalf("operation %s (%s) is %q (reason %q, message %q), want %q", op.ID, refCommand(got), got.State, got.Reason, got.Message, want)
	}
	return got
}

func refCommand(op *v3.Operation) string {
	if op.Reference == nil {
		return ""
	}
	return op.Reference.Command
}

// op asserts that an SDK call answered an operation, and returns it.
func (v *env) op(op *v3.Operation, err error) *v3.Operation {
	v.t.Helper()
	if err != nil {
		v.t.Fatal(err)
	}
	return op
}

// apiError asserts err is the SDK's error for status (errors.Is with its
// sentinel) and returns the server's message.
func apiError(t *testing.T, err error, sentinel error) string {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v is not %v", err, sentinel)
	}
	var ae *v3.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a *v3.APIError", err, err)
	}
	if ae.Message == "" {
		t.Fatalf("error %v has no message", err)
	}
	return ae.Message
}

func wantContains(t *testing.T, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Fatalf("%q does not contain %q", got, p)
		}
	}
}

func wantStatus(t *testing.T, resp *http.Response, body []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

func ptr[T any](v T) *T { return &v }
