package v1beta1

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/api/internal/specutil"
)

// The seed corpus (f.Add and testdata/fuzz/FuzzExoscaleSpec) runs with
// every go test; a long run is `go test -fuzz=FuzzExoscaleSpec
// -fuzztime=10m ./api/exoscale/v1beta1/`.

// FuzzExoscaleSpec: decoding, defaulting and validating any bytes never
// panics; errors stay short; a spec that is accepted is a fixed point
// (defaulting it again, validating it again, or encoding and parsing it
// again changes nothing), and everything it would send the API is bounded
// and one line.
func FuzzExoscaleSpec(f *testing.F) {
	for _, s := range []string{
		minimal,
		`{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.extra-large","template":{"name":"rhcos-4.19","visibility":"private"},"diskSize":120,"sshKeys":["c1-admin"],"securityGroups":[{"name":"c1-all-machines"}],"antiAffinityKey":"worker","privateNetworks":[{"name":"c1_clusternet","ip":"172.18.200.21"}],"publicIPAssignment":"dual","deployTarget":{"id":"2db69ba3-1864-4608-853a-0771b6885a3a"},"labels":{"team":"a"},"userDataSecret":{"name":"worker-user-data"},"credentialsSecret":{"name":"exoscale-credentials"}}`,
		`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"id":"2db69ba3-1864-4608-853a-0771b6885a3a"},"labels":{"a\nb":"\u0000"},"diskSize":-1}`,
		`{"zone":["ch-gva-2"]}`,
		`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"diskSize":1e400}`,
		`{"zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"x"},"privateNetworks":[{}],"publicIPAssignment":"none"}`,
		`null`, `[]`, `"x"`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ps := machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}
		spec, errs := SpecFromProviderSpec(ps, SpecPath)
		if spec == nil {
			if len(errs) == 0 {
				t.Fatal("refused without an error")
			}
			for _, e := range errs {
				if n := len(e.Error()); n > 2000 {
					t.Fatalf("error of %d bytes: %.300s", n, e.Error())
				}
			}
			return
		}
		if len(errs) > 0 {
			t.Fatalf("accepted with errors: %v", errs)
		}
		before, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		spec.Default()
		if again, _ := json.Marshal(spec); string(again) != string(before) {
			t.Fatalf("Default is not idempotent:\n%s\n%s", before, again)
		}
		if errs := spec.Validate(SpecPath); len(errs) > 0 {
			t.Fatalf("an accepted spec does not validate again: %v", errs)
		}
		spec2, errs := SpecFromProviderSpec(machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: before}}, SpecPath)
		if len(errs) > 0 {
			t.Fatalf("the encoded spec is refused: %v\n%s", errs, before)
		}
		// Compared as encoded: an empty list and none are the same spec.
		if again, _ := json.Marshal(spec2); string(again) != string(before) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", before, again)
		}
		if spec.DiskSize < MinDiskSize || spec.DiskSize > MaxDiskSize {
			t.Fatalf("accepted diskSize %d", spec.DiskSize)
		}
		values := []string{spec.Zone, spec.InstanceType, spec.Template.ID, spec.Template.Name, spec.AntiAffinityKey}
		values = append(values, spec.SSHKeys...)
		for _, r := range append(spec.SecurityGroups, spec.AntiAffinityGroups...) {
			values = append(values, r.ID, r.Name)
		}
		for _, n := range spec.PrivateNetworks {
			values = append(values, n.ID, n.Name, n.IP)
		}
		for k, v := range spec.Labels {
			values = append(values, k, v)
			if strings.ContainsAny(k, " =") {
				t.Fatalf("accepted label key %q", k)
			}
		}
		for _, s := range values {
			if len(s) > maxNameLength || strings.ContainsAny(s, "\n\r\x00") || !utf8.ValidString(s) || !specutil.Printable(s) {
				t.Fatalf("accepted an unbounded or multi-line value %.100q", s)
			}
		}
	})
}
