// Package cloud is the provider-neutral boundary between the Machine API and
// a cloud. The actuator and the controllers know a cloud only through these
// interfaces; the provider spec, the SDK and the cloud's conventions (tags,
// server groups, flavors) live behind them, in pkg/cloud/<cloud>.
package cloud

import (
	"context"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Cloud is one cloud that Machines run on.
type Cloud interface {
	// Name is the cloud's name, also the scheme of its provider IDs
	// ("cloudscale" in cloudscale://<uuid>).
	Name() string
	// SpecKind is the kind of the cloud's provider spec; MachineSets with
	// another kind belong to another provider.
	SpecKind() string
	// ParseSpec decodes, defaults and validates a provider spec. What is
	// wrong comes back as field errors under path.
	ParseSpec(ps machinev1.ProviderSpec, path *field.Path) (Spec, field.ErrorList)
	// Client returns a client acting with token; "" means the default token
	// the manager was started with. Clients are cheap to ask for: a cloud
	// keeps one per token.
	Client(token string) (Client, error)
}

// Spec is a parsed, defaulted and valid provider spec.
type Spec interface {
	// TokenSecretName names the secret (key "token") holding the API token,
	// "" for the default token.
	TokenSecretName() string
	// UserDataSecretName names the secret (key "userData") holding the
	// user data, "" for none.
	UserDataSecretName() string
	// InstanceType, Region and Zone place the server, for Machine labels.
	InstanceType() string
	Region() string
	Zone() string
	// RootVolumeGiB is the size of the root disk, for capacity publishing.
	RootVolumeGiB() int
}

// MachineRef names a Machine to the cloud: its servers carry tags with both.
type MachineRef struct {
	// Name of the Machine.
	Name string
	// ClusterID is the cluster's infrastructure name, the Machine's
	// machine.openshift.io/cluster-api-cluster label.
	ClusterID string
}

// Server is a cloud server as the Machine API needs to see it.
type Server struct {
	ID string
	// Name is the server's hostname, which becomes the Node's name.
	Name string
	// Status is the cloud's own word for the server's state.
	Status string
	// Running is true once the server has booted.
	Running      bool
	InstanceType string
	Region       string
	Zone         string
	// Addresses are the server's IPs: InternalIP for private networks (the
	// public IPv4 when there is none), ExternalIP for public ones.
	Addresses []corev1.NodeAddress
	Tags      map[string]string
	// Detail is the implementation's own record of the server.
	Detail any
}

// Flavor is what a server of some flavor offers a Node.
type Flavor struct {
	Name      string
	VCPUs     int
	MemoryMiB int64
	GPUs      int
	// GPUType names the GPU model, "" without GPUs.
	GPUType string
	// Arch is the CPU architecture as in kubernetes.io/arch.
	Arch string
}

// Client acts on one cloud account. Every method may be retried: none of
// them makes a second server when called again after an error.
type Client interface {
	// FindServers returns the servers tagged as the Machine's. More than
	// one is a fault the caller must report, never resolve by guessing.
	FindServers(ctx context.Context, m MachineRef) ([]Server, error)
	// GetServer returns a server by ID, or an error wrapping ErrNotFound.
	GetServer(ctx context.Context, id string) (*Server, error)
	// CreateServer creates the Machine's server, tagged as the Machine's, with
	// userData. Callers look for an existing one first (FindServers); with
	// an anti-affinity key, concurrent creates are placed consistently.
	CreateServer(ctx context.Context, m MachineRef, spec Spec, userData []byte) (*Server, error)
	// DeleteServer deletes a server (a server already gone is no error)
	// and then the anti-affinity groups of the provider it left empty.
	DeleteServer(ctx context.Context, m MachineRef, s *Server) error
	// ListServers returns all servers of a cluster.
	ListServers(ctx context.Context, clusterID string) ([]Server, error)
	// SyncServer brings the tags of the server and its root volume in line
	// with spec, and returns the immutable fields (by their provider spec
	// names) in which the server differs from spec: the Machine must be
	// replaced for those to take effect.
	SyncServer(ctx context.Context, m MachineRef, spec Spec, s *Server) (drift []string, err error)
	// Flavor describes a flavor in a zone; an unknown one is an
	// InvalidConfigError.
	Flavor(ctx context.Context, zone, name string) (*Flavor, error)
}
