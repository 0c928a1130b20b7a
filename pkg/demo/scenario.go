package demo

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
)

// WorkloadNamespace and WorkloadName name the demo's Deployment.
const (
	WorkloadNamespace = "default"
	WorkloadName      = "demo-app"
)

// MachineSet returns the worker MachineSet, e.MachineSetName, on the
// environment's cloud, with no replicas. instanceType is the cloud's
// flavor or instance type; "" is DefaultInstanceType. Autoscaling it takes
// a MachineAutoscaler (autoscaling.go), whose bounds the
// cluster-autoscaler-operator writes onto it.
func (e *Env) MachineSet(instanceType string) *machinev1.MachineSet {
	return e.machineSet(e.MachineSetName, e.cloud.zone, instanceType)
}

// OtherMachineSet is a second worker MachineSet beside MachineSet's, with
// 0 replicas and the cloud's 4-vCPU, 16-GiB instance type (flex-16-4;
// on Exoscale standard.extra-large, named by its ID, as a spec may), in
// OtherZone: on cloudscale.ch another zone (lpg1), on Exoscale the same
// (ch-gva-2), as its CCM serves the one zone it is configured for (it asks
// that zone's API endpoint, which knows no instance of another zone: their
// Nodes stay uninitialized).
func (e *Env) OtherMachineSet() *machinev1.MachineSet {
	return e.machineSet(e.Options.ClusterID+"-worker-large-"+zoneSuffix(e.cloud.otherZone), e.cloud.otherZone, e.cloud.otherType)
}

// OtherZone is OtherMachineSet's zone.
func (e *Env) OtherZone() string { return e.cloud.otherZone }

// zoneSuffix ends a MachineSet's name, as an installer names them after
// their zone: rma1, gva2 (ch-gva-2).
func zoneSuffix(zone string) string {
	if parts := strings.Split(zone, "-"); len(parts) > 1 {
		return strings.Join(parts[1:], "")
	}
	return zone
}

func (e *Env) machineSet(name, zone, instanceType string) *machinev1.MachineSet {
	if instanceType == "" {
		instanceType = e.cloud.instanceType
	}
	labels := map[string]string{
		"machine.openshift.io/cluster-api-cluster":      e.Options.ClusterID,
		"machine.openshift.io/cluster-api-machineset":   name,
		"machine.openshift.io/cluster-api-machine-role": "worker",
		"machine.openshift.io/cluster-api-machine-type": "worker",
	}
	zero := int32(0)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: Namespace,
			Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": e.Options.ClusterID},
		},
		Spec: machinev1.MachineSetSpec{
			Replicas: &zero,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				"machine.openshift.io/cluster-api-cluster":    e.Options.ClusterID,
				"machine.openshift.io/cluster-api-machineset": name,
			}},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	ms.Spec.Template.Spec.ObjectMeta.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(e.cloud.providerSpec(zone, instanceType))}
	return ms
}

// Workload is a Deployment whose pods fit on no node there is.
func Workload(replicas int32, cpu string) *appsv1.Deployment {
	labels := map[string]string{"app": WorkloadName}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: WorkloadNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.example/demo-app:1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
					}},
					NodeSelector: map[string]string{"node-role.kubernetes.io/worker": ""},
				},
			},
		},
	}
}

// ScaleWorkload sets the Deployment's replicas.
func (e *Env) ScaleWorkload(ctx context.Context, replicas int32) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	return e.Client.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: WorkloadNamespace}}, patch)
}

// State is what the demo shows and the e2e test checks.
type State struct {
	Replicas                int32          // the MachineSet's
	Machines                map[string]int // by phase
	MachineCount            int
	Servers, ServersRunning int
	Nodes, NodesReady       int // workers: the control plane's are not counted
	// NodesUninitialized are Nodes still waiting for the
	// cloud-controller-manager (tainted uninitialized): not counted Ready,
	// as no pod can run there yet.
	NodesUninitialized       int
	Workload                 int32 // the Deployment's replicas: pods wanted
	PodsPending, PodsRunning int
}

// Zero is the end of the cycle: the MachineSet scaled to 0, and no Machine,
// Node or server left.
func (s State) Zero() bool {
	return s.Replicas == 0 && s.MachineCount == 0 && s.Nodes == 0 && s.Servers == 0
}

