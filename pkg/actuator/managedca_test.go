package actuator_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// pointer is the machine-config-operator's pointer Ignition of the worker
// pool with ca as its one CA (ctrlcommon.PointerConfig).
func pointer(ca string) string {
	return `{"ignition":{"config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]},` +
		`"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,` +
		base64.StdEncoding.EncodeToString([]byte(ca)) + `"}]}},"version":"3.2.0"}}`
}

// rotate writes the managed Secret as the machine-config-operator does
// after a CA rotation (pkg/operator/sync.go: the pool's pointer Ignition,
// labelled, key disableTemplating too).
func rotate(t *testing.T, e *fixture.Env, ca string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker-user-data-managed", Namespace: fixture.Namespace}}
	_, err := controllerutilCreateOrUpdate(e.Client, s, func() {
		s.Labels = map[string]string{actuator.ManagedUserDataLabel: ""}
		s.Data = map[string][]byte{"userData": []byte(pointer(ca)), "disableTemplating": []byte("true\n")}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func controllerutilCreateOrUpdate(c client.Client, s *corev1.Secret, mutate func()) (bool, error) {
	ctx := context.Background()
	err := c.Get(ctx, client.ObjectKeyFromObject(s), s)
	mutate()
	if err == nil {
		return false, c.Update(ctx, s)
	}
	return true, c.Create(ctx, s)
}

// caOf decodes the one CA of a server's Ignition.
func caOf(t *testing.T, userData string) string {
	t.Helper()
	const prefix = `"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,`
	i := strings.Index(userData, prefix)
	if i < 0 {
		t.Fatalf("no CA in the user data %s", userData)
	}
	rest := userData[i+len(prefix):]
	b, err := base64.StdEncoding.DecodeString(rest[:strings.IndexByte(rest, '"')])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUserDataFollowsTheManagedCA: whatever the user data secret holds (an
// Ignition the machine-config-operator would rotate, or a Jsonnet template
// with a CA copy it cannot parse), a new server gets the CA of the pool's
// managed Secret, and after the operator rotates it, the next server gets
// the new one. A template sees the secrets its userDataSecretSelector picks
// (appuio's spec field), and a selector picking credentials fails the
// Machine, naming the field and the secret, before anything is made.
func TestUserDataFollowsTheManagedCA(t *testing.T) {
	e := env(t)
	secret(t, e, "static-ignition", map[string]string{"userData": pointer("CA-AT-INSTALL")})
	secret(t, e, "static-template", map[string]string{"baseIgnition": pointer("CA-AT-INSTALL"),
		"userData": `local ctx = std.extVar('context'); std.parseJson(ctx.data.baseIgnition) + { storage: { files: [{ path: '/etc/hostname', contents: { source: 'data:,' + ctx.machine.metadata.name } }] } }`})
	// appuio's v0.4.0 way: the template takes the CA from the managed
	// Secret that its selector picks (here by the operator's label).
	secret(t, e, "selecting-template", map[string]string{"userData": `local ctx = std.extVar('context');
local m = std.filter(function(s) s.metadata.name == 'worker-user-data-managed', ctx.secrets);
local ign = std.parseJson(std.decodeUTF8(std.base64DecodeBytes(m[0].data.userData)));
{ ignition: { version: '3.1.0', config: ign.ignition.config, security: ign.ignition.security }, seen: std.length(ctx.secrets) }`})
	e.StartManager(t, manager.Options{})

	const label = `{"matchLabels":{"` + actuator.ManagedUserDataLabel + `":""}}`
	machines := map[string]string{
		"static-ignition":    spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": "static-ignition"} }),
		"static-template":    spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": "static-template"} }),
		"selecting-template": strings.Replace(spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": "selecting-template"} }), "{", `{"userDataSecretSelector":`+label+`,`, 1),
	}
	for round, ca := range []string{"CA-1", "CA-2-ROTATED"} {
		rotate(t, e, ca)
		for name, specJSON := range machines {
			m := name + []string{"-a", "-b"}[round]
			createMachine(t, e, m, specJSON)
			waitPhase(t, e, m, machinev1.PhaseProvisioned)
			servers := serversOf(t, e, m)
			if len(servers) != 1 {
				t.Fatalf("%s: %d servers", m, len(servers))
			}
			ud := userDataOf(t, e, servers[0].UUID)
			if got := caOf(t, ud); got != ca {
				t.Errorf("%s: the server's CA is %q, want the managed Secret's %q", m, got, ca)
			}
			if name == "static-template" && !strings.Contains(ud, "data:,"+m) {
				t.Errorf("%s: the template's hostname is gone: %s", m, ud)
			}
			if name == "selecting-template" && !strings.Contains(ud, `"seen":1`) {
				t.Errorf("%s: the template saw other than the one managed Secret: %s", m, ud)
			}
			if name == "static-ignition" {
				// Events are recorded asynchronously: awaited.
				fixture.Eventually(t, 30*time.Second, m+"'s UserDataCAUpdated event", func() (bool, error) {
					return strings.Contains(fixture.EventText(e.Events(t, m)), "UserDataCAUpdated"), nil
				})
			}
		}
	}

	// An empty selector picks every secret of the namespace, the token
	// among them: refused.
	before := e.Emulator.Harness().Count(createPOST)
	createMachine(t, e, "greedy", strings.Replace(spec(nil), "{", `{"userDataSecretSelector":{},`, 1))
	m := waitPhase(t, e, "greedy", machinev1.PhaseFailed)
	if msg := *m.Status.ErrorMessage; !strings.Contains(msg, "userDataSecretSelector") || !strings.Contains(msg, "cloudscale-token") {
		t.Errorf("error message %q does not name the selector and the credentials secret", msg)
	}
	if n := e.Emulator.Harness().Count(createPOST) - before; n != 0 {
		t.Errorf("%d creates for a Machine whose selector picks credentials", n)
	}
	assertNoCanary(t, e)
}
