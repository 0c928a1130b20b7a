package adopt

import (
	"fmt"
	"slices"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// What stays Terraform's. After the handover (docs/adopt.md, "The Terraform
// handover") the masters stay in Terraform's state, with their anti-affinity
// group: appuio's modules make exactly three masters, and their DNS records
// and load balancer backends refer to them. Terraform sets every attribute
// it manages back to what the module says at its next apply, so adopt
// writes nothing on what it keeps:
//
//   - the masters' group is never taken over: the masters' spec names it
//     (serverGroups by UUID on cloudscale.ch, antiAffinityGroups by name on
//     Exoscale), so that a replacement master lands in it too;
//   - a master is adopted only when it carries the provider's identity
//     already, written by Terraform itself: appuio/terraform-openshift4-
//     cloudscale tags the masters with the provider's tag keys when
//     make_master_adoptable_by_provider is on (modules/node-group/main.tf,
//     main at a8195e7, the tags of cloudscale_server.node). The Exoscale
//     module sets no labels on its instances (modules/node-group/main.tf,
//     main at 46016ea: exoscale_compute_instance.nodes has no labels): the
//     labels adopt would set were removed at every terraform apply and put
//     back by the provider's next sync, so its masters stay Terraform's.
//
// test/adopt (TestAdopt*, terraformAgrees) compares, attribute by attribute,
// what the modules keep in their state before and after adopt.

// leaveToTerraform leaves the groups of the roles Options.LeaveRoles names
// to Terraform: appuio's modules take their load balancers' router
// backends from the infra nodes' addresses (lb.tf), so a cluster whose
// ingress depends on them keeps them in Terraform's state.
func (a *Adopter) leaveToTerraform(g *Group) {
	if slices.Contains(a.o.LeaveRoles, g.Role) {
		g.Blocked = fmt.Sprintf("left to Terraform (--leave-role %s): nothing of it is written, keep it in Terraform's state", g.Role)
	}
}

// masterIdentityHint says how a cluster's masters get the identity from
// Terraform itself, per cloud. The cloudscale.ch module tags them with its
// cluster_id variable (modules/node-group/main.tf), which the provider
// takes for their cluster only when it is the cluster's identity, the
// infrastructureName: taggedAs is the other cluster ID the module tagged
// them with ("" when it tagged them not at all). adopt never retags them
// itself (--take-over-cluster-id included): the next terraform apply would
// set the module's cluster_id again, and terraform plan would not be clean.
// cluster_id names more in the module (main.tf: the private network, the
// nodes' domain when cluster_name is empty; lb.tf: the load balancers),
// which a new value replaces: on a running cluster the masters stay
// Terraform's unless the module's cluster_id is declared as a legacy ID.
func masterIdentityHint(cloudName string, ids clusterid.IDs, taggedAs string) string {
	if cloudName != "cloudscale" {
		return "the Exoscale module sets no labels on them, and terraform apply would remove the ones adopt set"
	}
	const check = "never change it on a running cluster: cluster_id also names the module's private network and load balancers, and its nodes' domain unless cluster_name is set, which a new value replaces"
	if taggedAs != "" {
		return fmt.Sprintf("the module tagged them with its cluster_id %q, not the cluster's identity, and adopt does not retag what Terraform keeps; they become the provider's as they are tagged when %q is declared as this cluster's legacy ID (%s), then run adopt again; else they stay Terraform's, which is fine (the module tags them as the provider's only in a cluster made with cluster_id = %q from the start, %s)", taggedAs, taggedAs, ids.DeclareCommand(taggedAs), ids.Own, check)
	}
	return fmt.Sprintf("where the module's cluster_id is %q already, set make_master_adoptable_by_provider = true in terraform-openshift4-cloudscale and terraform apply (also where it is a cluster_id this cluster declares as its legacy ID): the module then tags them itself; run adopt again (%s)", ids.Own, check)
}

// keepTerraformMasters leaves a master group alone unless every master it
// would adopt carries the provider's identity already.
func (a *Adopter) keepTerraformMasters(g *Group) {
	if !g.Master || g.Blocked != "" {
		return
	}
	var missing []string
	taggedAs := ""
	for _, m := range g.Members {
		f := m.Found
		if m.Action == ActAdopt && (f.ClusterID != a.groupID(g) || f.Machine != m.MachineName) {
			missing = append(missing, m.MachineName)
			if f.ClusterID != "" && f.ClusterID != a.groupID(g) {
				taggedAs = f.ClusterID
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	verb := "does"
	if len(missing) > 1 {
		verb = "do"
	}
	g.Blocked = fmt.Sprintf("Terraform keeps the masters in its state, and %s %s not carry the provider's identity: adopt writes nothing Terraform keeps (%s)",
		joinNames(missing), verb, masterIdentityHint(a.cloud.Name(), a.ids(), taggedAs))
	for _, m := range g.Members {
		if m.Action == ActAdopt {
			m.Action = ActMisfit
			m.Misfits = append(m.Misfits, "identity (Terraform keeps the masters: see the group)")
		}
	}
}

// existingGroups names the one anti-affinity group the members are in, as
// the cloud's spec names an existing group: the field and its value ("" and
// nil when they are in none or several).
func existingGroups(cloudName string, members []*Member) (string, []any) {
	var ids, names []string
	for _, m := range members {
		for _, fg := range m.Found.Groups {
			if !slices.Contains(ids, fg.ID) {
				ids, names = append(ids, fg.ID), append(names, fg.Name)
			}
		}
	}
	if len(ids) != 1 {
		return "", nil
	}
	var refs []any
	if cloudName == "cloudscale" {
		for _, id := range ids {
			refs = append(refs, id)
		}
		return "serverGroups", refs
	}
	for _, n := range names {
		refs = append(refs, map[string]any{"name": n})
	}
	return "antiAffinityGroups", refs
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			out += " and "
		default:
			out += ", "
		}
		out += n
	}
	return out
}
