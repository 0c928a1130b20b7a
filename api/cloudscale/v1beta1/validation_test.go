package v1beta1

import (
	"encoding/json"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
)

func parse(t *testing.T, specJSON string) (*CloudscaleMachineProviderSpec, string) {
	t.Helper()
	ps := machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(specJSON)}}
	spec, errs := SpecFromProviderSpec(ps, SpecPath)
	if len(errs) == 0 {
		return spec, ""
	}
	return spec, errs.ToAggregate().Error()
}

const minimal = `{"zone":"rma1","flavor":"flex-8-4","image":"debian-12","interfaces":[{"type":"Private","networkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a"}]}`

func TestDefaults(t *testing.T) {
	spec, errs := parse(t, minimal)
	if spec == nil {
		t.Fatal(errs)
	}
	if spec.APIVersion != APIVersion || spec.Kind != SpecKind {
		t.Errorf("apiVersion/kind %s/%s", spec.APIVersion, spec.Kind)
	}
	if spec.RootVolumeSizeGB != DefaultRootVolumeSizeGB || DefaultRootVolumeSizeGB < 100 || spec.UseIPV6 == nil || !*spec.UseIPV6 {
		t.Errorf("rootVolumeSizeGB %d (want Red Hat's minimum of 100 GB at least), useIPV6 %v", spec.RootVolumeSizeGB, spec.UseIPV6)
	}
	if len(spec.Interfaces) != 1 || spec.Interfaces[0].Type != InterfaceTypePrivate {
		t.Errorf("interfaces %v, want the one Private interface the spec names, no public one added", spec.Interfaces)
	}
	// Defaulting twice changes nothing.
	before, _ := json.Marshal(spec)
	spec.Default()
	after, _ := json.Marshal(spec)
	if string(before) != string(after) {
		t.Errorf("Default is not idempotent:\n%s\n%s", before, after)
	}
}

func TestExistingSpecsKeepWorking(t *testing.T) {
	// A providerSpec as the cloudscale.ch provider already in use writes it.
	spec, errs := parse(t, `{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec",
		"zone":"lpg1","flavor":"plus-16-4","image":"custom:rhcos-4.15","rootVolumeSizeGB":100,
		"antiAffinityKey":"worker","baseDomain":"c1.example.com","tags":{"team":"a"},"sshKeys":[],
		"userDataSecret":{"name":"cloudscale-user-data"},"tokenSecret":{"name":"cloudscale-rw-token"},
		"interfaces":[{"type":"Public"},{"type":"Private","networkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a"}]}`)
	if spec == nil {
		t.Fatal(errs)
	}
	if spec.Zone != "lpg1" || spec.AntiAffinityKey != "worker" || spec.UserDataSecret.Name != "cloudscale-user-data" || len(spec.Interfaces) != 2 {
		t.Errorf("decoded %+v", spec)
	}
}

