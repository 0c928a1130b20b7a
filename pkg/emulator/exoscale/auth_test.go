package exoscale_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

var twoAccounts = []emu.Account{
	{Name: "alice", Key: "EXOaaaaaaaaaaaaaaaaaaaaaaaa", Secret: "alice-secret"},
	{Name: "bob", Key: "EXObbbbbbbbbbbbbbbbbbbbbbbb", Secret: "bob-secret"},
}

func wantMessage(t *testing.T, body []byte, want string) {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil || len(m) != 1 {
		t.Fatalf("body %s is not {\"message\": ...}", body)
	}
	if !strings.Contains(m["message"], want) {
		t.Fatalf("message %q, want one containing %q", m["message"], want)
	}
}

// The zone list is the one call the SDK does not sign, and needs not.
func TestZoneListNeedsNoSignature(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	resp, body := v.raw("GET", "/v2/zone", nil, false)
	wantStatus(t, resp, body, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestUnsignedOrBadlySignedRequestsAreRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	sign := func(req *http.Request, key, secret string, expires time.Time) {
		if err := emu.SignRequest(req, key, secret, expires); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name    string
		prepare func(*http.Request)
		want    string
	}{
		{"no header", func(*http.Request) {}, "Missing Authorization header"},
		{"another scheme", func(r *http.Request) { r.Header.Set("Authorization", "Bearer abc") }, "Malformed Authorization header"},
		{"no expiry", func(r *http.Request) {
			r.Header.Set("Authorization", "EXO2-HMAC-SHA256 credential="+emu.DefaultAPIKey+",signature=abc")
		}, "Malformed Authorization header"},
		{"unknown key", func(r *http.Request) { sign(r, "EXO000000000000000000000000", emu.DefaultAPISecret, later) }, "Invalid API key"},
		{"wrong secret", func(r *http.Request) { sign(r, emu.DefaultAPIKey, "not-the-secret", later) }, "Invalid request signature"},
		{"expired", func(r *http.Request) { sign(r, emu.DefaultAPIKey, emu.DefaultAPISecret, time.Now().Add(-time.Second)) }, "Request has expired"},
		{"query changed after signing", func(r *http.Request) {
			sign(r, emu.DefaultAPIKey, emu.DefaultAPISecret, later)
			r.URL.RawQuery = "labels=a%3Db"
		}, "Invalid request signature"},
	} {
		req, err := http.NewRequest("GET", v.srv.URL+"/v2/instance", nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.prepare(req)
		resp, body := v.do(req)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: status %d, want 403; body %s", tc.name, resp.StatusCode, body)
		}
		wantMessage(t, body, tc.want)
	}

	// A body changed after signing.
	req, err := http.NewRequest("POST", v.srv.URL+"/v2/ssh-key", strings.NewReader(`{"name":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	sign(req, emu.DefaultAPIKey, emu.DefaultAPISecret, later)
	req.Body, req.ContentLength = http.NoBody, 0
	resp, body := v.do(req)
	wantStatus(t, resp, body, http.StatusForbidden)
	wantMessage(t, body, "Invalid request signature")
	if n := v.emu.Harness().Count("GET /v2/instance"); n != 7 {
		t.Fatalf("refused requests counted %d times, want 7", n)
	}

	// The SDK with a wrong secret gets ErrForbidden and the message.
	msg := apiError(t, func() error {
		_, err := v.sdk(emu.DefaultAPIKey, "wrong", "").ListInstances(v.ctx)
		return err
	}(), v3.ErrForbidden)
	wantContains(t, msg, "Invalid request signature")
	if secret := emu.DefaultAPISecret; strings.Contains(msg, secret) {
		t.Fatal("the answer names the secret")
	}
}

func TestAccountsAreSeparate(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Accounts: twoAccounts})
	alice := v.sdk(twoAccounts[0].Key, twoAccounts[0].Secret, "")
	bob := v.sdk(twoAccounts[1].Key, twoAccounts[1].Secret, "")

	_, id := v.create(alice, instanceReq("alices"))
	if _, err := bob.GetInstance(v.ctx, id); err == nil {
		t.Fatal("bob sees alice's instance")
	}
	l, err := bob.ListInstances(v.ctx)
	if err != nil || len(l.Instances) != 0 {
		t.Fatalf("bob lists %v (%v), want nothing", l, err)
	}
	_, err = bob.DeleteInstance(v.ctx, id)
	apiError(t, err, v3.ErrNotFound)

	// Each has its own default security group and private templates.
	for _, c := range []*v3.Client{alice, bob} {
		sgs, err := c.ListSecurityGroups(v.ctx)
		if err != nil || len(sgs.SecurityGroups) != 1 || sgs.SecurityGroups[0].Name != "default" {
			t.Fatalf("security groups %+v (%v), want the account's default", sgs, err)
		}
	}
	if a, b := v.emu.TemplateID("alice", "ch-gva-2", "rhcos-4.19"), v.emu.TemplateID("bob", "ch-gva-2", "rhcos-4.19"); a == "" || b != "" {
		t.Fatalf("rhcos template: alice %q, bob %q; the seed goes to the first account only", a, b)
	}
	// The default account does not exist when accounts are configured.
	_, err = v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "").ListInstances(v.ctx)
	apiError(t, err, v3.ErrForbidden)

	infos := v.emu.Instances()
	if len(infos) != 1 || infos[0].Account != "alice" {
		t.Fatalf("Instances() = %+v, want alice's one", infos)
	}
}

func TestConfigRefusesBadAccounts(t *testing.T) {
	t.Parallel()
	for _, accts := range [][]emu.Account{
		{{Name: "a", Key: "k"}},
		{{Name: "a", Key: "k", Secret: "s"}, {Name: "b", Key: "k", Secret: "t"}},
		{{Name: "a", Key: "k", Secret: "s"}, {Name: "a", Key: "l", Secret: "t"}},
		{{Name: "a", Key: "k", Secret: "s", DeployTargets: []emu.DeployTargetSeed{{Zone: "xx-nowhere-1", Name: "d"}}}},
		{{Name: "a", Key: "k", Secret: "s", DeployTargets: []emu.DeployTargetSeed{{Zone: "ch-gva-2", Name: "d", Type: "shared"}}}},
	} {
		if _, err := emu.New(emu.Config{Accounts: accts}); err == nil {
			t.Errorf("New accepted accounts %+v", accts)
		}
	}
	if _, err := emu.New(emu.Config{Templates: []emu.TemplateSeed{{Name: "x", Account: "nobody"}}}); err == nil {
		t.Error("New accepted a template seed of an unknown account")
	}
	if _, err := emu.New(emu.Config{Templates: []emu.TemplateSeed{{Name: "x", Zones: []string{"mars-1"}}}}); err == nil {
		t.Error("New accepted a template seed in an unknown zone")
	}
}
