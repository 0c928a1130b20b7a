package actuator

import (
	"encoding/json"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
)

func decodeStatus(m *machinev1.Machine) (*providerStatus, error) {
	st := &providerStatus{}
	if raw := m.Status.ProviderStatus; raw != nil && len(raw.Raw) > 0 {
		if err := json.Unmarshal(raw.Raw, st); err != nil {
			return nil, fmt.Errorf("decoding the Machine's providerStatus: %w", err)
		}
	}
	return st, nil
}

func encodeStatus(st *providerStatus) (*runtime.RawExtension, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &runtime.RawExtension{Raw: b}, nil
}
