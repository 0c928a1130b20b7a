package exoscale

import (
	"context"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

// A Node without a providerID that reports only its instance's private
// address (a cluster without the Exoscale CCM, on a private network) holds
// the deletion of the instance's Machine also right after a restart of the
// manager, whose client has read no lease yet: the veto reads them right
// before the delete. Once the Node is gone, the instance goes.
func TestNodeOnAPrivateAddressHoldsTheDeleteAfterARestart(t *testing.T) {
	e := env(t, emu.Config{})
	ctx := context.Background()
	c := sdk(e, "ch-gva-2")
	done(t, c)(c.CreatePrivateNetwork(ctx, v3.CreatePrivateNetworkRequest{
		Name: "c1_clusternet", StartIP: []byte{172, 18, 200, 101}, EndIP: []byte{172, 18, 200, 253}, Netmask: []byte{255, 255, 255, 0},
	}))
	stop := startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) {
		s["privateNetworks"] = []any{map[string]string{"name": "c1_clusternet"}}
	}))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	id := strings.TrimPrefix(*m.Spec.ProviderID, "exoscale://")
	inst, _ := e.Exoscale.Instance(id)
	if len(inst.PrivateIPs) != 1 {
		t.Fatalf("the instance leases %v", inst.PrivateIPs)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-a"}}
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: inst.PrivateIPs[0]}}
	if err := e.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	stop()
	e.DeleteMachine(t, "worker-a")
	startManager(t, e, manager.Options{})
	waitEvent(t, e, "worker-a", "DeleteRefused", id, "Node worker-a (by name and address)")
	if _, there := e.Exoscale.Instance(id); !there {
		t.Fatal("the instance was deleted under its Node, which reports its private address")
	}
	if err := e.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	e.WaitMachineGone(t, "worker-a", 3*time.Minute)
	if _, there := e.Exoscale.Instance(id); there {
		t.Error("the instance outlived its Machine once the Node was gone")
	}
}
