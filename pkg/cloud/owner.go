package cloud

import (
	"context"
	"fmt"
	"time"
)

// A server is the provider's to change or delete only while its identity
// (the tags or labels the provider gives its servers: the cluster and the
// Machine) says so at that moment. A provider ID names a server, it does not
// prove whose it is: any Machine may be created with the provider ID of any
// server the credentials reach (another cluster's master, a load balancer
// Terraform made, a Machine restored from another cluster). So every write
// (SyncServer) and every delete (DeleteServer) checks the identity first,
// deletes re-read it right before the DELETE, and a server without the
// Machine's identity is left alone. Taking over a server without any
// identity is adopt's alone (pkg/adopt), explicitly.

// NotOwnedError is a server that does not carry the identity of the Machine
// the provider was about to act for: another cluster's, another Machine's,
// or none at all. Nothing was sent to it.
type NotOwnedError struct {
	ServerID, ServerName string
	// Want is the Machine the provider acted for.
	Want MachineRef
	// Cluster and Machine are the identity the server carries ("" for
	// none).
	Cluster, Machine string
}

func (e *NotOwnedError) Error() string {
	var has string
	switch {
	case e.Cluster == "" && e.Machine == "":
		has = "carries no provider identity (no cluster or Machine tag or label)"
	case e.Cluster != e.Want.ClusterID:
		has = fmt.Sprintf("carries cluster %q's identity (Machine %q), and this cluster is %q", e.Cluster, e.Machine, e.Want.ClusterID)
	default:
		has = fmt.Sprintf("carries the identity of Machine %q, not of Machine %q", e.Machine, e.Want.Name)
	}
	name := ""
	if e.ServerName != "" {
		name = " (" + e.ServerName + ")"
	}
	return fmt.Sprintf("server %s%s %s: it is not this Machine's to change or delete, and is left alone", e.ServerID, name, has)
}

// CheckOwned returns a *NotOwnedError unless the server carries the
// Machine's identity: its cluster and its name.
func CheckOwned(m MachineRef, s *Server) error {
	if s != nil && m.ClusterID != "" && m.Name != "" && s.ClusterID == m.ClusterID && s.Machine == m.Name {
		return nil
	}
	e := &NotOwnedError{Want: m}
	if s != nil {
		e.ServerID, e.ServerName, e.Cluster, e.Machine = s.ID, s.Name, s.ClusterID, s.Machine
	}
	return e
}

// deleteKey marks a context whose calls serve a delete decided at a time
// (DeleteDecided).
type deleteKey struct{}

// DeleteDecided marks the calls made with the returned context as those of
// a delete decided at t, before any read for it was sent: a record of a
// read sent at or after t proves ownership for that delete on its own
// (ProvenOwned).
func DeleteDecided(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, deleteKey{}, t)
}

// ProvenOwned reports whether the record s proves that the server carries
// the Machine's identity for the delete ctx serves (DeleteDecided): the
// record of a read sent after the delete was decided, by the delete itself
// (the list of the Machines being deleted together, View.MachineNow, or a
// read of the server), that shows the identity. Such a read serves the
// delete as a read by ID made then would, and the delete needs no read of
// its own; any other record (the shared view's, up to its refresh interval
// old; one made from a create's request) is read again first.
func ProvenOwned(ctx context.Context, m MachineRef, s *Server) bool {
	decided, ok := ctx.Value(deleteKey{}).(time.Time)
	if !ok || s == nil || s.ReadAt.IsZero() || s.ReadAt.Before(decided) {
		return false
	}
	return CheckOwned(m, s) == nil
}

// CheckSurveyed returns an error unless a server, read again right before
// adopt gives it a Machine's identity, still carries the identity adopt
// surveyed it with (or already the one adopt gives it): a server another
// process or a person tagged since the plan is not taken over on that plan.
func CheckSurveyed(f *Found, now *Server, m MachineRef) error {
	if now.ClusterID == f.ClusterID && now.Machine == f.Machine {
		return nil
	}
	if now.ClusterID == m.ClusterID && now.Machine == m.Name {
		return nil
	}
	return fmt.Errorf("server %s (%s) carries cluster %q's identity (Machine %q) now, not %q's (Machine %q) as when adopt surveyed it: it is left alone, run adopt again",
		now.ID, now.Name, now.ClusterID, now.Machine, f.ClusterID, f.Machine)
}

// ownershipKey marks a context whose calls read a server to prove it is
// the Machine's (ProvingOwnership).
type ownershipKey struct{}

// ProvingOwnership marks the calls made with the returned context as reads
// that prove a server carries the Machine's identity right before a write
// or a delete: they are counted apart too
// (machine_api_provider_cloud_ownership_reads_total), so that what the
// ownership rule costs the account can be told from what the work itself
// needs (make bench prints it per Machine).
func ProvingOwnership(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownershipKey{}, true)
}

// provingOwnership reports whether ctx is ProvingOwnership's.
func provingOwnership(ctx context.Context) bool {
	v, _ := ctx.Value(ownershipKey{}).(bool)
	return v
}
