package adopt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// specPath is where a Machine's provider spec is, for messages.
var specPath = field.NewPath("spec", "providerSpec", "value")

// parse defaults and validates a provider spec as the actuator and the
// webhooks do, and returns it with its canonical JSON: the parsed spec
// encoded (what the defaulting webhook fills in from) with its members
// sorted, as the API server stores a Machine's providerSpec. A spec in this
// form is a fixed point of every defaulting step: the webhook finds nothing
// to fill in, and the CPMS template, the Machines and what the CPMS would
// make of the template are byte for byte the same.
func parse(c cloud.Cloud, spec map[string]any) (cloud.Spec, []byte, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	parsed, errs := c.ParseSpec(machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}, specPath)
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	b, err := json.Marshal(parsed)
	if err != nil {
		return nil, nil, err
	}
	canon, err := canonical(b)
	if err != nil {
		return nil, nil, err
	}
	// Parse the canonical form again: what the Machines carry is what the
	// actuator reads.
	parsed, errs = c.ParseSpec(machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: canon}}, specPath)
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	return parsed, canon, nil
}

// canonical re-encodes JSON with the members of every object sorted.
func canonical(b []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// fields decodes a canonical spec into its top-level members.
func fields(b []byte) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(b, &m)
	return m
}

// diff lists the top-level fields in which two specs differ, each with
// both values: "flavor (flex-8-4; the group's plus-16-4)".
func diff(have, want []byte) []string {
	h, w := fields(have), fields(want)
	keys := slices.Sorted(maps.Keys(h))
	for k := range w {
		if _, ok := h[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if bytes.Equal(h[k], w[k]) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s; the group's %s)", k, short(h[k]), short(w[k])))
	}
	return out
}

// short renders a JSON value for a message: strings unquoted, nothing
// longer than 80 characters.
func short(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "none"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return cloud.Truncate(s)
	}
	out := string(raw)
	if len(out) > 80 {
		out = out[:77] + "..."
	}
	return out
}

// summary renders a spec's fields for the plan, without its type and the
// defaults of no interest: "flavor=plus-16-4 image=custom:rhcos-4.19 ...".
func summary(b []byte) string {
	f := fields(b)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		parts = append(parts, k+"="+short(f[k]))
	}
	return strings.Join(parts, " ")
}

// clone copies a spec map deeply enough to add top-level members.
func clone(spec map[string]any) map[string]any {
	out := make(map[string]any, len(spec)+4)
	maps.Copy(out, spec)
	return out
}

// CanonicalSpec defaults and validates a provider spec as the actuator
// and the webhooks do, and returns it in the form every defaulting step
// leaves as it is (see parse): what a MachineSet or a
// ControlPlaneMachineSet template should carry.
func CanonicalSpec(c cloud.Cloud, spec map[string]any) ([]byte, error) {
	_, b, err := parse(c, spec)
	return b, err
}
