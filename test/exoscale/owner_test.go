package exoscale

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/actuator"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// instance makes an instance the provider did not make for this cluster.
func instance(t *testing.T, e *fixture.Env, name string, labels map[string]string) string {
	t.Helper()
	c := sdk(e, "ch-gva-2")
	tpl := e.Exoscale.TemplateID("openshift", "ch-gva-2", "rhcos-4.19")
	op := done(t, c)(c.CreateInstance(context.Background(), v3.CreateInstanceRequest{
		Name: name, DiskSize: 20, InstanceType: &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("standard.small"))},
		Template: &v3.Template{ID: v3.UUID(tpl)}, Labels: labels,
	}))
	return string(op.Reference.ID)
}

// untouched checks that nothing was written to an instance and that it is
// there as it was.
func untouched(t *testing.T, e *fixture.Env, id string, labels map[string]string) {
	t.Helper()
	if w := e.WritesTo(id); len(w) > 0 {
		t.Errorf("instance %s was written to: %v", id, w)
	}
	inst, ok := e.Exoscale.Instance(id)
	if !ok || !maps.Equal(inst.Labels, labels) {
		t.Errorf("instance %s: %+v (there: %v), want it left as it was", id, inst, ok)
	}
}

func waitEvent(t *testing.T, e *fixture.Env, object string, wants ...string) {
	t.Helper()
	fixture.Eventually(t, 60*time.Second, fmt.Sprintf("events on %s saying %q", object, wants), func() (bool, error) {
		text := fixture.EventText(e.Events(t, object))
		for _, w := range wants {
			if !strings.Contains(text, w) {
				return false, fmt.Errorf("events:\n%s", text)
			}
		}
		return true, nil
	})
}

// Exoscale's side of pkg/actuator's owner tests: a Machine naming another
// cluster fails saying so; a Machine given the provider ID of an instance
// of another cluster, of another Machine or of none fails naming the field;
// none of those instances is ever written to, and deleting the Machines
// deletes none of them.
func TestInstancesOfAnotherIdentityAreLeftAlone(t *testing.T) {
	e := env(t, emu.Config{})
	startManager(t, e, manager.Options{})
	ctx := context.Background()
	theirs := map[string]string{v1beta1.LabelClusterID: "other-cluster-b1", v1beta1.LabelMachineName: "master-0"}
	lb := map[string]string{"terraform": "api-lb"}
	sibling := map[string]string{v1beta1.LabelClusterID: fixture.ClusterID, v1beta1.LabelMachineName: "sibling"}
	targets := map[string]map[string]string{}
	for _, tc := range []struct {
		machine, says string
		labels        map[string]string
	}{
		{"master-of-b", `carries cluster "other-cluster-b1"'s identity`, theirs},
		{"takes-lb", "carries no provider identity", lb},
		{"takes-sibling", `carries the identity of Machine "sibling"`, sibling},
	} {
		id := instance(t, e, tc.machine+"-target", tc.labels)
		targets[id] = tc.labels
		m := fixture.Machine(tc.machine, spec(nil))
		pid := "exoscale://" + id
		m.Spec.ProviderID = &pid
		if err := e.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		// Failed by the provider, naming the field and why (not the
		// machine controller's "can't find created instance").
		m = waitPhase(t, e, tc.machine, machinev1.PhaseFailed)
		if m.Status.ErrorReason == nil || *m.Status.ErrorReason != machinev1.InvalidConfigurationMachineError ||
			m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, "spec.providerID") || !strings.Contains(*m.Status.ErrorMessage, tc.says) {
			t.Errorf("%s failed with %v: %v, want %s naming spec.providerID and saying %s", tc.machine, m.Status.ErrorReason, m.Status.ErrorMessage, machinev1.InvalidConfigurationMachineError, tc.says)
		}
		waitEvent(t, e, tc.machine, "ServerNotOwned", "spec.providerID", id, tc.says)
	}
	copied := fixture.Machine("copied", spec(nil))
	copied.Labels[actuator.ClusterIDLabel] = "other-cluster-b1"
	if err := e.Client.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	m := waitPhase(t, e, "copied", machinev1.PhaseFailed)
	want := fmt.Sprintf(`names cluster "other-cluster-b1", and this cluster is %q`, fixture.ClusterID)
	if m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, want) {
		t.Errorf("errorMessage %v, want it to say %s", m.Status.ErrorMessage, want)
	}
	for _, name := range []string{"master-of-b", "takes-lb", "takes-sibling", "copied"} {
		e.DeleteMachine(t, name)
	}
	for _, name := range []string{"master-of-b", "takes-lb", "takes-sibling", "copied"} {
		e.WaitMachineGone(t, name, time.Minute)
	}
	for id, labels := range targets {
		untouched(t, e, id, labels)
	}
	if n := e.Harness().Count(createPOST); n != 3 {
		t.Errorf("%d instance creates, want only the test's three", n)
	}
	assertNoCanary(t, e)
}

// A Node that runs on a Machine's instance and is not the Machine's own
// (no provider ID: matched by name and address) holds the Machine's
// deletion, with an event naming it; once it is gone, the instance goes.
func TestNodeByNameAndAddressHoldsTheDelete(t *testing.T) {
	e := env(t, emu.Config{})
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	id := strings.TrimPrefix(*m.Spec.ProviderID, "exoscale://")
	inst, _ := e.Exoscale.Instance(id)
	node := fixture.NodeWithoutProviderID(t, e, "worker-a", inst.PublicIPv4)
	e.DeleteMachine(t, "worker-a")
	heldUntilNodeGone(t, e, "worker-a", id, node)
}
