package webhooks_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// FuzzUnknownFields checks the unknown-field warnings against the decoder
// itself: encoding/json, told to refuse unknown fields, refuses a spec
// exactly when UnknownFields names one. A long run:
// go test -fuzz=FuzzUnknownFields -fuzztime=10m ./pkg/webhooks/
func FuzzUnknownFields(f *testing.F) {
	f.Add([]byte(misspelt))
	for _, s := range []string{
		`{"zone":"rma1","flavor":"flex-8-4","image":"debian-12","interfaces":[{"type":"Public"}]}`,
		`{"Zone":"rma1","FLAVOR":"x","kind":"k","ApiVersion":"v"}`,
		`{"interfaces":[{"type":"Private","addresses":[{"subnetUUID":"u","addr":"x"}]}]}`,
		`{"tags":{"x":"y"},"userDataSecret":{"name":"a","Name":"b","x":1}}`,
		`{"useIPV6":true,"useipv6":false,"serverGroups":["a"],"sshKeys":["k"]}`,
		`{"a":{"b":{"c":1}}}`, `{}`, `[]`, `null`, `{"zone":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			// ParseSpec refuses it, and UnknownFields names nothing.
			if got := webhooks.UnknownFields(raw, &v1beta1.CloudscaleMachineProviderSpec{}); got != nil {
				t.Fatalf("unknown fields %q in invalid JSON", got)
			}
			return
		}
		unknown := webhooks.UnknownFields(raw, &v1beta1.CloudscaleMachineProviderSpec{})
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var spec v1beta1.CloudscaleMachineProviderSpec
		err := dec.Decode(&spec)
		if err != nil && !strings.Contains(err.Error(), "unknown field") {
			// A type error stops the decoder before it sees every member:
			// nothing to compare.
			return
		}
		if (err != nil) != (len(unknown) > 0) {
			t.Fatalf("encoding/json says %v, UnknownFields %q, for %s", err, unknown, raw)
		}
	})
}
