package exoscale

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

// TestBadSpecsAreRefusedWithoutWrites: what the catalogue can tell is
// wrong fails the create with the field, before any write.
func TestBadSpecsAreRefusedWithoutWrites(t *testing.T) {
	twice := imagefetch.FakeQCOW2(10<<30, "twice-2")
	x := newEnv(t, emu.Config{
		Accounts:    []emu.Account{{Name: "test", Key: testKey, Secret: testSecret, Quotas: map[string]int64{"gpu": 0}}},
		ImageClient: &http.Client{Transport: imagefetch.Mirror{"https://templates.example/twice-2.qcow2": twice}},
		Templates: []emu.TemplateSeed{
			{Name: "rhcos-4.19", SizeGiB: 16}, {Name: "twice", Zones: []string{"ch-gva-2"}},
		},
	})
	// A second template of the same name, registered as a user would.
	x.wait(x.raw.RegisterTemplate(x.ctx, v3.RegisterTemplateRequest{
		Name: "twice", URL: "https://templates.example/twice-2.qcow2", Checksum: fmt.Sprintf("%x", md5.Sum(twice)),
		PasswordEnabled: v3.Bool(false), SSHKeyEnabled: v3.Bool(true),
	}))
	for name, c := range map[string]struct {
		extra map[string]any
		field string
		msg   string
	}{
		"unknown template":   {map[string]any{"template": map[string]string{"name": "rhcos-9"}}, "template", `no private template named "rhcos-9" exists in zone ch-gva-2`},
		"ambiguous template": {map[string]any{"template": map[string]string{"name": "twice"}}, "template", `2 private templates are named "twice"`},
		"public template":    {map[string]any{"template": map[string]string{"name": "rhcos-4.19", "visibility": "public"}}, "template", "no public template"},
		"template id":        {map[string]any{"template": map[string]string{"id": "6a1b4f6e-0000-4000-8000-000000000000"}}, "template", "no template 6a1b4f6e"},
		"unknown type":       {map[string]any{"instanceType": "standard.gigantic"}, "instanceType", `instance type "standard.gigantic" does not exist`},
		"type not in zone":   {map[string]any{"instanceType": "gpu2.small", "zone": "de-fra-1"}, "instanceType", "not available in zone de-fra-1"},
		"gpu unauthorized":   {map[string]any{"instanceType": "gpu3.small", "zone": "de-fra-1"}, "instanceType", "requires an authorization"},
		"unknown zone":       {map[string]any{"zone": "ch-zrh-1"}, "zone", `zone "ch-zrh-1" does not exist`},
		"security group":     {map[string]any{"securityGroups": []any{map[string]string{"name": "nope"}}}, "securityGroups[0]", `no security group "nope"`},
		"network":            {map[string]any{"privateNetworks": []any{map[string]string{"name": "nope"}}}, "privateNetworks[0]", `no private network "nope" exists in zone ch-gva-2`},
		"ssh key":            {map[string]any{"sshKeys": []string{"nope"}}, "sshKeys[0]", `no SSH key "nope"`},
		"deploy target":      {map[string]any{"deployTarget": map[string]string{"name": "nope"}}, "deployTarget", `no deploy target "nope"`},
		"aa group":           {map[string]any{"antiAffinityGroups": []any{map[string]string{"name": "nope"}}}, "antiAffinityGroups[0]", `no anti-affinity group "nope"`},
	} {
		t.Run(name, func(t *testing.T) {
			before := x.writes()
			spec := x.spec(specJSON(c.extra))
			if err := x.c.CheckSpec(x.ctx, spec); !isInvalid(err, c.field, c.msg) {
				t.Errorf("CheckSpec: %v", err)
			}
			_, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, nil)
			if !isInvalid(err, c.field, c.msg) {
				t.Errorf("CreateServer: %v, want field %s and %q", err, c.field, c.msg)
			}
			if n := x.writes() - before; n != 0 {
				t.Errorf("%d writes", n)
			}
		})
	}
	if n := x.emu.CountInstances(); n != 0 {
		t.Errorf("%d instances", n)
	}
}

func isInvalid(err error, field, msg string) bool {
	var inv *cloud.InvalidConfigError
	return errors.As(err, &inv) && inv.Field == field && strings.Contains(inv.Message, msg)
}

