package e2e

import (
	"context"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// A Node whose kubelet stops reporting goes NotReady; the machine-api's
// MachineHealthCheck deletes its Machine, the provider deletes the server,
// and the MachineSet gets a new Machine, server and Node.
func TestMachineHealthCheckReplacesNotReadyMachine(t *testing.T) {
	e := start(t, false)
	ctx := context.Background()
	ms := demo.MachineSet("flex-8-4", 0, 3)
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	maxUnhealthy := intstr.FromString("100%")
	mhc := &machinev1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: demo.Namespace},
		Spec: machinev1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machineset": demo.MachineSetName}},
			UnhealthyConditions: []machinev1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 5 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Second}},
			},
			MaxUnhealthy: &maxUnhealthy,
		},
	}
	if err := e.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Patch(ctx, ms, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	var m demo.Milestones
	watch(t, e, &m, 3*time.Minute, "one Machine Running", func(s demo.State) bool { return s.Machines["Running"] == 1 && s.NodesReady == 1 })
	sick := onlyMachine(t, e)

	// Its kubelet stops reporting, as when the server hangs.
	var node corev1.Node
	if err := e.Client.Get(ctx, client.ObjectKey{Name: sick.Status.NodeRef.Name}, &node); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+localcluster.KwokNodeAnnotation+`":null}}}`))
	if err := e.Client.Patch(ctx, &node, patch); err != nil {
		t.Fatal(err)
	}
	watch(t, e, &m, 4*time.Minute, "a new Machine Running in place of "+sick.Name, func(s demo.State) bool {
		if s.Machines["Running"] != 1 || s.MachineCount != 1 || s.Servers != 1 {
			return false
		}
		var list machinev1.MachineList
		_ = e.Client.List(ctx, &list, client.InNamespace(demo.Namespace))
		return len(list.Items) == 1 && list.Items[0].Name != sick.Name
	})
	for _, s := range e.Emulator.Servers() {
		if sick.Spec.ProviderID != nil && *sick.Spec.ProviderID == "cloudscale://"+s.UUID {
			t.Errorf("the unhealthy Machine's server %s is still there", s.UUID)
		}
	}
	assertLinked(t, e)
}

func onlyMachine(t *testing.T, e *demo.Env) machinev1.Machine {
	t.Helper()
	var list machinev1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(demo.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Status.NodeRef == nil {
		t.Fatalf("want one Machine with a Node, got %d", len(list.Items))
	}
	return list.Items[0]
}
