package cloudscale_test

import (
	"context"
	"testing"
	"time"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestServerLifeCycle(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{BootTime: 5 * time.Second, ActionTime: 2 * time.Second})

	// Create: "changing" until the boot time has passed.
	s := v.createServer(serverReq("web"))
	if s.Status != "changing" {
		t.Fatalf("create answered status %q, want changing", s.Status)
	}
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(4*time.Second + 999*time.Millisecond)
	v.wantServerStatus(s.UUID, "changing")
	if l := v.listServers(); len(l) != 1 || l[0].Status != "changing" {
		t.Fatalf("list shows %+v, want the one changing server", l)
	}
	v.clock.Advance(time.Millisecond)
	v.wantServerStatus(s.UUID, "running")
	if l := v.listServers(); l[0].Status != "running" {
		t.Fatalf("list shows status %q, want running", l[0].Status)
	}

	// A flavor change is refused while running.
	err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Flavor: "flex-8-2"})
	fieldError(t, err, "flavor")
	if got := v.getServer(s.UUID).Flavor.Slug; got != "flex-4-1" {
		t.Fatalf("refused flavor change left flavor %q", got)
	}

	// Stop: "changing" for the action time, then "stopped".
	if err := v.client.Servers.Stop(v.ctx, s.UUID); err != nil {
		t.Fatalf("stop: %v", err)
	}
	v.wantServerStatus(s.UUID, "changing")
	// No other action while it changes.
	apiError(t, v.client.Servers.Start(v.ctx, s.UUID), 400)
	v.clock.Advance(time.Second)
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(time.Second)
	v.wantServerStatus(s.UUID, "stopped")

	// Stopped: a reboot is refused, a flavor change allowed.
	apiError(t, v.client.Servers.Reboot(v.ctx, s.UUID), 400)
	v.wantServerStatus(s.UUID, "stopped")
	if err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Flavor: "flex-8-2"}); err != nil {
		t.Fatalf("flavor change while stopped: %v", err)
	}
	got := v.getServer(s.UUID)
	if got.Flavor.Slug != "flex-8-2" || got.Flavor.VCPUCount != 2 || got.Flavor.MemoryGB != 8 {
		t.Fatalf("flavor after change %+v, want flex-8-2 (2 vCPU, 8 GB)", got.Flavor)
	}
	// An unknown flavor is refused even when stopped.
	fieldError(t, v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Flavor: "flex-0-0"}), "flavor")

	// Start: "changing" for the boot time, then "running".
	if err := v.client.Servers.Start(v.ctx, s.UUID); err != nil {
		t.Fatalf("start: %v", err)
	}
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(2 * time.Second)
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(3 * time.Second)
	v.wantServerStatus(s.UUID, "running")

	// Reboot: "changing" for the action time, then "running" again.
	if err := v.client.Servers.Reboot(v.ctx, s.UUID); err != nil {
		t.Fatalf("reboot: %v", err)
	}
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(2 * time.Second)
	v.wantServerStatus(s.UUID, "running")

	// The SDK's status shortcut goes through the same actions.
	if err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Status: cloudscale.ServerStopped}); err != nil {
		t.Fatalf("update status=stopped: %v", err)
	}
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(2 * time.Second)
	v.wantServerStatus(s.UUID, "stopped")
}

func TestActionTimeDefaultsToBootTime(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{BootTime: 3 * time.Second})
	s := v.createServer(serverReq("a"))
	v.clock.Advance(3 * time.Second)
	v.wantServerStatus(s.UUID, "running")
	if err := v.client.Servers.Stop(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	v.clock.Advance(3*time.Second - time.Nanosecond)
	v.wantServerStatus(s.UUID, "changing")
	v.clock.Advance(time.Nanosecond)
	v.wantServerStatus(s.UUID, "stopped")
}

func TestZeroBootTimeIsImmediate(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	s := v.createServer(serverReq("instant"))
	if s.Status != "running" {
		t.Fatalf("create answered status %q, want running at once", s.Status)
	}
	v.wantServerStatus(s.UUID, "running")
	if err := v.client.Servers.Stop(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	v.wantServerStatus(s.UUID, "stopped")
	if err := v.client.Servers.Start(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	v.wantServerStatus(s.UUID, "running")
}

func TestServerWaitForWithFakeClock(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{BootTime: time.Minute})
	s := v.createServer(serverReq("waiting"))
	v.clock.Advance(time.Minute)
	// The SDK's own polling helper sees the change on its first look; the
	// deadline keeps a regression from polling for the SDK's 5 minutes.
	ctx, cancel := context.WithTimeout(v.ctx, time.Second)
	defer cancel()
	got, err := v.client.Servers.WaitFor(ctx, s.UUID, cloudscale.ServerIsRunning)
	if err != nil {
		t.Fatalf("WaitFor: %v", err)
	}
	if got.Status != "running" {
		t.Fatalf("WaitFor returned status %q", got.Status)
	}
}

func TestServerRename(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	s := v.createServer(serverReq("old"))
	if err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Name: "new"}); err != nil {
		t.Fatal(err)
	}
	if got := v.getServer(s.UUID).Name; got != "new" {
		t.Fatalf("name %q after rename, want new", got)
	}
	// One attribute per PATCH, as on the real API.
	err := v.client.Servers.Update(v.ctx, s.UUID, &cloudscale.ServerUpdateRequest{Name: "newer", Flavor: "flex-8-2"})
	fieldError(t, err, "non_field_errors")
	if got := v.getServer(s.UUID).Name; got != "new" {
		t.Fatalf("refused PATCH renamed the server to %q", got)
	}
}

// A deleted server is still shown, "changing", for the delete time: what
// it had attached is released at once, and it is gone after.
func TestDeletedServerIsShownWhileItGoes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{DeleteTime: 10 * time.Second})
	s := v.createServer(serverReq("web"))
	if err := v.client.Servers.Delete(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	got := v.getServer(s.UUID)
	if got.Status != "changing" || len(got.Volumes) != 0 || len(got.Interfaces) != 0 {
		t.Fatalf("a deleted server shows status %q, %d volumes, %d interfaces; want changing, none attached", got.Status, len(got.Volumes), len(got.Interfaces))
	}
	if l := v.listServers(); len(l) != 1 {
		t.Fatalf("the list shows %d servers while one goes, want it", len(l))
	}
	// Deleting it again changes nothing.
	if err := v.client.Servers.Delete(v.ctx, s.UUID); err != nil {
		t.Fatalf("a second delete: %v", err)
	}
	v.clock.Advance(10 * time.Second)
	if l := v.listServers(); len(l) != 0 {
		t.Fatalf("the list shows %d servers after the delete time", len(l))
	}
	_, err := v.client.Servers.Get(v.ctx, s.UUID)
	apiError(t, err, 404)
}
