// Package nodes tells which Nodes run on a cloud server. It is the one
// matcher of the provider: the janitor, duplicate cleanup and the
// actuator's deletes ask it before any delete (a Node that runs on a server
// vetoes the delete), and adopt pairs servers with their Nodes with it.
//
// A Node runs on a server when
//
//   - its spec.providerID is the server's (<cloud>://<id>), as a cloud
//     controller manager or the provider's Machines set it; or
//   - it has no providerID (a cluster without a cloud controller manager,
//     a node Terraform made) and its name is the server's name, or the
//     name's first label (a server named <host>.<domain> runs a Node named
//     <host>: the Terraform modules' Ignition and the provider's own user
//     data set that hostname; pkg/actuator's hostnames), and it reports one
//     of the server's addresses. The name alone could be another cluster's
//     Node of the same name; the address makes it this server's.
//
// A Node with another server's providerID never matches by name: it runs
// there.
//
// Every address a Node reports counts, of any type, compared as addresses
// (an IPv6 address written another way is the same). For a delete, what a
// server's record says is not enough: an Exoscale instance's private
// addresses are known only once read (the leases of its networks), and an
// interface the cloud gives no address (a cloudscale.ch interface with
// `addresses: []`, an unmanaged Exoscale network) has the one its server
// configures itself. So the veto (Veto, which every delete of a server
// asks: cloud.NodeVeto) decides on the server as the cloud shows it right
// before the delete, with every address read then; and where the cloud
// cannot tell an address (cloud.Server.AddressesUnknown), a Node of the
// server's name without a providerID vetoes by its name alone: a delete
// refused is safe, a Node's server deleted is not.
//
// It lives apart from pkg/orphans and pkg/adopt because every delete path
// uses it, and they must all agree on what "a Node runs on it" means.
package nodes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// How a Node was matched to a server.
const (
	ByProviderID = "providerID"
	ByName       = "name and address"
	// ByNameOnly: the Node has the server's name and no providerID, and
	// the cloud cannot tell every address of the server (Vetoes only).
	ByNameOnly = "name"
)

// Match is a Node found running on a server.
type Match struct {
	Node *corev1.Node
	// By is ByProviderID, ByName or ByNameOnly.
	By string
	// Why says, for ByNameOnly, why the addresses cannot decide.
	Why string
}

// String names the Node and how it was matched, for events and logs:
// `Node worker-a (by providerID)`.
func (m Match) String() string {
	if m.By == ByNameOnly {
		return fmt.Sprintf("Node %s (by name: %s)", m.Node.Name, m.Why)
	}
	return fmt.Sprintf("Node %s (by %s)", m.Node.Name, m.By)
}

// Index holds a cluster's Nodes for matching. It is read-only once made:
// callers make one per sweep or decision, from a current list.
type Index struct {
	cloud        string
	byProviderID map[string][]*corev1.Node
	byName       map[string][]*corev1.Node // Nodes without a providerID
}

// New indexes the Nodes of a cluster for servers of the cloud (its name is
// the scheme of its provider IDs).
func New(cloudName string, list []corev1.Node) *Index {
	ix := &Index{cloud: cloudName, byProviderID: map[string][]*corev1.Node{}, byName: map[string][]*corev1.Node{}}
	for i := range list {
		n := &list[i]
		if n.Spec.ProviderID != "" {
			ix.byProviderID[n.Spec.ProviderID] = append(ix.byProviderID[n.Spec.ProviderID], n)
			continue
		}
		ix.byName[n.Name] = append(ix.byName[n.Name], n)
	}
	return ix
}

// List reads the cluster's Nodes with c and indexes them (New).
func List(ctx context.Context, c client.Reader, cloudName string) (*Index, error) {
	var list corev1.NodeList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	return New(cloudName, list.Items), nil
}

// On returns the Nodes that run on the server, those matched by providerID
// first; none when no Node does.
func (ix *Index) On(s cloud.Server) []Match {
	var out []Match
	for _, n := range ix.byProviderID[ix.cloud+"://"+s.ID] {
		out = append(out, Match{Node: n, By: ByProviderID})
	}
	for _, name := range names(s.Name) {
		for _, n := range ix.byName[name] {
			if sharesAddress(n, s) {
				out = append(out, Match{Node: n, By: ByName})
			}
		}
	}
	return out
}

// Vetoes returns the Nodes that keep the server from being deleted: those
// that run on it (On), and, when the cloud cannot tell every address of
// the server (AddressesUnknown), every other Node of its name without a
// providerID (ByNameOnly).
func (ix *Index) Vetoes(s cloud.Server) []Match {
	out := ix.On(s)
	if len(s.AddressesUnknown) == 0 {
		return out
	}
	why := "the address of the server's " + strings.Join(s.AddressesUnknown, ", ") + " cannot be read"
	for _, name := range names(s.Name) {
		for _, n := range ix.byName[name] {
			if !sharesAddress(n, s) {
				out = append(out, Match{Node: n, By: ByNameOnly, Why: why})
			}
		}
	}
	return out
}

// named says whether a Node without a providerID has one of the server's
// names: only such a Node can run on it by name and address.
func (ix *Index) named(s cloud.Server) bool {
	for _, name := range names(s.Name) {
		if len(ix.byName[name]) > 0 {
			return true
		}
	}
	return false
}

// Veto is the Node veto of a delete (cloud.NodeVeto): the Nodes of Index
// that run on the server (Vetoes), but those Except lets be.
type Veto struct {
	Index *Index
	// Except, when set, says which Nodes may run on the server all the
	// same: a Machine deleting its own server, whose Node the machine
	// controller deletes after it; adopt evicting the pool member whose
	// Node it drained.
	Except func(Match) bool
}

var _ cloud.NodeVeto = Veto{}

// NeedsAddresses: only a Node without a providerID of the server's name
// can match by address.
func (v Veto) NeedsAddresses(s *cloud.Server) bool { return v.Index.named(*s) }

// Check returns a *VetoedError naming the Nodes that run on the server.
func (v Veto) Check(s *cloud.Server) error {
	var on []Match
	for _, m := range v.Index.Vetoes(*s) {
		if v.Except == nil || !v.Except(m) {
			on = append(on, m)
		}
	}
	if len(on) == 0 {
		return nil
	}
	return &VetoedError{ServerID: s.ID, ServerName: s.Name, Nodes: on}
}

// VetoedError is a delete refused because Nodes run on the server. Nothing
// was sent.
type VetoedError struct {
	ServerID, ServerName string
	Nodes                []Match
}

func (e *VetoedError) Error() string {
	return fmt.Sprintf("server %s (%s) is not deleted: %s runs on it", e.ServerID, e.ServerName, Describe(e.Nodes))
}

// Describe lists matches for a message: "Node a (by providerID), Node b
// (by name and address)".
func Describe(ms []Match) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, ", ")
}

// names are the Node names a server may run: its name, and for a name with
// a domain its first label.
func names(server string) []string {
	if server == "" {
		return nil
	}
	out := []string{server}
	if host, _, ok := strings.Cut(server, "."); ok && host != "" {
		out = append(out, host)
	}
	return out
}

// sharesAddress says whether a Node reports one of the server's addresses:
// any of them, of any type, compared as addresses where they parse.
func sharesAddress(n *corev1.Node, s cloud.Server) bool {
	for _, na := range n.Status.Addresses {
		for _, sa := range s.Addresses {
			if sameAddress(na.Address, sa.Address) {
				return true
			}
		}
	}
	return false
}

func sameAddress(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	if errX != nil || errY != nil {
		return a == b
	}
	return x.Unmap() == y.Unmap()
}
