package cloud

import (
	"fmt"
	"strings"
)

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
// user's to name. A cluster that declares legacy cluster IDs (pkg/clusterid)
// owns what carries any of them: a Terraform-made group or network tagged
// with the module's cluster_id is joined like one tagged with the
// infrastructure name.

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
	// the provider acts for (the Machine's cluster ID), AlsoOwns the
	// cluster's other IDs (MachineRef.AlsoOwns).
	Cluster, Want string
	AlsoOwns      []string
}

func (e *ForeignResourceError) Error() string {
	return e.Field + ": " + e.message()
}

func (e *ForeignResourceError) message() string {
	want := fmt.Sprintf("%q", e.Want)
	if len(e.AlsoOwns) > 0 {
		want += " (also " + quoted(e.AlsoOwns) + ")"
	}
	return fmt.Sprintf("%s %s carries cluster %q's identity (%s), and this cluster is %s: a server of this cluster never joins another cluster's %s; name this cluster's own, or one that carries no cluster's identity",
		e.What, e.Ref, e.Cluster, e.Mark, want, e.What)
}

// Unwrap makes it a spec error wherever those are handled.
func (e *ForeignResourceError) Unwrap() error {
	return &InvalidConfigError{Field: e.Field, Message: e.message()}
}

// CheckResourceCluster returns a *ForeignResourceError when a resource the
// spec names at field carries the identity of another cluster (cluster, ""
// for none) than the one the provider acts for: the Machine's (m's
// ClusterID) or another the cluster owns (m's AlsoOwns).
func CheckResourceCluster(field, what, ref, mark, cluster string, m MachineRef) error {
	if cluster == "" || m.Owns(cluster) {
		return nil
	}
	return &ForeignResourceError{Field: field, What: what, Ref: ref, Mark: mark, Cluster: cluster, Want: m.ClusterID, AlsoOwns: m.AlsoOwns}
}

func quoted(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}
