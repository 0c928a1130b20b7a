package v1beta1

import (
	"encoding/json"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SpecFromProviderSpec decodes, defaults and validates the provider spec of
// a Machine. Every problem comes back as a field error under path, so a
// caller can tell the user exactly what to fix.
func SpecFromProviderSpec(ps machinev1.ProviderSpec, path *field.Path) (*ExoscaleMachineProviderSpec, field.ErrorList) {
	if ps.Value == nil || len(ps.Value.Raw) == 0 {
		return nil, field.ErrorList{field.Required(path, "the machine has no providerSpec value")}
	}
	spec := &ExoscaleMachineProviderSpec{}
	if err := json.Unmarshal(ps.Value.Raw, spec); err != nil {
		return nil, field.ErrorList{field.Invalid(path, "(raw JSON)", describeJSONError(err))}
	}
	spec.Default()
	if errs := spec.Validate(path); len(errs) > 0 {
		return nil, errs
	}
	return spec, nil
}

// describeJSONError names the offending field of a type error, without
// repeating the input.
func describeJSONError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return fmt.Sprintf("cannot decode field %q: got JSON %s, want %s", truncate(te.Field), te.Value, te.Type)
	}
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("not a valid %s: JSON syntax error at byte %d", SpecKind, se.Offset)
	}
	return "not a valid " + SpecKind + ": " + truncate(err.Error())
}

// RawExtension encodes a spec or status for a Machine.
func RawExtension(v any) (*runtime.RawExtension, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &runtime.RawExtension{Raw: b}, nil
}

// StatusFromRaw decodes a provider status; an empty one is a zero status.
func StatusFromRaw(raw *runtime.RawExtension) (*ExoscaleMachineProviderStatus, error) {
	st := &ExoscaleMachineProviderStatus{}
	if raw != nil && len(raw.Raw) > 0 {
		if err := json.Unmarshal(raw.Raw, st); err != nil {
			return nil, fmt.Errorf("decoding providerStatus: %w", err)
		}
	}
	st.APIVersion, st.Kind = APIVersion, StatusKind
	return st, nil
}
