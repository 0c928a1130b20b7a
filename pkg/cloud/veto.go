package cloud

import (
	"context"
	"errors"
)

// NodeVeto keeps a server that a Node runs on from being deleted. Every
// delete of a server asks it right before the delete, with the server as
// the cloud shows it then (Client.DeleteServer, Adopter.EvictPoolMember
// take one, and refuse to go on without), so that no delete path can
// forget it, and none decides on addresses a list or a cache had. pkg/nodes
// implements it (nodes.Veto).
type NodeVeto interface {
	// NeedsAddresses says whether the server's addresses can decide: a
	// Node exists that could run on it by name and address. Only then does
	// a delete read every address of the server (ReadAddresses), which on
	// Exoscale costs a read per private network.
	NeedsAddresses(s *Server) bool
	// Check returns an error naming the Nodes that run on the server; nil
	// when none does.
	Check(s *Server) error
}

// ErrNoVeto is a delete asked for without a Node veto: a bug, refused.
var ErrNoVeto = errors.New("a server is deleted only after the Node veto: none was given, nothing is deleted")

// CheckVeto asks veto about a server read right before its delete. When
// the veto needs the server's addresses, read (the cloud's ReadAddresses,
// or what completes a fresh record) fills them in first; nil when s has
// every address the cloud knows already.
func CheckVeto(ctx context.Context, veto NodeVeto, s *Server, read func(context.Context, *Server) error) error {
	if veto == nil {
		return ErrNoVeto
	}
	if read != nil && veto.NeedsAddresses(s) {
		if err := read(ctx, s); err != nil {
			return err
		}
	}
	return veto.Check(s)
}
