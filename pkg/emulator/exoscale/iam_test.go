package exoscale_test

import (
	"errors"
	"net/http"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// A key whose role lacks an operation is refused that operation, with the
// real API's 403, and nothing else: the role's other operations go
// through, and what was refused changed nothing.
func TestRolePolicyRefusesOneOperation(t *testing.T) {
	t.Parallel()
	policy, err := emu.ParsePolicy([]byte(`{
		"default-service-strategy": "deny",
		"services": {"compute": {"type": "rules", "rules": [
			{"action": "deny", "expression": "operation == 'delete-instance'"},
			{"action": "allow", "expression": "resources.instance.name == 'x'"},
			{"action": "allow", "expression": "operation in ['list-instances', 'get-instance', 'create-instance', 'list-instance-types', 'list-templates', 'get-operation'] || operation == 'list-zones'"}
		]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	acct := emu.Account{Name: "restricted", Key: "EXOcccccccccccccccccccccccc", Secret: "restricted-secret", Policy: policy}
	v := newEnv(t, emu.Config{Accounts: []emu.Account{acct}})
	c := v.client
	_, id := v.create(c, instanceReq("worker-a"))
	list, err := c.ListInstances(v.ctx)
	if err != nil || len(list.Instances) != 1 {
		t.Fatalf("list with the operation allowed: %v, %v", list, err)
	}
	_, err = c.DeleteInstance(v.ctx, id)
	if !errors.Is(err, v3.ErrForbidden) {
		t.Fatalf("delete the role denies: %v, want 403", err)
	}
	wantContains(t, apiError(t, err, v3.ErrForbidden), "Forbidden by role policy for compute")
	if _, err := c.ListSSHKeys(v.ctx); !errors.Is(err, v3.ErrForbidden) {
		t.Fatalf("an operation no rule allows: %v, want 403", err)
	}
	v.getInstance(c, id)
	if n := v.emu.CountInstances(); n != 1 {
		t.Fatalf("%d instances after the refused delete", n)
	}

	// An account without a policy may do everything; a service the policy
	// does not name takes its default.
	open, err := emu.ParsePolicy([]byte(`{"default-service-strategy": "allow", "services": {"sos": {"type": "deny"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	w := newEnv(t, emu.Config{Accounts: []emu.Account{{Name: "open", Key: acct.Key, Secret: acct.Secret, Policy: open}}})
	if _, err := w.client.ListSSHKeys(w.ctx); err != nil {
		t.Fatalf("default allow: %v", err)
	}
	// The zone list needs no signature, whatever the roles.
	resp, body := v.raw("GET", "/v2/zone", nil, false)
	wantStatus(t, resp, body, http.StatusOK)
}

func TestParsePolicyRefusesBadShapes(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"default-service-strategy": "maybe", "services": {}}`,
		`{"default-service-strategy": "deny", "services": {"compute": {"type": "some"}}}`,
		`{"default-service-strategy": "deny", "services": {"compute": {"type": "rules", "rules": [{"action": "perhaps", "expression": "true"}]}}}`,
		`{"default-service-strategy": "deny", "services": {}, "extra": 1}`,
	} {
		if _, err := emu.ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("ParsePolicy(%s) accepted", bad)
		}
	}
}

// An organization's second key acts on the same resources under its own
// role: the key of a role without delete-instance is refused the delete
// the account's first key may do, and sees the instance the first made.
func TestKeysOfOneAccountHaveTheirOwnRoles(t *testing.T) {
	t.Parallel()
	noDelete, err := emu.ParsePolicy([]byte(`{"default-service-strategy": "allow",
		"services": {"compute": {"type": "rules", "rules": [{"action": "deny", "expression": "operation == 'delete-instance'"}, {"action": "allow", "expression": "true"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, emu.Config{})
	const key, secret = "EXOdddddddddddddddddddddddd", "second-key-secret"
	if err := v.emu.AddKey(emu.DefaultAccountName, key, secret, noDelete); err != nil {
		t.Fatal(err)
	}
	if err := v.emu.AddKey(emu.DefaultAccountName, key, "other", nil); err == nil {
		t.Error("the same key added twice")
	}
	_, id := v.create(v.client, instanceReq("worker-a"))
	second := v.sdk(key, secret, "ch-gva-2")
	if got := v.getInstance(second, id); got.ID != id {
		t.Fatalf("the second key sees %v", got.ID)
	}
	if _, err := second.DeleteInstance(v.ctx, id); !errors.Is(err, v3.ErrForbidden) {
		t.Fatalf("delete by the key whose role denies it: %v, want 403", err)
	}
	if got := v.emu.RoleRefusals(key); got["delete-instance"] != 1 || len(got) != 1 {
		t.Errorf("the second key's refusals: %v, want the one delete", got)
	}
	if got := v.emu.RoleRefusals(emu.DefaultAPIKey); len(got) != 0 {
		t.Errorf("the first key's refusals: %v, want none", got)
	}
	if err := v.emu.SetKeyPolicy(key, nil); err != nil {
		t.Fatal(err)
	}
	v.op(second.DeleteInstance(v.ctx, id))
}
