package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
	"github.com/appuio/machine-api-provider/pkg/demo"
)

// The product's reason to exist: pods that fit nowhere make the real
// cluster-autoscaler scale a MachineSet up from zero, using the capacity
// the provider publishes; when the pods go, it scales back down to zero
// Machines, Nodes and servers within its (short, for the test) scale-down
// delays. Autoscaling is configured as on OpenShift: a ClusterAutoscaler
// and a MachineAutoscaler, reconciled by the real
// cluster-autoscaler-operator, which renders the autoscaler's Deployment
// (run here with bin/cluster-autoscaler for its image) and writes the
// MachineAutoscaler's bounds onto the MachineSet. The cluster-autoscaler is
// the Makefile's patched build: unpatched, the last node is never removed
// (see hack/tools/cluster-autoscaler). On both clouds the workers have 4
// vCPUs and 8 GiB (flex-8-4, standard.large).
func TestAutoscalingFromZeroAndBack(t *testing.T) { eachCloud(t, testAutoscalingFromZeroAndBack) }

func testAutoscalingFromZeroAndBack(t *testing.T, cloud string) {
	e := start(t, cloud, true)
	ctx := context.Background()
	assertAutoscalerAsRendered(t, e)
	if err := e.Client.Create(ctx, e.MachineSet("")); err != nil {
		t.Fatal(err)
	}
	assertWebhookRefuses(t, e)
	if err := e.Client.Create(ctx, e.MachineAutoscaler(0, 4)); err != nil {
		t.Fatal(err)
	}
	var m demo.Milestones
	// The operator, not the test, gives the MachineSet its bounds.
	watchFor(t, e, &m, 2*time.Minute, "the MachineAutoscaler's bounds on the MachineSet (0 to 4)", func() bool {
		var ms machinev1.MachineSet
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: e.MachineSetName}, &ms)
		return err == nil && ms.Annotations[demo.MinSizeAnnotation] == "0" && ms.Annotations[demo.MaxSizeAnnotation] == "4"
	})
	assertBoundsByOperator(t, e)
	// With no Machine to look at, the autoscaler knows a worker's size
	// only from what the capacity publisher read from the cloud's catalogue.
	watchFor(t, e, &m, time.Minute, "the capacity annotations (4 vCPUs, 8 GiB)", func() bool {
		var ms machinev1.MachineSet
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: e.MachineSetName}, &ms)
		return err == nil && ms.Annotations[capacity.CPUKey] == "4" && ms.Annotations[capacity.MemoryKey] == "8192Mi"
	})
	const pods = 6 // 1.5 CPU each: two per 4-vCPU worker, so three workers
	if err := e.Client.Create(ctx, demo.Workload(pods, "1500m")); err != nil {
		t.Fatal(err)
	}
	st := watch(t, e, &m, 5*time.Minute, "every pod Running", func(s demo.State) bool { return s.PodsRunning == pods })
	if st.Replicas < 3 || st.Replicas > 4 {
		t.Errorf("the autoscaler asked for %d workers; 6 pods of 1.5 CPU need 3", st.Replicas)
	}
	assertLinked(t, e)
	t.Logf("scale-up on %s: %s", e.Title(), m)

	if err := e.ScaleWorkload(ctx, 0); err != nil {
		t.Fatal(err)
	}
	m.WorkloadGone = m.Elapsed()
	within := e.ScaleDownWithin(int(st.Replicas))
	watch(t, e, &m, within, fmt.Sprintf("zero Machines, Nodes and servers within %s (scale-down unneeded time %s, delay after add %s)",
		within, e.Options.ScaleDownUnneeded, e.Options.ScaleDownDelayAfterAdd), demo.State.Zero)

	// Zero, read from the API and the cloud rather than the watch's summary.
	var ms machinev1.MachineSet
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: e.MachineSetName}, &ms); err != nil {
		t.Fatal(err)
	}
	if ms.Spec.Replicas == nil || *ms.Spec.Replicas != 0 {
		t.Errorf("MachineSet replicas %v, want 0", ms.Spec.Replicas)
	}
	var machines machinev1.MachineList
	if err := e.Client.List(ctx, &machines, client.InNamespace(demo.Namespace)); err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := e.Client.List(ctx, &nodes, workers); err != nil {
		t.Fatal(err)
	}
	if servers := e.Servers(); len(machines.Items) != 0 || len(nodes.Items) != 0 || len(servers) != 0 {
		t.Errorf("want nothing left; got %d Machines, %d Nodes, %d servers", len(machines.Items), len(nodes.Items), len(servers))
	}
	// Every server the scale-up created was deleted, each once.
	created, deleted := e.ServerCalls()
	if created != int64(st.Replicas) || deleted != created {
		t.Errorf("cloud calls: %d servers created, %d deleted; want %d and %d", created, deleted, st.Replicas, st.Replicas)
	}
	assertNoneRefused(t, e)
	t.Logf("phase times on %s: %s", e.Title(), m)
	phaseTimes.add(cloud, "autoscaling", m.String())

	testScaleUpBySelector(t, e)
}

