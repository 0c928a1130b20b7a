package v1beta1

import (
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/api/internal/specutil"
)

// SpecFromProviderSpec decodes, defaults and validates the provider spec of
// a Machine. Every problem comes back as a field error under path, so a
// caller can tell the user exactly what to fix.
func SpecFromProviderSpec(ps machinev1.ProviderSpec, path *field.Path) (*CloudscaleMachineProviderSpec, field.ErrorList) {
	return specutil.Decode[CloudscaleMachineProviderSpec](ps, path, SpecKind)
}

// RawExtension encodes a spec or status for a Machine.
func RawExtension(v any) (*runtime.RawExtension, error) { return specutil.RawExtension(v) }

// StatusFromRaw decodes a provider status; an empty one is a zero status.
func StatusFromRaw(raw *runtime.RawExtension) (*CloudscaleMachineProviderStatus, error) {
	st := &CloudscaleMachineProviderStatus{}
	if err := specutil.DecodeStatus(raw, st); err != nil {
		return nil, err
	}
	st.APIVersion, st.Kind = APIVersion, StatusKind
	return st, nil
}
