package adopt

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// planGroup decides a group's spec, which members fit it, and the objects
// adopt writes for it.
func (a *Adopter) planGroup(ctx context.Context, g *Group, cl *cluster) error {
	g.NodeLabels = commonNodeRoles(g.Members)
	warnStorage(g)
	reportRefused(g)
	a.leaveToTerraform(g)
	a.planGroups(g)
	if err := a.planUserData(ctx, g); err != nil {
		return err
	}
	defer func() {
		// What the group's nodes booted with, from those that fit it.
		if g.UserData.Create != nil || g.UserData.Exists || g.Blocked != "" {
			return
		}
		a.userDataContent(ctx, g)
	}()
	type candidate struct {
		m    *Member
		json []byte
		spec cloud.Spec
	}
	var rest []*Member
	for _, m := range g.Members {
		if !a.identify(m, cl) {
			rest = append(rest, m)
		}
	}
	a.clusterOfGroup(g, cl, rest)
	var cands []candidate
	for _, m := range rest {
		if m.Action == ActMisfit {
			continue
		}
		spec, b, err := parse(a.cloud, a.memberSpec(g, m))
		if err != nil {
			m.Action = ActMisfit
			m.Misfits = append(m.Misfits, "spec: "+err.Error())
			continue
		}
		cands = append(cands, candidate{m, b, spec})
	}
	// Once adopt has written the group's MachineSet or Machines, their spec
	// is the group's: a run after it compares the rest with that.
	if raw := existingSpec(g, cl); raw != nil {
		spec, b, err := reparse(a, raw)
		if err != nil {
			g.Blocked = "the spec of its MachineSet or Machines does not parse: " + err.Error()
		} else {
			g.Spec, g.SpecJSON = spec, b
		}
	}
	if len(cands) == 0 {
		if g.SpecJSON == nil && g.Blocked == "" {
			g.Blocked = "no member has a spec a Machine could have"
		}
		return a.planObjects(g, cl)
	}
	if g.SpecJSON == nil {
		// The group's spec is the one most members share; of equally
		// many, the newest member's (the module's configuration as it is
		// now).
		count := map[string]int{}
		for _, c := range cands {
			count[string(c.json)]++
		}
		best := cands[0]
		for _, c := range cands[1:] {
			n, bn := count[string(c.json)], count[string(best.json)]
			if n > bn || n == bn && c.m.Found.CreatedAt.After(best.m.Found.CreatedAt) {
				best = c
			}
		}
		g.Spec, g.SpecJSON = best.spec, best.json
	}
	if err := a.c.CheckSpec(ctx, g.Spec); err != nil {
		g.Blocked = fmt.Sprintf("a Machine with this spec could not be created: %v", err)
	}
	for _, c := range cands {
		m := c.m
		if g.Mode == Replace {
			m.Action = ActReplace
			continue
		}
		m.Misfits = append(m.Misfits, diff(c.json, g.SpecJSON)...)
		more, err := a.a.Misfits(ctx, cloud.MachineRef{Name: m.MachineName, ClusterID: a.groupID(g)}, g.Spec, m.Found)
		if err != nil {
			return fmt.Errorf("comparing %s with its group's spec: %w", m.Found.Name, err)
		}
		for _, f := range more {
			if !slices.ContainsFunc(m.Misfits, func(s string) bool { return strings.HasPrefix(s, f+" ") || s == f }) {
				m.Misfits = append(m.Misfits, f)
			}
		}
		if len(m.Misfits) > 0 {
			m.Action = ActMisfit
			continue
		}
		m.Action = ActAdopt
	}
	a.keepTerraformMasters(g)
	if g.Blocked != "" {
		for _, m := range g.Members {
			if m.Action == ActAdopt || m.Action == ActReplace {
				m.Action = ActMisfit
				m.Misfits = append(m.Misfits, "the group: "+g.Blocked)
			}
		}
	}
	return a.planObjects(g, cl)
}

// reparse parses a spec a Machine already carries.
func reparse(a *Adopter, b []byte) (cloud.Spec, []byte, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, b, err
	}
	return parse(a.cloud, m)
}

// existingSpec is the spec of what adopt wrote for the group before: the
// template of its MachineSet (or of the ControlPlaneMachineSet), else the
// spec of a Machine it adopted.
func existingSpec(g *Group, cl *cluster) []byte {
	if g.Master {
		for _, c := range cl.cpms {
			if t := c.Spec.Template.OpenShiftMachineV1Beta1Machine; t != nil && t.Spec.ProviderSpec.Value != nil {
				return t.Spec.ProviderSpec.Value.Raw
			}
		}
	} else if ms := existingMachineSet(cl, g.Name); ms != nil && ms.Spec.Template.Spec.ProviderSpec.Value != nil {
		return ms.Spec.Template.Spec.ProviderSpec.Value.Raw
	}
	for _, m := range g.Members {
		if m.Action != ActAdopted {
			continue
		}
		for i := range cl.machines {
			if cl.machines[i].Name == m.MachineName && cl.machines[i].Spec.ProviderSpec.Value != nil {
				return cl.machines[i].Spec.ProviderSpec.Value.Raw
			}
		}
	}
	return nil
}

