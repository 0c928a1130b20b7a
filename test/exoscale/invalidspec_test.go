package exoscale

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestSpecThatStopsValidatingLeavesTheInstanceAlone: a Running Machine
// whose spec no longer validates (a stricter check of a newer provider:
// here an apiVersion this one does not decode) stays Running; its instance
// is still found by its labels, a condition and an event say what to fix,
// and nothing of the spec reaches the instance (its labels stay). Deleting
// the Machine still deletes its instance.
func TestSpecThatStopsValidatingLeavesTheInstanceAlone(t *testing.T) {
	e := env(t, emu.Config{})
	ctx := context.Background()
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: "worker-a"}
	if err := e.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, e, "worker-a", machinev1.PhaseRunning)

	m = getMachine(t, e, "worker-a")
	m.Spec.ProviderSpec.Value.Raw = []byte(spec(func(s map[string]any) {
		s["labels"] = map[string]string{"team": "storage"}
		s["apiVersion"] = "machine.appuio.io/v1alpha1"
	}))
	if err := e.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	e.Harness().ResetRequests()
	fixture.Eventually(t, 60*time.Second, "an InvalidSpec event and condition", func() (bool, error) {
		m := getMachine(t, e, "worker-a")
		var st struct{ Conditions []metav1.Condition }
		_ = json.Unmarshal(m.Status.ProviderStatus.Raw, &st)
		c := meta.FindStatusCondition(st.Conditions, actuator.ConditionSpecValid)
		return strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "InvalidSpec") &&
			c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "spec.providerSpec.value.apiVersion"), fmt.Errorf("phase %q, conditions %v", phase(m), st.Conditions)
	})
	if p := phase(getMachine(t, e, "worker-a")); p != machinev1.PhaseRunning {
		t.Fatalf("worker-a is %q, want it still Running", p)
	}
	insts := instancesOf(e, "worker-a")
	if len(insts) != 1 || insts[0].Labels["team"] != "platform" {
		t.Fatalf("instances %v: want the one instance, its labels untouched", insts)
	}
	if n := writes(e); n != 0 {
		t.Errorf("%d writes to an instance whose spec does not validate: %v", n, e.Harness().Requests())
	}
	e.DeleteMachine(t, "worker-a")
	e.WaitMachineGone(t, "worker-a", 60*time.Second)
	if n := e.Exoscale.CountInstances(); n != 0 {
		t.Errorf("%d instances left after the Machine went", n)
	}
}
