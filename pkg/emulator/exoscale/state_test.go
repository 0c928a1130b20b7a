package exoscale_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	clock := newFakeClock()
	cfg := emu.Config{StateFile: file, BootTime: 10 * time.Second}

	v1 := newEnvClock(t, cfg, clock)
	c := v1.client
	gid := v1.op(c.CreateAntiAffinityGroup(v1.ctx, v3.CreateAntiAffinityGroupRequest{Name: "workers"})).Reference.ID
	pnID := v1.op(c.CreatePrivateNetwork(v1.ctx, v3.CreatePrivateNetworkRequest{Name: "net", StartIP: net.ParseIP("10.0.0.1"), EndIP: net.ParseIP("10.0.0.9"), Netmask: net.ParseIP("255.255.255.0")})).Reference.ID
	v1.op(c.RegisterSSHKey(v1.ctx, v3.RegisterSSHKeyRequest{Name: "k", PublicKey: testPublicKey}))
	req := instanceReq("running")
	req.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: gid}}
	req.Labels = v3.Labels{"cluster": "c1"}
	_, running := v1.create(c, req)
	v1.op(c.AttachInstanceToPrivateNetwork(v1.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: running}}))
	clock.Advance(10 * time.Second)
	v1.wantState(c, running, v3.InstanceStateRunning)
	// The seeded template is deleted: it must stay deleted.
	v1.op(c.DeleteTemplate(v1.ctx, v3.UUID(v1.emu.TemplateID(emu.DefaultAccountName, "ch-gva-2", "rhcos-4.19"))))
	pendingOp, pending := v1.create(c, instanceReq("pending"))
	clock.Advance(4 * time.Second)
	before := v1.emu.Instances()
	v1.srv.Close()

	b, err := os.ReadFile(file)
	if err != nil || !json.Valid(b) {
		t.Fatalf("state file: %v, %.100s", err, b)
	}

	v2 := newEnvClock(t, cfg, clock)
	c = v2.client
	if after := v2.emu.Instances(); !reflect.DeepEqual(after, before) {
		t.Fatalf("instances after restart:\n%+v\nwant\n%+v", after, before)
	}
	// The pending boot goes on where it was.
	v2.wantState(c, pending, v3.InstanceStateStarting)
	v2.opState(c, pendingOp, v3.OperationStatePending)
	clock.Advance(6 * time.Second)
	v2.wantState(c, pending, v3.InstanceStateRunning)
	v2.opState(c, pendingOp, v3.OperationStateSuccess)
	if id := v2.emu.TemplateID(emu.DefaultAccountName, "ch-gva-2", "rhcos-4.19"); id != "" {
		t.Fatal("the deleted seed template is back")
	}
	if id := v2.emu.TemplateID(emu.DefaultAccountName, "de-fra-1", "rhcos-4.19"); id == "" {
		t.Fatal("the other zones' seed templates are gone")
	}
	if _, err := c.GetSSHKey(v2.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if g, err := c.GetAntiAffinityGroup(v2.ctx, gid); err != nil || len(g.Instances) != 1 {
		t.Fatalf("group after restart %+v, %v", g, err)
	}
	// Addresses are never handed out twice, across restarts too.
	_, third := v2.create(c, instanceReq("third"))
	if ip := v2.getInstance(c, third).PublicIP.String(); ip == before[0].PublicIPv4 || ip == before[1].PublicIPv4 {
		t.Fatalf("address %s handed out again", ip)
	}
}

func TestBadStateFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	for _, content := range []string{"not json", `{"seq": 3}`} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := emu.New(emu.Config{StateFile: file}); err == nil {
			t.Fatalf("New loaded a state file of %q", content)
		}
	}
}
