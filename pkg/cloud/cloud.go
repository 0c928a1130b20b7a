// Package cloud is the provider-neutral boundary between the Machine API and
// a cloud. The actuator and the controllers know a cloud only through these
// interfaces; the provider spec, the SDK and the cloud's conventions (tags or
// labels, server groups, flavors) live behind them, in pkg/cloud/<cloud>.
//
// What is the same on every cloud lives here, once, and both clouds use it:
// accounts and their credentials (accounts.go, credentials.go), the per-account
// call gate with its rate limit and Retry-After (gate.go, call.go), the error
// classes and their classification (errors.go, classify.go), scrubbing
// secrets from cloud messages (scrub.go), packing servers into anti-affinity
// groups (groups.go), and the shared view of a cluster's servers (view.go).
package cloud

import (
	"context"
	"slices"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// CredentialsSecretOf reads only the name of the credentials secret from
	// a provider spec that may be invalid otherwise, so that the servers of a
	// Machine whose spec broke after they were made can still be found with
	// the credentials the spec names. ok is false when the spec cannot even
	// say that (not JSON).
	CredentialsSecretOf(ps machinev1.ProviderSpec) (name string, ok bool)
	// CredentialKeys are the keys a credentials secret holds for this
	// cloud: ["token"] for cloudscale.ch, the API key and secret for
	// Exoscale.
	CredentialKeys() []string
	// DefaultCredentials are the manager's own credentials (from its
	// environment), used for Machines whose spec names no secret; nil when
	// the manager has none.
	DefaultCredentials() *Credentials
	// DefaultCredentialsSecret names the Secret the manager's default
	// credentials are read from instead (--default-credentials-secret),
	// with the keys of CredentialKeys; the zero value when they come from
	// the environment. It is read at every use, as a secret a spec names
	// is, so that replacing it takes effect with the next call, without a
	// restart.
	DefaultCredentialsSecret() types.NamespacedName
	// NewClient returns a client acting with creds. Every API call it makes
	// passes gate first (see Call). Clients are kept per account by
	// Accounts: never call this for each reconcile.
	NewClient(creds Credentials, gate *Gate) (Client, error)
	// DefaultRateLimit is the cloud's safe default for calls per second and
	// burst per account.
	DefaultRateLimit() RateLimit
	// CallTimeout is how long one API call may take before the client
	// gives up on its answer: the timeout its calls actually use, always
	// bounded. A create given up on may still make its server until then,
	// so the actuator's create grace must be longer (manager.New checks).
	CallTimeout() time.Duration
}

// Spec is a parsed, defaulted and valid provider spec.
type Spec interface {
	// CredentialsSecretName names the secret holding the cloud's
	// credentials (Cloud.CredentialKeys), "" for the manager's default.
	CredentialsSecretName() string
	// CredentialsSecretField is the spec field naming that secret
	// ("tokenSecret", "credentialsSecret"), for messages.
	CredentialsSecretField() string
	// UserDataSecretName names the secret (key "userData") holding the
	// user data, "" for none.
	UserDataSecretName() string
	// UserDataSecretSelector picks the secrets a user data template sees
	// as context.secrets; nil for none (the template sees null).
	UserDataSecretSelector() *metav1.LabelSelector
	// InstanceType, Region and Zone place the server, for Machine labels.
	InstanceType() string
	Region() string
	Zone() string
	// RootVolumeGiB is the size of the root disk, for capacity publishing.
	RootVolumeGiB() int
	// NodeLabels are the labels the cloud's cloud-controller-manager gives
	// the Node of a server of this spec and flavor f, as the vendor's CCM
	// sets them on platform External (NodeLabels of this package): what a
	// scale-from-zero template may promise.
	NodeLabels(f *Flavor) map[string]string
	// ServerName is the name the Machine's server gets, which is also its
	// hostname and so the Node's name.
	ServerName(machine string) string
	// AntiAffinityKey is the spec's antiAffinityKey: servers of all
	// Machines with the same key are spread over anti-affinity groups the
	// provider makes and deletes. "" for none.
	AntiAffinityKey() string
	// MaxUserDataBytes is the largest user data the cloud accepts, as the
	// bytes the provider renders (before any encoding the API asks for).
	MaxUserDataBytes() int
}

// MachineRef names a Machine to the cloud: its servers carry tags or labels
// with both.
type MachineRef struct {
	// Name of the Machine.
	Name string
	// ClusterID is the Machine's machine.openshift.io/cluster-api-cluster
	// label: the cluster's infrastructure name, or a legacy cluster ID it
	// declares (pkg/clusterid).
	ClusterID string
	// AlsoOwns are the cluster's other IDs besides ClusterID (its
	// infrastructure name and the legacy IDs it declares): a resource a
	// spec names that carries one of them is the cluster's as much as one
	// that carries ClusterID (CheckResourceCluster). A server is the
	// Machine's only with ClusterID.
	AlsoOwns []string
}

