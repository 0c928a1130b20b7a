package v1beta1

import (
	"encoding/json"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
)

func parse(t *testing.T, specJSON string) (*ExoscaleMachineProviderSpec, string) {
	t.Helper()
	ps := machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(specJSON)}}
	spec, errs := SpecFromProviderSpec(ps, SpecPath)
	if len(errs) == 0 {
		return spec, ""
	}
	return spec, errs.ToAggregate().Error()
}

const minimal = `{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"rhcos-4.19"}}`

func TestDefaults(t *testing.T) {
	spec, errs := parse(t, minimal)
	if spec == nil {
		t.Fatal(errs)
	}
	if spec.APIVersion != APIVersion || spec.Kind != SpecKind {
		t.Errorf("apiVersion/kind %s/%s", spec.APIVersion, spec.Kind)
	}
	if spec.DiskSize != DefaultDiskSize || spec.PublicIPAssignment != PublicIPInet4 || spec.Template.Visibility != TemplateVisibilityPrivate {
		t.Errorf("diskSize %d, publicIPAssignment %q, template visibility %q", spec.DiskSize, spec.PublicIPAssignment, spec.Template.Visibility)
	}
	before, _ := json.Marshal(spec)
	spec.Default()
	after, _ := json.Marshal(spec)
	if string(before) != string(after) {
		t.Errorf("Default is not idempotent:\n%s\n%s", before, after)
	}
}

// TestOpenShiftWorkerSpec is a worker as the Terraform-installed OpenShift
// clusters on Exoscale have them: RHCOS private template, the cluster's
// security group, its private network, anti-affinity.
func TestOpenShiftWorkerSpec(t *testing.T) {
	spec, errs := parse(t, `{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec",
		"zone":"ch-gva-2","instanceType":"standard.extra-large","template":{"name":"rhcos-4.19","visibility":"private"},
		"diskSize":120,"sshKeys":["c1-admin"],"securityGroups":[{"name":"c1-all-machines"},{"id":"2db69ba3-1864-4608-853a-0771b6885a3a"}],
		"antiAffinityKey":"worker","privateNetworks":[{"name":"c1_clusternet"},{"id":"2db69ba3-1864-4608-853a-0771b6885a3b","ip":"172.18.200.21"}],
		"publicIPAssignment":"dual","deployTarget":{"name":"dedicated-1"},"labels":{"team":"a b"},
		"userDataSecret":{"name":"worker-user-data"},"credentialsSecret":{"name":"exoscale-credentials"}}`)
	if spec == nil {
		t.Fatal(errs)
	}
	if spec.PrivateNetworks[1].IP != "172.18.200.21" || spec.SecurityGroups[0].Name != "c1-all-machines" || spec.DeployTarget.Name != "dedicated-1" {
		t.Errorf("decoded %+v", spec)
	}
}

func TestInvalidSpecsNameTheirFields(t *testing.T) {
	for name, c := range map[string]struct{ spec, want string }{
		"empty":            {`{}`, "spec.providerSpec.value.zone: Required value"},
		"zone":             {`{"zone":"gva2","instanceType":"standard.large","template":{"name":"x"}}`, "spec.providerSpec.value.zone: Invalid value: \"gva2\""},
		"type":             {`{"zone":"ch-gva-2","instanceType":"large","template":{"name":"x"}}`, "spec.providerSpec.value.instanceType: Invalid value"},
		"no template":      {`{"zone":"ch-gva-2","instanceType":"standard.large"}`, "spec.providerSpec.value.template: Required value"},
		"template both":    {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"id":"2db69ba3-1864-4608-853a-0771b6885a3a","name":"x"}}`, "spec.providerSpec.value.template.name: Forbidden"},
		"template id":      {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"id":"rhcos"}}`, "spec.providerSpec.value.template.id: Invalid value"},
		"visibility":       {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x","visibility":"mine"}}`, "spec.providerSpec.value.template.visibility: Unsupported value"},
		"disk small":       {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"diskSize":9}`, "spec.providerSpec.value.diskSize: Invalid value: 9: must be at least 10"},
		"disk large":       {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"diskSize":51201}`, "spec.providerSpec.value.diskSize: Invalid value: 51201: must be at most 51200"},
		"key underscore":   {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"antiAffinityKey":"my_workers"}`, "spec.providerSpec.value.antiAffinityKey: Invalid value: \"my_workers\""},
		"ref empty":        {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"securityGroups":[{}]}`, "spec.providerSpec.value.securityGroups[0]: Required value"},
		"ip":               {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"privateNetworks":[{"name":"n","ip":"fe80::1"}]}`, "spec.providerSpec.value.privateNetworks[0].ip: Invalid value"},
		"no network":       {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"publicIPAssignment":"none"}`, "spec.providerSpec.value.publicIPAssignment: Invalid value: \"none\": an instance without a public address needs a private network"},
		"assignment":       {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"publicIPAssignment":"inet6"}`, "spec.providerSpec.value.publicIPAssignment: Unsupported value"},
		"reserved label":   {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"labels":{"machine-api-provider.appuio.io/machine":"x"}}`, "spec.providerSpec.value.labels[machine-api-provider.appuio.io/machine]: Forbidden"},
		"credentials name": {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"credentialsSecret":{"name":"Exo_Creds"}}`, "spec.providerSpec.value.credentialsSecret.name: Invalid value"},
		"credentials none": {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"credentialsSecret":{}}`, "spec.providerSpec.value.credentialsSecret.name: Required value"},
		"kind":             {`{"kind":"CloudscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"}}`, "spec.providerSpec.value.kind: Invalid value"},
		"type error":       {`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"diskSize":"100"}`, `cannot decode field "diskSize"`},
		"not json":         {`zone: ch-gva-2`, "spec.providerSpec.value: Invalid value: \"(raw JSON)\""},
	} {
		t.Run(name, func(t *testing.T) {
			spec, errs := parse(t, c.spec)
			if spec != nil {
				t.Fatalf("accepted: %+v", spec)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("error %q does not contain %q", errs, c.want)
			}
		})
	}
}

func TestStatusRoundTrip(t *testing.T) {
	raw, err := RawExtension(&ExoscaleMachineProviderStatus{InstanceID: "i", Status: "running"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := StatusFromRaw(raw)
	if err != nil || st.InstanceID != "i" || st.Kind != StatusKind {
		t.Fatalf("%+v %v", st, err)
	}
}

// A spec of another apiVersion is refused, not taken for ours: a later
// version, or another project's spec of the same kind, may mean another
// server by the same fields.
func TestOtherAPIVersionIsRefused(t *testing.T) {
	for _, v := range []string{"machine.appuio.io/v1", "machine.appuio.io/v1alpha1", "example.com/v1beta1", "v1beta1"} {
		spec := strings.Replace(minimal, "{", `{"apiVersion":"`+v+`","kind":"ExoscaleMachineProviderSpec",`, 1)
		if _, errs := parse(t, spec); !strings.Contains(errs, "spec.providerSpec.value.apiVersion: Unsupported value") || !strings.Contains(errs, APIVersion) {
			t.Errorf("apiVersion %s: %q, want it refused naming %s", v, errs, APIVersion)
		}
	}
	if _, errs := parse(t, strings.Replace(minimal, "{", `{"apiVersion":"`+APIVersion+`",`, 1)); errs != "" {
		t.Errorf("our own apiVersion: %s", errs)
	}
}
