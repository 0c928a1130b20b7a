package adopt_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// What runs around the Machines of a fleet cluster, as the switch finds it
// and leaves it running: the cluster-autoscaler (the real
// cluster-autoscaler-operator and autoscaler of the demo environment, a
// MachineAutoscaler on the worker MachineSet) and a MachineHealthCheck of
// the workers (the machine-api-operator's controller).

// fleetNodeCapacity is what a flex-16-4 node reports: the Nodes of the
// servers appuio's provider made (the test registers them) as those the
// boot simulation registers for new servers.
var fleetNodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
}

// withCapacity gives a Node the capacity its server has.
func (e *env) withCapacity(name string) {
	e.t.Helper()
	var n corev1.Node
	if err := e.Client.Get(e.ctx, client.ObjectKey{Name: name}, &n); err != nil {
		e.t.Fatal(err)
	}
	base := n.DeepCopy()
	n.Status.Capacity, n.Status.Allocatable = fleetNodeCapacity.DeepCopy(), fleetNodeCapacity.DeepCopy()
	if err := e.Client.Status().Patch(e.ctx, &n, client.MergeFrom(base)); err != nil {
		e.t.Fatal(err)
	}
}

// fleetAutomation puts a MachineAutoscaler (min..max) on a MachineSet and
// a MachineHealthCheck over its Machines, and waits until the operator has
// given the MachineSet its bounds.
func (e *env) fleetAutomation(ms string, min, max int) *machinev1beta1.MachineHealthCheck {
	e.t.Helper()
	if err := e.Client.Create(e.ctx, demo.MachineAutoscaler(ms, min, max)); err != nil {
		e.t.Fatal(err)
	}
	e.eventually(2*time.Minute, fmt.Sprintf("the MachineAutoscaler's bounds on MachineSet %s (%d to %d)", ms, min, max), func() (bool, string) {
		var set machinev1beta1.MachineSet
		err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: ms}, &set)
		return err == nil && set.Annotations[demo.MinSizeAnnotation] == fmt.Sprint(min) && set.Annotations[demo.MaxSizeAnnotation] == fmt.Sprint(max), fmt.Sprint(set.Annotations, err)
	})
	maxUnhealthy := intstr.FromInt32(1)
	mhc := &machinev1beta1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: ms, Namespace: demo.Namespace},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machineset": ms}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 5 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Second}},
			},
			MaxUnhealthy: &maxUnhealthy,
		},
	}
	if err := e.Client.Create(e.ctx, mhc); err != nil {
		e.t.Fatal(err)
	}
	return mhc
}

// mhcHealthy is what a MachineHealthCheck's status counts (as the
// machine-api-operator's controller writes it): healthy and expected
// Machines.
func (e *env) mhcHealthy(name string) (healthy, expected int) {
	e.t.Helper()
	var mhc machinev1beta1.MachineHealthCheck
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &mhc); err != nil {
		e.t.Fatal(err)
	}
	h, x := 0, 0
	if mhc.Status.CurrentHealthy != nil {
		h = *mhc.Status.CurrentHealthy
	}
	if mhc.Status.ExpectedMachines != nil {
		x = *mhc.Status.ExpectedMachines
	}
	return h, x
}

