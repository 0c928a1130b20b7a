// Package v1beta1 holds the Exoscale provider spec and status that a Machine
// carries in spec.providerSpec and status.providerStatus.
//
// The spec is shaped after what the OpenShift workers on Exoscale that
// Terraform installs are made of: an instance of an instance type, booted
// from the RHCOS private template, with a disk, security groups, a private
// network, an anti-affinity group and the worker Ignition pointer as user
// data. It shares its API group with the cloudscale.ch spec. Defaulting and
// validation live here, in one place, for the actuator and the admission
// webhook alike.
package v1beta1

// GroupVersion of the provider spec, as written in its apiVersion field: the
// same group as the cloudscale.ch spec.
const (
	Group      = "machine.appuio.io"
	Version    = "v1beta1"
	APIVersion = Group + "/" + Version

	SpecKind   = "ExoscaleMachineProviderSpec"
	StatusKind = "ExoscaleMachineProviderStatus"
)
