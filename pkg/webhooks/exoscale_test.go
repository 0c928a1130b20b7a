package webhooks_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// The webhooks are cloud-neutral: on Exoscale they default and validate the
// ExoscaleMachineProviderSpec with the same code, and never call the cloud.
func exoscaleSpec() map[string]any {
	return map[string]any{
		"zone": "ch-gva-2", "instanceType": "standard.large", "template": map[string]any{"name": "rhcos-4.19"},
		"userDataSecret": map[string]any{"name": "worker-user-data"},
	}
}

func TestExoscaleWebhooks(t *testing.T) {
	c := exocloud.New(exocloud.Options{APIEndpoint: "http://127.0.0.1:1/v2"})
	ctx := context.Background()

	d := webhooks.NewDefaulter(c, webhooks.Machines)
	resp := d.Handle(ctx, request(t, admissionv1.Create, machine("worker-a", exoscaleSpec(), defaultLabels()), nil))
	if !resp.Allowed {
		t.Fatalf("defaulting refused: %+v", resp.Result)
	}
	patches, _ := json.Marshal(resp.Patches)
	for _, want := range []string{`"/spec/providerSpec/value/diskSize"`, `"/spec/providerSpec/value/publicIPAssignment"`, `"ExoscaleMachineProviderSpec"`} {
		if !strings.Contains(string(patches), want) {
			t.Errorf("patches %s lack %s", patches, want)
		}
	}

	v := webhooks.NewValidator(c, webhooks.Machines, webhooks.FixedIdentity(clusterID))
	bad := exoscaleSpec()
	bad["diskSize"] = 5
	resp = v.Handle(ctx, request(t, admissionv1.Create, machine("worker-a", bad, defaultLabels()), nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.providerSpec.value.diskSize: Invalid value: 5: must be at least 10") {
		t.Errorf("diskSize 5: allowed %v, %+v", resp.Allowed, resp.Result)
	}
	other := exoscaleSpec()
	other["apiVersion"], other["kind"] = "machine.appuio.io/v1alpha1", "ExoscaleMachineProviderSpec"
	resp = v.Handle(ctx, request(t, admissionv1.Create, machine("worker-a", other, defaultLabels()), nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `spec.providerSpec.value.apiVersion: Unsupported value: "machine.appuio.io/v1alpha1"`) {
		t.Errorf("another apiVersion: allowed %v, %+v", resp.Allowed, resp.Result)
	}
	misspelt := exoscaleSpec()
	misspelt["diskSizeGB"] = 100
	resp = v.Handle(ctx, request(t, admissionv1.Create, machine("worker-a", misspelt, defaultLabels()), nil))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "diskSizeGB: unknown field") {
		t.Errorf("misspelt: allowed %v, warnings %q", resp.Allowed, resp.Warnings)
	}
	resp = v.Handle(ctx, request(t, admissionv1.Create, machine("worker_a", exoscaleSpec(), defaultLabels()), nil))
	if resp.Allowed {
		t.Errorf("a Machine name the instance and the Node cannot have was admitted")
	}
	// A cloudscale.ch spec is another provider's business.
	cs := validSpec()
	cs["kind"] = "CloudscaleMachineProviderSpec"
	resp = v.Handle(ctx, request(t, admissionv1.Create, machine("worker-a", cs, defaultLabels()), nil))
	if !resp.Allowed {
		t.Errorf("another cloud's spec refused: %+v", resp.Result)
	}
}
