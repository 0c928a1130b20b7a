package actuator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// Servers that carry a Machine's identity beside the one it records (an
// operator's mistake, a cloud's fault) are resolved: the recorded one stays,
// an extra without a Node is deleted, an extra a Node runs on is kept and
// reported. The Machine never gets stuck on it.
func TestDuplicateServersAreResolved(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{ServerViewRefresh: time.Second})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	kept := serversOf(t, e, "worker-a")[0].UUID
	before := duplicatesMetric(t, "deleted")

	extra := func(name string) string {
		tags := cloudscale.TagMap{v1beta1.TagMachineName: "worker-a", v1beta1.TagClusterID: fixture.ClusterID}
		req := &cloudscale.ServerRequest{Name: name, Flavor: "flex-8-4", Image: "custom:rhcos-4.19", Zone: "rma1", SSHKeys: []string{}}
		req.Tags = &tags
		s, err := sdk(e).Servers.Create(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return s.UUID
	}
	idle, busy := extra("worker-a"), extra("worker-a")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-a-busy"}, Spec: corev1.NodeSpec{ProviderID: "cloudscale://" + busy}}
	if err := e.Client.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	// A reconcile, as the next resync would make.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"test/touch":"1"}}}`))
	if err := e.Client.Patch(context.Background(), m, patch); err != nil {
		t.Fatal(err)
	}
	// The machine controller reconciles a Provisioned Machine without a
	// Node every 30s; the view shows both extras by the next of them.
	fixture.Eventually(t, 90*time.Second, "the idle duplicate deleted and the busy one reported", func() (bool, error) {
		ids := map[string]bool{}
		for _, s := range serversOf(t, e, "worker-a") {
			ids[s.UUID] = true
		}
		events := fixture.EventText(e.Events(t, "worker-a"))
		for _, want := range []string{"DuplicateServerDeleted", idle, "DuplicateServer:", busy, "worker-a-busy"} {
			if !strings.Contains(events, want) {
				return false, fmt.Errorf("events lack %q:\n%s", want, events)
			}
		}
		return ids[kept] && ids[busy] && !ids[idle] && len(ids) == 2, fmt.Errorf("servers %v", ids)
	})
	if d := duplicatesMetric(t, "deleted") - before; d != 1 {
		t.Errorf("duplicate_servers_total{action=deleted} grew by %v, want 1", d)
	}
	if p := phase(getMachine(t, e, "worker-a")); p != machinev1.PhaseProvisioned {
		t.Errorf("the Machine is %s, want it to go on as Provisioned", p)
	}
	if got := getMachine(t, e, "worker-a").Spec.ProviderID; got == nil || *got != "cloudscale://"+kept {
		t.Errorf("providerID %v, want the recorded server %s", got, kept)
	}
}

func duplicatesMetric(t *testing.T, action string) float64 {
	t.Helper()
	return fixture.CounterSum(t, "machine_api_provider_duplicate_servers_total", map[string]string{"action": action})
}
