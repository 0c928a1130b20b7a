package webhooks_test

import (
	"context"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

func TestNamesMustMakeHostnames(t *testing.T) {
	ctx := context.Background()
	longDomain := strings.Repeat("abcdefghi.", 24) + "example.ch" // 250 characters
	withDomain := func(d string) map[string]any {
		s := validSpec()
		s["baseDomain"] = d
		return s
	}
	generated := func(prefix string) *machinev1.Machine {
		m := machine("", validSpec(), defaultLabels())
		m.GenerateName = prefix
		return m
	}
	for _, c := range []struct {
		name   string
		res    webhooks.Resource
		obj    runtime.Object
		field  string // "" when admitted
		reason string
	}{
		{"Machine: a DNS label", webhooks.Machines, machine("c1-worker-a1b2c", validSpec(), defaultLabels()), "", ""},
		{"Machine: 63 characters", webhooks.Machines, machine(strings.Repeat("w", 63), validSpec(), defaultLabels()), "", ""},
		{"Machine: 64 characters", webhooks.Machines, machine(strings.Repeat("w", 64), validSpec(), defaultLabels()), "metadata.name", "must be no more than 63 characters"},
		{"Machine: dots", webhooks.Machines, machine("c1.worker.a1b2c", validSpec(), defaultLabels()), "metadata.name", "must be one DNS label"},
		{"Machine: generateName with capitals", webhooks.Machines, generated("C1-Worker-"), "metadata.generateName", "must be one DNS label"},
		{"Machine: long generateName is cut by the API server", webhooks.Machines, generated(strings.Repeat("w", 80) + "-"), "", ""},
		// baseDomain no longer names the server (it is the Machine's name,
		// as its Node's), so no name is too long with it.
		{"Machine: with a long baseDomain", webhooks.Machines, machine("abc", withDomain(longDomain), defaultLabels()), "", ""},
		{"MachineSet: usual name", webhooks.MachineSets, machineSet("c1-worker-rma1", validSpec(), defaultLabels()), "", ""},
		{"MachineSet: long name is cut", webhooks.MachineSets, machineSet(strings.Repeat("w", 200), validSpec(), defaultLabels()), "", ""},
		{"MachineSet: dots", webhooks.MachineSets, machineSet("c1.worker", validSpec(), defaultLabels()), "metadata.name", `the Machines named from it (e.g. "c1.worker-x7k2p")`},
		{"MachineSet: with a long baseDomain", webhooks.MachineSets, machineSet("c1-worker", withDomain(strings.Repeat("abcdefghi.", 23)+"example.ch"), defaultLabels()), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := webhooks.NewValidator(unreachableCloud(), c.res, webhooks.FixedIdentity(clusterID)).Handle(ctx, request(t, admissionv1.Create, c.obj, nil))
			if c.field == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result.Message)
				}
				return
			}
			if resp.Allowed {
				t.Fatalf("admitted, want %s refused", c.field)
			}
			msg := resp.Result.Message
			if !strings.Contains(msg, c.field+": Invalid value") || !strings.Contains(msg, c.reason) {
				t.Errorf("message %q\nwant %s: ... %s", msg, c.field, c.reason)
			}
			if len(msg) > 2000 {
				t.Errorf("message of %d bytes", len(msg))
			}
		})
	}

	t.Run("an existing Machine with such a name can still be updated", func(t *testing.T) {
		old := machine("c1.worker.a1b2c", validSpec(), defaultLabels())
		cur := old.DeepCopy()
		cur.Finalizers = []string{"machine.machine.openshift.io"}
		resp := webhooks.NewValidator(unreachableCloud(), webhooks.Machines, webhooks.FixedIdentity(clusterID)).Handle(ctx, request(t, admissionv1.Update, cur, old))
		if !resp.Allowed || !containsWarning(resp.Warnings, "metadata.name") {
			t.Errorf("allowed %v, warnings %q; want admitted with the name's problem as a warning", resp.Allowed, resp.Warnings)
		}
	})
}