// Owns says whether a resource carrying cluster id is the cluster's: id
// is ClusterID or one of AlsoOwns.
func (m MachineRef) Owns(id string) bool {
	return id != "" && (id == m.ClusterID || slices.Contains(m.AlsoOwns, id))
}

// Selector picks servers by the identity the provider gave them: every
// server of a cluster (Machine "") or those of one Machine.
type Selector struct {
	ClusterID string
	Machine   string
}

// Server is a cloud server as the Machine API needs to see it.
type Server struct {
	ID string
	// Name is the server's hostname, which becomes the Node's name.
	Name string
	// Machine and ClusterID are the identity the provider tagged the
	// server with ("" when it carries none).
	Machine   string
	ClusterID string
	// CreatedAt is when the cloud created the server, to tell duplicates
	// apart (the oldest is kept).
	CreatedAt time.Time
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
	// AddressesUnknown names what the server is attached to whose address
	// Addresses lacks: the cloud cannot tell it (a private network that
	// leases none, a cloudscale.ch interface without addresses, whose
	// server configures its own), or the client has not read it (an
	// Exoscale instance's private networks before ReadAddresses). A Node
	// on the server may report only such an address: the Node veto
	// (pkg/nodes) then lets a Node of the server's name veto by its name.
	AddressesUnknown []string
	Tags             map[string]string
	// ReadAt is when the read this record comes from (a list, a get) was
	// sent, by the wall clock: the cloud's answer shows the server as it
	// was then or later. Zero for a record that no read of the cloud's
	// made (a create's). One sent for a delete proves ownership for it
	// (ProvenOwned).
	ReadAt time.Time
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
	// ListServers returns the servers carrying the selector's identity,
	// with one API call (a tag or label filter; one per zone where the
	// API answers per zone). Each call goes to the cloud; the View
	// (view.go) is the cached way to ask. A server being destroyed is not
	// listed: it is no one's any more. When some zones answered and others
	// did not, it returns the servers of those that did with a
	// *PartialListError.
	ListServers(ctx context.Context, sel Selector) ([]Server, error)
	// GetServer returns a server by ID, or an error wrapping ErrNotFound
	// (also for a server being destroyed).
	GetServer(ctx context.Context, id string) (*Server, error)
	// CreateServer creates the Machine's server, with the Machine's identity
	// and userData, unless the Machine has one already: after any lock or
	// wait it takes, and the caller's BeforeCreate (WithBeforeCreate), it
	// looks for the Machine's servers with ListServers and returns the
	// first it finds (created false). Concurrent creates with an
	// anti-affinity key are placed consistently. When the cloud refuses the
	// server, nothing the call made before (an anti-affinity group) stays.
	CreateServer(ctx context.Context, m MachineRef, spec Spec, userData []byte) (s *Server, created bool, err error)
	// DeleteServer deletes a server (a server already gone is no error)
	// and then, as far as it can, the provider's anti-affinity groups it
	// left empty: once the server is deleted, the call succeeds, and
	// groups it could not delete are left to CleanupGroups. Right before
	// the delete it reads the server again: one that does not carry the
	// Machine's identity then is a *NotOwnedError, one that a Node runs on
	// is veto's error (CheckVeto: with every address the server has then),
	// and nothing is sent. veto is required.
	DeleteServer(ctx context.Context, m MachineRef, s *Server, veto NodeVeto) error
	// ReadAddresses reads, now, every address the cloud knows the server
	// by into s.Addresses, and names in s.AddressesUnknown what it cannot
	// tell the address of: cloudscale.ch reads the server, Exoscale the
	// instance and the leases of its private networks (a read per
	// network), never from what the client remembers. A server gone is
	// ErrNotFound.
	ReadAddresses(ctx context.Context, s *Server) error
	// SyncServer brings the server's tags or labels (and, where the cloud
	// has them, its root volume's) in line with spec and attaches what the
	// spec asks for and the create could not do (networks, security groups),
	// and returns the immutable fields (by their provider spec names) in
	// which the server differs from spec: the Machine must be replaced for
	// those to take effect. An attach the cloud refuses for good is an
	// *IncompleteError naming the field: no retry completes the server.
	SyncServer(ctx context.Context, m MachineRef, spec Spec, s *Server) (drift []string, err error)
	// CheckSpec checks spec against the cloud's catalog (flavor, image and
	// whether the disk fits it, networks, subnets and fixed addresses
	// against their ranges, groups), from cached lists where it can, and
	// returns an InvalidConfigError naming the field when the cloud cannot
	// have such a server. It makes no change anywhere.
	CheckSpec(ctx context.Context, spec Spec) error
	// Flavor describes a flavor in a zone; an unknown one is an
	// InvalidConfigError.
	Flavor(ctx context.Context, zone, name string) (*Flavor, error)
	// CleanupGroups deletes the cluster's anti-affinity groups that the
	// provider made (they carry its identity), that hold no server and that
	// are older than minAge, and returns their names. Groups the user named
	// in a spec are never touched.
	CleanupGroups(ctx context.Context, clusterID string, minAge time.Duration) ([]string, error)
}