// autoscaledUpAndDown has the cluster-autoscaler scale a MachineSet of n
// Machines up by one and down again: a workload of pods that each take
// most of a node, one more than the worker Nodes take, then none. Right
// before, the machine-config-operator rotates the machine config server's
// CA: the new server trusts the new one. One server made, one deleted
// (whichever Machine the autoscaler removes: appuio's or the new one), each
// once.
func (e *env) autoscaledUpAndDown(w *apWorld, ms string, n int32, mcsHost string) {
	e.t.Helper()
	before := map[string]bool{}
	for _, m := range e.machinesOf(ms) {
		before[m.Name] = true
	}
	var workers corev1.NodeList
	if err := e.Client.List(e.ctx, &workers, client.HasLabels{"node-role.kubernetes.io/worker"}); err != nil {
		e.t.Fatal(err)
	}
	ca := e.rotateCA("worker", mcsHost)
	e.Harness().ResetRequests()
	pods := int32(len(workers.Items) + 1)
	if err := e.Client.Create(e.ctx, demo.Workload(pods, "3")); err != nil {
		e.t.Fatal(err)
	}
	e.eventually(3*time.Minute, fmt.Sprintf("the autoscaler to scale %s to %d, every pod running", ms, n+1), func() (bool, string) {
		var list corev1.PodList
		if err := e.Client.List(e.ctx, &list, client.InNamespace(demo.WorkloadNamespace), client.MatchingLabels{"app": demo.WorkloadName}); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		r, all := e.runningMachines(ms)
		return running == int(pods) && r == int(n+1) && all == int(n+1), fmt.Sprintf("%d of %d pods running; %d of %d Machines running", running, pods, r, all)
	})
	e.assertApproved()
	for _, m := range e.machinesOf(ms) {
		if before[m.Name] {
			continue
		}
		id := strings.TrimPrefix(*m.Spec.ProviderID, "cloudscale://")
		if got := caSource(e.cloudscaleUserData(id)); got != ca {
			e.t.Errorf("the new Machine %s's server trusts the CA %q, want the rotated one of the managed Secret, %q", m.Name, caText(got), caText(ca))
		}
	}
	if err := e.ScaleWorkload(e.ctx, 0); err != nil {
		e.t.Fatal(err)
	}
	within := e.ScaleDownWithin(1)
	e.eventually(within, fmt.Sprintf("the autoscaler to scale %s back to %d", ms, n), func() (bool, string) {
		r, all := e.runningMachines(ms)
		return r == int(n) && all == int(n), fmt.Sprintf("%d of %d Machines running", r, all)
	})
	removed := ""
	for name := range before {
		if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &machinev1beta1.Machine{}); apierrors.IsNotFound(err) {
			removed = name
			delete(w.servers, name)
		}
	}
	if c, d := e.Harness().Count("POST /v1/servers"), e.Harness().Count("DELETE /v1/servers/{uuid}"); c != 1 || d != 1 {
		e.t.Errorf("the autoscaler's scale-up and scale-down of %s: %d creates, %d deletes, want 1 and 1", ms, c, d)
	}
	e.t.Logf("the autoscaler scaled %s %d -> %d -> %d; the scale-down removed %s", ms, n, n+1, n, orNew(removed))
}

func orNew(name string) string {
	if name == "" {
		return "the new Machine"
	}
	return "appuio's Machine " + name
}

// remediated has the MachineHealthCheck remediate one of appuio's Machines
// of a MachineSet: its Node's kubelet stops reporting (kwok lets go of it),
// the Node goes NotReady, the MachineHealthCheck deletes the Machine; its
// server is deleted under the Syn ID, the Node goes, and the MachineSet's
// replacement gets one server.
func (e *env) remediated(w *apWorld, ms string) {
	e.t.Helper()
	var old []string
	for _, m := range e.machinesOf(ms) {
		if _, ok := w.servers[m.Name]; ok {
			old = append(old, m.Name)
		}
	}
	if len(old) == 0 {
		e.t.Fatalf("no Machine of appuio's left in %s", ms)
	}
	slices.Sort(old)
	sick := old[0]
	n := len(e.machinesOf(ms))
	e.Harness().ResetRequests()
	var node corev1.Node
	if err := e.Client.Get(e.ctx, client.ObjectKey{Name: sick}, &node); err != nil {
		e.t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+localcluster.KwokNodeAnnotation+`":null}}}`))
	if err := e.Client.Patch(e.ctx, &node, patch); err != nil {
		e.t.Fatal(err)
	}
	e.eventually(4*time.Minute, "the MachineHealthCheck to replace "+sick+", its server deleted", func() (bool, string) {
		err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: sick}, &machinev1beta1.Machine{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("Machine %s: %v", sick, err)
		}
		if _, err := w.c.Servers.Get(e.ctx, w.servers[sick]); err == nil {
			return false, "its server " + w.servers[sick] + " is still there"
		}
		r, all := e.runningMachines(ms)
		return r == n && all == n, fmt.Sprintf("%d of %d running", r, all)
	})
	if err := e.Client.Get(e.ctx, client.ObjectKey{Name: sick}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		e.t.Errorf("the Node of %s: %v, want it gone with its server", sick, err)
	}
	if c, d := e.Harness().Count("POST /v1/servers"), e.Harness().Count("DELETE /v1/servers/{uuid}"); c != 1 || d != 1 {
		e.t.Errorf("the MachineHealthCheck's remediation of %s: %d creates, %d deletes, want 1 and 1", sick, c, d)
	}
	delete(w.servers, sick)
	e.t.Logf("the MachineHealthCheck replaced appuio's Machine %s; its server went with it", sick)
}
