package capacity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

const (
	timeout    = 20 * time.Second
	flavorsAPI = "GET /v1/flavors"
)

var scheme = runtime.NewScheme()

func init() {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := machinev1.Install(scheme); err != nil {
		panic(err)
	}
	log.SetLogger(funcr.New(func(prefix, args string) {
		if testing.Verbose() {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{Verbosity: 1}))
}

// TestController runs the controller in a manager against envtest and the
// real cloudscale.ch cloud implementation talking to the emulator. Every
// subtest has its own namespace, emulator and manager.
func TestController(t *testing.T) {
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t))

	t.Run("PublishesFlavor", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		ms := e.create(machineSet("workers", spec("flex-16-4", 80), func(ms *machinev1.MachineSet) {
			ms.Spec.Template.Spec.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
		}))
		a := e.waitPublished(ms)

		want := map[string]string{
			capacity.CPUKey:             "4",
			capacity.MemoryKey:          "16384Mi",
			capacity.EphemeralDiskKey:   "80Gi",
			capacity.OpenShiftVCPUKey:   "4",
			capacity.OpenShiftMemoryKey: "16384",
			capacity.OpenShiftGPUKey:    "0",
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s = %q, want %q", k, a[k], v)
			}
		}
		for _, k := range []string{capacity.GPUCountKey, capacity.GPUTypeKey, capacity.GPUModelKey, capacity.TaintsKey} {
			if v, ok := a[k]; ok {
				t.Errorf("%s = %q, want it absent without GPUs/taints", k, v)
			}
		}
		wantLabels := "kubernetes.io/arch=amd64,node-role.kubernetes.io/worker=,node.kubernetes.io/instance-type=flex-16-4,topology.kubernetes.io/region=rma,topology.kubernetes.io/zone=rma1"
		if a[capacity.LabelsKey] != wantLabels {
			t.Errorf("labels = %q, want %q", a[capacity.LabelsKey], wantLabels)
		}
		e.waitEvent(ms, corev1.EventTypeNormal, capacity.ReasonPublished, "flex-16-4")
		c := e.condition(e.get(ms))
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != capacity.ReasonPublished {
			t.Errorf("condition = %+v, want True/%s", c, capacity.ReasonPublished)
		}
	})

	// A MachineSet copied from another cluster (its label names that
	// cluster) is left alone: no lookup, no account, so that it never
	// enrols that cluster's servers in the janitor; a condition and an
	// event say which cluster it names and which this one is.
	t.Run("LeavesAnotherClustersMachineSetAlone", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{ClusterID: "c1-x7k2p"})
		label := func(id string) func(*machinev1.MachineSet) {
			return func(ms *machinev1.MachineSet) {
				ms.Labels = map[string]string{"machine.openshift.io/cluster-api-cluster": id}
				ms.Spec.Template.Labels["machine.openshift.io/cluster-api-cluster"] = id
			}
		}
		copied := e.create(machineSet("copied", spec("flex-16-4", 80), label("other-cluster-b1")))
		e.waitEvent(copied, corev1.EventTypeWarning, capacity.ReasonOtherCluster, `names cluster "other-cluster-b1", and this cluster is "c1-x7k2p"`)
		if c := e.condition(e.get(copied)); c == nil || c.Status != corev1.ConditionFalse || c.Reason != capacity.ReasonOtherCluster {
			t.Errorf("condition = %+v, want False/%s", c, capacity.ReasonOtherCluster)
		}
		if n := e.lookups.Load(); n != 0 {
			t.Errorf("%d flavor lookups for another cluster's MachineSet", n)
		}
		if a := e.get(copied).Annotations; a[capacity.CPUKey] != "" {
			t.Errorf("published %v for another cluster's MachineSet", a)
		}
		e.waitPublished(e.create(machineSet("ours", spec("flex-16-4", 80), label("c1-x7k2p"))))
	})

	t.Run("PublishesGPUFlavor", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		ms := e.create(machineSet("gpu", spec("gpu2-128-16-1-200", 0)))
		a := e.waitPublished(ms)
		want := map[string]string{
			capacity.CPUKey:             "16",
			capacity.MemoryKey:          "131072Mi",
			capacity.EphemeralDiskKey:   fmt.Sprintf("%dGi", v1beta1.DefaultRootVolumeSizeGB),
			capacity.GPUCountKey:        "1",
			capacity.GPUTypeKey:         "nvidia.com/gpu",
			capacity.OpenShiftVCPUKey:   "16",
			capacity.OpenShiftMemoryKey: "131072",
			capacity.OpenShiftGPUKey:    "1",
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s = %q, want %q", k, a[k], v)
			}
		}
		if !strings.Contains(a[capacity.GPUModelKey], "NVIDIA") {
			t.Errorf("%s = %q, want the GPU model", capacity.GPUModelKey, a[capacity.GPUModelKey])
		}
		if !hasLabel(a, "node.kubernetes.io/instance-type=gpu2-128-16-1-200") {
			t.Errorf("labels = %q, want the instance type", a[capacity.LabelsKey])
		}
	})

	t.Run("PublishesTaints", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		ms := e.create(machineSet("tainted", spec("flex-8-2", 0), func(ms *machinev1.MachineSet) {
			ms.Spec.Template.Spec.Taints = []corev1.Taint{
				{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/drain", Effect: corev1.TaintEffectNoExecute},
			}
		}))
		a := e.waitPublished(ms)
		if want := "dedicated=infra:NoSchedule,example.com/drain:NoExecute"; a[capacity.TaintsKey] != want {
			t.Errorf("taints = %q, want %q", a[capacity.TaintsKey], want)
		}

		// A taint removed from the template leaves the annotation.
		e.update(ms, func(ms *machinev1.MachineSet) { ms.Spec.Template.Spec.Taints = ms.Spec.Template.Spec.Taints[:1] })
		e.eventually("taint withdrawn", func() (bool, string) {
			v := e.get(ms).Annotations[capacity.TaintsKey]
			return v == "dedicated=infra:NoSchedule", v
		})
	})

	t.Run("KeepsHandSetLabels", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		// Set before the controller ever ran: the user's, both of them,
		// including one that collides with a label the controller publishes.
		ms := e.create(machineSet("handset", spec("flex-16-4", 0), func(ms *machinev1.MachineSet) {
			ms.Annotations = map[string]string{capacity.LabelsKey: "team=ml,topology.kubernetes.io/zone=custom"}
			ms.Spec.Template.Spec.Labels = map[string]string{"pool": "a"}
		}))
		a := e.waitPublished(ms)
		for _, l := range []string{"team=ml", "topology.kubernetes.io/zone=custom", "pool=a", "node.kubernetes.io/instance-type=flex-16-4"} {
			if !hasLabel(a, l) {
				t.Errorf("labels = %q, want %s", a[capacity.LabelsKey], l)
			}
		}
		if hasLabel(a, "topology.kubernetes.io/zone=rma1") {
			t.Errorf("labels = %q: the published zone overrode the hand-set one", a[capacity.LabelsKey])
		}
		if p := a[capacity.PublishedLabelsKey]; strings.Contains(p, "team") || strings.Contains(p, "topology.kubernetes.io/zone") {
			t.Errorf("%s = %q lists the user's labels", capacity.PublishedLabelsKey, p)
		}

		// Another flavor and another template label: ours follow, theirs stay.
		e.update(ms, func(ms *machinev1.MachineSet) {
			setSpec(ms, spec("flex-8-2", 0))
			ms.Spec.Template.Spec.Labels = map[string]string{"pool": "b"}
		})
		e.eventually("labels follow the flavor", func() (bool, string) {
			a := e.get(ms).Annotations
			return a[capacity.CPUKey] == "2" && hasLabel(a, "node.kubernetes.io/instance-type=flex-8-2"), a[capacity.LabelsKey]
		})
		a = e.get(ms).Annotations
		want := "node.kubernetes.io/instance-type=flex-8-2,kubernetes.io/arch=amd64,pool=b,team=ml,topology.kubernetes.io/region=rma,topology.kubernetes.io/zone=custom"
		if !sameLabels(a[capacity.LabelsKey], want) {
			t.Errorf("labels = %q, want %q", a[capacity.LabelsKey], want)
		}
		if l := a[capacity.LabelsKey]; !isSorted(l) {
			t.Errorf("labels %q are not sorted", l)
		}

		// A label the user adds later is theirs as well.
		e.update(ms, func(ms *machinev1.MachineSet) {
			ms.Annotations[capacity.LabelsKey] += ",gpu.example.com/product=none"
		})
		e.update(ms, func(ms *machinev1.MachineSet) { setSpec(ms, spec("flex-16-4", 0)) })
		e.eventually("added label survives", func() (bool, string) {
			a := e.get(ms).Annotations
			return a[capacity.CPUKey] == "4" && hasLabel(a, "gpu.example.com/product=none") && hasLabel(a, "team=ml"), a[capacity.LabelsKey]
		})
	})

	t.Run("UnknownFlavor", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		ms := e.create(machineSet("unknown", spec("flex-16-4", 0), func(ms *machinev1.MachineSet) {
			ms.Annotations = map[string]string{capacity.LabelsKey: "team=ml"}
		}))
		e.waitPublished(ms)

		e.update(ms, func(ms *machinev1.MachineSet) { setSpec(ms, spec("flex-999-1", 0)) })
		e.waitEvent(ms, corev1.EventTypeWarning, capacity.ReasonUnknown, "flex-999-1")
		e.eventually("condition False", func() (bool, string) {
			c := e.condition(e.get(ms))
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == capacity.ReasonUnknown, fmt.Sprintf("%+v", c)
		})
		c := e.condition(e.get(ms))
		if !strings.Contains(c.Message, "flex-999-1") {
			t.Errorf("condition message %q does not name the flavor", c.Message)
		}
		// What described the old flavor is gone; the user's label stays.
		a := e.get(ms).Annotations
		for _, k := range []string{capacity.CPUKey, capacity.MemoryKey, capacity.OpenShiftVCPUKey, capacity.PublishedLabelsKey} {
			if v, ok := a[k]; ok {
				t.Errorf("%s = %q still published for an unknown flavor", k, v)
			}
		}
		if a[capacity.LabelsKey] != "team=ml" {
			t.Errorf("labels = %q, want the hand-set team=ml only", a[capacity.LabelsKey])
		}

		// No hot loop: the flavor API is left alone until the spec changes.
		// (The cloud caches the flavor list, so the lookups through the cloud
		// interface are counted too.)
		before, lookups := e.emu.Harness().Count(flavorsAPI), e.lookups.Load()
		time.Sleep(3 * time.Second)
		if n := e.emu.Harness().Count(flavorsAPI) - before; n > 1 {
			t.Errorf("%d flavor API calls in 3s for an unknown flavor, want at most 1", n)
		}
		if n := e.lookups.Load() - lookups; n > 1 {
			t.Errorf("%d flavor lookups in 3s for an unknown flavor, want at most 1", n)
		}
		// One warning, not one per reconcile.
		var warnings int32
		for _, ev := range e.eventsWithReason(e.get(ms), capacity.ReasonUnknown) {
			warnings += max(ev.Count, 1)
		}
		if warnings != 1 {
			t.Errorf("%d %s warnings, want 1", warnings, capacity.ReasonUnknown)
		}

		// Fixing the spec publishes again.
		e.update(ms, func(ms *machinev1.MachineSet) { setSpec(ms, spec("flex-8-4", 0)) })
		e.eventually("published after the fix", func() (bool, string) {
			ms := e.get(ms)
			c := e.condition(ms)
			return ms.Annotations[capacity.CPUKey] == "4" && c != nil && c.Status == corev1.ConditionTrue, fmt.Sprintf("%v %+v", ms.Annotations, c)
		})
	})

	t.Run("InvalidSpec", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		ms := e.create(machineSet("invalid", map[string]any{
			"apiVersion": v1beta1.APIVersion, "kind": v1beta1.SpecKind, "zone": "rma1", "image": "custom:rhcos-4.19",
		}))
		e.waitEvent(ms, corev1.EventTypeWarning, capacity.ReasonUnknown, "flavor")
		e.eventually("condition False", func() (bool, string) {
			c := e.condition(e.get(ms))
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == capacity.ReasonUnknown, fmt.Sprintf("%+v", c)
		})
		if n := e.emu.Harness().Count(flavorsAPI); n != 0 {
			t.Errorf("%d flavor API calls for a spec without a flavor", n)
		}
	})

	t.Run("IgnoresOtherProviders", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		other := e.create(machineSet("aws", map[string]any{
			"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig", "instanceType": "m5.xlarge",
		}))
		// The controller has one worker: once a later MachineSet is
		// published, the other provider's has been looked at.
		e.waitPublished(e.create(machineSet("ours", spec("flex-4-2", 0))))
		e.update(other, func(ms *machinev1.MachineSet) { ms.Spec.Replicas = ptr.To[int32](2) })
		ours2 := e.create(machineSet("ours-2", spec("flex-4-2", 0)))
		e.waitPublished(ours2)
		// The recorder writes events in order: once ours-2's is there,
		// any about the other provider's would be too.
		e.waitEvent(ours2, corev1.EventTypeNormal, capacity.ReasonPublished, "")

		got := e.get(other)
		if len(got.Annotations) != 0 {
			t.Errorf("annotations of another provider's MachineSet: %v", got.Annotations)
		}
		if len(got.Status.Conditions) != 0 {
			t.Errorf("conditions of another provider's MachineSet: %v", got.Status.Conditions)
		}
		if ev := e.events(got); len(ev) != 0 {
			t.Errorf("events about another provider's MachineSet: %v", ev)
		}
	})

	t.Run("SteadyState", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{})
		ms := e.create(machineSet("steady", spec("flex-16-4", 0), func(ms *machinev1.MachineSet) {
			ms.Annotations = map[string]string{capacity.LabelsKey: "team=ml"}
			ms.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}
		}))
		e.waitPublished(ms)
		// Let the reconcile that our own write caused finish.
		e.eventually("settled", func() (bool, string) {
			n := e.lookups.Load()
			time.Sleep(500 * time.Millisecond)
			return e.lookups.Load() == n, fmt.Sprint(n)
		})
		published := e.get(ms)
		patches, statusPatches, lookups := e.patches.Load(), e.statusPatches.Load(), e.lookups.Load()

		const touches = 5
		for i := range touches {
			e.update(ms, func(ms *machinev1.MachineSet) { ms.Annotations["example.com/touch"] = fmt.Sprint(i) })
			want := lookups + int64(i) + 1
			e.eventually("reconciled after a touch", func() (bool, string) {
				return e.lookups.Load() >= want, fmt.Sprintf("%d flavor lookups, want %d", e.lookups.Load(), want)
			})
		}
		time.Sleep(500 * time.Millisecond)
		if n := e.patches.Load() - patches; n != 0 {
			t.Errorf("%d annotation patches in %d reconciles with nothing changed", n, touches)
		}
		if n := e.statusPatches.Load() - statusPatches; n != 0 {
			t.Errorf("%d status patches in %d reconciles with nothing changed", n, touches)
		}
		got := e.get(ms)
		for k, v := range published.Annotations {
			if got.Annotations[k] != v && k != "example.com/touch" {
				t.Errorf("%s changed from %q to %q", k, v, got.Annotations[k])
			}
		}
		if !got.Status.Conditions[0].LastTransitionTime.Equal(&published.Status.Conditions[0].LastTransitionTime) {
			t.Error("condition rewritten")
		}
		// the first publishing's event, sent asynchronously, then no other
		e.waitEvent(got, corev1.EventTypeNormal, capacity.ReasonPublished, "")
		if n := len(e.eventsWithReason(got, capacity.ReasonPublished)); n != 1 {
			t.Errorf("%d %s events, want 1", n, capacity.ReasonPublished)
		}
	})

	t.Run("TokenSecret", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{SecretRequeue: 500 * time.Millisecond})
		s := spec("flex-16-4", 0)
		s["tokenSecret"] = map[string]any{"name": "cloudscale-token"}
		ms := e.create(machineSet("token", s))
		e.waitEvent(ms, corev1.EventTypeWarning, capacity.ReasonTokenSecretMissing, "cloudscale-token")
		e.eventually("condition False", func() (bool, string) {
			c := e.condition(e.get(ms))
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == capacity.ReasonTokenSecretMissing, fmt.Sprintf("%+v", c)
		})
		if n := e.emu.Harness().Count(flavorsAPI); n != 0 {
			t.Errorf("%d flavor API calls without a token", n)
		}

		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "cloudscale-token", Namespace: e.ns},
			Data:       map[string][]byte{"token": []byte("secret-token")},
		}
		if err := e.c.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		e.waitPublished(ms)
	})

	t.Run("RetriesTransientErrors", func(t *testing.T) {
		e := start(t, cfg, capacity.Options{RetryRequeue: 200 * time.Millisecond})
		if err := e.emu.Harness().AddRule(harness.Rule{Route: flavorsAPI, ErrorRate: 1, ErrorStatus: 503, Times: 3}); err != nil {
			t.Fatal(err)
		}
		ms := e.create(machineSet("transient", spec("flex-16-4", 0)))
		e.waitPublished(ms)
		// Events are written in order: an Unknown one of the failures
		// would be there before the Published one.
		e.waitEvent(ms, corev1.EventTypeNormal, capacity.ReasonPublished, "")
		if fired := e.emu.Harness().Rules()[0].Fired; fired != 3 {
			t.Errorf("fault rule fired %d times, want 3", fired)
		}
		if ev := e.eventsWithReason(e.get(ms), capacity.ReasonUnknown); len(ev) != 0 {
			t.Errorf("transient errors reported as unknown capacity: %v", ev)
		}
	})
}

