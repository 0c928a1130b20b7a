package uninstall_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/adopt"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/pkg/uninstall"
)

// stopped is a Stopper of controllers that are not there.
type stopped struct{ starts int }

func (*stopped) Describe() []string                                  { return []string{"nothing"} }
func (*stopped) Stop(context.Context, func(string, ...any)) error    { return nil }
func (s *stopped) Start(context.Context, func(string, ...any)) error { s.starts++; return nil }

func start(t *testing.T) client.WithWatch {
	t.Helper()
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t))
	scheme, err := adopt.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUninstall runs its cases on one control plane, each in a namespace
// of its own.
func TestUninstall(t *testing.T) {
	c := start(t)
	for name, run := range map[string]func(*testing.T, client.WithWatch, string){
		"release-is-not-a-race":          releaseIsNotARace,
		"undo-releases-what-adopt-wrote": undoReleasesWhatAdoptWrote,
		"deployment-stopper":             deploymentStopper,
	} {
		t.Run(name, func(t *testing.T) {
			if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				t.Fatal(err)
			}
			run(t, c, name)
		})
	}
}

// release plans, prints and applies; the plan and the progress are in out.
func release(t *testing.T, c client.Client, o uninstall.Options) (*uninstall.Plan, *uninstall.Report, *bytes.Buffer, error) {
	t.Helper()
	out := &bytes.Buffer{}
	o.Out = out
	u, err := uninstall.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := u.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Print(out, true)
	r, err := u.Apply(context.Background(), p)
	return p, r, out, err
}

func spec(kind string) machinev1beta1.ProviderSpec {
	return machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"` + kind + `","zone":"rma1"}`)}}
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// releaseIsNotARace: Machines with the machine controller's finalizer,
// owned by a MachineSet, are released while something puts the finalizer
// back on every Machine that lacks it, as a machine controller still
// running would: each goes all the same, and none is ever seen with a
// deletion timestamp (what a machine controller drains, and deletes the
// server and the Node for). Machines of another provider stay; the
// MachineSet goes. The racer puts it back three times per Machine, then
// stops, as a machine controller does once the stop step has ended it:
// one that never stopped would win every round on a loaded host (release
// gives up after ten, and says so).
func releaseIsNotARace(t *testing.T, c client.WithWatch, ns string) {
	ctx := context.Background()
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-worker-rma1", Finalizers: []string{"example.com/keep"}}}
	ms.Spec.Selector.MatchLabels = map[string]string{"set": "w"}
	ms.Spec.Template.Labels = map[string]string{"set": "w"}
	ms.Spec.Template.Spec.ProviderSpec = spec("CloudscaleMachineProviderSpec")
	create(t, c, ms)
	var names []string
	for _, n := range []string{"worker-a", "worker-b", "worker-c"} {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Labels: map[string]string{"set": "w"},
			Finalizers:      []string{"machine.machine.openshift.io"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ms, machinev1beta1.GroupVersion.WithKind("MachineSet"))}}}
		m.Spec.ProviderSpec = spec("CloudscaleMachineProviderSpec")
		m.Spec.ProviderID = ptr.To("cloudscale://" + n)
		create(t, c, m)
		names = append(names, n)
	}
	other := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-a", Finalizers: []string{"machine.machine.openshift.io"}}}
	other.Spec.ProviderSpec = machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig"}`)}}
	create(t, c, other)

	// The machine controller that would not stop, and a watch for any
	// Machine that gets a deletion timestamp.
	w, err := c.Watch(ctx, &machinev1beta1.MachineList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deleting []string
	putBack := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*machinev1beta1.Machine)
			if !ok {
				continue
			}
			if m.DeletionTimestamp != nil {
				mu.Lock()
				deleting = append(deleting, m.Name)
				mu.Unlock()
			}
			if ev.Type == watch.Modified && len(m.Finalizers) == 0 && m.DeletionTimestamp == nil && putBack[m.Name] < 3 {
				m.Finalizers = []string{"machine.machine.openshift.io"}
				if c.Update(ctx, m) == nil {
					putBack[m.Name]++
				}
			}
		}
	}()

	p, r, out, err := release(t, c, uninstall.Options{Namespace: ns, Cloud: "cloudscale", Stopper: &stopped{}})
	w.Stop()
	if len(p.Machines) != 3 || len(p.MachineSets) != 1 {
		t.Fatalf("plan: %d Machines, MachineSets %v; want worker-a to -c and c1-worker-rma1\n%s", len(p.Machines), p.MachineSets, out.String())
	}
	<-done
	if err != nil || r.Machines != 3 || r.MachineSets != 1 {
		t.Fatalf("apply: %+v, %v\n%s", r, err, out.String())
	}
	if len(deleting) > 0 {
		t.Errorf("Machines seen with a deletion timestamp, which a machine controller acts on: %v", deleting)
	}
	t.Logf("finalizers put back, by Machine: %v", putBack)
	for _, n := range names {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &machinev1beta1.Machine{}); !apierrors.IsNotFound(err) {
			t.Errorf("Machine %s: %v, want it gone", n, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), &machinev1beta1.Machine{}); err != nil {
		t.Errorf("another provider's Machine: %v, want it kept", err)
	}
	// The MachineSet is gone, or (no garbage collector here to take the
	// orphan finalizer off) being deleted with nothing to cascade to.
	var got machinev1beta1.MachineSet
	if err := c.Get(ctx, client.ObjectKeyFromObject(ms), &got); err == nil && got.DeletionTimestamp == nil {
		t.Errorf("MachineSet still there: %+v", got.ObjectMeta)
	}
	wantLeftAlone(t, c, ns, "cloudscale", "`machine-api-provider uninstall`", names...)
}

