package actuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// foreignServer makes a server the provider did not make for this cluster:
// another cluster's, a Terraform load balancer without the provider's
// tags, another Machine's.
func foreignServer(t *testing.T, e *fixture.Env, name string, tags map[string]string) *cloudscale.Server {
	t.Helper()
	tm := cloudscale.TagMap(tags)
	req := &cloudscale.ServerRequest{Name: name, Flavor: "flex-8-4", Image: "custom:rhcos-4.19", Zone: "rma1", SSHKeys: []string{}}
	req.Tags = &tm
	s, err := sdk(e).Servers.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// untouched checks that nothing was written to a server and that it is
// there as it was.
func untouched(t *testing.T, e *fixture.Env, s *cloudscale.Server) {
	t.Helper()
	if w := e.WritesTo(s.UUID); len(w) > 0 {
		t.Errorf("server %s (%s) was written to: %v", s.UUID, s.Name, w)
	}
	got, err := sdk(e).Servers.Get(context.Background(), s.UUID)
	if err != nil {
		t.Fatalf("server %s (%s): %v", s.UUID, s.Name, err)
	}
	if !maps.Equal(got.Tags, s.Tags) {
		t.Errorf("server %s tags %v, want them left as %v", s.Name, got.Tags, s.Tags)
	}
}

func waitEvent(t *testing.T, e *fixture.Env, object string, wants ...string) string {
	t.Helper()
	var text string
	fixture.Eventually(t, 60*time.Second, fmt.Sprintf("events on %s saying %q", object, wants), func() (bool, error) {
		text = fixture.EventText(e.Events(t, object))
		for _, w := range wants {
			if !strings.Contains(text, w) {
				return false, fmt.Errorf("events:\n%s", text)
			}
		}
		return true, nil
	})
	return text
}

// A Machine whose cluster label names another cluster (copied from it, or
// labelled by a wrong `adopt --cluster-id`) is failed, saying which cluster
// it names and which this one is, before any cloud write; one that also
// names that cluster's server by provider ID (restored from a backup of
// the other cluster) leaves it alone, and deleting it deletes nothing.
func TestMachineOfAnotherClusterIsFailedAndTouchesNothing(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	theirs := foreignServer(t, e, "their-worker", map[string]string{v1beta1.TagClusterID: "other-cluster-b1", v1beta1.TagMachineName: "their-worker"})

	m := fixture.Machine("copied", spec(nil))
	m.Labels[actuator.ClusterIDLabel] = "other-cluster-b1"
	if err := e.Client.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	restored := fixture.Machine("their-worker", spec(nil))
	restored.Labels[actuator.ClusterIDLabel] = "other-cluster-b1"
	restored.Spec.ProviderID = ptrTo("cloudscale://" + theirs.UUID)
	if err := e.Client.Create(context.Background(), restored); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, e, "copied", machinev1.PhaseFailed)
	want := fmt.Sprintf(`names cluster "other-cluster-b1", and this cluster is %q`, fixture.ClusterID)
	if got.Status.ErrorMessage == nil || !strings.Contains(*got.Status.ErrorMessage, want) || !strings.Contains(*got.Status.ErrorMessage, actuator.ClusterIDLabel) {
		t.Errorf("errorMessage %v, want it to say %s (and name the label)", got.Status.ErrorMessage, want)
	}
	failedSaying(t, waitPhase(t, e, "their-worker", machinev1.PhaseFailed), actuator.ClusterIDLabel, want)
	waitEvent(t, e, "their-worker", want)
	if n := e.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d creates, want only the test's own of the other cluster's server", n)
	}
	deleteMachine(t, e, "their-worker")
	deleteMachine(t, e, "copied")
	waitGone(t, e, "their-worker", time.Minute)
	waitGone(t, e, "copied", time.Minute)
	untouched(t, e, theirs)
}

// failedSaying checks that a Failed Machine was failed by the provider, as
// a configuration error whose message names the field and says why, not by
// the machine controller for a server it cannot find ("can't find created
// instance", which says neither).
func failedSaying(t *testing.T, m *machinev1.Machine, wants ...string) {
	t.Helper()
	if m.Status.ErrorReason == nil || *m.Status.ErrorReason != machinev1.InvalidConfigurationMachineError {
		t.Errorf("%s: errorReason %v, want %s", m.Name, m.Status.ErrorReason, machinev1.InvalidConfigurationMachineError)
	}
	msg := ""
	if m.Status.ErrorMessage != nil {
		msg = *m.Status.ErrorMessage
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: errorMessage %q, want it to say %q", m.Name, msg, w)
		}
	}
}

