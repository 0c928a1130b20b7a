package e2e

import (
	"context"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/demo"
)

// The product's reason to exist: pods that fit nowhere make the real
// cluster-autoscaler scale a MachineSet up from zero, using the capacity
// the provider publishes; when the pods go, it scales back to zero servers.
func TestAutoscalingFromZeroAndBack(t *testing.T) {
	e := start(t, true)
	ctx := context.Background()
	if err := e.Client.Create(ctx, demo.MachineSet("flex-8-4", 0, 4)); err != nil {
		t.Fatal(err)
	}
	var m demo.Milestones
	watchFor(t, e, &m, time.Minute, "the capacity annotations", func() bool {
		var ms machinev1.MachineSet
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineSetName}, &ms)
		return err == nil && ms.Annotations["machine.openshift.io/vCPU"] == "4"
	})
	const pods = 6 // 1.5 CPU each: two per 4-vCPU worker, so three workers
	if err := e.Client.Create(ctx, demo.Workload(pods, "1500m")); err != nil {
		t.Fatal(err)
	}
	st := watch(t, e, &m, 5*time.Minute, "every pod Running", func(s demo.State) bool { return s.PodsRunning == pods })
	m.AllPodsRunning = m.Elapsed()
	if st.Replicas < 3 || st.Replicas > 4 {
		t.Errorf("the autoscaler asked for %d workers; 6 pods of 1.5 CPU need 3", st.Replicas)
	}
	assertLinked(t, e)
	t.Logf("scale-up: first Machine %s, first server running %s, first Node Ready %s, all pods Running %s",
		m.FirstMachine, m.FirstServerRunning, m.FirstNodeReady, m.AllPodsRunning)

	if err := e.ScaleWorkload(ctx, 0); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// The pinned cluster-autoscaler (the only one the module proxy serves
	// here) cannot scale a node group to 0: its clusterapi provider's
	// SetSize sends a merge patch whose replicas of 0 is dropped by
	// omitempty. Fixed upstream by kubernetes/autoscaler#8412 (2025-08).
	watch(t, e, &m, 5*time.Minute, "zero servers and zero Machines (the last node stays if the cluster-autoscaler lacks kubernetes/autoscaler#8412)", func(s demo.State) bool {
		return s.Servers == 0 && s.Replicas == 0 && s.MachineCount == 0
	})
	t.Logf("scale-down: zero servers %s after the workload went", time.Since(down).Round(100*time.Millisecond))
}

func watchFor(t *testing.T, e *demo.Env, m *demo.Milestones, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	watch(t, e, m, timeout, what, func(demo.State) bool { return cond() })
}
