package cloud

import "fmt"

// A server joins what its spec names: anti-affinity or server groups,
// private networks and their subnets, security groups, and boots from a
// template or image, on a deploy target. A spec can name another cluster's
// (a copied MachineSet, a typo, a spec written against another cluster's
// Terraform output), and joining it would put this cluster's server into
// the other cluster's anti-affinity group, onto its network or behind its
// firewall. So every resource a spec names is checked before a server
// joins it, on create and on every sync that attaches one: one that
// carries another cluster's identity (a tag or label of the provider's,
// or, where the cloud has neither, the provider's mark in its
// description) is refused, naming the field, and nothing is written.
// Resources that carry no cluster's identity (the cluster's Terraform
// network, security groups and groups) are joined as named: they are the
// user's to name.

// ForeignResourceError is a resource a spec names that carries another
// cluster's identity. Nothing was written for it. It unwraps to an
// InvalidConfigError: the spec must change.
type ForeignResourceError struct {
	// Field is the provider spec field that names it
	// ("serverGroups[0]", "privateNetworks[1]").
	Field string
	// What is the kind of resource, in the cloud's words ("server
	// group"), and Ref how the spec names it (an ID, a quoted name).
	What, Ref string
	// Mark is where its identity is: the tag or label, or "description".
	Mark string
	// Cluster is the cluster whose identity it carries, Want the cluster
	// the provider acts for.
	Cluster, Want string
}

func (e *ForeignResourceError) Error() string {
	return e.Field + ": " + e.message()
}

func (e *ForeignResourceError) message() string {
	return fmt.Sprintf("%s %s carries cluster %q's identity (%s), and this cluster is %q: a server of this cluster never joins another cluster's %s; name this cluster's own, or one that carries no cluster's identity",
		e.What, e.Ref, e.Cluster, e.Mark, e.Want, e.What)
}

// Unwrap makes it a spec error wherever those are handled.
func (e *ForeignResourceError) Unwrap() error {
	return &InvalidConfigError{Field: e.Field, Message: e.message()}
}

// CheckResourceCluster returns a *ForeignResourceError when a resource the
// spec names at field carries the identity of another cluster (cluster, ""
// for none) than want, the cluster the provider acts for.
func CheckResourceCluster(field, what, ref, mark, cluster, want string) error {
	if cluster == "" || cluster == want {
		return nil
	}
	return &ForeignResourceError{Field: field, What: what, Ref: ref, Mark: mark, Cluster: cluster, Want: want}
}