func TestValidationNamesTheField(t *testing.T) {
	const base = `"zone":"rma1","flavor":"flex-8-4","image":"debian-12"`
	cases := map[string]struct{ spec, field string }{
		// A server with a public interface only: kubelet and NodePorts on
		// the internet (cloudscale.ch has no security groups).
		"no interfaces":        {`{` + base + `}`, "spec.providerSpec.value.interfaces: Required value: name the cluster's private network"},
		"missing zone":         {`{"flavor":"flex-8-4","image":"debian-12"}`, "spec.providerSpec.value.zone: Required"},
		"bad zone":             {`{"zone":"RMA 1","flavor":"flex-8-4","image":"debian-12"}`, "spec.providerSpec.value.zone: Invalid"},
		"missing flavor":       {`{"zone":"rma1","image":"debian-12"}`, "spec.providerSpec.value.flavor: Required"},
		"missing image":        {`{"zone":"rma1","flavor":"flex-8-4"}`, "spec.providerSpec.value.image: Required"},
		"small root volume":    {`{` + base + `,"rootVolumeSizeGB":5}`, "spec.providerSpec.value.rootVolumeSizeGB"},
		"reserved tag":         {`{` + base + `,"tags":{"` + TagMachineName + `":"x"}}`, "spec.providerSpec.value.tags[" + TagMachineName + "]: Forbidden"},
		"long tag key":         {`{` + base + `,"rootVolumeTags":{"` + strings.Repeat("k", 65) + `":"x"}}`, "spec.providerSpec.value.rootVolumeTags["},
		"empty ssh key":        {`{` + base + `,"sshKeys":[""]}`, "spec.providerSpec.value.sshKeys[0]"},
		"malformed ssh key":    {`{` + base + `,"sshKeys":["ssh-ed25519 AAAA admin@example"]}`, "spec.providerSpec.value.sshKeys[0]: Invalid value: \"(withheld)\": must be an OpenSSH public key"},
		"ssh key with options": {`{` + base + `,"sshKeys":["no-pty ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g a@b"]}`, "spec.providerSpec.value.sshKeys[0]: Invalid"},
		"bad interface type":   {`{` + base + `,"interfaces":[{"type":"Bogus"}]}`, "spec.providerSpec.value.interfaces[0].type: Unsupported"},
		"public with network":  {`{` + base + `,"interfaces":[{"type":"Public","networkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a"}]}`, "spec.providerSpec.value.interfaces[0].networkUUID: Forbidden"},
		"private without net":  {`{` + base + `,"interfaces":[{"type":"Private"}]}`, "spec.providerSpec.value.interfaces[0].networkUUID: Required"},
		"bad network uuid":     {`{` + base + `,"interfaces":[{"type":"Private","networkUUID":"net-1"}]}`, "spec.providerSpec.value.interfaces[0].networkUUID: Invalid"},
		"bad address":          {`{` + base + `,"interfaces":[{"type":"Private","addresses":[{"subnetUUID":"2db69ba3-1864-4608-853a-0771b6885a3a","address":"10.0.0.300"}]}]}`, "spec.providerSpec.value.interfaces[0].addresses[0].address"},
		"address sans subnet":  {`{` + base + `,"interfaces":[{"type":"Private","addresses":[{"address":"10.0.0.3"}]}]}`, "spec.providerSpec.value.interfaces[0].addresses[0].subnetUUID: Required"},
		"bad server group":     {`{` + base + `,"serverGroups":["group-a"]}`, "spec.providerSpec.value.serverGroups[0]"},
		"bad anti-affinity":    {`{` + base + `,"antiAffinityKey":"Workers_1"}`, "spec.providerSpec.value.antiAffinityKey"},
		"bad base domain":      {`{` + base + `,"baseDomain":"-x-.example"}`, "spec.providerSpec.value.baseDomain"},
		"empty token secret":   {`{` + base + `,"tokenSecret":{"name":""}}`, "spec.providerSpec.value.tokenSecret.name: Required"},
		"empty userdata":       {`{` + base + `,"userDataSecret":{}}`, "spec.providerSpec.value.userDataSecret.name: Required"},
		"other kind":           {`{` + base + `,"kind":"AWSMachineProviderConfig"}`, "spec.providerSpec.value.kind"},
		"flavor of wrong type": {`{"zone":"rma1","flavor":["flex-8-4"],"image":"debian-12"}`, `spec.providerSpec.value: Invalid value: "(raw JSON)": cannot decode field "flavor"`},
		"no value":             {``, "spec.providerSpec.value: Required"},
		"bad selector":         {`{` + base + `,"userDataSecret":{"name":"u"},"userDataSecretSelector":{"matchLabels":{"a b":"c"}}}`, "spec.providerSpec.value.userDataSecretSelector.matchLabels: Invalid"},
		"bad selector op":      {`{` + base + `,"userDataSecret":{"name":"u"},"userDataSecretSelector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}`, "spec.providerSpec.value.userDataSecretSelector.matchExpressions[0].operator"},
		"selector sans secret": {`{` + base + `,"userDataSecretSelector":{}}`, "spec.providerSpec.value.userDataSecretSelector: Forbidden"},
		"metadata":             {`{` + base + `,"metadata":{"name":"x"}}`, "spec.providerSpec.value.metadata: Forbidden"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			spec, errs := parse(t, c.spec)
			if spec != nil {
				t.Fatalf("accepted")
			}
			if !strings.Contains(errs, c.field) {
				t.Errorf("error %q does not contain %q", errs, c.field)
			}
		})
	}
}

