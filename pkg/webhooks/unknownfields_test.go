package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

const misspelt = `{"zone":"rma1","flavor":"flex-8-4","image":"debian-12",
	"flavour":"plus-32-8",
	"ZONE":"lpg1",
	"rootvolumesizegb":100,
	"interfaces":[{"type":"Public"},{"type":"Private","netwrkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a","addresses":[{"subnetUUID":"2db69ba3-1864-4608-853a-0771b6885a3a","subnet":"x"}]}],
	"tags":{"anything":"goes"},
	"userDataSecret":{"name":"a","nmae":"b"},
	"antiAfinityKey":"worker",
	"line\nbreak":1}`

func TestUnknownFields(t *testing.T) {
	want := []string{
		`"line\nbreak"`,
		"antiAfinityKey",
		"flavour",
		"interfaces[1].addresses[0].subnet",
		"interfaces[1].netwrkUUID",
		"userDataSecret.nmae",
	}
	// The API type itself, and a cloud's Spec embedding it: both decode
	// the same members.
	for _, proto := range []any{&v1beta1.CloudscaleMachineProviderSpec{}, v1beta1.CloudscaleMachineProviderSpec{}, &embedding{}} {
		got := webhooks.UnknownFields([]byte(misspelt), proto)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T: got %q\nwant %q", proto, got, want)
		}
	}
	// Members encoding/json applies in another case (ZONE, rootvolumesizegb)
	// are not unknown: the decoder uses them.
	if got := webhooks.UnknownFields([]byte(`{"Zone":"rma1","KIND":"x","apiversion":"y"}`), &v1beta1.CloudscaleMachineProviderSpec{}); len(got) != 0 {
		t.Errorf("case-insensitive matches reported: %q", got)
	}
	for _, notJSON := range []string{``, `[`, `"x"`, `nul`} {
		if got := webhooks.UnknownFields([]byte(notJSON), &v1beta1.CloudscaleMachineProviderSpec{}); got != nil {
			t.Errorf("%q: %q, want none", notJSON, got)
		}
	}
	// A hostile spec with a million members gets a bounded answer.
	var b strings.Builder
	b.WriteString("{")
	for i := range 1000 {
		fmt.Fprintf(&b, `"x%d":1,`, i)
	}
	b.WriteString(`"zone":"rma1"}`)
	if got := webhooks.UnknownFields([]byte(b.String()), &v1beta1.CloudscaleMachineProviderSpec{}); len(got) != 100 {
		t.Errorf("got %d unknown fields, want the first 100", len(got))
	}
}

// embedding is how a cloud's Spec wraps its provider spec.
type embedding struct {
	*v1beta1.CloudscaleMachineProviderSpec
}

func TestUnknownFieldsAreWarnedAbout(t *testing.T) {
	ctx := context.Background()
	for _, k := range []struct {
		res    webhooks.Resource
		object runtime.Object
		path   string
	}{
		{webhooks.Machines, machine("m", specFrom(t, misspelt), defaultLabels()), "spec.providerSpec.value"},
		{webhooks.MachineSets, machineSet("ms", specFrom(t, misspelt), defaultLabels()), "spec.template.spec.providerSpec.value"},
	} {
		v := webhooks.NewValidator(unreachableCloud(), k.res, webhooks.FixedIdentity(clusterID))
		resp := v.Handle(ctx, request(t, admissionv1.Create, k.object, nil))
		if !resp.Allowed {
			t.Fatalf("%s: refused: %+v", k.path, resp.Result)
		}
		for _, f := range []string{"flavour", "antiAfinityKey", "interfaces[1].netwrkUUID", "userDataSecret.nmae"} {
			if !containsWarning(resp.Warnings, k.path+"."+f+": unknown field") {
				t.Errorf("no warning names %s.%s: %q", k.path, f, resp.Warnings)
			}
		}
		if containsWarning(resp.Warnings, "ZONE") || containsWarning(resp.Warnings, "tags") {
			t.Errorf("warnings name known fields: %q", resp.Warnings)
		}
		if len(resp.Warnings) != 6 {
			t.Errorf("%d warnings, want 6: %q", len(resp.Warnings), resp.Warnings)
		}
	}
}

func TestUnknownFieldsOfAnInvalidSpec(t *testing.T) {
	ctx := context.Background()
	spec := specFrom(t, `{"zone":"rma1","flavour":"flex-8-4","image":"debian-12"}`)

	// A cloud that names its spec type: the misspelling that made the spec
	// invalid is named beside the error.
	v := webhooks.NewValidator(prototypeCloud{unreachableCloud()}, webhooks.Machines, webhooks.FixedIdentity(clusterID))
	resp := v.Handle(ctx, request(t, admissionv1.Create, machine("m", spec, defaultLabels()), nil))
	if resp.Allowed {
		t.Fatal("admitted without a flavor")
	}
	if !containsWarning(resp.Warnings, "spec.providerSpec.value.flavour: unknown field") {
		t.Errorf("warnings %q do not name flavour", resp.Warnings)
	}
}

// prototypeCloud is a cloud that names its provider spec's type.
type prototypeCloud struct{ cloud.Cloud }

func (prototypeCloud) SpecPrototype() any { return &v1beta1.CloudscaleMachineProviderSpec{} }

func (p prototypeCloud) ParseSpec(ps machinev1.ProviderSpec, path *field.Path) (cloud.Spec, field.ErrorList) {
	return p.Cloud.ParseSpec(ps, path)
}

// specFrom decodes a provider spec written as JSON.
func specFrom(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func containsWarning(warnings []string, s string) bool {
	for _, w := range warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}