// identify decides the member's Machine name from what the server and the
// cluster say, and whether adopt is done with it (adopted before, or left
// alone for its identity).
func (a *Adopter) identify(m *Member, cl *cluster) bool {
	pid := a.cloud.Name() + "://" + m.Found.ID
	f := m.Found
	for i := range cl.machines {
		mach := &cl.machines[i]
		if mach.Spec.ProviderID != nil && *mach.Spec.ProviderID == pid {
			m.MachineName, m.Action = mach.Name, ActAdopted
			// Its tags were changed since (a terraform apply that sets the
			// module's own again): the provider leaves such a server
			// alone, and adopt, told to take that ID over, gives it its
			// Machine's identity back.
			id := mach.Labels[clusterLabel]
			m.Restore = a.ids().Owns(id) && (f.ClusterID != id || f.Machine != mach.Name) &&
				(f.ClusterID == "" || a.ours(f.ClusterID))
			m.restoreID = id
			return true
		}
	}
	switch {
	case f.ClusterID != "" && !a.ours(f.ClusterID):
		m.Action = ActMisfit
		m.Misfits = append(m.Misfits, fmt.Sprintf("identity (the server is tagged as cluster %q's, not %q's; declaring %s as this cluster's legacy ID (%s) adopts such servers as they are tagged, --take-over-cluster-id %s takes them over, retagged)",
			f.ClusterID, a.o.ClusterID, f.ClusterID, a.ids().DeclareCommand(f.ClusterID), f.ClusterID))
		return true
	case f.Machine != "":
		// Tagged for adoption already (the cloudscale.ch module's
		// make_*_adoptable_by_provider): the Machine takes that name.
		m.MachineName = f.Machine
	}
	for _, msg := range validation.IsDNS1123Label(m.MachineName) {
		m.Action = ActMisfit
		m.Misfits = append(m.Misfits, fmt.Sprintf("name (%q cannot be a Machine's name and hostname: %s)", m.MachineName, msg))
		return true
	}
	for i := range cl.machines {
		if cl.machines[i].Name == m.MachineName {
			m.Action = ActMisfit
			m.Misfits = append(m.Misfits, fmt.Sprintf("name (a Machine %s exists already, for another server)", m.MachineName))
			return true
		}
	}
	if m.Found.Pool != nil {
		return false
	}
	if !m.Found.Running {
		m.Action = ActMisfit
		m.Misfits = append(m.Misfits, fmt.Sprintf("status (%s, not running)", m.Found.Status))
		return true
	}
	return false
}

// ours says whether adopt may take over what carries a cluster ID: the
// cluster's own, a legacy one it declares, or the one it was told to take
// over.
func (a *Adopter) ours(clusterID string) bool {
	return a.ids().Owns(clusterID) || (a.o.TakeOverClusterID != "" && clusterID == a.o.TakeOverClusterID)
}

// clusterOfGroup decides the cluster ID the group's Machines carry
// (Group.ClusterID): the one its MachineSet or ControlPlaneMachineSet
// carries when adopt wrote it before; else the legacy ID the cluster
// declares that its servers carry (pkg/clusterid: they stay as they are
// tagged, nothing is retagged, and appuio's provider or Terraform find them
// as they wrote them); else the cluster's infrastructureName. A member
// tagged with another of the cluster's IDs is left alone: one MachineSet's
// Machines carry one ID. rest are the members identify did not settle.
func (a *Adopter) clusterOfGroup(g *Group, cl *cluster, rest []*Member) {
	g.ClusterID = a.o.ClusterID
	if id := existingClusterID(g, cl); id != "" {
		g.ClusterID = id
	} else {
		legacy := map[string]bool{}
		for _, m := range g.Members {
			if a.ids().IsLegacy(m.Found.ClusterID) {
				legacy[m.Found.ClusterID] = true
			}
			if m.Existing != nil && a.ids().IsLegacy(m.Existing.Labels[clusterLabel]) {
				legacy[m.Existing.Labels[clusterLabel]] = true
			}
		}
		switch ids := slices.Sorted(maps.Keys(legacy)); len(ids) {
		case 0:
		case 1:
			g.ClusterID = ids[0]
		default:
			g.Blocked = fmt.Sprintf("its servers carry %d of the cluster's legacy IDs (%s): one MachineSet's Machines carry one", len(ids), strings.Join(ids, ", "))
		}
	}
	for _, m := range rest {
		if f := m.Found; f.ClusterID != "" && f.ClusterID != g.ClusterID && a.ids().Owns(f.ClusterID) {
			m.Action = ActMisfit
			m.Misfits = append(m.Misfits, fmt.Sprintf("identity (the server is tagged as cluster %q's, and the group's Machines carry %q)", f.ClusterID, g.ClusterID))
		}
	}
}