// env is one subtest's world: a namespace, an emulator and a manager
// running the controller on that namespace.
type env struct {
	t   *testing.T
	c   client.Client // uncached
	ns  string
	emu *emucs.Emulator

	// patches and statusPatches count the controller's writes to
	// MachineSets; lookups its flavor lookups.
	patches, statusPatches, lookups atomic.Int64
}

func start(t *testing.T, cfg *rest.Config, opts capacity.Options) *env {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "capacity-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, ns: ns.Name}

	e.emu, err = emucs.New(emucs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.emu)
	t.Cleanup(srv.Close)
	var cl cloud.Cloud = cscloud.New(cscloud.Options{BaseURL: srv.URL + "/", DefaultToken: "t"})

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{e.ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.SpecKind == "" {
		opts.SpecKind = v1beta1.SpecKind
	}
	r := capacity.New(
		countingClient{Client: mgr.GetClient(), patches: &e.patches, statusPatches: &e.statusPatches},
		cloud.NewAccounts(countingCloud{Cloud: cl, n: &e.lookups}, cloud.AccountOptions{}),
		mgr.GetEventRecorderFor("machineset-capacity"),
		opts,
	)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return e
}

func spec(flavor string, rootGB int) map[string]any {
	s := map[string]any{
		"apiVersion": v1beta1.APIVersion,
		"kind":       v1beta1.SpecKind,
		"zone":       "rma1",
		"flavor":     flavor,
		"image":      "custom:rhcos-4.19",
		"interfaces": []any{map[string]any{"type": "Public"}},
	}
	if rootGB > 0 {
		s["rootVolumeSizeGB"] = rootGB
	}
	return s
}

func setSpec(ms *machinev1.MachineSet, spec map[string]any) {
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: raw}
}

