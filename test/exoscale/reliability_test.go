package exoscale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// A Machine deleted and made again with the same name gets a new instance:
// the old one, "destroying" for a while, is not adopted, also by a manager
// that did not delete it itself (a new leader).
func TestReusedNameDoesNotAdoptTheDestroyingInstance(t *testing.T) {
	e := env(t, emu.Config{ActionTime: 40 * time.Second})
	stop := startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	old := *waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned).Spec.ProviderID
	e.DeleteMachine(t, "worker-a")
	e.WaitMachineGone(t, "worker-a", 60*time.Second)
	stop()
	if got := instancesOf(e, "worker-a"); len(got) != 1 || got[0].State != "destroying" {
		t.Fatalf("instances of the deleted Machine: %+v; the test wants the old one destroying", got)
	}

	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if *m.Spec.ProviderID == old {
		t.Fatalf("the new worker-a adopted the instance of the deleted one (%s), which is being destroyed", old)
	}
	if n := e.Harness().Count(createPOST); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
}

// A zone that holds none of the cluster's instances and fails (5xx, no
// answer, a refusal) stops nothing: a manager whose first list of the
// cluster sweeps every zone creates and deletes as usual.
func TestUnusedZoneDownStopsNothing(t *testing.T) {
	e := env(t, emu.Config{})
	h := e.Harness()
	slowClient := &http.Client{Timeout: 3 * time.Second}
	for _, tc := range []struct {
		name string
		rule harness.Rule
	}{
		{"5xx", harness.Rule{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 503}},
		{"refused", harness.Rule{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 403}},
		{"no answer", harness.Rule{Route: "GET /v2/instance", Zone: "de-fra-1", Latency: harness.Duration(time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := h.SetRules([]harness.Rule{tc.rule}); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = h.SetRules(nil) }()
			// A new manager: its first list of the cluster asks every zone.
			stop := startManager(t, e, manager.Options{Cloud: exocloud.New(exocloud.Options{APIEndpoint: e.APIURL + "v2", HTTPClient: slowClient})})
			defer stop()
			name := "worker-" + strings.ReplaceAll(tc.name, " ", "-")
			createMachine(t, e, name, spec(nil))
			waitPhase(t, e, name, machinev1.PhaseProvisioned)
			e.DeleteMachine(t, name)
			e.WaitMachineGone(t, name, 60*time.Second)
			if n := len(instancesOf(e, name)); n != 0 {
				t.Errorf("%d instances left", n)
			}
		})
	}
}

// A zone that holds some of the cluster's instances and fails degrades
// only its own Machines, with an event and a condition naming the zone:
// the others are created and deleted as usual. When the zone answers
// again, its Machines go on.
func TestZoneDownDegradesOnlyItsMachines(t *testing.T) {
	e := env(t, emu.Config{})
	h := e.Harness()
	startManager(t, e, manager.Options{ServerViewRefresh: time.Second})
	createMachine(t, e, "in-gva", spec(nil))
	createMachine(t, e, "in-fra", spec(func(s map[string]any) { s["zone"] = "de-fra-1" }))
	waitPhase(t, e, "in-gva", machinev1.PhaseProvisioned)
	waitPhase(t, e, "in-fra", machinev1.PhaseProvisioned)

	if err := h.SetRules([]harness.Rule{{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 503}}); err != nil {
		t.Fatal(err)
	}
	e.DeleteMachine(t, "in-gva")
	e.DeleteMachine(t, "in-fra")
	createMachine(t, e, "new-in-gva", spec(nil))
	e.WaitMachineGone(t, "in-gva", 60*time.Second)
	waitPhase(t, e, "new-in-gva", machinev1.PhaseProvisioned)

	fixture.Eventually(t, 60*time.Second, "in-fra's condition naming its zone", func() (bool, error) {
		st := providerConditions(t, getMachine(t, e, "in-fra"))
		c := meta.FindStatusCondition(st, actuator.ConditionZone)
		return c != nil && c.Status == "False" && strings.Contains(c.Message, "de-fra-1"), nil
	})
	// Events are sent apart from the condition's write: awaited.
	fixture.Eventually(t, 30*time.Second, "an event of in-fra naming the zone", func() (bool, error) {
		list, err := e.EventsOf("in-fra")
		if err != nil {
			return false, err
		}
		events := fixture.EventText(list)
		return strings.Contains(events, "ZoneUnavailable") && strings.Contains(events, "de-fra-1"), fmt.Errorf("its events:\n%s", events)
	})
	if getMachine(t, e, "in-fra").DeletionTimestamp == nil {
		t.Fatal("in-fra is not being deleted")
	}
	if n := len(instancesOf(e, "in-fra")); n != 1 {
		t.Errorf("in-fra has %d instances while its zone is down, want its one", n)
	}

	if err := h.SetRules(nil); err != nil {
		t.Fatal(err)
	}
	e.WaitMachineGone(t, "in-fra", 3*time.Minute)
	if n := len(instancesOf(e, "in-fra")); n != 0 {
		t.Errorf("%d instances of in-fra left", n)
	}
}

