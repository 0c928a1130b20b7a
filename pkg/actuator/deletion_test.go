package actuator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/test/fixture"
)

func deleteMachine(t *testing.T, e *fixture.Env, name string) {
	t.Helper()
	if err := e.Client.Delete(context.Background(), getMachine(t, e, name)); err != nil {
		t.Fatal(err)
	}
}

func waitGone(t *testing.T, e *fixture.Env, name string, timeout time.Duration) {
	t.Helper()
	fixture.Eventually(t, timeout, "Machine "+name+" gone", func() (bool, error) {
		err := e.Client.Get(context.Background(), objKey(name), &machinev1.Machine{})
		return apierrors.IsNotFound(err), err
	})
}

// A Machine for which no server was ever created goes at once, whatever
// state its secrets are in, and without a cloud call.
func TestMachineWithoutServerDeletesAtOnce(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "never-made", spec(func(s map[string]any) { s["tokenSecret"] = map[string]string{"name": "no-such-secret"} }))
	createMachine(t, e, "bad-spec", spec(func(s map[string]any) { s["flavor"] = "flex-999-1" }))
	fixture.Eventually(t, 30*time.Second, "a SecretNotFound event", func() (bool, error) {
		return strings.Contains(fixture.EventText(e.Events(t, "never-made")), "SecretNotFound"), nil
	})
	waitPhase(t, e, "bad-spec", machinev1.PhaseFailed)
	before := e.Emulator.Harness().Total()
	deleteMachine(t, e, "never-made")
	deleteMachine(t, e, "bad-spec")
	waitGone(t, e, "never-made", 20*time.Second)
	waitGone(t, e, "bad-spec", 20*time.Second)
	if n := e.Emulator.Harness().Total() - before; n != 0 {
		t.Errorf("deleting Machines that never had a server made %d cloud calls (%v)", n, e.Emulator.Harness().Requests())
	}
}

// A Machine that has a server, whose credentials are unusable now, keeps
// its finalizer and says which secret to fix; a person can let it go with
// the abandon annotation, and its server is then recorded as an orphan.
func TestDeletionBlockedOnCredentialsUntilAPersonDecides(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	server := serversOf(t, e, "worker-a")[0]

	// The token secret is replaced by something unusable.
	var s corev1.Secret
	if err := e.Client.Get(context.Background(), objKey("cloudscale-token"), &s); err != nil {
		t.Fatal(err)
	}
	s.Data["token"] = []byte(canaryToken + "\n")
	if err := e.Client.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	deleteMachine(t, e, "worker-a")
	fixture.Eventually(t, 30*time.Second, "a DeleteBlocked event naming the secret, the key and the annotation", func() (bool, error) {
		text := fixture.EventText(e.Events(t, "worker-a"))
		ok := strings.Contains(text, "DeleteBlocked") && strings.Contains(text, fixture.Namespace+"/cloudscale-token") &&
			strings.Contains(text, `key "token"`) && strings.Contains(text, actuator.AbandonServerAnnotation)
		return ok, nil
	})
	m := getMachine(t, e, "worker-a")
	var st struct {
		Conditions []struct{ Type, Status, Message string } `json:"conditions"`
	}
	_ = json.Unmarshal(m.Status.ProviderStatus.Raw, &st)
	found := false
	for _, c := range st.Conditions {
		found = found || (c.Type == actuator.ConditionCredentials && c.Status == "False" && strings.Contains(c.Message, "cloudscale-token"))
	}
	if !found {
		t.Errorf("no %s=False condition naming the secret: %+v", actuator.ConditionCredentials, st.Conditions)
	}
	time.Sleep(2 * time.Second)
	if len(serversOf(t, e, "worker-a")) != 1 {
		t.Fatal("the server went although its credentials are unusable")
	}
	if err := e.Client.Get(context.Background(), objKey("worker-a"), m); err != nil {
		t.Fatalf("the Machine went without its server being deleted: %v", err)
	}

	// A person decides.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+actuator.AbandonServerAnnotation+`":"true"}}}`))
	if err := e.Client.Patch(context.Background(), m, patch); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "worker-a", 30*time.Second)
	if len(serversOf(t, e, "worker-a")) != 1 {
		t.Error("the abandoned server was deleted")
	}
	var cm corev1.ConfigMap
	if err := e.Client.Get(context.Background(), objKey(orphans.ConfigMapName("cloudscale")), &cm); err != nil {
		t.Fatalf("no orphan record: %v", err)
	}
	if entry := cm.Data[server.UUID]; !strings.Contains(entry, "worker-a") || !strings.Contains(entry, "cloudscale-token") {
		t.Errorf("orphan record %v lacks the server %s of worker-a and its credentials", cm.Data, server.UUID)
	}
	assertNoCanary(t, e)
}