// Observe reads the State.
func (e *Env) Observe(ctx context.Context) (State, error) {
	st := State{Machines: map[string]int{}}
	var ms machinev1.MachineSet
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: e.MachineSetName}, &ms); err == nil && ms.Spec.Replicas != nil {
		st.Replicas = *ms.Spec.Replicas
	}
	var machines machinev1.MachineList
	if err := e.Client.List(ctx, &machines, client.InNamespace(Namespace)); err != nil {
		return st, err
	}
	for _, m := range machines.Items {
		phase := "Pending"
		if m.Status.Phase != nil && *m.Status.Phase != "" {
			phase = *m.Status.Phase
		}
		if m.DeletionTimestamp != nil {
			phase = "Deleting"
		}
		st.Machines[phase]++
		st.MachineCount++
	}
	for _, s := range e.Servers() {
		st.Servers++
		if s.Running {
			st.ServersRunning++
		}
	}
	var nodes corev1.NodeList
	if err := e.Client.List(ctx, &nodes); err != nil {
		return st, err
	}
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/master"]; cp {
			continue
		}
		st.Nodes++
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == bootsim.UninitializedTaint.Key }) {
			st.NodesUninitialized++
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				st.NodesReady++
			}
		}
	}
	var deploy appsv1.Deployment
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: WorkloadNamespace, Name: WorkloadName}, &deploy); err == nil && deploy.Spec.Replicas != nil {
		st.Workload = *deploy.Spec.Replicas
	}
	var pods corev1.PodList
	if err := e.Client.List(ctx, &pods, client.InNamespace(WorkloadNamespace), client.MatchingLabels{"app": WorkloadName}); err != nil {
		return st, err
	}
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodRunning:
			st.PodsRunning++
		case p.Status.Phase == corev1.PodPending:
			st.PodsPending++
		}
	}
	return st, nil
}

// String is one line of the progress view.
func (s State) String() string {
	phases := make([]string, 0, len(s.Machines))
	for p, n := range s.Machines {
		phases = append(phases, fmt.Sprintf("%d %s", n, p))
	}
	sort.Strings(phases)
	machines := "none"
	if len(phases) > 0 {
		machines = strings.Join(phases, ", ")
	}
	uninitialized := ""
	if s.NodesUninitialized > 0 {
		uninitialized = fmt.Sprintf(" (%d uninitialized)", s.NodesUninitialized)
	}
	return fmt.Sprintf("replicas %d | machines: %-34s | servers %d (%d running) | nodes %d/%d Ready%s | pods %d running, %d pending",
		s.Replicas, machines, s.Servers, s.ServersRunning, s.NodesReady, s.Nodes, uninitialized, s.PodsRunning, s.PodsPending)
}

// Milestones records when the cycle reached each phase, as the time since
// the first Watch began; 0 is not (yet). Watch marks them all but
// WorkloadGone, which the caller sets when it scales the workload to 0.
type Milestones struct {
	start                                            time.Time
	FirstMachine, FirstServerRunning, FirstNodeReady time.Duration
	AllPodsRunning                                   time.Duration
	WorkloadGone                                     time.Duration
	LastMachineGone, LastNodeGone, LastServerGone    time.Duration
}

// Elapsed is the time since the first Watch began.
func (m *Milestones) Elapsed() time.Duration { return time.Since(m.start) }

// String gives the phase times reached so far, e.g. "first Machine 9.3s,
// first server running 12.3s, first Node Ready 14.4s, all pods Running
// 19.4s, workload gone 19.5s, last server gone 68.1s (48.6s later)".
func (m Milestones) String() string {
	var parts []string
	add := func(what string, d time.Duration) {
		if d != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", what, round(d)))
		}
	}
	add("first Machine", m.FirstMachine)
	add("first server running", m.FirstServerRunning)
	add("first Node Ready", m.FirstNodeReady)
	add("all pods Running", m.AllPodsRunning)
	add("workload gone", m.WorkloadGone)
	add("last Machine gone", m.LastMachineGone)
	add("last Node gone", m.LastNodeGone)
	add("last server gone", m.LastServerGone)
	if m.WorkloadGone != 0 && m.LastServerGone != 0 {
		parts[len(parts)-1] += fmt.Sprintf(" (%s later)", round(m.LastServerGone-m.WorkloadGone))
	}
	return strings.Join(parts, ", ")
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// Watch prints the State every interval via show and records milestones,
// until until says the scenario step is done or ctx ends.
func (e *Env) Watch(ctx context.Context, m *Milestones, interval time.Duration, show func(time.Duration, State), until func(State) bool) (State, error) {
	if m.start.IsZero() {
		m.start = time.Now()
	}
	for {
		st, err := e.Observe(ctx)
		if err != nil {
			return st, err
		}
		el := time.Since(m.start)
		mark := func(d *time.Duration, reached bool) {
			if *d == 0 && reached {
				*d = el
			}
		}
		mark(&m.FirstMachine, st.MachineCount > 0)
		mark(&m.FirstServerRunning, st.ServersRunning > 0)
		mark(&m.FirstNodeReady, st.NodesReady > 0)
		mark(&m.AllPodsRunning, st.Workload > 0 && int(st.Workload) == st.PodsRunning)
		if m.WorkloadGone != 0 {
			mark(&m.LastMachineGone, st.MachineCount == 0)
			mark(&m.LastNodeGone, st.Nodes == 0)
			mark(&m.LastServerGone, st.Servers == 0)
		}
		if show != nil {
			show(el, st)
		}
		if until(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(interval):
		}
		if e.kubelet != nil {
			if err := e.kubelet.failed(); err != nil {
				return st, fmt.Errorf("%w; the logs are in %s", err, e.kubelet.o.Dir)
			}
		}
		if err := e.ccmFailed(); err != nil {
			return st, err
		}
	}
}
