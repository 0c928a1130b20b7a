package actuator_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestStopLookStartLosesNothing follows docs/runbooks/stop-and-start.md
// with the real deployer: the test plays the kubelet of the controllers'
// Deployment, running the provider (the machine controller of the
// machine-api-operator with this actuator) while the Deployment has a
// replica. Stopped by the ConfigMap, nothing reaches the cloud, whatever
// happens to the Machines meanwhile (one deleted, one created); started
// again, each is done: the deleted Machine's server is deleted, the new
// Machine gets one server, the untouched Machine keeps its server, and no
// server is made twice or left behind.
func TestStopLookStartLosesNothing(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	ns := fixture.Namespace
	if err := e.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: ns},
		Data:       map[string]string{deployer.ImagesKey: `{"machineAPIOperator": "mao:1", "kubeRBACProxy": "proxy:1"}`},
	}); err != nil {
		t.Fatal(err)
	}
	dep, err := deployer.NewManager(e.Config, deployer.ManagerOptions{
		Options:            deployer.Options{Namespace: ns, ProviderImage: "provider:1", ClusterID: fixture.ClusterID},
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", AllowManyPerProcess: true, Log: e.Logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, dep)
	k := playKubelet(t, e, types.NamespacedName{Namespace: ns, Name: deployer.DeploymentName("")})
	fixture.Eventually(t, time.Minute, "the provider running", func() (bool, error) { return k.running(), nil })

	createMachine(t, e, "worker-a", spec(nil))
	createMachine(t, e, "worker-b", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	waitPhase(t, e, "worker-b", machinev1.PhaseProvisioned)
	serverA, serverB := serversOf(t, e, "worker-a")[0].UUID, serversOf(t, e, "worker-b")[0].UUID

	// Stop.
	if err := e.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.StopConfigMap, Namespace: ns},
		Data:       map[string]string{deployer.StopReasonKey: "INC-1234"},
	}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, time.Minute, "the provider stopped", func() (bool, error) { return !k.running(), nil })
	conds, err := deployer.ReadConditions(ctx, e.Client, ns)
	if c := meta.FindStatusCondition(conds, deployer.ConditionStopped); err != nil || c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "INC-1234") {
		t.Fatalf("condition %s: %+v (%v), want True naming the reason", deployer.ConditionStopped, c, err)
	}

	// Look: what happens to the Machines meanwhile reaches no cloud.
	h := e.Emulator.Harness()
	h.ResetRequests()
	e.DeleteMachine(t, "worker-a")
	createMachine(t, e, "worker-c", spec(nil))
	time.Sleep(3 * time.Second)
	if n := h.Total(); n != 0 {
		t.Errorf("%d requests reached the cloud while stopped: %v", n, h.Requests())
	}
	if len(serversOf(t, e, "worker-a")) != 1 || len(serversOf(t, e, "worker-c")) != 0 {
		t.Errorf("the servers changed while stopped")
	}
	if m := getMachine(t, e, "worker-a"); m.DeletionTimestamp == nil || !slices.Contains(m.Finalizers, machinev1.MachineFinalizer) {
		t.Errorf("worker-a: deleted %v, finalizers %v: want it waiting for the provider", m.DeletionTimestamp, m.Finalizers)
	}

	// Start again.
	if err := e.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.StopConfigMap, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	e.WaitMachineGone(t, "worker-a", 2*time.Minute)
	waitPhase(t, e, "worker-c", machinev1.PhaseProvisioned)
	if s := serversOf(t, e, "worker-a"); len(s) != 0 {
		t.Errorf("worker-a's server %s is left", serverA)
	}
	if s := serversOf(t, e, "worker-b"); len(s) != 1 || s[0].UUID != serverB {
		t.Errorf("worker-b's servers %v, want its own %s", s, serverB)
	}
	if s := serversOf(t, e, "worker-c"); len(s) != 1 {
		t.Errorf("worker-c has %d servers, want 1", len(s))
	}
	all, err := sdk(e).Servers.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Errorf("%d servers in the cloud, want worker-b's and worker-c's", len(all))
	}
	assertNoCanary(t, e)
}

// kubelet runs the provider while a Deployment has a replica, as the
// kubelet runs its pod: started when it is scaled up, stopped (as a pod
// is killed) when it is scaled to 0.
type kubelet struct {
	mu   sync.Mutex
	stop func()
}

func (k *kubelet) running() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stop != nil
}

func playKubelet(t *testing.T, e *fixture.Env, key types.NamespacedName) *kubelet {
	k := &kubelet{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := func() (func(), error) {
		mgr, err := manager.New(e.Config, manager.Options{Cloud: e.Cloud("default-token"), ClusterID: fixture.ClusterID, Namespace: fixture.Namespace,
			MetricsBindAddress: "0", HealthProbeBindAddress: "0", Log: e.Logs.Logger(), AllowManyPerProcess: true})
		if err != nil {
			return nil, err
		}
		runCtx, stopRun := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() { ended <- mgr.Start(runCtx) }()
		return func() {
			stopRun()
			if err := <-ended; err != nil {
				t.Errorf("the provider: %v", err)
			}
		}, nil
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			d := &appsv1.Deployment{}
			want := e.Client.Get(ctx, key, d) == nil && d.Spec.Replicas != nil && *d.Spec.Replicas > 0
			k.mu.Lock()
			switch {
			case want && k.stop == nil:
				stop, err := start()
				if err != nil {
					t.Errorf("starting the provider: %v", err)
				}
				k.stop = stop
			case !want && k.stop != nil:
				k.stop()
				k.stop = nil
			}
			k.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
		k.mu.Lock()
		if k.stop != nil {
			k.stop()
		}
		k.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return k
}