// A provider ID is no proof of ownership: a Machine of this cluster created
// with the provider ID of a server that carries another cluster's identity,
// another Machine's, or none (a Terraform load balancer) fails, naming the
// field and whose the server is, with an event; the server is never
// written to, and deleting the Machine does not delete it.
func TestGivenProviderIDOfAnotherIdentityFailsTheMachine(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	for _, tc := range []struct {
		machine, says string
		tags          map[string]string
	}{
		{"master-of-b", `carries cluster "other-cluster-b1"'s identity`, map[string]string{v1beta1.TagClusterID: "other-cluster-b1", v1beta1.TagMachineName: "master-0"}},
		{"takes-lb", "carries no provider identity", map[string]string{"terraform": "api-lb"}},
		{"takes-sibling", `carries the identity of Machine "sibling"`, map[string]string{v1beta1.TagClusterID: fixture.ClusterID, v1beta1.TagMachineName: "sibling"}},
	} {
		s := foreignServer(t, e, tc.machine+"-target", tc.tags)
		m := fixture.Machine(tc.machine, spec(nil))
		m.Spec.ProviderID = ptrTo("cloudscale://" + s.UUID)
		if err := e.Client.Create(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		failedSaying(t, waitPhase(t, e, tc.machine, machinev1.PhaseFailed), "spec.providerID", s.UUID, tc.says)
		waitEvent(t, e, tc.machine, "ServerNotOwned", "spec.providerID", s.UUID, tc.says)
		deleteMachine(t, e, tc.machine)
		waitGone(t, e, tc.machine, time.Minute)
		untouched(t, e, s)
	}
	if n := e.Harness().Count(createPOST); n != 3 {
		t.Errorf("%d creates, want only the test's three: a Machine naming another's server got one of its own", n-3)
	}
}

// A server this provider recorded in a Machine's status whose identity
// changes behind its back (a person, Terraform, another cluster's
// provider retagging it) is no longer the Machine's: it is never written
// to, the Machine says so (ServerOwned=False, an event), and it is not
// failed, which would have its Node remediated. Deleting the Machine leaves
// the server.
//
// Either step may find it, and each must say so at once: the sync's proof
// before it writes the spec's new tags, while the view still shows the old
// ones; or a lookup of the recorded server that the view does not show as
// the Machine's (a manager started after the retag lists afresh). The
// condition is awaited for less than the 30 s after which the machine
// controller retries a failed Update (machine-api-operator,
// pkg/controller/machine, controller.go, requeueAfter), so a step that left
// it to the next reconcile fails here.
func TestRecordedServerRetaggedIsLeftAlone(t *testing.T) {
	t.Run("by the sync's proof", func(t *testing.T) { retaggedLeftAlone(t, false) })
	t.Run("by a lookup", func(t *testing.T) { retaggedLeftAlone(t, true) })
}

// retaggedLeftAlone retags a Machine's server to another cluster's
// identity. With restart, the manager is stopped meanwhile and started
// again, and the spec is left alone: only the new manager's lookup can find
// it. Without, the view is never refreshed, and the spec's tags change:
// only the sync's proof before it writes them can.
func retaggedLeftAlone(t *testing.T, restart bool) {
	e := env(t)
	opts := manager.Options{ServerViewRefresh: time.Hour}
	stop := e.StartManager(t, opts)
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	s := serversOf(t, e, "worker-a")[0]
	if restart {
		stop()
	}
	retag := cloudscale.TagMap{v1beta1.TagClusterID: "other-cluster-b1", v1beta1.TagMachineName: "worker-a"}
	req := &cloudscale.ServerUpdateRequest{}
	req.Tags = &retag
	if err := sdk(e).Servers.Update(context.Background(), s.UUID, req); err != nil {
		t.Fatal(err)
	}
	s.Tags = retag
	writesBefore := len(e.WritesTo(s.UUID))
	if restart {
		e.StartManager(t, opts)
	} else {
		// A change of the spec's tags would have the next update write them.
		m := getMachine(t, e, "worker-a")
		m.Spec.ProviderSpec.Value.Raw = []byte(spec(func(sp map[string]any) { sp["tags"] = map[string]string{"team": "other"} }))
		if err := e.Client.Update(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, e, "worker-a", "ServerNotOwned", "status.providerStatus.instanceId", `carries cluster "other-cluster-b1"'s identity`)
	fixture.Eventually(t, 20*time.Second, "ServerOwned=False", func() (bool, error) {
		c := condition(t, getMachine(t, e, "worker-a"), actuator.ConditionServerOwned)
		return c != nil && c.Status == metav1.ConditionFalse, fmt.Errorf("condition %+v", c)
	})
	if p := phase(getMachine(t, e, "worker-a")); p == machinev1.PhaseFailed {
		t.Errorf("the Machine is %s: a server retagged behind its back must not fail it", p)
	}
	deleteMachine(t, e, "worker-a")
	waitGone(t, e, "worker-a", time.Minute)
	if w := e.WritesTo(s.UUID); len(w) != writesBefore {
		t.Errorf("writes to the retagged server: %v", w[writesBefore:])
	}
	got, err := sdk(e).Servers.Get(context.Background(), s.UUID)
	if err != nil || !maps.Equal(got.Tags, s.Tags) {
		t.Errorf("the retagged server: %+v, %v; want it left as it is", got, err)
	}
}

// "Never a server a Node runs on" means every Node: a Machine's deletion
// does not delete its server while a Node that is not its own runs on it,
// matched by name and address as Nodes without a provider ID are (a
// cluster without a cloud controller manager); it says which Node, and
// goes on once that Node is gone.
func TestNodeByNameAndAddressHoldsTheDelete(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	s := serversOf(t, e, "worker-a")[0]
	node := nodeOn(t, e, "worker-a", &s)
	deleteMachine(t, e, "worker-a")
	waitEvent(t, e, "worker-a", "DeleteRefused", s.UUID, "Node worker-a (by name and address)")
	if _, err := sdk(e).Servers.Get(context.Background(), s.UUID); err != nil {
		t.Fatalf("the server was deleted under its Node: %v", err)
	}
	if err := e.Client.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	waitGone(t, e, "worker-a", 3*time.Minute)
	if _, err := sdk(e).Servers.Get(context.Background(), s.UUID); err == nil {
		t.Error("the server outlived its Machine once the Node was gone")
	}
}

func ptrTo[T any](v T) *T { return &v }

// condition is a condition of the Machine's provider status.
func condition(t *testing.T, m *machinev1.Machine, typ string) *metav1.Condition {
	t.Helper()
	if m.Status.ProviderStatus == nil {
		return nil
	}
	var st struct{ Conditions []metav1.Condition }
	if err := json.Unmarshal(m.Status.ProviderStatus.Raw, &st); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(st.Conditions, typ)
}
