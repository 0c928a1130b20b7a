package actuator_test

import (
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A create that fails after its intent was written but before the server
// create was sent (here: its anti-affinity group's create gets a 503) sent
// nothing that could still make a server: the next attempt creates at
// once, not a grace period later.
func TestCreateFailingBeforeItsSendIsNotHeld(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: "POST /v1/server-groups", ErrorRate: 1, ErrorStatus: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{Actuator: actuator.Options{CreateGrace: 10 * time.Minute}})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) { s["antiAffinityKey"] = "workers" }))
	fixture.Eventually(t, 60*time.Second, "the group create refused", func() (bool, error) {
		return h.Count("POST /v1/server-groups") >= 1, nil
	})
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "CreatePending") {
		t.Error("worker-a waited for a create that was never sent")
	}
	if n := h.Count(createPOST); n != 1 {
		t.Errorf("%d server creates, want 1", n)
	}
}
