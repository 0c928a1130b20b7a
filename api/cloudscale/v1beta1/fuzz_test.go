package v1beta1

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/appuio/machine-api-provider/api/internal/specutil"
)

// The seed corpus (f.Add and testdata/fuzz) runs with every go test; a long
// run is `go test -fuzz=FuzzSpecFromProviderSpec -fuzztime=10m
// ./api/cloudscale/v1beta1/` (docs/security.md).

// FuzzSpecFromProviderSpec: decoding, defaulting and validating any bytes
// never panics; errors stay short; a spec that is accepted is a fixed point
// (defaulting it again, validating it again, or encoding and parsing it
// again changes nothing).
func FuzzSpecFromProviderSpec(f *testing.F) {
	for _, s := range []string{
		`{"zone":"rma1","flavor":"flex-8-4","image":"debian-12"}`,
		`{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"lpg1","flavor":"plus-16-4","image":"custom:rhcos-4.15","rootVolumeSizeGB":100,"antiAffinityKey":"worker","baseDomain":"c1.example.com","tags":{"team":"a"},"sshKeys":["ssh-ed25519 AAAA k"],"userDataSecret":{"name":"cloudscale-user-data"},"tokenSecret":{"name":"cloudscale-rw-token"},"interfaces":[{"type":"Public"},{"type":"Private","networkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a","addresses":[{"subnetUUID":"2db69ba3-1864-4608-853a-0771b6885a3a","address":"10.0.0.5"}]}],"serverGroups":["2db69ba3-1864-4608-853a-0771b6885a3a"],"useIPV6":false}`,
		`{"zone":"rma1","flavor":"flex-8-4","image":"debian-12","tags":{"a\nb":"\u0000"},"rootVolumeSizeGB":-1}`,
		`{"zone":["rma1"]}`,
		`{"zone":"rma1","flavor":"flex-8-4","image":"debian-12","rootVolumeSizeGB":1e400}`,
		`{"zone":"rma1","flavor":"flex-8-4","image":"debian-12","interfaces":[{"type":"Private","addresses":[{}]}]}`,
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
				// Errors end up in a Machine's status: a hostile spec must
				// not make them large.
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
		// Encoded, as the defaulting webhook writes it back, it parses to
		// the same spec.
		spec2, errs := SpecFromProviderSpec(machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: before}}, SpecPath)
		if len(errs) > 0 {
			t.Fatalf("the encoded spec is refused: %v\n%s", errs, before)
		}
		// (Compared encoded: an empty list and none are the same spec.)
		if after, _ := json.Marshal(spec2); string(after) != string(before) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", before, after)
		}
		// What the cloud gets is bounded and one line each.
		for _, s := range append([]string{spec.Zone, spec.Flavor, spec.Image, spec.BaseDomain, spec.AntiAffinityKey}, spec.SSHKeys...) {
			if len(s) > maxSSHKeyLength || strings.ContainsAny(s, "\n\r\x00") || !utf8.ValidString(s) {
				t.Fatalf("accepted an unbounded or multi-line value %.100q", s)
			}
		}
		for _, tags := range []map[string]string{spec.Tags, spec.RootVolumeTags} {
			for k, v := range tags {
				if !specutil.Printable(k) || !specutil.Printable(v) || len(k) > maxTagKeyLength || len(v) > maxTagValueLength {
					t.Fatalf("accepted tag %q=%q", k, v)
				}
			}
		}
	})
}

// FuzzValidateHostname: an accepted name is one DNS label of at most 63
// characters and makes, with the base domain, a name of at most 253.
func FuzzValidateHostname(f *testing.F) {
	f.Add("worker-a1b2c", "")
	f.Add("worker-a1b2c", "c1.example.com")
	f.Add(strings.Repeat("w", 63), strings.Repeat("abcdefghi.", 18)+"example.ch")
	f.Add("a.b", "")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, name, baseDomain string) {
		err := ValidateHostname(name, baseDomain)
		if err != nil {
			if _, ok := err.(*HostnameError); !ok {
				t.Fatalf("error of type %T", err)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("message of %d bytes", len(err.Error()))
			}
			return
		}
		if len(validation.IsDNS1123Label(name)) > 0 || len(name) > 63 {
			t.Fatalf("accepted %q", name)
		}
		if baseDomain != "" && len(name)+1+len(baseDomain) > 253 {
			t.Fatalf("accepted %q with a %d-character domain", name, len(baseDomain))
		}
	})
}
