// Package v1beta1 holds the cloudscale.ch provider spec and status that a
// Machine carries in spec.providerSpec and status.providerStatus.
//
// The JSON field names are those of the cloudscale.ch provider already in
// use (appuio/machine-api-provider-cloudscale), so existing MachineSets keep
// working unchanged. Defaulting and validation live here, in one place,
// for the actuator and the admission webhook alike.
package v1beta1

// GroupVersion of the provider spec, as written in its apiVersion field.
const (
	Group      = "machine.appuio.io"
	Version    = "v1beta1"
	APIVersion = Group + "/" + Version

	SpecKind   = "CloudscaleMachineProviderSpec"
	StatusKind = "CloudscaleMachineProviderStatus"
)