// A zone whose endpoint fails the create only (its lists answer) says so on
// the Machine as a failing lookup does: the condition names the zone, and
// goes once the create is through. The condition is set by whichever step
// meets the zone's failure, not only by lookups.
func TestZoneFailingTheCreateSaysSoOnTheMachine(t *testing.T) {
	e := env(t, emu.Config{})
	h := e.Harness()
	// A 503 on a create may have made the instance: the next one waits
	// the create grace, which must outlast the call timeout.
	exo := exocloud.New(exocloud.Options{APIEndpoint: e.APIURL + "v2", HTTPClient: &http.Client{Timeout: 2 * time.Second}})
	startManager(t, e, manager.Options{Cloud: exo, ServerViewRefresh: time.Second, Actuator: actuator.Options{CreateGrace: 3 * time.Second}})
	// Another zone answers: the failure is confined to de-fra-1.
	createMachine(t, e, "in-gva", spec(nil))
	waitPhase(t, e, "in-gva", machinev1.PhaseProvisioned)
	if err := h.SetRules([]harness.Rule{{Route: createPOST, Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: 503}}); err != nil {
		t.Fatal(err)
	}
	createMachine(t, e, "in-fra", spec(func(s map[string]any) { s["zone"] = "de-fra-1" }))
	fixture.Eventually(t, 60*time.Second, "in-fra's condition naming its zone", func() (bool, error) {
		c := meta.FindStatusCondition(providerConditions(t, getMachine(t, e, "in-fra")), actuator.ConditionZone)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "de-fra-1"), fmt.Errorf("condition %+v", c)
	})
	if n := h.Count(createPOST); n < 2 {
		t.Errorf("%d creates sent, want in-gva's and in-fra's refused one", n)
	}
	if n := len(instancesOf(e, "in-fra")); n != 0 {
		t.Fatalf("in-fra has %d instances from creates its zone refused", n)
	}

	if err := h.SetRules(nil); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, e, "in-fra", machinev1.PhaseProvisioned)
	fixture.Eventually(t, 30*time.Second, "in-fra's zone condition gone", func() (bool, error) {
		c := meta.FindStatusCondition(providerConditions(t, getMachine(t, e, "in-fra")), actuator.ConditionZone)
		return c == nil, fmt.Errorf("condition %+v", c)
	})
	if n := len(instancesOf(e, "in-fra")); n != 1 {
		t.Errorf("in-fra has %d instances, want one", n)
	}
}

// providerConditions are the conditions of a Machine's provider status.
func providerConditions(t *testing.T, m *machinev1.Machine) []metav1.Condition {
	t.Helper()
	if m.Status.ProviderStatus == nil {
		return nil
	}
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if err := json.Unmarshal(m.Status.ProviderStatus.Raw, &st); err != nil {
		t.Fatal(err)
	}
	return st.Conditions
}

// The last Machine of a cluster goes while its instance is still
// "destroying", and so still in its anti-affinity group, which cannot be
// deleted yet: the account is swept a while after the Machine
// (--janitor-linger), and the group goes once the instance has.
func TestGroupOfTheLastMachineIsSweptOnceItsInstanceIsGone(t *testing.T) {
	e := env(t, emu.Config{ActionTime: 15 * time.Second})
	startManager(t, e, manager.Options{
		ServerViewRefresh: time.Second,
		Janitor:           janitor.Options{Interval: time.Second, GroupMinAge: time.Second},
	})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) { s["antiAffinityKey"] = "workers" }))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := len(e.Exoscale.AntiAffinityGroups()); n != 1 {
		t.Fatalf("%d groups, want 1", n)
	}
	e.DeleteMachine(t, "worker-a")
	e.WaitMachineGone(t, "worker-a", 60*time.Second)
	if got := instancesOf(e, "worker-a"); len(got) != 1 || got[0].State != "destroying" {
		t.Fatalf("instances: %+v; the test wants the Machine gone while its instance is destroyed", got)
	}
	fixture.Eventually(t, 90*time.Second, "the group deleted", func() (bool, error) {
		return len(e.Exoscale.AntiAffinityGroups()) == 0, nil
	})
}