// TestAppuioSpecAsItIs: a spec of appuio/machine-api-provider-cloudscale
// v0.4.0 with every field of its CloudscaleMachineProviderSpec
// (api/cloudscale/provider/v1beta1/cloudscaleprovider_types.go), without
// apiVersion and kind (its decoder neither requires nor checks them), and
// with the empty metadata its encoder writes (the type embeds ObjectMeta),
// means the same here.
func TestAppuioSpecAsItIs(t *testing.T) {
	spec, errs := parse(t, `{"metadata":{"creationTimestamp":null},
		"userDataSecret":{"name":"cloudscale-user-data"},
		"userDataSecretSelector":{"matchLabels":{"machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap":""}},
		"tokenSecret":{"name":"cloudscale-rw-token"},"baseDomain":"c1.example.com","zone":"rma1",
		"antiAffinityKey":"app","serverGroups":["2db69ba3-1864-4608-853a-0771b6885a3a"],"tags":{"team":"a"},
		"flavor":"flex-16-4","image":"custom:rhcos-4.15","rootVolumeSizeGB":100,"rootVolumeTags":{"backup":"no"},
		"sshKeys":null,"useIPV6":false,
		"interfaces":[{"type":"Private","networkUUID":"fd2b132d-f5d0-4024-b99f-68e5321ab4d1","addresses":null}]}`)
	if spec == nil {
		t.Fatal(errs)
	}
	sel := spec.UserDataSecretSelector
	if sel == nil || len(sel.MatchLabels) != 1 || spec.TokenSecret.Name != "cloudscale-rw-token" || spec.UserDataSecret.Name != "cloudscale-user-data" ||
		spec.RootVolumeTags["backup"] != "no" || len(spec.ServerGroups) != 1 || spec.UseIPV6 == nil || *spec.UseIPV6 ||
		spec.BaseDomain != "c1.example.com" || spec.AntiAffinityKey != "app" || spec.Interfaces[0].NetworkUUID != "fd2b132d-f5d0-4024-b99f-68e5321ab4d1" {
		t.Errorf("decoded %+v", spec)
	}
	if spec.APIVersion != APIVersion || spec.Kind != SpecKind {
		t.Errorf("apiVersion/kind %q/%q, want them defaulted", spec.APIVersion, spec.Kind)
	}
}

func TestValidationUnderAMachineSetPath(t *testing.T) {
	ps := machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(`{"zone":"rma1","image":"debian-12"}`)}}
	path := SpecPath.Root().Child("spec", "template", "spec", "providerSpec", "value")
	_, errs := SpecFromProviderSpec(ps, path)
	if got := errs.ToAggregate().Error(); !strings.Contains(got, "spec.template.spec.providerSpec.value.flavor") {
		t.Errorf("error %q does not name the MachineSet field", got)
	}
}

// A spec of another apiVersion is refused, not taken for ours: a later
// version, or another project's spec of the same kind, may mean another
// server by the same fields.
func TestOtherAPIVersionIsRefused(t *testing.T) {
	for _, v := range []string{"machine.appuio.io/v1", "machine.appuio.io/v1alpha1", "example.com/v1beta1", "v1beta1"} {
		spec := strings.Replace(minimal, "{", `{"apiVersion":"`+v+`","kind":"CloudscaleMachineProviderSpec",`, 1)
		if _, errs := parse(t, spec); !strings.Contains(errs, "spec.providerSpec.value.apiVersion: Unsupported value") || !strings.Contains(errs, APIVersion) {
			t.Errorf("apiVersion %s: %q, want it refused naming %s", v, errs, APIVersion)
		}
	}
	if _, errs := parse(t, strings.Replace(minimal, "{", `{"apiVersion":"`+APIVersion+`",`, 1)); errs != "" {
		t.Errorf("our own apiVersion: %s", errs)
	}
}
