package cloudscale

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

func TestCreateRefusedIsInvalidConfig(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	for _, tc := range []struct {
		field  string
		change func(p *v1beta1.CloudscaleMachineProviderSpec)
	}{
		{"flavor", func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Flavor = "flex-999-1" }},
		{"flavor", func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Flavor, p.Zone = "gpu2-128-16-1-200", "lpg1" }},
		{"image", func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "windows-95" }},
		{"image", func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "custom:nope" }},
		{"zone", func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Zone = "xyz9" }},
		{"rootVolumeSizeGB", func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image, p.RootVolumeSizeGB = "rhcos-4.19", 12 }},
	} {
		_, _, err := v.client.CreateServer(v.ctx, ref("m"), v.spec(tc.change), []byte("user-data"))
		ic := asInvalid(t, err)
		if ic.Field != tc.field || ic.Message == "" {
			t.Errorf("InvalidConfigError %+v, want field %q with the API's message", ic, tc.field)
		}
		if cloud.IsNotFound(err) || errors.As(err, new(*cloud.RetryableError)) {
			t.Errorf("%v is also not-found or retryable", err)
		}
	}
	if l := v.servers(); len(l) != 0 {
		t.Errorf("%d servers after refused creates", len(l))
	}
}

func TestInjectedServerErrorsAreRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, retryAfter int
		want               time.Duration
	}{
		{503, 0, 0},
		{503, 3, 3 * time.Second},
		{500, 0, 0},
		{502, 0, 0},
		{504, 0, 0},
		{429, 7, 7 * time.Second},
	} {
		v := newEnv(t, emucs.Config{})
		if err := v.emu.Harness().AddRule(harness.Rule{Route: "GET /v1/servers", ErrorRate: 1, ErrorStatus: tc.status, RetryAfterSeconds: tc.retryAfter}); err != nil {
			t.Fatal(err)
		}
		_, err := v.client.ListServers(v.ctx, sel("m"))
		re := asRetryable(t, err)
		if re.NotPerformed != (tc.status == 429) {
			t.Errorf("HTTP %d: NotPerformed = %v; only a 429 says the request had no effect", tc.status, re.NotPerformed)
		}
		if re.RetryAfter != tc.want {
			t.Errorf("HTTP %d with Retry-After %d: RetryAfter %v, want %v", tc.status, tc.retryAfter, re.RetryAfter, tc.want)
		}
		if !strings.Contains(err.Error(), "server.list") || !strings.Contains(err.Error(), strconv.Itoa(tc.status)) {
			t.Errorf("error %q does not say what failed", err)
		}
	}
}

func TestLostResponseOnCreate(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, 502} {
		v := newEnv(t, emucs.Config{})
		if err := v.emu.Harness().AddRule(harness.Rule{Route: "POST /v1/servers", LostResponseRate: 1, LostResponseStatus: status, Times: 1}); err != nil {
			t.Fatal(err)
		}
		_, _, err := v.client.CreateServer(v.ctx, ref("m"), v.spec(nil), []byte("user-data"))
		if re := asRetryable(t, err); re.NotPerformed {
			t.Errorf("lost response %d: the create is marked as not performed, but it may have been (it was)", status)
		}
		found, err := v.client.ListServers(v.ctx, sel("m"))
		if err != nil || len(found) != 1 {
			t.Fatalf("lost response %d: ListServers = %d servers, %v; want exactly the one created", status, len(found), err)
		}
		// Asked again, the create finds the server and makes no other.
		s, created, err := v.client.CreateServer(v.ctx, ref("m"), v.spec(nil), []byte("user-data"))
		if err != nil || created || s.ID != found[0].ID {
			t.Fatalf("create after a lost response: %v, created %v; want the existing server %s", err, created, found[0].ID)
		}
		if n := v.emu.Harness().Count("POST /v1/servers"); n != 1 {
			t.Errorf("%d server creates, want 1", n)
		}
	}
}

func TestTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "GET /v1/servers", Latency: harness.Duration(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	cl := newTestClient(t, New(Options{BaseURL: v.url, HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}}), testToken)
	_, err := cl.ListServers(v.ctx, sel("m"))
	asRetryable(t, err)

	// A caller that gives up gets its own error back, not a retry hint.
	ctx, cancel := context.WithCancel(v.ctx)
	cancel()
	_, err = cl.ListServers(ctx, sel("m"))
	if !errors.Is(err, context.Canceled) || errors.As(err, new(*cloud.RetryableError)) {
		t.Errorf("cancelled call: %v, want context.Canceled and not retryable", err)
	}
}

func TestRefusedToken(t *testing.T) {
	t.Parallel()
	const (
		good           = "good-token-0123456789"
		readOnly       = "read-only-token-0123456789"
		badDefault     = "canary-default-token-0123456789"
		badFromSpec    = "canary-secret-token-0123456789"
		canaryUserData = "canary-user-data-0123456789"
	)
	v := newEnvToken(t, emucs.Config{Tokens: map[string]emucs.Access{good: emucs.ReadWrite, readOnly: emucs.ReadOnly}}, good)
	spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.TokenSecret = &corev1.LocalObjectReference{Name: "cloudscale-token"}
	})

	c := New(Options{BaseURL: v.url, DefaultToken: badDefault})
	def, err := c.NewClient(*c.DefaultCredentials(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = def.ListServers(v.ctx, sel("m"))
	checkAuthError(t, err, "default token")
	mustNotContain(t, err, badDefault)

	fromSpec, _ := c.NewClient(cloud.Credentials{Values: map[string]string{TokenKey: badFromSpec}, Source: `secret ns/cloudscale-token (keys "token")`}, nil)
	_, err = fromSpec.ListServers(v.ctx, sel("m"))
	checkAuthError(t, err, "cloudscale-token")
	_, _, err = fromSpec.CreateServer(v.ctx, ref("m"), spec, []byte(canaryUserData))
	checkAuthError(t, err, "cloudscale-token")
	mustNotContain(t, err, badFromSpec, canaryUserData)
	_, err = fromSpec.SyncServer(v.ctx, ref("m"), spec, &cloud.Server{ID: "00000000-0000-4000-8000-000000000000"})
	checkAuthError(t, err, "cloudscale-token")

	// A read-only token is accepted: it may read, and a write is refused
	// for want of the scope, not for the token.
	ro, _ := c.NewClient(cloud.Credentials{Values: map[string]string{TokenKey: readOnly}, Source: "a read-only secret"}, nil)
	if _, err := ro.ListServers(v.ctx, sel("m")); err != nil {
		t.Fatalf("a read with a read-only token: %v", err)
	}
	_, _, err = ro.CreateServer(v.ctx, ref("m"), spec, nil)
	var perm *cloud.PermissionError
	if !errors.As(err, &perm) || errors.As(err, new(*cloud.AuthError)) || perm.Permission != TokenScope || !cloud.NotPerformed(err) {
		t.Errorf("a write with a read-only token: %v (%T), want a PermissionError for %q", err, err, TokenScope)
	}
	if !strings.Contains(err.Error(), "read-only secret") || !strings.Contains(err.Error(), "read/write") {
		t.Errorf("%q does not say where the token came from and what it lacks", err)
	}
	mustNotContain(t, err, readOnly)
}

func checkAuthError(t *testing.T, err error, mention string) {
	t.Helper()
	if err == nil {
		t.Fatal("a refused token gave no error")
	}
	var auth *cloud.AuthError
	if !errors.As(err, &auth) || errors.As(err, new(*cloud.InvalidConfigError)) || errors.As(err, new(*cloud.RetryableError)) || cloud.IsNotFound(err) {
		t.Errorf("refused token: %v (%T), want an AuthError and nothing else", err, err)
	}
	if !cloud.NotPerformed(err) {
		t.Errorf("a refused token is not marked as having done nothing")
	}
	if !strings.Contains(err.Error(), mention) {
		t.Errorf("refused token: %q does not mention %s", err, mention)
	}
}

// The canaries must not leak through any error of a create, whatever the
// API answers.
func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	const (
		token    = "canary-token-5f0c2d1e"
		userData = "canary-user-data-9b7a"
	)
	v := newEnvToken(t, emucs.Config{}, token)
	spec := v.spec(nil)
	bad := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Flavor = "nope" })
	try := func(what string, spec *Spec) {
		_, _, err := v.client.CreateServer(v.ctx, ref("m"), spec, []byte(userData))
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		mustNotContain(t, err, token, userData)
	}
	try("invalid flavor", bad)
	for _, rule := range []harness.Rule{
		{Route: "POST /v1/servers", ErrorRate: 1, ErrorStatus: 503, Times: 1},
		{Route: "POST /v1/servers", ErrorRate: 1, ErrorStatus: 429, Times: 1},
		{Route: "POST /v1/servers", LostResponseRate: 1, Times: 1},
		{Route: "POST /v1/servers", LostResponseRate: 1, LostResponseStatus: 500, Times: 1},
	} {
		if err := v.emu.Harness().SetRules([]harness.Rule{rule}); err != nil {
			t.Fatal(err)
		}
		try(rule.Route, spec)
	}

	// A 401 with the canary token.
	strict, err := emucs.New(emucs.Config{Tokens: map[string]emucs.Access{"other-token": emucs.ReadWrite}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(strict)
	defer srv.Close()
	c := New(Options{BaseURL: srv.URL, DefaultToken: token})
	cl, _ := c.NewClient(*c.DefaultCredentials(), nil)
	_, _, err = cl.CreateServer(v.ctx, ref("m"), spec, []byte(userData))
	checkAuthError(t, err, "default token")
	mustNotContain(t, err, token, userData)
}

// An API echoing the secrets back is scrubbed.
func TestEchoedSecretsAreScrubbed(t *testing.T) {
	t.Parallel()
	const token, userData = "canary-token-echoed-1", "canary-user-data-echoed-1"
	for _, status := range []int{400, 401, 404, 500} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"user_data": "bad: ` + userData + `", "detail": "token ` + token + ` is wrong"}`))
		}))
		cl := newTestClient(t, New(Options{BaseURL: srv.URL}), token)
		_, _, err := cl.CreateServer(context.Background(), ref("m"), parseSpec(t, nil), []byte(userData))
		srv.Close()
		if err == nil {
			t.Fatalf("HTTP %d: no error", status)
		}
		mustNotContain(t, err, token, userData)
		if !strings.Contains(err.Error(), "[redacted]") && status != 401 {
			t.Errorf("HTTP %d: %q does not show the redaction", status, err)
		}
	}
}

// Answers the SDK cannot decode still classify by their status.
func TestUndecodableErrorBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		check      func(t *testing.T, err error)
	}{
		{"HTML 502", "<html><body>Bad Gateway</body></html>", 502, func(t *testing.T, err error) {
			asRetryable(t, err)
			if !strings.Contains(err.Error(), "502") {
				t.Errorf("%q does not name the status", err)
			}
		}},
		{"nested 400", `{"interfaces": [{"addresses": ["Address 172.16.0.5 is taken."]}]}`, 400, func(t *testing.T, err error) {
			ic := asInvalid(t, err)
			if ic.Field != "interfaces" || !strings.Contains(ic.Message, "172.16.0.5 is taken") {
				t.Errorf("%+v", ic)
			}
		}},
		{"list 400", `{"flavor": ["Flavor is gone."]}`, 400, func(t *testing.T, err error) {
			if ic := asInvalid(t, err); ic.Field != "flavor" || ic.Message != "Flavor is gone." {
				t.Errorf("%+v", ic)
			}
		}},
		{"several fields", `{"flavor": "bad flavor", "volume_size_gb": "too small"}`, 400, func(t *testing.T, err error) {
			ic := asInvalid(t, err)
			if ic.Field != "" || !strings.Contains(ic.Message, "flavor: bad flavor") || !strings.Contains(ic.Message, "rootVolumeSizeGB: too small") {
				t.Errorf("%+v", ic)
			}
		}},
		{"name", `{"name": "Not a valid hostname."}`, 400, func(t *testing.T, err error) {
			ic := asInvalid(t, err)
			if ic.Field != "" || !strings.Contains(ic.Message, "Machine's name") {
				t.Errorf("%+v", ic)
			}
		}},
		{"422", `{"ssh_keys": "Not a key."}`, 422, func(t *testing.T, err error) {
			if ic := asInvalid(t, err); ic.Field != "sshKeys" {
				t.Errorf("%+v", ic)
			}
		}},
		{"empty 404", ``, 404, func(t *testing.T, err error) {
			if !cloud.IsNotFound(err) {
				t.Errorf("%v", err)
			}
		}},
		{"418", `{"detail": "I'm a teapot"}`, 418, func(t *testing.T, err error) {
			if errors.As(err, new(*cloud.RetryableError)) || errors.As(err, new(*cloud.InvalidConfigError)) {
				t.Errorf("%v (%T)", err, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Lists answer as an empty account would, with the flavor of
			// the spec; only the create fails.
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/flavors":
					_, _ = w.Write([]byte(`[{"slug": "flex-4-1", "vcpu_count": 1, "memory_gb": 4, "zones": []}]`))
				case r.Method == http.MethodGet:
					_, _ = w.Write([]byte(`[]`))
				default:
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
				}
			}))
			defer srv.Close()
			cl := newTestClient(t, New(Options{BaseURL: srv.URL}), "x")
			_, _, err := cl.CreateServer(context.Background(), ref("m"), parseSpec(t, nil), nil)
			tc.check(t, err)
		})
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(90 * time.Second).UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", at.Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	cl := newTestClient(t, New(Options{BaseURL: srv.URL}), "x")
	_, err := cl.ListServers(context.Background(), sel(""))
	re := asRetryable(t, err)
	if re.RetryAfter < 85*time.Second || re.RetryAfter > 90*time.Second {
		t.Errorf("RetryAfter %v, want about 90s", re.RetryAfter)
	}
}

func TestSpecFieldOfVolumeTags(t *testing.T) {
	t.Parallel()
	if f := specField("volume.update", "tags"); f != "rootVolumeTags" {
		t.Errorf("tags of a volume map to %q", f)
	}
	if f := specField("server.update", "tags"); f != "tags" {
		t.Errorf("tags of a server map to %q", f)
	}
	if f := specField("server.create", "user_data"); f != "userDataSecret" {
		t.Errorf("the user data maps to %q", f)
	}
	if f := specField("server.create", "volumes"); f != "volumes" {
		t.Errorf("unknown fields map to %q", f)
	}
}

// The API's words for a token it does not know ("Invalid token.") refuse
// the token whatever status carries them (a proxy in between may change
// it): an AuthError, never a spec error that would fail the Machine for
// good, nor a refused permission.
func TestRefusedTokenWhateverTheStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"detail": "Invalid token."}`))
		}))
		c := New(Options{BaseURL: srv.URL + "/", DefaultToken: "canary-unknown-token-4471"})
		cl, err := c.NewClient(*c.DefaultCredentials(), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.ListServers(context.Background(), sel("m"))
		srv.Close()
		if !errors.As(err, new(*cloud.AuthError)) || errors.As(err, new(*cloud.PermissionError)) {
			t.Errorf("HTTP %d Invalid token.: %v (%T), want an AuthError", status, err, err)
		}
		mustNotContain(t, err, "canary-unknown-token-4471")
	}
}