// TestErrorClasses: the API's answers become the shared classes, with the
// server's message (which v3.APIError's Error() drops).
func TestErrorClasses(t *testing.T) {
	t.Run("refused by the API", func(t *testing.T) {
		x := newEnv(t, emu.Config{})
		zc, _ := x.c.zoneClient(x.ctx, "ch-gva-2")
		err := x.c.call(x.ctx, "instance.create", func(ctx context.Context) error {
			_, err := zc.CreateInstance(ctx, v3.CreateInstanceRequest{DiskSize: 5, InstanceType: &v3.InstanceType{ID: "x"}, Template: &v3.Template{ID: "y"}})
			return err
		})
		if !isInvalid(err, "diskSize", "Invalid value in disk-size") {
			t.Errorf("%v", err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		x := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: "GET /v2/instance", ErrorRate: 1, ErrorStatus: 503}}})
		_, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
		var re *cloud.RetryableError
		if !errors.As(err, &re) || re.NotPerformed {
			t.Errorf("%v", err)
		}
		// The shared layer retries a read (cloud.Call); the SDK itself
		// must not add retries of its own. (A cluster's first list asks
		// every zone.)
		if n, want := x.emu.Harness().Count("GET /v2/instance"), int64(cloud.ReadAttempts*len(emu.Zones)); n != want {
			t.Errorf("%d calls, want %d: the SDK retried by itself", n, want)
		}
	})
	t.Run("rate limited", func(t *testing.T) {
		x := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: createRoute, ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 7}}})
		_, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(nil)), nil)
		var re *cloud.RetryableError
		if !errors.As(err, &re) || !re.NotPerformed || re.RetryAfter < 6*time.Second {
			t.Fatalf("%v", err)
		}
		if until := x.gate.ClosedUntil(); time.Until(until) < 5*time.Second {
			t.Errorf("the gate is open: %v", until)
		}
	})
	t.Run("refused credentials", func(t *testing.T) {
		x := newEnv(t, emu.Config{})
		bad := New(Options{APIEndpoint: x.url + "v2", DefaultAPIKey: testKey, DefaultAPISecret: "wrong-secret-0123456789"})
		cl, err := bad.NewClient(*bad.DefaultCredentials(), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID})
		var auth *cloud.AuthError
		// The emulator, as the real API, answers a bad signature with 403.
		if !errors.As(err, &auth) || (auth.Status != 401 && auth.Status != 403) {
			t.Fatalf("%v", err)
		}
		if strings.Contains(err.Error(), "wrong-secret") {
			t.Errorf("the secret is in the error: %v", err)
		}
	})
	t.Run("operation the role lacks", func(t *testing.T) {
		policy, err := emu.ParsePolicy([]byte(`{"default-service-strategy": "deny", "services": {"compute": {"type": "rules", "rules": [
			{"action": "deny", "expression": "operation == 'create-instance'"}, {"action": "allow", "expression": "true"}]}}}`))
		if err != nil {
			t.Fatal(err)
		}
		x := newEnv(t, emu.Config{Accounts: []emu.Account{{Name: "test", Key: testKey, Secret: testSecret, Policy: policy}}})
		_, _, err = x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(nil)), nil)
		var perm *cloud.PermissionError
		if !errors.As(err, &perm) || errors.As(err, new(*cloud.AuthError)) || perm.Permission != "create-instance" || !cloud.NotPerformed(err) {
			t.Fatalf("a create the role denies: %v (%T), want a PermissionError naming create-instance", err, err)
		}
		if !strings.Contains(err.Error(), `IAM operation "create-instance"`) || !strings.Contains(err.Error(), "Forbidden by role policy") {
			t.Errorf("%q does not name the operation to grant", err)
		}
		// The account goes on; the refused operation is held back.
		if !x.gate.ClosedUntil().IsZero() || x.gate.OpHeldUntilIn("instance.create", "ch-gva-2").IsZero() {
			t.Errorf("gate closed until %v, create held until %v: want only the create held (in its zone)", x.gate.ClosedUntil(), x.gate.OpHeldUntilIn("instance.create", "ch-gva-2"))
		}
		if _, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID}); err != nil {
			t.Errorf("a list after the refused create: %v", err)
		}
	})
	t.Run("quota", func(t *testing.T) {
		x := newEnv(t, emu.Config{Accounts: []emu.Account{{Name: "test", Key: testKey, Secret: testSecret, Quotas: map[string]int64{"instance": 1}}}})
		spec := x.spec(specJSON(nil))
		if _, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), spec, nil); err != nil {
			t.Fatal(err)
		}
		_, _, err := x.c.CreateServer(x.ctx, ref("worker-b"), spec, nil)
		var inv *cloud.InvalidConfigError
		if !errors.As(err, &inv) || !strings.Contains(inv.Message, "Quota exceeded") || !cloud.NotPerformed(err) {
			t.Errorf("%v", err)
		}
	})
}

// TestSecretsAreScrubbed: an API message that echoes the API secret or the
// user data does not carry them into the error.
func TestSecretsAreScrubbed(t *testing.T) {
	x := newEnv(t, emu.Config{})
	userData := "ud-canary-Pq7Wm2Zx9L"
	ex := &cloud.Exchange{}
	ctx := cloud.WithExchange(cloud.WithRedaction(x.ctx, userData), ex)
	_ = ctx
	msg := x.c.scrub("refused "+testSecret+" and "+userData+" and "+testKey, []string{userData})
	for _, s := range []string{testSecret, userData, testKey} {
		if strings.Contains(msg, s) {
			t.Errorf("%q left in %q", s, msg)
		}
	}
}
