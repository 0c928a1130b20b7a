package matrix

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// How long each step may take: bounds for a loaded machine, not targets.
const (
	deployerWithin  = 3 * time.Minute
	podReadyWithin  = 4 * time.Minute
	scaleUpWithin   = 4 * time.Minute
	linkWithin      = 3 * time.Minute
	replaceWithin   = 5 * time.Minute
	scaleDownWithin = 4 * time.Minute
	replicas        = 3
)

// run is one era on one cloud, from an empty control plane to the audit.
func run(t *testing.T, e era, cloud, provider string) *result {
	res := newResult(e.name, cloud)
	dir, err := os.MkdirTemp("", "matrix-"+e.name+"-"+cloud+"-")
	if err != nil {
		t.Fatal(err)
	}
	res.logDir = dir
	t.Cleanup(func() {
		if t.Failed() || !res.passed() {
			t.Logf("logs of %s on %s kept in %s", e.name, cloud, dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &cell{t: t, era: e, cloud: cloud, provider: provider, dir: dir, ctx: ctx, res: res}
	c.start()
	// before the control plane stops (cleanups run last first): the
	// pods, the boot simulation and the Node's heartbeat
	t.Cleanup(func() {
		for _, p := range c.pods {
			p.Stop()
		}
		cancel()
	})
	c.openShift()
	c.emulate()
	c.install()
	c.startCCM()
	sim := bootsim.New(c.admin, c.servers, bootsim.Options{RegisterDelay: time.Second, External: true})
	go func() { _ = sim.Run(ctx) }()
	err = localcluster.RunNode(ctx, c.cluster.Config, localcluster.NodeOptions{
		Name: masterNode, IP: c.hostIP,
		Labels: map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": ""},
		Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}},
	})
	if err != nil {
		t.Fatal(err)
	}

	c.runDeployer()
	hooks := c.runWebhooks()
	pod := c.runControllers()
	if ms := c.createMachineSet(); ms != nil {
		c.scaleUp(ms)
		c.checkLinked(ms)
		c.checkMachineSetStatus(ms, replicas)
		c.replaceUnhealthy(ms)
		c.scaleDown(ms)
	} else {
		for _, name := range []string{chkScaleUp, chkNodeRef, chkStatus, chkMHC, chkScaleDown} {
			c.res.skip(name)
		}
	}
	c.checkWebhooks()
	c.checkStaysUp(pod, hooks)
	c.checkRBAC()
	return res
}

// images are what plays which image: the era's machine-api-operator
// binaries and the provider image's static binary. The kube-rbac-proxy
// image is none of them: its sidecars are skipped.
func (c *cell) images() map[string]string {
	return map[string]string{
		c.era.maoImage(): c.era.dir,
		providerImage:    filepath.Dir(c.provider),
	}
}

// runPod waits for the pod of Deployment name that the scheduler bound to
// this machine's Node (of its newest ReplicaSet) and runs it.
func (c *cell) runPod(name string, within time.Duration) (*localcluster.Pod, error) {
	var pod *corev1.Pod
	err := c.waitFor(within, "a pod of Deployment "+name+" bound to "+masterNode, func() (bool, string, error) {
		var err error
		pod, err = c.newestPod(name)
		if err != nil || pod == nil {
			return false, "", err
		}
		return pod.Spec.NodeName == masterNode, "pod " + pod.Name + " on node " + pod.Spec.NodeName, nil
	})
	if err != nil {
		return nil, err
	}
	p, err := localcluster.RunPod(c.ctx, c.cluster.Config, pod, localcluster.PodOptions{
		Images: c.images(), Dir: filepath.Join(c.dir, "pods"), HostIP: c.hostIP,
		// the emulator, which the provider calls
		Reach: []string{strings.TrimPrefix(c.emuURL, "http://")},
	})
	if err == nil {
		c.pods = append(c.pods, p)
	}
	return p, err
}

// newestPod is the pod of Deployment name's newest ReplicaSet that is not
// being deleted, nil if there is none yet.
func (c *cell) newestPod(name string) (*corev1.Pod, error) {
	var d appsv1.Deployment
	if err := c.admin.Get(c.ctx, key(name), &d); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	rev := d.Annotations["deployment.kubernetes.io/revision"]
	var rss appsv1.ReplicaSetList
	if err := c.admin.List(c.ctx, &rss, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil, err
	}
	for _, rs := range rss.Items {
		if rev == "" || rs.Annotations["deployment.kubernetes.io/revision"] != rev {
			continue
		}
		var pods corev1.PodList
		sel := labels.Set{"pod-template-hash": rs.Labels["pod-template-hash"]}
		for k, v := range d.Spec.Selector.MatchLabels {
			sel[k] = v
		}
		if err := c.admin.List(c.ctx, &pods, client.InNamespace(namespace), client.MatchingLabels(sel)); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				return &pods.Items[i], nil
			}
		}
	}
	return nil, nil
}

