package exoscale

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Spec is a parsed, defaulted and valid Exoscale provider spec. It encodes
// as the provider spec (the webhook's defaulting writes it back).
type Spec struct {
	*v1beta1.ExoscaleMachineProviderSpec
}

func (s Spec) CredentialsSecretName() string {
	if s.CredentialsSecret == nil {
		return ""
	}
	return s.CredentialsSecret.Name
}

func (s Spec) CredentialsSecretField() string { return "credentialsSecret" }

func (s Spec) UserDataSecretName() string {
	if s.UserDataSecret == nil {
		return ""
	}
	return s.UserDataSecret.Name
}

// UserDataSecretSelector is nil: the Exoscale spec picks no secrets for
// its templates.
func (s Spec) UserDataSecretSelector() *metav1.LabelSelector { return nil }

// InstanceType is the spec's instanceType (family.size or an ID).
func (s Spec) InstanceType() string { return s.ExoscaleMachineProviderSpec.InstanceType }

// Zone shadows the embedded field of the same name.
func (s Spec) Zone() string { return s.ExoscaleMachineProviderSpec.Zone }

// Region is the zone: Exoscale has no regions above its zones, and its
// cloud controller manager labels Nodes with the zone as their region.
func (s Spec) Region() string { return s.ExoscaleMachineProviderSpec.Zone }

func (s Spec) RootVolumeGiB() int { return int(s.DiskSize) }

// NodeLabels are what the Exoscale CCM sets: the instance type as
// <family>.<size> (also for a spec that names it by ID), the zone's name as
// the region, and no zone label at all: its Zones returns the CCM's zone as
// the region only (exoscale/instances.go, InstanceTypeByProviderID, and
// exoscale/zones.go, GetZoneByProviderID, of
// exoscale/exoscale-cloud-controller-manager v0.34.0).
func (s Spec) NodeLabels(f *cloud.Flavor) map[string]string {
	return cloud.NodeLabels(f.Name, "", s.Zone())
}

// ServerName is the Machine's name: the instance's name is its hostname,
// and so the Node's name.
func (s Spec) ServerName(machine string) string { return machine }

// AntiAffinityKey shadows the embedded field of the same name.
func (s Spec) AntiAffinityKey() string { return s.ExoscaleMachineProviderSpec.AntiAffinityKey }

// MaxUserDataBytes is what fits into the API's 32768 characters of base64.
func (s Spec) MaxUserDataBytes() int { return v1beta1.MaxUserDataBytes }

// providerSpec unwraps a cloud.Spec that ParseSpec of this package made.
func providerSpec(spec cloud.Spec) (*v1beta1.ExoscaleMachineProviderSpec, error) {
	var p *v1beta1.ExoscaleMachineProviderSpec
	switch s := spec.(type) {
	case *Spec:
		if s != nil {
			p = s.ExoscaleMachineProviderSpec
		}
	case Spec:
		p = s.ExoscaleMachineProviderSpec
	default:
		return nil, fmt.Errorf("exoscale: got a %T spec, want one parsed by the exoscale cloud", spec)
	}
	if p == nil {
		return nil, fmt.Errorf("exoscale: empty spec")
	}
	return p, nil
}
