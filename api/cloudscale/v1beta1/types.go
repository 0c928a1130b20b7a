package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InterfaceType says which network an interface connects to.
type InterfaceType string

const (
	InterfaceTypePublic  InterfaceType = "Public"
	InterfaceTypePrivate InterfaceType = "Private"
)

// CloudscaleMachineProviderSpec describes the cloudscale.ch server of one
// Machine.
type CloudscaleMachineProviderSpec struct {
	metav1.TypeMeta `json:",inline"`
	// Metadata is taken, empty, for appuio's provider spec type, which
	// embeds ObjectMeta and so writes "metadata":{"creationTimestamp":null}
	// into the specs it encodes; neither provider reads it, so anything in
	// it is refused rather than ignored.
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`

	// Zone the server runs in: rma1 or lpg1.
	Zone string `json:"zone"`
	// Flavor of the server, e.g. flex-16-4 or plus-32-8.
	Flavor string `json:"flavor"`
	// Image is a public image slug (e.g. debian-12), or a custom image as
	// custom:<slug> or its UUID.
	Image string `json:"image"`
	// RootVolumeSizeGB is the size of the root volume. Default 100.
	RootVolumeSizeGB int `json:"rootVolumeSizeGB,omitempty"`
	// RootVolumeTags are set on the root volume, besides the machine tags.
	RootVolumeTags map[string]string `json:"rootVolumeTags,omitempty"`
	// Tags are set on the server, besides the tags that identify it as the
	// Machine's (which they may not override).
	Tags map[string]string `json:"tags,omitempty"`
	// SSHKeys are public keys authorised on the server.
	SSHKeys []string `json:"sshKeys,omitempty"`
	// UseIPV6 gives public interfaces an IPv6 address too. Default true.
	UseIPV6 *bool `json:"useIPV6,omitempty"`
	// Interfaces of the server, required: the cluster's private network
	// (type Private), and a public interface only when listed (type Public).
	Interfaces []Interface `json:"interfaces,omitempty"`
	// ServerGroups are UUIDs of existing server groups to put the server in.
	ServerGroups []string `json:"serverGroups,omitempty"`
	// AntiAffinityKey spreads the servers of all Machines with the same key
	// over anti-affinity server groups, created and deleted as needed (at most
	// four servers share a group on cloudscale.ch).
	AntiAffinityKey string `json:"antiAffinityKey,omitempty"`
	// BaseDomain is the domain of servers made before with this spec, named
	// <machine>.<baseDomain>: they stay their Machines' servers. New servers
	// are named <machine>, as their Nodes are, so that the cloudscale.ch
	// cloud-controller-manager finds a Node's server by its name.
	BaseDomain string `json:"baseDomain,omitempty"`
	// UserDataSecret names a secret in the Machine's namespace whose key
	// userData is the server's user data (e.g. the worker Ignition config).
	UserDataSecret *corev1.LocalObjectReference `json:"userDataSecret,omitempty"`
	// UserDataSecretSelector picks secrets of the Machine's namespace that
	// a user data template sees as std.extVar('context').secrets, a list of
	// Secret objects as the API has them (data base64), as appuio's
	// provider offers them (v0.4.0). Without it, secrets is null; an empty
	// selector picks every secret. A selection holding credentials (a key
	// of the cloud's credentials, or a Secret of another type than
	// Opaque) fails the Machine: user data reaches the server and the
	// cloud.
	UserDataSecretSelector *metav1.LabelSelector `json:"userDataSecretSelector,omitempty"`
	// TokenSecret names a secret in the Machine's namespace whose key token
	// is the API token to use; without it, the manager's default token.
	TokenSecret *corev1.LocalObjectReference `json:"tokenSecret,omitempty"`
}

// Interface is one network interface of the server.
type Interface struct {
	// Type is Public or Private.
	Type InterfaceType `json:"type"`
	// NetworkUUID is the private network to connect (Private only).
	NetworkUUID string `json:"networkUUID,omitempty"`
	// Addresses to give the interface (Private only); without any, one
	// address of the network's first subnet.
	Addresses []Address `json:"addresses,omitempty"`
}

// Address is an address of a private interface.
type Address struct {
	// SubnetUUID the address belongs to.
	SubnetUUID string `json:"subnetUUID,omitempty"`
	// Address to assign; without it, a free one of the subnet.
	Address string `json:"address,omitempty"`
}

// CloudscaleMachineProviderStatus is what the provider reports about the
// server of a Machine.
type CloudscaleMachineProviderStatus struct {
	metav1.TypeMeta `json:",inline"`

	// InstanceID is the server's UUID.
	InstanceID string `json:"instanceId,omitempty"`
	// Status is the server's status: changing, running or stopped.
	Status string `json:"status,omitempty"`
	// Conditions: ServerReady, SpecInSync (false when an immutable field
	// changed and the Machine must be replaced).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