// wantLeftAlone checks that the servers of the released Machines are
// recorded as left alone (pkg/orphans, Adoptions): they keep the
// provider's identity without a Machine, and the janitor of the
// controllers started again (the undo) or of a later install must never
// take them for orphans.
func wantLeftAlone(t *testing.T, c client.Client, ns, cloudName, by string, servers ...string) {
	t.Helper()
	recorded, err := (&orphans.Adoptions{Client: c, Namespace: ns, Cloud: cloudName}).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range servers {
		if a, ok := recorded[id]; !ok || !strings.Contains(a.LeftAlone, by) {
			t.Errorf("server %s of a released Machine: recorded %+v, want it left alone, released by %s", id, a, by)
		}
	}
	if len(recorded) != len(servers) {
		t.Errorf("recorded as left alone %v, want %v", recorded, servers)
	}
}

// undoReleasesWhatAdoptWrote: adopt --undo releases the Machines adopt
// adopted and the MachineSet it wrote, keeps the Machine the provider made
// in it since (without the owner, with its finalizer), keeps a MachineSet
// adopt did not write, and starts the controllers again.
func undoReleasesWhatAdoptWrote(t *testing.T, c client.WithWatch, ns string) {
	ctx := context.Background()
	set := func(name string, written bool) *machinev1beta1.MachineSet {
		ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if written {
			ms.Annotations = map[string]string{adopt.WrittenAnnotation: "true"}
		}
		ms.Spec.Selector.MatchLabels = map[string]string{"set": name}
		ms.Spec.Template.Labels = map[string]string{"set": name}
		ms.Spec.Template.Spec.ProviderSpec = spec("ExoscaleMachineProviderSpec")
		create(t, c, ms)
		return ms
	}
	adopted, own := set("c1-infra-gva2", true), set("c1-worker-gva2", false)
	machine := func(name string, owner *machinev1beta1.MachineSet, adoptedServer bool) {
		m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"machine.machine.openshift.io"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, machinev1beta1.GroupVersion.WithKind("MachineSet"))}}}
		if adoptedServer {
			m.Annotations = map[string]string{adopt.AdoptedAnnotation: name + ".example.com"}
			m.Spec.ProviderID = ptr.To("exoscale://" + name)
		}
		m.Spec.ProviderSpec = spec("ExoscaleMachineProviderSpec")
		create(t, c, m)
	}
	machine("infra-7a8b", adopted, true)
	machine("c1-infra-gva2-x7k2p", adopted, false)
	machine("c1-worker-gva2-b2c4d", own, false)

	s := &stopped{}
	_, r, out, err := release(t, c, uninstall.Options{Namespace: ns, Cloud: "exoscale", AdoptedOnly: true, Stopper: s})
	if err != nil || r.Machines != 1 || r.MachineSets != 1 || s.starts != 1 {
		t.Fatalf("undo: %+v, %v, %d starts\n%s", r, err, s.starts, out.String())
	}
	if !strings.Contains(out.String(), "kept: Machine c1-infra-gva2-x7k2p") {
		t.Errorf("the plan does not say the provider's Machine stays:\n%s", out.String())
	}
	var kept machinev1beta1.Machine
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-infra-gva2-x7k2p"}, &kept); err != nil || len(kept.OwnerReferences) != 0 || len(kept.Finalizers) != 1 {
		t.Errorf("the provider's Machine: %+v, %v; want it kept, its finalizer too, without the owner", kept.ObjectMeta, err)
	}
	for _, n := range []string{"c1-worker-gva2-b2c4d"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &machinev1beta1.Machine{}); err != nil {
			t.Errorf("Machine %s of a MachineSet adopt did not write: %v", n, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(own), &machinev1beta1.MachineSet{}); err != nil {
		t.Errorf("the MachineSet adopt did not write: %v", err)
	}
	wantLeftAlone(t, c, ns, "exoscale", "`machine-api-provider adopt --undo`", "infra-7a8b")
}

