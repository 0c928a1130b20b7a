package actuator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// rotatedToken is the only token the cloud accepts in the rotation test:
// the secrets start with tokens it has revoked.
const rotatedToken = "rotated-token-3d9a71"

// Replacing the default credentials secret, or a secret a Machine names,
// takes effect for the next call, in the same manager process: no restart.
// The manager reads its default credentials from the secret
// (--default-credentials-secret, which the deployer sets), not from
// environment variables that keep the value the pod started with.
func TestCredentialsRotateWithoutRestart(t *testing.T) {
	e := fixture.Start(t, fixture.Options{Emulator: emucs.Config{
		Tokens:    map[string]emucs.Access{rotatedToken: emucs.ReadWrite},
		StateFile: filepath.Join(t.TempDir(), "cloudscale.json"),
	}})
	secret(t, e, "cloudscale-token", map[string]string{"token": "revoked-default-token-0a1b"})
	secret(t, e, "named-token", map[string]string{"token": "revoked-named-token-2c3d"})
	secret(t, e, "worker-user-data", map[string]string{"userData": canaryUserData})
	e.StartManager(t, manager.Options{Cloud: cscloud.New(cscloud.Options{
		BaseURL:       e.APIURL,
		DefaultSecret: types.NamespacedName{Namespace: fixture.Namespace, Name: "cloudscale-token"},
	})})
	noSecret := spec(func(s map[string]any) { delete(s, "tokenSecret") })
	named := spec(func(s map[string]any) { s["tokenSecret"] = map[string]string{"name": "named-token"} })
	createMachine(t, e, "worker-default", noSecret)
	createMachine(t, e, "worker-named", named)
	for machine, source := range map[string]string{"worker-default": "cloudscale-token", "worker-named": "named-token"} {
		fixture.Eventually(t, 30*time.Second, machine+": the cloud refuses the old token", func() (bool, error) {
			text := fixture.EventText(e.Events(t, machine))
			if !strings.Contains(text, "CredentialsRefused") || !strings.Contains(text, fixture.Namespace+"/"+source) {
				return false, fmt.Errorf("no CredentialsRefused event naming secret %s:\n%s", source, text)
			}
			return true, nil
		})
		// The machine-api-operator's own failure counter, as its
		// built-in providers fill it.
		if n := counter(t, "mapi_instance_create_failed", machine, "CredentialsRefused"); n < 1 {
			t.Errorf("mapi_instance_create_failed{name=%s,reason=CredentialsRefused} = %v, want at least 1", machine, n)
		}
	}
	if n := len(e.Emulator.Servers()); n != 0 {
		t.Fatalf("%d servers made with revoked tokens", n)
	}

	// Rotated: the secrets now hold the token the cloud accepts.
	for _, name := range []string{"cloudscale-token", "named-token"} {
		s := &corev1.Secret{}
		if err := e.Client.Get(context.Background(), objKey(name), s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"token": []byte(rotatedToken)}
		if err := e.Client.Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	// A new Machine's first call already carries the new token; the
	// refused ones come back with their next reconcile, after the backoff
	// of refused credentials (30 s, doubling while the refusals go on; the
	// machine controller does not watch Secrets).
	start := time.Now()
	createMachine(t, e, "worker-new", noSecret)
	waitPhase(t, e, "worker-new", machinev1.PhaseProvisioned)
	t.Logf("a Machine created after the rotation: Provisioned in %s", time.Since(start).Round(100*time.Millisecond))
	for _, machine := range []string{"worker-default", "worker-named"} {
		fixture.Eventually(t, 3*time.Minute, machine+" Provisioned with the rotated token", func() (bool, error) {
			p := phase(getMachine(t, e, machine))
			return p == machinev1.PhaseProvisioned || p == machinev1.PhaseRunning, fmt.Errorf("phase %q", p)
		})
	}
	t.Logf("the refused Machines: Provisioned %s after the rotation", time.Since(start).Round(100*time.Millisecond))
	if n := len(e.Emulator.Servers()); n != 3 {
		t.Errorf("%d servers, want 3", n)
	}
	// neither the revoked tokens (quoted back by no event) nor the new one
	e.AssertNoCanary(t, rotatedToken, "revoked-default-token-0a1b", "revoked-named-token-2c3d", "canary-userdata-4e8a2f")
}
