package exoscale_test

import (
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// A failed creation: the instance is there (starting) while the operation
// is pending, then the operation ends in failure and the instance is gone.
func TestFailedCreateLeavesNoInstance(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{
		BootTime: 10 * time.Second, OperationTime: time.Second,
		OperationFailures: []emu.OperationFailure{{Command: "create-instance", Rate: 1, Times: 1, Reason: "unavailable", Message: "no capacity left"}},
	})
	c := v.client
	op, id := v.create(c, instanceReq("unlucky"))
	v.wantState(c, id, v3.InstanceStateStarting)
	v.clock.Advance(9 * time.Second)
	v.opState(c, op, v3.OperationStatePending)
	v.clock.Advance(time.Second)
	failed := v.opState(c, op, v3.OperationStateFailure)
	if failed.Reason != v3.OperationReasonUnavailable || failed.Message != "no capacity left" || failed.Reference.ID != id {
		t.Fatalf("failed operation %+v", failed)
	}
	_, err := c.GetInstance(v.ctx, id)
	apiError(t, err, v3.ErrNotFound)
	if n := v.emu.CountInstances(); n != 0 {
		t.Fatalf("%d instances after a failed creation", n)
	}
	if f := v.emu.OperationFailures(); f[0].Fired != 1 {
		t.Fatalf("rule fired %d times", f[0].Fired)
	}
	// The rule is spent: the next creation works.
	op, id = v.create(c, instanceReq("lucky"))
	v.clock.Advance(10 * time.Second)
	v.opState(c, op, v3.OperationStateSuccess)
	v.wantState(c, id, v3.InstanceStateRunning)

	// The SDK's Wait reports the failure with reason and message.
	if err := v.emu.AddOperationFailure(emu.OperationFailure{Command: "stop-instance", Rate: 1}); err != nil {
		t.Fatal(err)
	}
	stop := v.op(c.StopInstance(v.ctx, id))
	v.wantState(c, id, v3.InstanceStateStopping)
	v.clock.Advance(10 * time.Second)
	v.opState(c, stop, v3.OperationStateFailure)
	// A failed stop leaves the instance as it was.
	v.wantState(c, id, v3.InstanceStateRunning)
}

// The SDK's Wait follows a pending operation to its end, by the wall clock.
func TestWaitFollowsOperations(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{BootTime: 500 * time.Millisecond, OperationTime: 200 * time.Millisecond, Clock: time.Now,
		OperationFailures: []emu.OperationFailure{{Command: "delete-instance", Rate: 1, Reason: "busy"}}})
	c := v.client
	op, id := v.create(c, instanceReq("waited"))
	done, err := c.Wait(v.ctx, op, v3.OperationStateSuccess)
	if err != nil || done.State != v3.OperationStateSuccess || done.Reference.ID != id {
		t.Fatalf("Wait: %+v, %v", done, err)
	}
	v.wantState(c, id, v3.InstanceStateRunning)

	del := v.op(c.DeleteInstance(v.ctx, id))
	_, err = c.Wait(v.ctx, del, v3.OperationStateSuccess)
	if err == nil || !strings.Contains(err.Error(), `state: failure, reason: "busy"`) {
		t.Fatalf("Wait on a failing delete: %v", err)
	}
	v.wantState(c, id, v3.InstanceStateRunning)
	if n := v.emu.PendingOperations(); n != 0 {
		t.Fatalf("%d operations pending after both ended", n)
	}
}

func TestOperationFailureRules(t *testing.T) {
	t.Parallel()
	for _, bad := range []emu.OperationFailure{
		{Command: "create-security-group", Rate: 1},
		{Command: "create-instance"},
		{Command: "create-instance", Rate: 1.5},
		{Command: "create-instance", Rate: 1, Reason: "bad-luck"},
		{Command: "*", Rate: 1, Times: -1},
	} {
		if _, err := emu.New(emu.Config{OperationFailures: []emu.OperationFailure{bad}}); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
	f, err := emu.ParseOperationFailure("command=register-template,rate=0.5,times=2,reason=incorrect,message=checksum mismatch")
	if err != nil {
		t.Fatal(err)
	}
	if f != (emu.OperationFailure{Command: "register-template", Rate: 0.5, Times: 2, Reason: "incorrect", Message: "checksum mismatch"}) {
		t.Fatalf("parsed %+v", f)
	}
	for _, s := range []string{"command=create-instance", "command=*,rate=1,colour=red", "rate"} {
		if _, err := emu.ParseOperationFailure(s); err == nil {
			t.Errorf("ParseOperationFailure(%q) accepted", s)
		}
	}

	// A failed registration leaves no template; "*" matches any command.
	v := newEnv(t, emu.Config{Templates: []emu.TemplateSeed{}, OperationFailures: []emu.OperationFailure{{Command: "*", Rate: 1, Reason: "incorrect"}}})
	op := v.op(v.client.RegisterTemplate(v.ctx, v3.RegisterTemplateRequest{
		Name: "broken", URL: "https://mirror.example/broken.qcow2", Checksum: "0123456789abcdef0123456789abcdef",
		SSHKeyEnabled: ptr(true), PasswordEnabled: ptr(false),
	}))
	if op.State != v3.OperationStateFailure || op.Reason != v3.OperationReasonIncorrect {
		t.Fatalf("registration answered %+v", op)
	}
	if _, err := v.client.GetTemplate(v.ctx, op.Reference.ID); err == nil {
		t.Fatal("the failed template is there")
	}
	// Commands that cannot fail are not affected.
	sg := v.op(v.client.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "fine"}))
	if sg.State != v3.OperationStateSuccess {
		t.Fatalf("security group creation answered %+v", sg)
	}
	if err := v.emu.SetOperationFailures(nil); err != nil || len(v.emu.OperationFailures()) != 0 {
		t.Fatalf("SetOperationFailures(nil): %v", err)
	}
}

func TestGetOperation(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	_, err := v.client.GetOperation(v.ctx, "6f8e2c7a-1234-4abc-8def-0123456789ab")
	apiError(t, err, v3.ErrNotFound)
	// An ended operation can be fetched for a day, not forever.
	op := v.op(v.client.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "kept"}))
	v.clock.Advance(23 * time.Hour)
	v.opState(v.client, op, v3.OperationStateSuccess)
	v.clock.Advance(2 * time.Hour)
	_, err = v.client.GetOperation(v.ctx, op.ID)
	apiError(t, err, v3.ErrNotFound)
	// Another account's operations are not found either.
	w := newEnv(t, emu.Config{Accounts: twoAccounts})
	op = w.op(w.sdk(twoAccounts[0].Key, twoAccounts[0].Secret, "").CreateSecurityGroup(w.ctx, v3.CreateSecurityGroupRequest{Name: "alice"}))
	_, err = w.sdk(twoAccounts[1].Key, twoAccounts[1].Secret, "").GetOperation(w.ctx, op.ID)
	apiError(t, err, v3.ErrNotFound)
}