// deploymentStopper: the deployer, then the controllers go to 0
// replicas; the machine controller's lease must have lapsed (a fresh one
// is a machine controller still running somewhere: refused); Start gives
// both their replicas back; an OLM-installed deployer is refused, naming
// what to delete first.
func deploymentStopper(t *testing.T, c client.WithWatch, ns string) {
	ctx := context.Background()
	deploy := func(name string, replicas int32, labels map[string]string) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
		d.Spec.Replicas = ptr.To(replicas)
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
		d.Spec.Template.Labels = map[string]string{"app": name}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "example.com/x:1"}}
		create(t, c, d)
	}
	deploy(uninstall.DeployerName, 1, nil)
	deploy(uninstall.ControllersName("cloudscale"), 2, nil)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uninstall.LeaseName("cloudscale")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("manager-abc"), LeaseDurationSeconds: ptr.To(int32(3600)), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	create(t, c, lease)
	s := &uninstall.DeploymentStopper{Client: c, Namespace: ns, Cloud: "cloudscale", Wait: 2 * time.Second, Poll: 200 * time.Millisecond}
	nop := func(string, ...any) {}
	if err := s.Stop(ctx, nop); err == nil || !strings.Contains(err.Error(), "a machine controller still runs") {
		t.Fatalf("stop with a fresh lease: %v, want a machine controller still running", err)
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-2 * time.Hour)}
	if err := c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx, nop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	replicas := func(name string) int32 {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	}
	if a, b := replicas(uninstall.DeployerName), replicas(uninstall.ControllersName("cloudscale")); a != 0 || b != 0 {
		t.Errorf("after Stop: %d and %d replicas, want 0", a, b)
	}
	if err := s.Start(ctx, nop); err != nil {
		t.Fatal(err)
	}
	if a, b := replicas(uninstall.DeployerName), replicas(uninstall.ControllersName("cloudscale")); a != 1 || b != 2 {
		t.Errorf("after Start: %d and %d replicas, want 1 and 2", a, b)
	}

	olm := &uninstall.DeploymentStopper{Client: c, Namespace: ns, Cloud: "exoscale", Wait: time.Second, Poll: 100 * time.Millisecond}
	if err := c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uninstall.DeployerName}}); err != nil {
		t.Fatal(err)
	}
	deploy(uninstall.DeployerName, 1, map[string]string{"olm.owner": "machine-api-provider-exoscale.v0.1.0"})
	if err := olm.Stop(ctx, nop); err == nil || !strings.Contains(err.Error(), "delete subscription machine-api-provider-exoscale") {
		t.Errorf("stop under OLM: %v, want it refused naming the Subscription", err)
	}
}