// groupID is the cluster ID the group's Machines carry (Group.ClusterID,
// the cluster's own until clusterOfGroup decided).
func (a *Adopter) groupID(g *Group) string {
	if g.ClusterID != "" {
		return g.ClusterID
	}
	return a.o.ClusterID
}

// existingClusterID is the cluster label of what adopt wrote for the group
// before: its MachineSet's template, or the ControlPlaneMachineSet's.
func existingClusterID(g *Group, cl *cluster) string {
	if g.Master {
		for _, c := range cl.cpms {
			if t := c.Spec.Template.OpenShiftMachineV1Beta1Machine; t != nil {
				return t.ObjectMeta.Labels[clusterLabel]
			}
		}
		return ""
	}
	if ms := existingMachineSet(cl, g.Name); ms != nil {
		return ms.Spec.Template.Labels[clusterLabel]
	}
	return ""
}

// memberSpec is the spec of a member's Machine: what the server is, and
// what adopt decides for the group.
func (a *Adopter) memberSpec(g *Group, m *Member) map[string]any {
	spec := clone(m.Found.Spec)
	if g.AntiAffinityKey != "" {
		spec["antiAffinityKey"] = g.AntiAffinityKey
	}
	if g.Master && g.noTakeover {
		// The masters' group is never taken over (terraform.go): a
		// replacement goes into their existing group, by reference.
		if field, refs := existingGroups(a.cloud.Name(), g.Members); field != "" {
			spec[field] = refs
		}
	}
	if g.UserData.Secret != "" {
		spec["userDataSecret"] = map[string]any{"name": g.UserData.Secret}
	}
	if a.o.CredentialsSecret != "" {
		spec[credentialsField(a.cloud.Name())] = map[string]any{"name": a.o.CredentialsSecret}
	}
	return spec
}

// credentialsField is the spec field naming the credentials secret.
func credentialsField(cloudName string) string {
	if cloudName == "cloudscale" {
		return "tokenSecret"
	}
	return "credentialsSecret"
}

// planGroups decides the group's antiAffinityKey and which existing
// anti-affinity groups become the provider's: those that hold members of
// this group only. The key is the role, as the Terraform modules' own
// MachineSet outputs have it.
func (a *Adopter) planGroups(g *Group) {
	g.AntiAffinityKey = g.Role
	g.maxGroup = a.a.MaxGroupSize()
	ok, why := a.a.GroupTakeover()
	if g.Master && ok {
		// Terraform keeps the masters' group in its state (terraform.go).
		ok, why = false, "the masters' group stays Terraform's, as the masters do; a replacement master goes into it"
	}
	mine := map[string]bool{}
	for _, m := range g.Members {
		mine[m.Found.ID] = true
	}
	seen := map[string]bool{}
	var foreign []string
	for _, m := range g.Members {
		for _, fg := range m.Found.Groups {
			if seen[fg.ID] {
				continue
			}
			seen[fg.ID] = true
			if !ok {
				continue
			}
			others := slices.ContainsFunc(fg.Members, func(id string) bool { return !mine[id] })
			switch {
			case fg.Key != "" && (fg.Key != g.AntiAffinityKey || !a.ours(fg.ClusterID)):
				foreign = append(foreign, fmt.Sprintf("%s (the provider's group of key %q, cluster %q)", fg.Name, fg.Key, fg.ClusterID))
			case others:
				foreign = append(foreign, fg.Name+" (it holds servers of other groups)")
			default:
				g.TakeOver = append(g.TakeOver, fg)
			}
		}
	}
	switch {
	case !ok && len(seen) > 0:
		g.GroupNote, g.noTakeover = why, true
		if g.Master {
			g.AntiAffinityKey = ""
		}
	case len(foreign) > 0:
		g.GroupNote = "not taken over: " + strings.Join(foreign, ", ")
	}
}

// commonNodeRoles are the node-role labels every member's Node has.
func commonNodeRoles(members []*Member) map[string]string {
	var out map[string]string
	for _, m := range members {
		roles := map[string]string{}
		for k := range m.Node.Labels {
			if strings.HasPrefix(k, nodeRolePrefix) {
				roles[k] = ""
			}
		}
		if out == nil {
			out = roles
			continue
		}
		maps.DeleteFunc(out, func(k, _ string) bool { _, ok := roles[k]; return !ok })
	}
	return out
}

// existingMachineSet finds a MachineSet by name.
func existingMachineSet(cl *cluster, name string) *machinev1beta1.MachineSet {
	for i := range cl.machineSets {
		if cl.machineSets[i].Name == name {
			return &cl.machineSets[i]
		}
	}
	return nil
}
