package exoscale

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// documentedPolicy is the IAM role policy docs/exoscale.md gives admins to
// apply as is: the first JSON block under its "IAM role" heading.
func documentedPolicy(t *testing.T) []byte {
	t.Helper()
	return fixture.DocumentedJSON(t, "../..", "exoscale.md", "IAM role")
}

// policyWithout is the documented policy without one operation.
func policyWithout(t *testing.T, operation string) *emu.Policy {
	t.Helper()
	doc := string(documentedPolicy(t))
	trimmed := strings.Replace(doc, "'"+operation+"', ", "", 1)
	if trimmed == doc {
		t.Fatalf("the documented policy has no %s to take away", operation)
	}
	p, err := emu.ParsePolicy([]byte(trimmed))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDocumentedRolePolicySuffices: the role policy of docs/exoscale.md
// allows exactly the operations of the provider's table, and a key with
// that role, on an emulator that enforces it as the API does, takes
// Machines through create (security group, private network with a fixed
// address, anti-affinity group, SSH key), a label change and delete
// without a single refusal.
func TestDocumentedRolePolicySuffices(t *testing.T) {
	raw := documentedPolicy(t)
	policy, err := emu.ParsePolicy(raw)
	if err != nil {
		t.Fatalf("the documented policy: %v", err)
	}
	var allowed []string
	for _, m := range regexp.MustCompile(`'([a-z-]+)'`).FindAllStringSubmatch(policy.Services[exoscale.IAMService].Rules[0].Expression, -1) {
		allowed = append(allowed, m[1])
	}
	slices.Sort(allowed)
	if !slices.Equal(allowed, exoscale.IAMOperations()) {
		t.Errorf("the documented policy allows %v,\nthe provider calls %v", allowed, exoscale.IAMOperations())
	}

	e := env(t, emu.Config{})
	ctx := context.Background()
	c := sdk(e, "ch-gva-2")
	done(t, c)(c.CreatePrivateNetwork(ctx, v3.CreatePrivateNetworkRequest{
		Name: "clusternet", StartIP: []byte{172, 18, 200, 101}, EndIP: []byte{172, 18, 200, 253}, Netmask: []byte{255, 255, 255, 0},
	}))
	done(t, c)(c.CreateSecurityGroup(ctx, v3.CreateSecurityGroupRequest{Name: "all_machines"}))
	done(t, c)(c.RegisterSSHKey(ctx, v3.RegisterSSHKeyRequest{Name: "admin", PublicKey: testSSHKey}))
	if err := e.Exoscale.SetPolicy("openshift", policy); err != nil {
		t.Fatal(err)
	}
	startManager(t, e, manager.Options{})
	full := func(labels map[string]string) string {
		return spec(func(s map[string]any) {
			s["securityGroups"] = []any{map[string]string{"name": "all_machines"}}
			s["privateNetworks"] = []any{map[string]string{"name": "clusternet", "ip": "172.18.200.150"}}
			s["antiAffinityKey"] = "worker"
			s["sshKeys"] = []string{"admin"}
			s["labels"] = labels
		})
	}
	createMachine(t, e, "worker-a", full(map[string]string{"team": "a"}))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	m.Spec.ProviderSpec.Value.Raw = []byte(full(map[string]string{"team": "b"}))
	if err := e.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "the labels to follow the spec", func() (bool, error) {
		insts := instancesOf(e, "worker-a")
		return len(insts) == 1 && insts[0].Labels["team"] == "b", nil
	})
	e.DeleteMachine(t, "worker-a")
	e.WaitMachineGone(t, "worker-a", 60*time.Second)
	fixture.Eventually(t, 60*time.Second, "the empty group gone", func() (bool, error) {
		return len(e.Exoscale.AntiAffinityGroups()) == 0 && e.Exoscale.CountInstances() == 0, nil
	})
	if text := fixture.EventText(e.Events(t, "worker-a")) + e.Logs.String(); strings.Contains(text, "PermissionDenied") || strings.Contains(text, "Forbidden by role policy") {
		t.Errorf("the documented role was refused something:\n%s", fixture.EventText(e.Events(t, "worker-a")))
	}
}