// runDeployer runs the deployer's pod until it has applied the
// controllers' Deployment and said which release it rendered, then stops
// it (scaled to zero, as an admin would): its ports are the controllers'
// too, and this machine has one network for both.
func (c *cell) runDeployer() {
	start := time.Now()
	pod, err := c.runPod(deployerDeployment, deployerWithin)
	if err != nil {
		c.res.fail(chkDeployer, "", err.Error())
		return
	}
	want, fit := deployer.ForVersion(c.era.version)
	var d appsv1.Deployment
	err = c.waitFor(deployerWithin, "the controllers' Deployment applied", func() (bool, string, error) {
		conds, err := deployer.ReadConditions(c.ctx, c.admin, namespace)
		if err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		cond := meta.FindStatusCondition(conds, deployer.ConditionDeployed)
		if cond == nil || cond.Reason != deployer.ReasonApplied {
			return false, fmt.Sprintf("Deployed: %+v", cond), nil
		}
		return c.admin.Get(c.ctx, key(deployer.DeploymentName(c.cloud)), &d) == nil, "", nil
	})
	if err != nil {
		c.res.fail(chkDeployer, "", err.Error()+"\n"+pod.Describe())
		return
	}
	var problems []string
	if got := d.Annotations[deployer.ReleaseAnnotation]; got != want.String() {
		problems = append(problems, fmt.Sprintf("the Deployment is rendered for %q, want %s", got, want))
	}
	conds, _ := deployer.ReadConditions(c.ctx, c.admin, namespace)
	known := meta.FindStatusCondition(conds, deployer.ConditionReleaseKnown)
	switch {
	case known == nil:
		problems = append(problems, "no "+deployer.ConditionReleaseKnown+" condition")
	case known.Reason != string(fit):
		problems = append(problems, fmt.Sprintf("%s: %s (%s), want %s", deployer.ConditionReleaseKnown, known.Reason, known.Message, fit))
	}
	if err := c.waitFor(time.Minute, "the deployer's pod Ready", func() (bool, string, error) { return pod.Ready(), pod.Describe(), nil }); err != nil {
		problems = append(problems, err.Error())
	}
	if exits := exitsOf(pod); len(exits) > 0 {
		problems = append(problems, exits...)
	}
	// one pod at a time on this machine's network
	if err := c.admin.Patch(c.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deployerDeployment, Namespace: namespace}},
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`))); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-pod.Done():
	case <-time.After(2 * time.Minute):
		c.t.Fatal("the deployer's pod did not stop after its Deployment was scaled to zero")
	}
	detail := want.String()
	if known != nil {
		detail += " " + known.Reason
	}
	if len(problems) > 0 {
		c.res.fail(chkDeployer, detail, strings.Join(problems, "\n"))
		return
	}
	c.res.pass(chkDeployer, detail+fmt.Sprintf(" %.0fs", time.Since(start).Seconds()))
}

// The Deployments of config/ the matrix runs besides the controllers'.
const (
	deployerDeployment = "machine-api-provider-deployer"
	webhookDeployment  = "machine-api-provider-webhook"
)

// runWebhooks runs one pod of the provider's webhook Deployment (its two
// replicas would share this machine's one network) and waits for it to be
// Ready; the controllers' start check waits for its Service to route to it.
func (c *cell) runWebhooks() *localcluster.Pod {
	pod, err := c.runPod(webhookDeployment, deployerWithin)
	if err != nil {
		c.res.fail(chkStart, "", "the webhooks' pod: "+err.Error())
		return nil
	}
	if err := c.waitFor(podReadyWithin, "the webhooks' pod Ready", func() (bool, string, error) { return pod.Ready(), pod.Describe(), nil }); err != nil {
		c.res.fail(chkStart, "", err.Error())
	}
	return pod
}

// runControllers runs the controllers' pod and waits for it to be Ready:
// every container started, its probes passing, the leader leases taken.
func (c *cell) runControllers() *localcluster.Pod {
	start := time.Now()
	pod, err := c.runPod(deployer.DeploymentName(c.cloud), deployerWithin)
	if err != nil {
		c.res.fail(chkStart, "", err.Error())
		return nil
	}
	c.t.Logf("controllers' pod %s: skipped %v (no local binary for their image)", pod.Name, pod.Skipped())
	err = c.waitFor(podReadyWithin, "the controllers' pod Ready", func() (bool, string, error) { return pod.Ready(), pod.Describe(), nil })
	if err != nil {
		c.res.fail(chkStart, "", err.Error())
		return pod
	}
	// the pod's readiness reaches the webhook Services' EndpointSlices
	// (the controller-manager's endpointslice controller): only then does
	// the API server find the webhooks
	err = c.waitFor(time.Minute, "the webhook Services routing to the pod", func() (bool, string, error) {
		var missing []string
		for _, svc := range []string{"machine-api-operator-webhook", "machine-api-provider-webhook"} {
			var slices discoveryv1.EndpointSliceList
			if err := c.admin.List(c.ctx, &slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
				return false, "", err
			}
			if !routes(slices.Items, c.podIPs()) {
				missing = append(missing, svc)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no ready endpoint at %v: %v", c.podIPs(), missing), nil
	})
	if err != nil {
		c.res.fail(chkStart, "", err.Error())
		return pod
	}
	leases := []string{"cluster-api-provider-machineset-leader", "cluster-api-provider-nodelink-leader",
		"cluster-api-provider-healthcheck-leader", c.cloud + "-machine-api-provider"}
	err = c.waitFor(2*time.Minute, "every controller's leader lease held", func() (bool, string, error) {
		var missing []string
		for _, name := range leases {
			var l coordinationv1.Lease
			if err := c.admin.Get(c.ctx, key(name), &l); err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not held: %v", missing), nil
	})
	if err != nil {
		c.res.fail(chkStart, "", err.Error()+"\n"+pod.Describe())
		return pod
	}
	c.res.pass(chkStart, fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
	return pod
}

// routes reports whether slices have a ready endpoint at one of ips.
func routes(eps []discoveryv1.EndpointSlice, ips []string) bool {
	for _, s := range eps {
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && len(e.Addresses) > 0 && slices.Contains(ips, e.Addresses[0]) {
				return true
			}
		}
	}
	return false
}

// podIPs are the IPs of the pods the cell runs (each has its own: the pod
// runner's networks).
func (c *cell) podIPs() []string {
	var out []string
	for _, p := range c.pods {
		out = append(out, p.IP())
	}
	return out
}

func (c *cell) msName() string { return clusterID + "-worker-" + c.cloud }

func (c *cell) machineLabels() map[string]string {
	return map[string]string{"machine.openshift.io/cluster-api-cluster": clusterID, "machine.openshift.io/cluster-api-machineset": c.msName()}
}

// createMachineSet creates the worker MachineSet at zero replicas, through
// the webhooks; nil when a webhook refused it.
func (c *cell) createMachineSet() *machinev1.MachineSet {
	zero := int32(0)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: c.msName(), Namespace: namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": clusterID}},
		Spec: machinev1.MachineSetSpec{
			Replicas: &zero,
			Selector: metav1.LabelSelector{MatchLabels: c.machineLabels()},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: c.machineLabels()}},
		},
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(c.providerSpec())}
	if err := c.admin.Create(c.ctx, ms); err != nil {
		c.res.fail(chkWebhooks, "refused", "creating the MachineSet: "+err.Error())
		return nil
	}
	return ms
}

// scale sets the MachineSet's replicas.
func (c *cell) scale(ms *machinev1.MachineSet, n int) error {
	return c.admin.Patch(c.ctx, ms, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)))
}

func (c *cell) machines() ([]machinev1.Machine, error) {
	var list machinev1.MachineList
	err := c.admin.List(c.ctx, &list, client.InNamespace(namespace), client.MatchingLabels(c.machineLabels()))
	return list.Items, err
}

// runningServers counts the emulator's running servers.
func (c *cell) runningServers() int {
	n := 0
	for _, s := range c.servers.Servers() {
		if s.Running {
			n++
		}
	}
	return n
}

// scaleUp: 0 -> 3 Machines, each with its server on the emulator.
func (c *cell) scaleUp(ms *machinev1.MachineSet) {
	start := time.Now()
	if err := c.scale(ms, replicas); err != nil {
		c.res.fail(chkScaleUp, "", err.Error())
		return
	}
	err := c.waitFor(scaleUpWithin, fmt.Sprintf("%d Machines with running servers", replicas), func() (bool, string, error) {
		ms, err := c.machines()
		if err != nil {
			return false, "", err
		}
		provisioned := 0
		var phases []string
		for _, m := range ms {
			if m.Spec.ProviderID != nil && *m.Spec.ProviderID != "" {
				provisioned++
			}
			phases = append(phases, m.Name+": "+ptrString(m.Status.Phase))
		}
		return len(ms) == replicas && provisioned == replicas && c.runningServers() == replicas,
			fmt.Sprintf("%d Machines (%s), %d provisioned, %d servers running", len(ms), strings.Join(phases, ", "), provisioned, c.runningServers()), nil
	})
	if err != nil {
		c.res.fail(chkScaleUp, "", err.Error())
		return
	}
	c.res.pass(chkScaleUp, fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
}

func ptrString(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// checkLinked: every Machine gets its Node (nodeRef, from nodelink) and
// the phase Running.
func (c *cell) checkLinked(ms *machinev1.MachineSet) {
	if !c.res.ok(chkScaleUp) {
		c.res.skip(chkNodeRef)
		return
	}
	start := time.Now()
	err := c.waitFor(linkWithin, "every Machine linked to its Node", func() (bool, string, error) {
		ms, err := c.machines()
		if err != nil {
			return false, "", err
		}
		linked := 0
		for _, m := range ms {
			if m.Status.NodeRef != nil && ptrString(m.Status.Phase) == string(machinev1.PhaseRunning) && initialized(c.ctx, c.admin, m.Status.NodeRef.Name) {
				linked++
			}
		}
		return len(ms) == replicas && linked == replicas, fmt.Sprintf("%d of %d Machines linked to Nodes the CCM initialized, and Running", linked, len(ms)), nil
	})
	if err != nil {
		c.res.fail(chkNodeRef, "", err.Error())
		return
	}
	c.res.pass(chkNodeRef, fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
}

// checkMachineSetStatus: the machineset controller's status follows
// (replicas, fully labeled, ready, available).
func (c *cell) checkMachineSetStatus(ms *machinev1.MachineSet, n int32) {
	if !c.res.ok(chkScaleUp) {
		c.res.skip(chkStatus)
		return
	}
	err := c.waitFor(linkWithin, fmt.Sprintf("the MachineSet's status at %d replicas", n), func() (bool, string, error) {
		return c.statusIs(ms, n)
	})
	if err != nil {
		c.res.fail(chkStatus, "", err.Error())
		return
	}
	c.res.pass(chkStatus, fmt.Sprintf("%d/%d/%d", n, n, n))
}

func (c *cell) statusIs(ms *machinev1.MachineSet, n int32) (bool, string, error) {
	if err := c.admin.Get(c.ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
		return false, "", err
	}
	s := ms.Status
	return s.Replicas == n && s.FullyLabeledReplicas == n && s.ReadyReplicas == n && s.AvailableReplicas == n && s.ObservedGeneration == ms.Generation,
		fmt.Sprintf("replicas %d, fully labeled %d, ready %d, available %d, observed generation %d of %d",
			s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas, s.ObservedGeneration, ms.Generation), nil
}

// replaceUnhealthy: a MachineHealthCheck sees all Machines healthy; one
// Node's kubelet goes silent; the Machine is deleted and replaced, and the
// MachineSet is back at 3 ready.
func (c *cell) replaceUnhealthy(ms *machinev1.MachineSet) {
	if !c.res.ok(chkNodeRef) {
		c.res.skip(chkMHC)
		return
	}
	start := time.Now()
	maxUnhealthy := intstr.FromString("100%")
	mhc := &machinev1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: namespace},
		Spec: machinev1.MachineHealthCheckSpec{
			Selector:     metav1.LabelSelector{MatchLabels: c.machineLabels()},
			MaxUnhealthy: &maxUnhealthy,
			UnhealthyConditions: []machinev1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 5 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Second}},
			},
		},
	}
	if err := c.admin.Create(c.ctx, mhc); err != nil {
		c.res.fail(chkMHC, "", err.Error())
		return
	}
	err := c.waitFor(linkWithin, "the MachineHealthCheck's status: all healthy", func() (bool, string, error) {
		if err := c.admin.Get(c.ctx, client.ObjectKeyFromObject(mhc), mhc); err != nil {
			return false, "", err
		}
		s := mhc.Status
		return s.ExpectedMachines != nil && *s.ExpectedMachines == replicas && s.CurrentHealthy != nil && *s.CurrentHealthy == replicas,
			fmt.Sprintf("status %+v", s), nil
	})
	if err != nil {
		c.res.fail(chkMHC, "", err.Error())
		return
	}
	machines, err := c.machines()
	if err != nil || len(machines) == 0 || machines[0].Status.NodeRef == nil {
		c.res.fail(chkMHC, "", fmt.Sprintf("no linked Machine to make unhealthy (%v)", err))
		return
	}
	sick := machines[0]
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sick.Status.NodeRef.Name}}
	// its kubelet stops reporting, as when the server hangs
	patch := `{"metadata":{"annotations":{"` + localcluster.KwokNodeAnnotation + `":null}}}`
	if err := c.admin.Patch(c.ctx, node, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		c.res.fail(chkMHC, "", err.Error())
		return
	}
	err = c.waitFor(replaceWithin, "Machine "+sick.Name+" replaced", func() (bool, string, error) {
		ms2, err := c.machines()
		if err != nil {
			return false, "", err
		}
		linked, gone := 0, true
		for _, m := range ms2 {
			if m.Name == sick.Name {
				gone = false
			} else if m.Status.NodeRef != nil {
				linked++
			}
		}
		ok, status, err := c.statusIs(ms, replicas)
		return gone && linked == replicas && ok && err == nil,
			fmt.Sprintf("%s gone: %t, %d others linked; MachineSet %s", sick.Name, gone, linked, status), err
	})
	if err != nil {
		c.res.fail(chkMHC, "", err.Error())
		return
	}
	for _, s := range c.servers.Servers() {
		if sick.Spec.ProviderID != nil && s.ProviderID == *sick.Spec.ProviderID {
			c.res.fail(chkMHC, "", "the replaced Machine's server "+s.ID+" is still there")
			return
		}
	}
	c.res.pass(chkMHC, fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
}

// scaleDown: 3 -> 0: no Machine, server or worker Node left, and the
// MachineSet's status at zero.
func (c *cell) scaleDown(ms *machinev1.MachineSet) {
	if !c.res.ok(chkScaleUp) {
		c.res.skip(chkScaleDown)
		return
	}
	// a workload on the workers, which the drain must evict
	if err := c.runWorkload(); err != nil {
		c.res.fail(chkScaleDown, "", err.Error())
		return
	}
	start := time.Now()
	if err := c.scale(ms, 0); err != nil {
		c.res.fail(chkScaleDown, "", err.Error())
		return
	}
	err := c.waitFor(scaleDownWithin, "no Machine, server or worker Node left", func() (bool, string, error) {
		machines, err := c.machines()
		if err != nil {
			return false, "", err
		}
		var nodes corev1.NodeList
		if err := c.admin.List(c.ctx, &nodes, client.HasLabels{"node-role.kubernetes.io/worker"}); err != nil {
			return false, "", err
		}
		var pods corev1.PodList
		if err := c.admin.List(c.ctx, &pods, client.InNamespace(workloadNamespace), client.MatchingLabels{"app": "workload"}); err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return len(machines) == 0 && len(c.servers.Servers()) == 0 && len(nodes.Items) == 0 && bound == 0,
			fmt.Sprintf("%d Machines, %d servers, %d worker Nodes, %d workload pods on a Node", len(machines), len(c.servers.Servers()), len(nodes.Items), bound), nil
	})
	if err == nil && c.res.ok(chkStatus) {
		err = c.waitFor(linkWithin, "the MachineSet's status at 0", func() (bool, string, error) { return c.statusIs(ms, 0) })
	}
	if err != nil {
		c.res.fail(chkScaleDown, "", err.Error())
		return
	}
	c.res.pass(chkScaleDown, fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
}

// workloadNamespace holds the workload the drain evicts.
const workloadNamespace = "default"

// runWorkload runs a Deployment of three pods on the workers (kwok plays
// their kubelets) and waits until they run.
func (c *cell) runWorkload() error {
	labels := map[string]string{"app": "workload"}
	three := int32(replicas)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workload", Namespace: workloadNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &three,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
	if err := c.admin.Create(c.ctx, d); err != nil {
		return err
	}
	return c.waitFor(time.Minute, "the workload running on the workers", func() (bool, string, error) {
		var pods corev1.PodList
		if err := c.admin.List(c.ctx, &pods, client.InNamespace(workloadNamespace), client.MatchingLabels(labels)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == replicas, fmt.Sprintf("%d of %d pods running", running, len(pods.Items)), nil
	})
}

// checkWebhooks: the era's and the provider's webhooks answered the
// Machine and MachineSet writes (the API server's audit annotations), and
// none failed open.
func (c *cell) checkWebhooks() {
	if c.res.get(chkWebhooks).status != "" {
		return // already failed: a write was refused
	}
	events, err := readAudit(c.audit)
	if err != nil {
		c.res.fail(chkWebhooks, "", err.Error())
		return
	}
	answered, failedOpen := webhookCalls(events)
	var problems []string
	for _, conf := range []string{"machine-api", "machine-api-provider"} {
		if answered[conf] == 0 {
			problems = append(problems, "no Machine or MachineSet write went through the mutating webhooks of "+conf)
		}
	}
	if len(failedOpen) > 0 {
		problems = append(problems, fmt.Sprintf("%d calls failed open, e.g. %s", len(failedOpen), failedOpen[0]))
	}
	if len(problems) > 0 {
		c.res.fail(chkWebhooks, "", strings.Join(problems, "\n"))
		return
	}
	c.res.pass(chkWebhooks, fmt.Sprintf("%d+%d", answered["machine-api"], answered["machine-api-provider"]))
}

// checkStaysUp: no container of the controllers' pod, nor of the
// webhooks', ever ended.
func (c *cell) checkStaysUp(pods ...*localcluster.Pod) {
	var exits []string
	n := 0
	for _, pod := range pods {
		if pod == nil {
			c.res.skip(chkStaysUp)
			return
		}
		exits = append(exits, exitsOf(pod)...)
		for _, s := range pod.Statuses() {
			n += len(s.Exits)
		}
	}
	if e := c.ccmExits(); len(e) > 0 {
		exits, n = append(exits, e...), n+1
	}
	if len(exits) > 0 {
		c.res.fail(chkStaysUp, fmt.Sprintf("%d exits", n), strings.Join(exits, "\n"))
		return
	}
	c.res.pass(chkStaysUp, "0 restarts")
}

// exitsOf describes every exit of the pod's containers.
func exitsOf(pod *localcluster.Pod) []string {
	var out []string
	for _, s := range pod.Statuses() {
		if n := len(s.Exits); n > 0 {
			e := s.Exits[n-1]
			out = append(out, fmt.Sprintf("%s: %d exits, the last with code %d (%s); its output began: %s",
				s.Name, n, e.Code, e.Reason, strings.ReplaceAll(strings.TrimSpace(e.Head), "\n", " | ")))
		}
		if s.Restarts > 0 && len(s.Exits) == 0 {
			out = append(out, fmt.Sprintf("%s: %d restarts", s.Name, s.Restarts))
		}
	}
	return out
}

// checkRBAC: no request of any of the namespace's service accounts was
// refused (403); the verbs granted but never used are reported.
func (c *cell) checkRBAC() {
	events, err := readAudit(c.audit)
	if err != nil {
		c.res.fail(chkRBAC, "", err.Error())
		return
	}
	counts := requestCount(events)
	for _, sa := range []string{"machine-api-provider-deployer", c.controllersSA()} {
		if counts[sa] == 0 {
			c.res.fail(chkRBAC, "", "the audit log has no request of "+sa+": it never ran as its service account")
			return
		}
		c.res.unused[sa] = unusedGrants(c.objs, sa, events)
	}
	refusals := refused(events)
	if len(refusals) == 0 {
		c.res.pass(chkRBAC, "0")
		return
	}
	var lines []string
	n := 0
	sas := make([]string, 0, len(refusals))
	for sa := range refusals {
		sas = append(sas, sa)
	}
	slices.Sort(sas)
	for _, sa := range sas {
		for _, r := range refusals[sa] {
			lines = append(lines, sa+": "+r)
			n++
		}
	}
	c.res.fail(chkRBAC, fmt.Sprintf("%d kinds", n), strings.Join(lines, "\n"))
}

// controllersSA is the service account the install runs the controllers
// as: the deployer's --service-account in config/overlays/<cloud>.
func (c *cell) controllersSA() string {
	for _, u := range c.objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		for _, a := range args {
			if sa, ok := strings.CutPrefix(a, "--service-account="); ok {
				return sa
			}
		}
	}
	c.t.Fatal("the install's deployer has no --service-account")
	return ""
}

func key(name string) client.ObjectKey { return client.ObjectKey{Namespace: namespace, Name: name} }

// waitFor polls cond every half second until it holds or within has
// passed; the error says what was awaited and the last state seen.
func (c *cell) waitFor(within time.Duration, what string, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(within)
	var last string
	var lastErr error
	for {
		ok, state, err := cond()
		if ok && err == nil {
			return nil
		}
		if state != "" {
			last = state
		}
		if err != nil && !apierrors.IsNotFound(err) {
			lastErr = err
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", within, what)
			if last != "" {
				msg += "; last seen: " + strings.TrimSpace(last)
			}
			if lastErr != nil {
				msg += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			return fmt.Errorf("%s", msg)
		}
		select {
		case <-c.ctx.Done():
			return c.ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
