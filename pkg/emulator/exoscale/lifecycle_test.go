package exoscale_test

import (
	"net"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestInstanceLifeCycle(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{BootTime: 10 * time.Second, ActionTime: 5 * time.Second, OperationTime: time.Second})
	c := v.client

	req := instanceReq("worker-1")
	req.Labels = v3.Labels{"cluster": "c1", "role": "worker"}
	op, id := v.create(c, req)
	if op.State != v3.OperationStatePending {
		t.Fatalf("create answered state %q, want pending", op.State)
	}
	if op.Reference.Command != "create-instance" || op.Reference.Link == "" {
		t.Fatalf("reference %+v, want command create-instance and a link", op.Reference)
	}

	// The instance is there at once, starting, with its addresses.
	inst := v.getInstance(c, id)
	if inst.State != v3.InstanceStateStarting || inst.Name != "worker-1" || inst.DiskSize != 20 {
		t.Fatalf("new instance %+v, want worker-1 starting with 20 GiB", inst)
	}
	if inst.PublicIP.To4() == nil || !net.ParseIP("198.19.128.0").Mask(net.CIDRMask(17, 32)).Equal(inst.PublicIP.Mask(net.CIDRMask(17, 32))) {
		t.Fatalf("public IP %v, want one of 198.19.128.0/17", inst.PublicIP)
	}
	if inst.Ipv6Address != "" {
		t.Fatalf("IPv6 %q without dual assignment", inst.Ipv6Address)
	}
	if inst.InstanceType.ID != typeMedium || inst.Template.ID != ubuntu {
		t.Fatalf("type %v and template %v, want the requested ones", inst.InstanceType, inst.Template)
	}
	if len(inst.SecurityGroups) != 1 {
		t.Fatalf("security groups %v, want the default one", inst.SecurityGroups)
	}

	if n, all := v.emu.CountInstances("starting"), v.emu.CountInstances(); n != 1 || all != 1 {
		t.Fatalf("CountInstances: %d starting of %d", n, all)
	}
	v.clock.Advance(9 * time.Second)
	v.wantState(c, id, v3.InstanceStateStarting)
	v.opState(c, op, v3.OperationStatePending)
	v.clock.Advance(time.Second)
	v.wantState(c, id, v3.InstanceStateRunning)
	v.opState(c, op, v3.OperationStateSuccess)

	// Stop: stopping, then stopped.
	stop := v.op(c.StopInstance(v.ctx, id))
	v.wantState(c, id, v3.InstanceStateStopping)
	v.clock.Advance(5 * time.Second)
	v.wantState(c, id, v3.InstanceStateStopped)
	v.opState(c, stop, v3.OperationStateSuccess)

	// Stopping a stopped instance changes nothing and succeeds.
	again := v.op(c.StopInstance(v.ctx, id))
	v.clock.Advance(time.Second)
	v.opState(c, again, v3.OperationStateSuccess)
	v.wantState(c, id, v3.InstanceStateStopped)

	// Start: starting for the boot time.
	start := v.op(c.StartInstance(v.ctx, id, v3.StartInstanceRequest{}))
	v.wantState(c, id, v3.InstanceStateStarting)
	// Another action while it starts is refused.
	_, err := c.StopInstance(v.ctx, id)
	apiError(t, err, v3.ErrConflict)
	v.clock.Advance(10 * time.Second)
	v.wantState(c, id, v3.InstanceStateRunning)
	v.opState(c, start, v3.OperationStateSuccess)

	// Reboot: starting for the action time.
	reboot := v.op(c.RebootInstance(v.ctx, id))
	v.wantState(c, id, v3.InstanceStateStarting)
	v.clock.Advance(5 * time.Second)
	v.wantState(c, id, v3.InstanceStateRunning)
	v.opState(c, reboot, v3.OperationStateSuccess)

	// Delete: destroying, then gone.
	del := v.op(c.DeleteInstance(v.ctx, id))
	if del.Reference.ID != id || del.Reference.Command != "delete-instance" {
		t.Fatalf("delete reference %+v", del.Reference)
	}
	v.wantState(c, id, v3.InstanceStateDestroying)
	// Deleting again while it goes answers an operation ending with it.
	del2 := v.op(c.DeleteInstance(v.ctx, id))
	v.clock.Advance(5 * time.Second)
	_, err = c.GetInstance(v.ctx, id)
	apiError(t, err, v3.ErrNotFound)
	v.opState(c, del, v3.OperationStateSuccess)
	v.opState(c, del2, v3.OperationStateSuccess)
	_, err = c.DeleteInstance(v.ctx, id)
	apiError(t, err, v3.ErrNotFound)
	if n := v.emu.CountInstances(); n != 0 {
		t.Fatalf("%d instances left", n)
	}
}

// With no boot and no operation time, everything is done when answered.
func TestImmediateOperations(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	op, id := v.create(v.client, instanceReq("quick"))
	if op.State != v3.OperationStateSuccess {
		t.Fatalf("create answered %q, want success", op.State)
	}
	v.wantState(v.client, id, v3.InstanceStateRunning)

	// The SDK's Wait returns at once for a done operation.
	start := time.Now()
	done, err := v.client.Wait(v.ctx, op, v3.OperationStateSuccess)
	if err != nil || done.State != v3.OperationStateSuccess {
		t.Fatalf("Wait: %+v, %v", done, err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("Wait took %v on a done operation", time.Since(start))
	}

	req := instanceReq("cold")
	req.AutoStart = ptr(false)
	_, cold := v.create(v.client, req)
	v.wantState(v.client, cold, v3.InstanceStateStopped)
}
