package cloudscale

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Spec is a parsed, defaulted and valid cloudscale.ch provider spec.
//
// Its Zone method shadows the embedded field of the same name: the field is
// spec.CloudscaleMachineProviderSpec.Zone.
type Spec struct {
	*v1beta1.CloudscaleMachineProviderSpec
}

func (s Spec) CredentialsSecretName() string {
	if s.TokenSecret == nil {
		return ""
	}
	return s.TokenSecret.Name
}

func (s Spec) CredentialsSecretField() string { return "tokenSecret" }

func (s Spec) UserDataSecretName() string {
	if s.UserDataSecret == nil {
		return ""
	}
	return s.UserDataSecret.Name
}

// UserDataSecretSelector shadows the embedded field of the same name.
func (s Spec) UserDataSecretSelector() *metav1.LabelSelector {
	return s.CloudscaleMachineProviderSpec.UserDataSecretSelector
}

// InstanceType is the flavor.
func (s Spec) InstanceType() string { return s.Flavor }

func (s Spec) Zone() string { return s.CloudscaleMachineProviderSpec.Zone }

// Region is the zone without its number (rma1 is in rma): cloudscale.ch
// names zones that way, and it saves an API call for the region list.
func (s Spec) Region() string { return regionOf(s.CloudscaleMachineProviderSpec.Zone) }

func (s Spec) RootVolumeGiB() int { return s.RootVolumeSizeGB }

// NodeLabels are what the cloudscale.ch CCM sets: the flavor's slug, the
// zone's slug and the zone without its digits as the region
// (pkg/cloudscale_ccm/instances.go, InstanceMetadata, of
// cloudscale-ch/cloudscale-cloud-controller-manager 1.3.0).
func (s Spec) NodeLabels(*cloud.Flavor) map[string]string {
	return cloud.NodeLabels(s.Flavor, s.Zone(), s.Region())
}

// ServerName is the Machine's name, also with baseDomain: the Node's name.
func (s Spec) ServerName(machine string) string {
	return serverName(machine, s.CloudscaleMachineProviderSpec)
}

func (s Spec) MaxUserDataBytes() int { return v1beta1.MaxUserDataBytes }

// AntiAffinityKey shadows the embedded field of the same name.
func (s Spec) AntiAffinityKey() string { return s.CloudscaleMachineProviderSpec.AntiAffinityKey }

func regionOf(zone string) string { return strings.TrimRight(zone, "0123456789") }

// providerSpec unwraps a cloud.Spec that ParseSpec of this package made.
func providerSpec(spec cloud.Spec) (*v1beta1.CloudscaleMachineProviderSpec, error) {
	var p *v1beta1.CloudscaleMachineProviderSpec
	switch s := spec.(type) {
	case *Spec:
		if s != nil {
			p = s.CloudscaleMachineProviderSpec
		}
	case Spec:
		p = s.CloudscaleMachineProviderSpec
	default:
		return nil, fmt.Errorf("cloudscale: got a %T spec, want one parsed by the cloudscale cloud", spec)
	}
	if p == nil {
		return nil, fmt.Errorf("cloudscale: empty spec")
	}
	return p, nil
}
