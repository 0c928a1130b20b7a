package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// These tests call the handlers directly, for what the API server cannot
// be made to send while the webhooks are installed: updates of objects that
// were invalid before.

func unreachableCloud() *cscloud.Cloud {
	return cscloud.New(cscloud.Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "x", HTTPClient: &http.Client{Transport: &countingTransport{}}})
}

func request(t *testing.T, op admissionv1.Operation, obj, old runtime.Object) admission.Request {
	t.Helper()
	enc := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Object: enc(obj), OldObject: enc(old)}}
}

func invalidMachine() *machinev1.Machine {
	spec := validSpec()
	spec["rootVolumeSizeGB"] = 5
	return machine("old", spec, defaultLabels())
}

func TestValidatorUpdates(t *testing.T) {
	v := webhooks.NewValidator(unreachableCloud(), webhooks.Machines, webhooks.FixedIdentity(clusterID))
	ctx := context.Background()

	t.Run("unchanged invalid spec: admitted with warnings", func(t *testing.T) {
		old := invalidMachine()
		cur := old.DeepCopy()
		cur.Finalizers = []string{"machine.machine.openshift.io"}
		resp := v.Handle(ctx, request(t, admissionv1.Update, cur, old))
		if !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
		if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "spec.providerSpec.value.rootVolumeSizeGB: Invalid value: 5") {
			t.Errorf("warnings = %q, want the rootVolumeSizeGB error", resp.Warnings)
		}
	})

	t.Run("changed, still invalid spec: refused", func(t *testing.T) {
		old := invalidMachine()
		cur := old.DeepCopy()
		spec := validSpec()
		spec["rootVolumeSizeGB"] = 6
		cur.Spec.ProviderSpec.Value = raw(t, spec)
		resp := v.Handle(ctx, request(t, admissionv1.Update, cur, old))
		if resp.Allowed {
			t.Fatal("admitted")
		}
		if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
			t.Errorf("result %d %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
		}
	})

	t.Run("invalid spec being deleted: admitted", func(t *testing.T) {
		old := invalidMachine()
		old.Finalizers = []string{"machine.machine.openshift.io"}
		now := metav1.Now()
		old.DeletionTimestamp = &now
		cur := old.DeepCopy()
		cur.Finalizers = nil
		cur.Labels = nil
		if resp := v.Handle(ctx, request(t, admissionv1.Update, cur, old)); !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
	})

	t.Run("delete: admitted", func(t *testing.T) {
		if resp := v.Handle(ctx, request(t, admissionv1.Delete, nil, invalidMachine())); !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
	})

	t.Run("not an object: bad request", func(t *testing.T) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`[1]`)}}}
		if resp := v.Handle(ctx, req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			t.Fatalf("got %+v, want 400", resp.AdmissionResponse)
		}
	})
}

func TestDefaulter(t *testing.T) {
	ctx := context.Background()
	d := webhooks.NewDefaulter(unreachableCloud(), webhooks.MachineSets)

	t.Run("invalid spec: no patch", func(t *testing.T) {
		spec := validSpec()
		delete(spec, "zone")
		resp := d.Handle(ctx, request(t, admissionv1.Create, machineSet("ms", spec, defaultLabels()), nil))
		if !resp.Allowed || len(resp.Patches) != 0 {
			t.Fatalf("allowed %v, patches %v; want allowed without patches", resp.Allowed, resp.Patches)
		}
	})

	t.Run("patches only what is missing or empty", func(t *testing.T) {
		spec := validSpec()
		spec["rootVolumeSizeGB"] = 0
		spec["useIPV6"] = nil
		spec["kind"] = ""
		spec["apiVersion"] = "machine.appuio.io/v1beta1"
		resp := d.Handle(ctx, request(t, admissionv1.Create, machineSet("ms", spec, defaultLabels()), nil))
		if !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
		got := map[string]any{}
		for _, op := range resp.Patches {
			if op.Operation != "add" {
				t.Errorf("op %s, want add", op.Operation)
			}
			got[op.Path] = op.Value
		}
		const at = "/spec/template/spec/providerSpec/value/"
		want := map[string]any{
			at + "kind":             "CloudscaleMachineProviderSpec",
			at + "rootVolumeSizeGB": float64(100),
			at + "useIPV6":          true,
		}
		if b1, b2 := mustJSON(t, got), mustJSON(t, want); b1 != b2 {
			t.Errorf("patches\n%s\nwant\n%s", b1, b2)
		}
	})

	t.Run("no interfaces: never a public-only default", func(t *testing.T) {
		spec := validSpec()
		delete(spec, "interfaces")
		resp := d.Handle(ctx, request(t, admissionv1.Create, machineSet("ms", spec, defaultLabels()), nil))
		for _, op := range resp.Patches {
			if strings.HasSuffix(op.Path, "/interfaces") {
				t.Errorf("the defaulter adds %v", op.Value)
			}
		}
	})

	t.Run("a cloud whose spec does not encode as its provider spec: error", func(t *testing.T) {
		d := webhooks.NewDefaulter(opaqueCloud{unreachableCloud()}, webhooks.Machines)
		resp := d.Handle(ctx, request(t, admissionv1.Create, machine("m", validSpec(), defaultLabels()), nil))
		if resp.Allowed || resp.Result.Code != http.StatusInternalServerError {
			t.Fatalf("got %+v, want 500", resp.AdmissionResponse)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// opaqueCloud parses specs into something that is not the provider spec.
type opaqueCloud struct{ *cscloud.Cloud }

type opaqueSpec struct{ cloud.Spec }

func (o opaqueCloud) ParseSpec(ps machinev1.ProviderSpec, path *field.Path) (cloud.Spec, field.ErrorList) {
	s, errs := o.Cloud.ParseSpec(ps, path)
	if len(errs) > 0 {
		return nil, errs
	}
	return opaqueSpec{s}, nil
}

func (opaqueSpec) MarshalJSON() ([]byte, error) { return []byte(`{"opaque":true}`), nil }
