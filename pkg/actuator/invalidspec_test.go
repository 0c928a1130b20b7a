package actuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestSpecThatStopsValidatingLeavesTheServerAlone: a Running Machine whose
// spec no longer validates (a stricter check of a newer provider: here a
// malformed SSH key, which older versions took) stays Running; its server
// is still found by its tags, a condition and an event say what to fix, and
// nothing of the spec reaches the server (its tags stay as they were).
// Deleting the Machine still deletes its server.
func TestSpecThatStopsValidatingLeavesTheServerAlone(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	// The Node joins (no kubelet here: the nodelink controller's part).
	m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: "worker-a"}
	if err := e.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, e, "worker-a", machinev1.PhaseRunning)

	m = getMachine(t, e, "worker-a")
	m.Spec.ProviderSpec.Value.Raw = []byte(spec(func(s map[string]any) {
		s["tags"] = map[string]string{"team": "storage"}
		s["sshKeys"] = []string{"ssh-ed25519 AAAA admin@example"}
	}))
	if err := e.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Emulator.Harness().ResetRequests()
	fixture.Eventually(t, 60*time.Second, "an InvalidSpec event and condition", func() (bool, error) {
		m := getMachine(t, e, "worker-a")
		var st struct{ Conditions []metav1.Condition }
		_ = json.Unmarshal(m.Status.ProviderStatus.Raw, &st)
		c := meta.FindStatusCondition(st.Conditions, actuator.ConditionSpecValid)
		return strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "InvalidSpec") &&
			c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "spec.providerSpec.value.sshKeys[0]"), fmt.Errorf("phase %q, conditions %v", phase(m), st.Conditions)
	})
	if p := phase(getMachine(t, e, "worker-a")); p != machinev1.PhaseRunning {
		t.Fatalf("worker-a is %q, want it still Running", p)
	}
	servers := serversOf(t, e, "worker-a")
	if len(servers) != 1 || servers[0].Tags["team"] != "platform" {
		t.Fatalf("servers %v: want the one server, its tags untouched", servers)
	}
	for route, n := range e.Emulator.Harness().Requests() {
		if !strings.HasPrefix(route, "GET ") {
			t.Errorf("%d writes %s to a server whose spec does not validate", n, route)
		}
	}

	if err := e.Client.Delete(ctx, getMachine(t, e, "worker-a")); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "worker-a gone", func() (bool, error) {
		err := e.Client.Get(ctx, types.NamespacedName{Namespace: fixture.Namespace, Name: "worker-a"}, &machinev1.Machine{})
		return apierrors.IsNotFound(err), nil
	})
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Errorf("%d servers left after the Machine went", n)
	}
}