func machineSet(name string, spec map[string]any, mutate ...func(*machinev1.MachineSet)) *machinev1.MachineSet {
	labels := map[string]string{"machine.openshift.io/cluster-api-machineset": name}
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: machinev1.MachineSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	setSpec(ms, spec)
	for _, m := range mutate {
		m(ms)
	}
	return ms
}

func (e *env) create(ms *machinev1.MachineSet) *machinev1.MachineSet {
	e.t.Helper()
	ms.Namespace = e.ns
	if err := e.c.Create(context.Background(), ms); err != nil {
		e.t.Fatalf("creating MachineSet %s: %v", ms.Name, err)
	}
	return ms
}

func (e *env) get(ms *machinev1.MachineSet) *machinev1.MachineSet {
	e.t.Helper()
	got := &machinev1.MachineSet{}
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(ms), got); err != nil {
		e.t.Fatalf("getting MachineSet %s: %v", ms.Name, err)
	}
	return got
}

// update changes the MachineSet as a user would, retrying on conflicts.
func (e *env) update(ms *machinev1.MachineSet, mutate func(*machinev1.MachineSet)) {
	e.t.Helper()
	for {
		cur := e.get(ms)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		mutate(cur)
		err := e.c.Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			e.t.Fatalf("updating MachineSet %s: %v", ms.Name, err)
		}
	}
}

