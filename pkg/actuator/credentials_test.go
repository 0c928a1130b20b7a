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
	"sigs.k8s.io/controller-runtime/pkg/client"

	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// defaultToken is the manager's own token in the tests below; the emulator
// accepts it, so a fall-back to it would show as a server.
const defaultToken = "default-token-5a1c9e"

// A Machine that names a token secret acts with that secret's token or not
// at all: whatever is wrong with the secret, never with the manager's
// default token. The error says which secret and which key.
func TestNamedSecretNeverFallsBackToTheDefaultToken(t *testing.T) {
	e := fixture.Start(t, fixture.Options{Emulator: emucs.Config{
		Tokens:    map[string]emucs.Access{canaryToken: emucs.ReadWrite, defaultToken: emucs.ReadWrite},
		StateFile: filepath.Join(t.TempDir(), "cloudscale.json"),
	}})
	secret(t, e, "worker-user-data", map[string]string{"userData": canaryUserData})
	cases := map[string]struct {
		data map[string]string // nil: no secret at all
		want []string
	}{
		"missing":      {nil, []string{"does not exist"}},
		"no-key":       {map[string]string{"tok": canaryToken}, []string{`key "token"`, "no such key"}},
		"empty":        {map[string]string{"token": ""}, []string{`key "token"`, "empty"}},
		"blank":        {map[string]string{"token": "   "}, []string{`key "token"`, "blank"}},
		"newline":      {map[string]string{"token": canaryToken + "\n"}, []string{`key "token"`, "newline"}},
		"inner-space":  {map[string]string{"token": "canary token 123"}, []string{`key "token"`, "whitespace"}},
		"control-char": {map[string]string{"token": "canary\x00token-123"}, []string{`key "token"`, "control"}},
	}
	for name, c := range cases {
		if c.data != nil {
			secret(t, e, "token-"+name, c.data)
		}
	}
	e.StartManager(t, manager.Options{Cloud: e.Cloud(defaultToken)})
	for name := range cases {
		createMachine(t, e, "worker-"+name, spec(func(s map[string]any) {
			s["tokenSecret"] = map[string]string{"name": "token-" + name}
		}))
	}
	for name, c := range cases {
		machine := "worker-" + name
		fixture.Eventually(t, 30*time.Second, machine+": an event naming the secret and what is wrong with it", func() (bool, error) {
			text := fixture.EventText(e.Events(t, machine))
			for _, w := range append([]string{fixture.Namespace + "/token-" + name, "tokenSecret"}, c.want...) {
				if !strings.Contains(text, w) {
					return false, fmt.Errorf("events lack %q:\n%s", w, text)
				}
			}
			return true, nil
		})
		if p := phase(getMachine(t, e, machine)); p == machinev1.PhaseFailed {
			t.Errorf("%s: Failed; a secret can be fixed, the Machine should wait for it", machine)
		}
	}
	if n := e.Emulator.Harness().Total(); n != 0 {
		t.Fatalf("the cloud got %d requests (%v), want none: no Machine has usable credentials", n, e.Emulator.Harness().Requests())
	}

	// Fixed, the secret is used: its token, not the default one, made the
	// server (the emulator's state keeps no token, but the default would
	// have worked long ago).
	var s corev1.Secret
	if err := e.Client.Get(context.Background(), objKey("token-newline"), &s); err != nil {
		t.Fatal(err)
	}
	s.Data["token"] = []byte(canaryToken)
	if err := e.Client.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, e, "worker-newline", machinev1.PhaseProvisioned)
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d creates, want 1: only the fixed Machine", n)
	}
	assertNoCanary(t, e)
}

// A Machine that names no secret uses the default token.
func TestDefaultTokenWhenNoSecretIsNamed(t *testing.T) {
	e := fixture.Start(t, fixture.Options{Emulator: emucs.Config{Tokens: map[string]emucs.Access{defaultToken: emucs.ReadWrite}}})
	e.StartManager(t, manager.Options{Cloud: e.Cloud(defaultToken)})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) {
		delete(s, "tokenSecret")
		delete(s, "userDataSecret")
	}))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
}

func objKey(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: fixture.Namespace, Name: name}
}
