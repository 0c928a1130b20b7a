package cloud

import (
	"context"
	"slices"
)

// What `machine-api-provider adopt` (pkg/adopt) needs of a cloud to bring
// servers made by Terraform under Machines, without recreating them. A
// cloud's Client implements Adopter; the neutral part (matching servers to
// Nodes, grouping, MachineSets, masters, the plan) is in pkg/adopt.

// Found is a server as adopt finds it in an account.
type Found struct {
	Server
	// Spec is the provider spec, as a JSON object of the cloud's kind, that
	// describes the server as it is: zone, type, image or template, disk,
	// networks, security groups, domain, the tags or labels it has besides
	// the provider's. adopt adds what it decides itself (antiAffinityKey,
	// the user data and credentials secrets) before the cloud parses it.
	Spec map[string]any
	// Groups are the anti-affinity groups the server is in.
	Groups []FoundGroup
	// Pool is the instance pool that owns the server; nil for a server
	// that stands alone.
	Pool *FoundPool
	// UserData is the server's user data where the cloud tells it (Exoscale,
	// decoded); nil where it does not (cloudscale.ch).
	UserData []byte
	// Refused are the permissions (IAM operations, in the cloud's terms)
	// the credentials were refused while the server was surveyed: its spec
	// names by ID what a refused list would have named by name, and what
	// needs them (a pool's replacement) cannot be done.
	Refused []string
}

// FoundGroup is an anti-affinity group.
type FoundGroup struct {
	ID, Name string
	// Members are the IDs of its servers.
	Members []string
	// Key and ClusterID are the provider's identity the group carries
	// already ("" for none).
	Key, ClusterID string
}

// FoundPool is an instance pool.
type FoundPool struct {
	ID, Name, Zone string
	Size           int
	// Members are the IDs of its instances that are not being destroyed.
	Members []string
}

// Adopter is what a cloud's Client offers adopt.
type Adopter interface {
	// Survey lists the servers of the account in the zones (every zone of
	// the account when zones is empty), each with the spec that describes
	// it, its groups and its pool.
	Survey(ctx context.Context, zones []string) ([]Found, error)
	// Misfits lists, by their provider spec names, the fields in which the
	// server differs from spec such that its Machine would not be in sync
	// (SpecInSync=False) or the provider would change the server beyond
	// its identity (attach a network, change its tags). A server without
	// misfits can be adopted with spec and nothing but its identity
	// changes. It makes no change anywhere.
	Misfits(ctx context.Context, m MachineRef, spec Spec, f *Found) ([]string, error)
	// Identify gives the server the Machine's identity (tags or labels), as
	// SyncServer would, and changes nothing else; it sends nothing when the
	// server has it already (changed false).
	Identify(ctx context.Context, m MachineRef, spec Spec, f *Found) (changed bool, err error)
	// GroupTakeover says whether the cloud can give an existing
	// anti-affinity group the provider's identity; when it cannot, why
	// not (for the plan).
	GroupTakeover() (ok bool, why string)
	// TakeOverGroup gives an anti-affinity group the provider's identity for
	// the cluster and key: the provider then puts new servers of the key
	// into it while it has room, and deletes it once it is empty. Its
	// members stay. It sends nothing when the group is the key's already.
	TakeOverGroup(ctx context.Context, clusterID, key string, g FoundGroup) (changed bool, err error)
	// MaxGroupSize is how many servers an anti-affinity group holds at most.
	MaxGroupSize() int
	// EvictPoolMember makes the pool let the member go, which destroys it,
	// and shrinks the pool by one; the last member goes with the pool
	// itself. It returns once the cloud has done it. Right before, it reads
	// the member again and asks veto (CheckVeto), as every delete does:
	// a Node that runs on it keeps it, and nothing is sent.
	EvictPoolMember(ctx context.Context, pool FoundPool, member string, veto NodeVeto) error
}

// UserKeys is a server's tags or labels without the provider's own
// (reserved): what its spec carries, and what drift compares.
func UserKeys[M ~map[string]string](m M, reserved []string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !slices.Contains(reserved, k) {
			out[k] = v
		}
	}
	return out
}