func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPublished waits for the CapacityPublished condition to be True and
// returns the annotations.
func (e *env) waitPublished(ms *machinev1.MachineSet) map[string]string {
	e.t.Helper()
	var got *machinev1.MachineSet
	e.eventually("capacity of "+ms.Name+" published", func() (bool, string) {
		got = e.get(ms)
		c := e.condition(got)
		return c != nil && c.Status == corev1.ConditionTrue && got.Annotations[capacity.CPUKey] != "",
			fmt.Sprintf("condition %+v, annotations %v", c, got.Annotations)
	})
	return got.Annotations
}

func (e *env) condition(ms *machinev1.MachineSet) *machinev1.Condition {
	for i, c := range ms.Status.Conditions {
		if c.Type == capacity.ConditionType {
			return &ms.Status.Conditions[i]
		}
	}
	return nil
}

func (e *env) events(ms *machinev1.MachineSet) []corev1.Event {
	e.t.Helper()
	list := &corev1.EventList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "MachineSet" && ev.InvolvedObject.Name == ms.Name {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) eventsWithReason(ms *machinev1.MachineSet, reason string) []corev1.Event {
	e.t.Helper()
	var out []corev1.Event
	for _, ev := range e.events(ms) {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) waitEvent(ms *machinev1.MachineSet, typ, reason, inMessage string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s event %s about %s", typ, reason, ms.Name), func() (bool, string) {
		evs := e.events(ms)
		for _, ev := range evs {
			if ev.Type == typ && ev.Reason == reason && strings.Contains(ev.Message, inMessage) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events: %v", evs)
	})
}

func hasLabel(a map[string]string, label string) bool {
	for _, l := range strings.Split(a[capacity.LabelsKey], ",") {
		if l == label {
			return true
		}
	}
	return false
}

func sameLabels(a, b string) bool {
	x, y := strings.Split(a, ","), strings.Split(b, ",")
	if len(x) != len(y) {
		return false
	}
	seen := map[string]bool{}
	for _, l := range x {
		seen[l] = true
	}
	for _, l := range y {
		if !seen[l] {
			return false
		}
	}
	return true
}

func isSorted(labels string) bool {
	var prev string
	for _, l := range strings.Split(labels, ",") {
		k, _, _ := strings.Cut(l, "=")
		if k < prev {
			return false
		}
		prev = k
	}
	return true
}

// countingClient counts the patches of MachineSets and their status.
type countingClient struct {
	client.Client
	patches, statusPatches *atomic.Int64
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.patches.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), n: c.statusPatches}
}

type countingStatus struct {
	client.SubResourceWriter
	n *atomic.Int64
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.n.Add(1)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// countingCloud counts flavor lookups: one per reconcile that gets that far.
type countingCloud struct {
	cloud.Cloud
	n *atomic.Int64
}

func (c countingCloud) NewClient(creds cloud.Credentials, gate *cloud.Gate) (cloud.Client, error) {
	cl, err := c.Cloud.NewClient(creds, gate)
	if err != nil {
		return nil, err
	}
	return countingCloudClient{Client: cl, n: c.n}, nil
}

type countingCloudClient struct {
	cloud.Client
	n *atomic.Int64
}

func (c countingCloudClient) Flavor(ctx context.Context, zone, name string) (*cloud.Flavor, error) {
	c.n.Add(1)
	return c.Client.Flavor(ctx, zone, name)
}