// documentedAddition is the second rule of a role docs/exoscale.md gives
// under heading, whose first rule must be the provider's, word for word:
// the operations it adds, sorted.
func documentedAddition(t *testing.T, heading string) []string {
	t.Helper()
	manager, err := emu.ParsePolicy(documentedPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	role, err := emu.ParsePolicy(fixture.DocumentedJSON(t, "../..", "exoscale.md", heading))
	if err != nil {
		t.Fatalf("the documented %q: %v", heading, err)
	}
	rules := role.Services[exoscale.IAMService].Rules
	if len(rules) != 2 || rules[0] != manager.Services[exoscale.IAMService].Rules[0] || role.DefaultServiceStrategy != "deny" {
		t.Fatalf("the rules of %q %+v: want the provider's rule, then the addition", heading, rules)
	}
	var added []string
	for _, m := range regexp.MustCompile(`'([a-z-]+)'`).FindAllStringSubmatch(rules[1].Expression, -1) {
		added = append(added, m[1])
	}
	slices.Sort(added)
	return added
}

// TestDocumentedAdoptRole: the role docs/exoscale.md gives adopt's key is
// the provider's rule, word for word, and a rule of exactly the operations
// only adopt calls (the client's second table). test/adopt runs adopt under
// it.
func TestDocumentedAdoptRole(t *testing.T) {
	if added := documentedAddition(t, "IAM role for adopt"); !slices.Equal(added, exoscale.AdoptIAMOperations()) {
		t.Errorf("the documented addition allows %v,\nadopt calls %v beside the provider's", added, exoscale.AdoptIAMOperations())
	}
}

// TestDocumentedBootImageRole: the role docs/exoscale.md gives where boot
// images are managed is the provider's rule, word for word, and a rule of
// exactly the operations only the boot image controller and `images` call
// (the client's third table); pkg/cloud/exoscale's
// TestBootImagesNeedTheirRoleAddition imports and deletes under that table.
func TestDocumentedBootImageRole(t *testing.T) {
	if added := documentedAddition(t, "IAM role for boot images"); !slices.Equal(added, exoscale.BootImageIAMOperations()) {
		t.Errorf("the documented addition allows %v,\nboot images call %v beside the provider's", added, exoscale.BootImageIAMOperations())
	}
}

// TestMissingPermissionCostsThatOperationOnly: a role that lacks one
// operation (deleting anti-affinity groups) costs that operation only. The
// Machine whose delete it hits still goes, with a PermissionDenied event
// naming the IAM operation to grant; its empty group stays; the refusals
// are counted by operation; and the account's other calls never stop: a
// Machine created right after is provisioned without a single call held
// back for refused credentials.
func TestMissingPermissionCostsThatOperationOnly(t *testing.T) {
	e := env(t, emu.Config{})
	if err := e.Exoscale.SetPolicy("openshift", policyWithout(t, "delete-anti-affinity-group")); err != nil {
		t.Fatal(err)
	}
	heldForAuth := fixture.CounterSum(t, "machine_api_provider_cloud_requests_held_total", map[string]string{"cloud": "exoscale", "reason": "auth"})
	refusedBefore := fixture.CounterSum(t, "machine_api_provider_cloud_permission_denied_total", map[string]string{"cloud": "exoscale", "operation": "antiaffinitygroup.delete"})
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-x", spec(func(s map[string]any) { s["antiAffinityKey"] = "worker" }))
	waitPhase(t, e, "worker-x", machinev1.PhaseProvisioned)
	e.DeleteMachine(t, "worker-x")
	fixture.Eventually(t, 60*time.Second, "a PermissionDenied event naming the operation", func() (bool, error) {
		text := fixture.EventText(e.Events(t, "worker-x"))
		return strings.Contains(text, "PermissionDenied") && strings.Contains(text, `"delete-anti-affinity-group"`), nil
	})
	createMachine(t, e, "worker-y", spec(nil))
	e.WaitMachineGone(t, "worker-x", 60*time.Second)
	waitPhase(t, e, "worker-y", machinev1.PhaseProvisioned)
	if n := e.Exoscale.CountInstances(); n != 1 {
		t.Errorf("%d instances, want worker-y's only", n)
	}
	if n := len(e.Exoscale.AntiAffinityGroups()); n != 1 {
		t.Errorf("%d anti-affinity groups, want the one the role may not delete", n)
	}
	if d := fixture.CounterSum(t, "machine_api_provider_cloud_requests_held_total", map[string]string{"cloud": "exoscale", "reason": "auth"}) - heldForAuth; d != 0 {
		t.Errorf("%v calls held back as if the credentials were refused", d)
	}
	if d := fixture.CounterSum(t, "machine_api_provider_cloud_permission_denied_total", map[string]string{"cloud": "exoscale", "operation": "antiaffinitygroup.delete"}) - refusedBefore; d < 1 {
		t.Errorf("the refused group delete is not counted by operation")
	}
	if text := fixture.EventText(e.Events(t, "worker-y")); strings.Contains(text, "Warning") {
		t.Errorf("worker-y had trouble:\n%s", text)
	}
	assertNoCanary(t, e)
}

// testSSHKey is a well-formed OpenSSH public key (of no one).
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb5bWVhXqN+o1nC3w8b2vW5t0fJ2s3QkWc0pR0cJx7d test@example"

// TestMachineSetToldOfMissingPermission: when the role lacks the instance
// type list that publishing a MachineSet's capacity needs, the MachineSet
// says so (condition and event naming the IAM operation), and its capacity
// is published once the role allows it, without a restart.
func TestMachineSetToldOfMissingPermission(t *testing.T) {
	e := env(t, emu.Config{})
	if err := e.Exoscale.SetPolicy("openshift", policyWithout(t, "list-instance-types")); err != nil {
		t.Fatal(err)
	}
	startManager(t, e, manager.Options{CapacityPublisher: true})
	ctx := context.Background()
	ms := &machinev1.MachineSet{}
	ms.Name, ms.Namespace = "c1-worker", fixture.Namespace
	ms.Labels = map[string]string{"machine.openshift.io/cluster-api-cluster": fixture.ClusterID}
	ms.Spec.Selector.MatchLabels = map[string]string{"machine.openshift.io/cluster-api-machineset": ms.Name}
	ms.Spec.Template.Labels = map[string]string{"machine.openshift.io/cluster-api-machineset": ms.Name, "machine.openshift.io/cluster-api-cluster": fixture.ClusterID}
	ms.Spec.Template.Spec.ProviderSpec = fixture.Machine(ms.Name, spec(nil)).Spec.ProviderSpec
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	get := func() *machinev1.MachineSet {
		got := &machinev1.MachineSet{}
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: fixture.Namespace, Name: ms.Name}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	fixture.Eventually(t, 60*time.Second, "a PermissionDenied condition and event on the MachineSet", func() (bool, error) {
		got := get()
		for _, c := range got.Status.Conditions {
			if c.Type == "CapacityPublished" && c.Reason == "PermissionDenied" && strings.Contains(c.Message, `"list-instance-types"`) {
				return strings.Contains(fixture.EventText(e.Events(t, ms.Name)), "PermissionDenied"), nil
			}
		}
		return false, fmt.Errorf("conditions %v", got.Status.Conditions)
	})
	if err := e.Exoscale.SetPolicy("openshift", nil); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 3*time.Minute, "the capacity published once the role allows it", func() (bool, error) {
		return get().Annotations["machine.openshift.io/vCPU"] == "4", nil
	})
}
