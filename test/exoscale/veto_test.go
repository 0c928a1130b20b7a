package exoscale

import (
	"context"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
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
	node := fixture.NodeWithoutProviderID(t, e, "worker-a", inst.PrivateIPs[0])
	stop()
	e.DeleteMachine(t, "worker-a")
	startManager(t, e, manager.Options{})
	heldUntilNodeGone(t, e, "worker-a", id, node)
}

// heldUntilNodeGone checks that the deletion of a Machine waits, saying
// so, while the Node runs on its instance id (by name and address), and
// goes with the instance once the Node is deleted.
func heldUntilNodeGone(t *testing.T, e *fixture.Env, machine, id string, node *corev1.Node) {
	t.Helper()
	waitEvent(t, e, machine, "DeleteRefused", id, "Node "+node.Name+" (by name and address)")
	if _, there := e.Exoscale.Instance(id); !there {
		t.Fatalf("the instance was deleted under its Node, which reports %v", node.Status.Addresses)
	}
	if err := e.Client.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	e.WaitMachineGone(t, machine, 3*time.Minute)
	if _, there := e.Exoscale.Instance(id); there {
		t.Error("the instance outlived its Machine once the Node was gone")
	}
}
