package exoscale

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// clusterNet makes the managed private network the tests fix addresses
// on: 172.18.200.101 to .253.
func clusterNet(t *testing.T, e *fixture.Env) v3.UUID {
	t.Helper()
	c := sdk(e, "ch-gva-2")
	op := done(t, c)(c.CreatePrivateNetwork(context.Background(), v3.CreatePrivateNetworkRequest{
		Name: "clusternet", StartIP: []byte{172, 18, 200, 101}, EndIP: []byte{172, 18, 200, 253}, Netmask: []byte{255, 255, 255, 0},
	}))
	return op.Reference.ID
}

func withAddress(ip string) func(s map[string]any) {
	return func(s map[string]any) {
		s["privateNetworks"] = []any{map[string]string{"name": "clusternet", "ip": ip}}
	}
}

// failedWith waits for the Machine to fail and returns its error message.
func failedWith(t *testing.T, e *fixture.Env, name string) string {
	t.Helper()
	var msg string
	fixture.Eventually(t, 90*time.Second, name+" to fail", func() (bool, error) {
		m := getMachine(t, e, name)
		if m.Status.ErrorMessage != nil {
			msg = *m.Status.ErrorMessage
		}
		return phase(m) == machinev1.PhaseFailed, fmt.Errorf("phase %q, instances %d, events:\n%s", phase(m), len(instancesOf(e, name)), fixture.EventText(e.Events(t, name)))
	})
	return msg
}

// TestWhatTheCloudCanRefuteIsRefusedBeforeAnyWrite: a fixed address
// outside its network's range and a disk smaller than the template are
// refused from what the cloud's lists say, before anything is written:
// no instance is made only to be found wanting.
func TestWhatTheCloudCanRefuteIsRefusedBeforeAnyWrite(t *testing.T) {
	e := env(t, emu.Config{})
	clusterNet(t, e)
	e.Harness().ResetRequests()
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-address", spec(withAddress("172.18.200.20")))
	// RHCOS is 16 GiB: 12 passes the spec's bounds, not the template.
	createMachine(t, e, "worker-disk", spec(func(s map[string]any) { s["diskSize"] = 12 }))
	if msg := failedWith(t, e, "worker-address"); !strings.Contains(msg, "spec.providerSpec.value.privateNetworks[0].ip") || !strings.Contains(msg, "outside the address range 172.18.200.101-172.18.200.253") {
		t.Errorf("worker-address failed with %q, want the field and the range", msg)
	}
	if msg := failedWith(t, e, "worker-disk"); !strings.Contains(msg, "spec.providerSpec.value.diskSize") || !strings.Contains(msg, "at least 16 GiB") {
		t.Errorf("worker-disk failed with %q, want the field and the template's size", msg)
	}
	if n := writes(e); n != 0 {
		t.Errorf("%d writes to the cloud: %v", n, e.Harness().Requests())
	}
}

// TestRefusedAttachDeletesTheInstance: a step after the create that the
// cloud refuses for good (the fixed address is leased to another instance
// when the new one is attached) leaves no running instance behind a
// Machine stuck in Provisioning: the instance is deleted, the Machine fails
// naming the field, and goes at once when deleted.
func TestRefusedAttachDeletesTheInstance(t *testing.T) {
	e := env(t, emu.Config{})
	ctx := context.Background()
	netID := clusterNet(t, e)
	c := sdk(e, "ch-gva-2")
	tpl := e.Exoscale.TemplateID("openshift", "ch-gva-2", "rhcos-4.19")
	other := done(t, c)(c.CreateInstance(ctx, v3.CreateInstanceRequest{Name: "someone-else", DiskSize: 20,
		InstanceType: &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("standard.small"))}, Template: &v3.Template{ID: v3.UUID(tpl)}}))
	done(t, c)(c.AttachInstanceToPrivateNetwork(ctx, netID, v3.AttachInstanceToPrivateNetworkRequest{
		Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: other.Reference.ID}, IP: []byte{172, 18, 200, 150}}))
	e.Harness().ResetRequests()
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(withAddress("172.18.200.150")))
	msg := failedWith(t, e, "worker-a")
	if !strings.Contains(msg, "spec.providerSpec.value.privateNetworks[0].ip") || !strings.Contains(msg, "172.18.200.150") {
		t.Errorf("worker-a failed with %q, want the field and the address", msg)
	}
	fixture.Eventually(t, 60*time.Second, "worker-a's instance deleted", func() (bool, error) {
		return len(instancesOf(e, "worker-a")) == 0, nil
	})
	// The event saying why the instance was deleted, sent apart from the
	// delete: awaited.
	e.AwaitEvent(t, "worker-a", "HalfMadeServer")
	if n := e.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d creates, want 1 (a refused attach is not retried by another instance)", n)
	}
	e.DeleteMachine(t, "worker-a")
	e.WaitMachineGone(t, "worker-a", 60*time.Second)
	if n := e.Exoscale.CountInstances(); n != 1 {
		t.Errorf("%d instances, want only someone-else's", n)
	}
	assertNoCanary(t, e)
}