// Pending pods that select a zone or an instance type scale up, from zero,
// the MachineSet whose Nodes will carry that label, and only it: the
// capacity publisher promises the labels the cloud's CCM sets on the Node,
// not those the spec names. Beside the first MachineSet, now at zero, a
// second one with another instance type (on Exoscale named by its ID, as a
// spec may), on cloudscale.ch in another zone (demo.Env.OtherMachineSet);
// one pod selects that instance type, one that zone. On cloudscale.ch both
// scale the second MachineSet, whose Node the CCM labels with both. The
// Exoscale CCM labels a Node with the instance type as family.size and
// with no zone at all: the pod selecting the instance type scales the
// second MachineSet (before, the template said the type's ID, and nothing
// scaled), and the pod selecting the zone scales nothing, as no Node would
// ever take it (before, it scaled a MachineSet up for a Node it could not
// run on).
func testScaleUpBySelector(t *testing.T, e *demo.Env) {
	ctx := context.Background()
	first := e.MachineSetName
	second := e.OtherMachineSet()
	if err := e.Client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, demo.MachineAutoscaler(second.Name, 0, 2)); err != nil {
		t.Fatal(err)
	}
	var m demo.Milestones
	var typeLabel string
	watchFor(t, e, &m, 2*time.Minute, "the bounds and capacity of MachineSet "+second.Name, func() bool {
		var ms machinev1.MachineSet
		if e.Client.Get(ctx, client.ObjectKeyFromObject(second), &ms) != nil || ms.Annotations[demo.MaxSizeAnnotation] != "2" {
			return false
		}
		for _, l := range strings.Split(ms.Annotations[capacity.LabelsKey], ",") {
			if k, v, _ := strings.Cut(l, "="); k == corev1.LabelInstanceTypeStable {
				typeLabel = v
			}
		}
		return typeLabel != ""
	})
	pod := func(name string, selector map[string]string) *corev1.Pod {
		selector["node-role.kubernetes.io/worker"] = ""
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.WorkloadNamespace},
			Spec: corev1.PodSpec{
				NodeSelector: selector,
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/demo-app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			},
		}
	}
	wantType := map[string]string{demo.Cloudscale: "flex-16-4", demo.Exoscale: "standard.extra-large"}[e.Options.Cloud]
	byType := pod("by-instance-type", map[string]string{corev1.LabelInstanceTypeStable: wantType})
	byZone := pod("by-zone", map[string]string{corev1.LabelTopologyZone: e.OtherZone()})
	for _, p := range []*corev1.Pod{byType, byZone} {
		if err := e.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	zoneLabelled := e.Options.Cloud != demo.Exoscale
	replicas := func(name string) int32 {
		var ms machinev1.MachineSet
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &ms); err != nil || ms.Spec.Replicas == nil {
			return -1
		}
		return *ms.Spec.Replicas
	}
	running := func(p *corev1.Pod) bool {
		var cur corev1.Pod
		return e.Client.Get(ctx, client.ObjectKeyFromObject(p), &cur) == nil && cur.Status.Phase == corev1.PodRunning
	}
	notTriggered := func(p *corev1.Pod) bool {
		var events corev1.EventList
		_ = e.Client.List(ctx, &events, client.InNamespace(p.Namespace))
		return slices.ContainsFunc(events.Items, func(ev corev1.Event) bool {
			return ev.InvolvedObject.Name == p.Name && ev.Reason == "NotTriggerScaleUp"
		})
	}
	// The most replicas each MachineSet had while the pods waited: the
	// first is to stay at 0, the second to reach 1 and no more.
	most := map[string]int32{first: 0, second.Name: 0}
	watchFor(t, e, &m, 5*time.Minute, "the pods selecting "+second.Name+"'s Node Running on it", func() bool {
		for name := range most {
			most[name] = max(most[name], replicas(name))
		}
		if zoneLabelled {
			return running(byType) && running(byZone)
		}
		return running(byType) && notTriggered(byZone)
	})
	if most[first] != 0 || most[second.Name] > 1 {
		t.Errorf("only %s was to scale, to 1: %s scaled to %d, %s to %d", second.Name, first, most[first], second.Name, most[second.Name])
	}
	if !zoneLabelled {
		var cur corev1.Pod
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(byZone), &cur); err != nil || cur.Status.Phase != corev1.PodPending {
			t.Errorf("pod %s selecting a zone label no %s Node has: phase %q, want Pending (%v)", byZone.Name, e.Title(), cur.Status.Phase, err)
		}
	}
	// The pods run on the second MachineSet's Node, labelled by the CCM as
	// the template promised.
	var cur corev1.Pod
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(byType), &cur); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := e.Client.Get(ctx, client.ObjectKey{Name: cur.Spec.NodeName}, &node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[corev1.LabelInstanceTypeStable] != typeLabel {
		t.Errorf("node %s: instance type %q, the template promised %q", node.Name, node.Labels[corev1.LabelInstanceTypeStable], typeLabel)
	}
	assertLinked(t, e)
	t.Logf("scale-up by selector on %s: %s", e.Title(), m)
}

// workers selects the worker Nodes: not the control-plane Node that runs
// the operator's and the autoscaler's pods.
var workers = client.MatchingLabelsSelector{Selector: mustSelector("!node-role.kubernetes.io/master")}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

func watchFor(t *testing.T, e *demo.Env, m *demo.Milestones, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	watch(t, e, m, timeout, what, func(demo.State) bool { return cond() })
}
