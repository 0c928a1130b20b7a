package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PublicIPAssignment says which public addresses an instance gets.
type PublicIPAssignment string

const (
	// PublicIPInet4 is a public IPv4 address (Exoscale's default).
	PublicIPInet4 PublicIPAssignment = "inet4"
	// PublicIPDual is a public IPv4 and a public IPv6 address.
	PublicIPDual PublicIPAssignment = "dual"
	// PublicIPNone is no public address: the instance is reached on its
	// private networks only.
	PublicIPNone PublicIPAssignment = "none"
)

// TemplateVisibility says whose templates a template name is looked up in.
type TemplateVisibility string

const (
	// TemplateVisibilityPrivate are the account's own templates (RHCOS,
	// which an OpenShift installation registers).
	TemplateVisibilityPrivate TemplateVisibility = "private"
	// TemplateVisibilityPublic are the templates Exoscale maintains.
	TemplateVisibilityPublic TemplateVisibility = "public"
)

// ExoscaleMachineProviderSpec describes the Exoscale compute instance of one
// Machine. The instance is named after the Machine, which is also its
// hostname and the Node's name.
type ExoscaleMachineProviderSpec struct {
	metav1.TypeMeta `json:",inline"`

	// Zone the instance runs in, e.g. ch-gva-2 or de-fra-1.
	Zone string `json:"zone"`
	// InstanceType as family.size (standard.extra-large, gpu3.small) or the
	// instance type's ID.
	InstanceType string `json:"instanceType"`
	// Template the instance boots from: by ID, or by name and visibility.
	// A name that more than one template of the zone has is an error,
	// never a guess.
	Template TemplateRef `json:"template"`
	// DiskSize is the size of the root disk in GiB, 10 to 51200. Default
	// 100.
	DiskSize int64 `json:"diskSize,omitempty"`
	// SSHKeys are names of SSH keys registered in the account.
	SSHKeys []string `json:"sshKeys,omitempty"`
	// SecurityGroups the instance is in, by ID or name. Without any, the
	// account's default security group.
	SecurityGroups []ResourceRef `json:"securityGroups,omitempty"`
	// AntiAffinityGroups are existing anti-affinity groups to put the
	// instance in, by ID or name. The provider never changes them.
	AntiAffinityGroups []ResourceRef `json:"antiAffinityGroups,omitempty"`
	// AntiAffinityKey spreads the instances of all Machines with the same
	// key over anti-affinity groups the provider creates on demand and
	// deletes when empty (at most eight instances share a group on
	// Exoscale).
	AntiAffinityKey string `json:"antiAffinityKey,omitempty"`
	// PrivateNetworks the instance is attached to, by ID or name, each with
	// an optional fixed IP address (managed networks only).
	PrivateNetworks []PrivateNetworkRef `json:"privateNetworks,omitempty"`
	// PublicIPAssignment is inet4, dual or none. Default inet4.
	PublicIPAssignment PublicIPAssignment `json:"publicIPAssignment,omitempty"`
	// DeployTarget places the instance on a dedicated hypervisor, by ID or
	// name.
	DeployTarget *ResourceRef `json:"deployTarget,omitempty"`
	// Labels are set on the instance, besides the labels that identify it
	// as the Machine's (which they may not override).
	Labels map[string]string `json:"labels,omitempty"`
	// UserDataSecret names a secret in the Machine's namespace whose key
	// userData is the instance's user data (e.g. the worker Ignition
	// config).
	UserDataSecret *corev1.LocalObjectReference `json:"userDataSecret,omitempty"`
	// CredentialsSecret names a secret in the Machine's namespace whose keys
	// api-key and api-secret are the API credentials to use; without it,
	// the manager's default credentials ($EXOSCALE_API_KEY and
	// $EXOSCALE_API_SECRET).
	CredentialsSecret *corev1.LocalObjectReference `json:"credentialsSecret,omitempty"`
}

// TemplateRef names a template: by ID, or by name and visibility.
type TemplateRef struct {
	// ID of the template; it excludes name.
	ID string `json:"id,omitempty"`
	// Name of the template, e.g. the RHCOS template an OpenShift
	// installation registered.
	Name string `json:"name,omitempty"`
	// Visibility of a template given by name: private (the account's own,
	// the default) or public (Exoscale's).
	Visibility TemplateVisibility `json:"visibility,omitempty"`
}

// ResourceRef names a resource of the account by ID or by name.
type ResourceRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// PrivateNetworkRef names a private network of the instance's zone.
type PrivateNetworkRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// IP is the address the instance gets on a managed network; without
	// it, a free one.
	IP string `json:"ip,omitempty"`
}

// ExoscaleMachineProviderStatus is what the provider reports about the
// instance of a Machine.
type ExoscaleMachineProviderStatus struct {
	metav1.TypeMeta `json:",inline"`

	// InstanceID is the instance's ID.
	InstanceID string `json:"instanceId,omitempty"`
	// Status is the instance's state: starting, running, stopped, ...
	Status string `json:"status,omitempty"`
	// Conditions: ServerReady, SpecInSync.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
