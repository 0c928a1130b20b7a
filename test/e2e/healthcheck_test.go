package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// A Node whose kubelet stops reporting goes NotReady; the machine-api's
// MachineHealthCheck deletes its Machine, the provider deletes the server,
// and the MachineSet gets a new Machine, server and Node.
func TestMachineHealthCheckReplacesNotReadyMachine(t *testing.T) {
	eachCloud(t, testMachineHealthCheckReplacesNotReadyMachine)
}

func testMachineHealthCheckReplacesNotReadyMachine(t *testing.T, cloud string) {
	// The provider reconciles every Machine often, as --sync-period does
	// every 10 minutes on a cluster: a server deleted behind the cluster's
	// back makes its Machine Failed at the next one.
	e := start(t, cloud, false, func(o *demo.Options) { o.SyncPeriod = 10 * time.Second })
	ctx := context.Background()
	ms := e.MachineSet("")
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	maxUnhealthy := intstr.FromString("100%")
	mhc := &machinev1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: demo.Namespace},
		Spec: machinev1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machineset": e.MachineSetName}},
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
	// The replacement's phases, from the moment the kubelet went silent.
	stopped := time.Now()
	var notReady, sickGone, replaced time.Duration
	mark := func(d *time.Duration, reached bool) {
		if *d == 0 && reached {
			*d = time.Since(stopped)
		}
	}
	watch(t, e, &m, 4*time.Minute, "a new Machine Running in place of "+sick.Name, func(s demo.State) bool {
		mark(&notReady, s.Nodes > s.NodesReady || s.Nodes == 0)
		var list machinev1.MachineList
		_ = e.Client.List(ctx, &list, client.InNamespace(demo.Namespace))
		mark(&sickGone, !slices.ContainsFunc(list.Items, func(m machinev1.Machine) bool { return m.Name == sick.Name }))
		done := s.Machines["Running"] == 1 && s.MachineCount == 1 && s.Servers == 1 && s.NodesReady == 1 &&
			len(list.Items) == 1 && list.Items[0].Name != sick.Name
		mark(&replaced, done)
		return done
	})
	for _, s := range e.Servers() {
		if sick.Spec.ProviderID != nil && *sick.Spec.ProviderID == s.ProviderID {
			t.Errorf("the unhealthy Machine's server %s is still there", s.ID)
		}
	}
	assertLinked(t, e)
	times := fmt.Sprintf("kubelet silent → Node NotReady %s, Machine %s deleted %s, new Machine Running with a Ready Node %s",
		notReady.Round(100*time.Millisecond), sick.Name, sickGone.Round(100*time.Millisecond), replaced.Round(100*time.Millisecond))
	t.Logf("MachineHealthCheck replacement on %s: %s", e.Title(), times)
	phaseTimes.add(cloud, "MHC", times)

	if e.Options.External() {
		testServerDeletedBehindTheBack(t, e, mhc)
	}
}

// A server deleted behind the cluster's back, through the cloud's API: its
// kubelet dies with it, the Node goes NotReady, and the CCM's
// cloud-node-lifecycle controller finds the server gone and deletes the
// Node; the provider finds no server for the Machine, which goes Failed; and
// the MachineHealthCheck replaces it, once. The MachineHealthCheck is paused
// until then: its NotReady timeout (seconds, for the test) would race the
// CCM, which is what this shows.
func testServerDeletedBehindTheBack(t *testing.T, e *demo.Env, mhc *machinev1.MachineHealthCheck) {
	ctx := context.Background()
	paused := func(on bool) {
		t.Helper()
		value := "null"
		if on {
			value = `""`
		}
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":`+value+`}}}`))
		if err := e.Client.Patch(ctx, mhc, patch); err != nil {
			t.Fatal(err)
		}
	}
	paused(true)
	victim := onlyMachine(t, e)
	nodeName := victim.Status.NodeRef.Name
	id := ""
	for _, s := range e.Servers() {
		if victim.Spec.ProviderID != nil && s.ProviderID == *victim.Spec.ProviderID {
			id = s.ID
		}
	}
	if id == "" {
		t.Fatalf("no server of Machine %s", victim.Name)
	}
	createdBefore, _ := e.ServerCalls()
	if err := e.DeleteServer(ctx, id); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var m demo.Milestones
	var nodeGone, failed time.Duration
	watchFor(t, e, &m, 3*time.Minute, "the Node of the deleted server gone and Machine "+victim.Name+" Failed", func() bool {
		if nodeGone == 0 && apierrors.IsNotFound(e.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &corev1.Node{})) {
			nodeGone = time.Since(deleted)
		}
		var cur machinev1.Machine
		if failed == 0 && e.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &cur) == nil && ptr.Deref(cur.Status.Phase, "") == machinev1.PhaseFailed {
			failed = time.Since(deleted)
		}
		return nodeGone != 0 && failed != 0
	})
	// The CCM deleted it, saying why, and nothing else did.
	awaitEvent(t, e.Client, "", nodeName, "DeletingNode", func(ev corev1.Event) bool {
		return ev.InvolvedObject.Kind == "Node" && ev.Source.Component == "cloud-node-lifecycle-controller"
	})

	paused(false)
	var replaced time.Duration
	watch(t, e, &m, 4*time.Minute, "a new Machine Running in place of "+victim.Name, func(s demo.State) bool {
		var list machinev1.MachineList
		_ = e.Client.List(ctx, &list, client.InNamespace(demo.Namespace))
		done := s.Machines["Running"] == 1 && s.MachineCount == 1 && s.Servers == 1 && s.NodesReady == 1 &&
			len(list.Items) == 1 && list.Items[0].Name != victim.Name
		if done {
			replaced = time.Since(deleted)
		}
		return done
	})
	if created, _ := e.ServerCalls(); created-createdBefore != 1 {
		t.Errorf("%d servers created in place of the deleted one, want 1", created-createdBefore)
	}
	assertLinked(t, e)
	times := fmt.Sprintf("server deleted → Node deleted by the CCM %s, Machine Failed %s, new Machine Running with a Ready Node %s",
		nodeGone.Round(100*time.Millisecond), failed.Round(100*time.Millisecond), replaced.Round(100*time.Millisecond))
	t.Logf("server deleted behind the cluster's back on %s: %s", e.Title(), times)
	phaseTimes.add(e.Options.Cloud, "server gone", times)
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
