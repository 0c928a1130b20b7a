package adopt

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the plan: a table of node groups (how each is brought under
// the provider, and what is written for it) with each group's spec, then a
// table of servers (what becomes of each).
func (p *Plan) Print(w io.Writer, apply bool) {
	mode := "dry run: nothing is changed (--apply carries it out)"
	if apply {
		mode = "applying"
	}
	fmt.Fprintf(w, "Adoption plan for cluster %s on %s (%s)\n", p.ClusterID, p.Cloud, mode)
	if p.TakeOverClusterID != "" {
		fmt.Fprintf(w, "Servers tagged as cluster %s's are taken over: their Machines, and they, carry %s's identity\n", p.TakeOverClusterID, p.ClusterID)
	}
	for _, id := range p.LegacyClusterIDs {
		fmt.Fprintf(w, "Servers tagged as cluster %s's are this cluster's (a declared legacy ID): their Machines carry %s, nothing is retagged\n", id, id)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE GROUP\tROLE\tZONE\tHOW\tSERVERS\tADOPT\tADOPTED\tREPLACE\tLEFT ALONE\tWRITES")
	for _, g := range p.Groups {
		n := map[string]int{}
		for _, m := range g.Members {
			n[m.Action]++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", g.Name, g.Role, g.Zone, g.Mode, len(g.Members),
			n[ActAdopt], n[ActAdopted], n[ActReplace], n[ActMisfit], writes(g))
	}
	_ = tw.Flush()
	for _, g := range p.Groups {
		fmt.Fprintf(w, "\n%s:\n", g.Name)
		if g.SpecJSON != nil {
			fmt.Fprintf(w, "  spec: %s\n", summary(g.SpecJSON))
		}
		for _, warning := range g.Warnings {
			fmt.Fprintf(w, "  WARNING: %s\n", warning)
		}
		if g.Mode == Replace {
			pool := g.Pool.Name
			if pool == "" {
				pool = g.Pool.ID
			}
			fmt.Fprintf(w, "  instance pool %s owns these servers, and a pool lets a member go only by destroying it:\n", pool)
			fmt.Fprintf(w, "    one new Machine per member; once its Node is Ready, the member's Node is drained and the member evicted\n")
		}
		if len(g.TakeOver) > 0 {
			var names []string
			for _, fg := range g.TakeOver {
				names = append(names, fmt.Sprintf("%s (%d servers)", fg.Name, len(fg.Members)))
			}
			fmt.Fprintf(w, "  anti-affinity: takes over %s as the provider's groups of key %q (up to %d servers each)\n", strings.Join(names, ", "), g.AntiAffinityKey, maxGroup(g))
		}
		if g.GroupNote != "" {
			fmt.Fprintf(w, "  anti-affinity: %s\n", g.GroupNote)
		}
		if g.UserData.Secret != "" && g.Blocked == "" {
			state := "exists"
			if !g.UserData.Exists {
				state = "new, from " + g.UserData.Source
			}
			fmt.Fprintf(w, "  user data: secret %s (%s)\n", g.UserData.Secret, state)
		}
		if g.Blocked != "" {
			fmt.Fprintf(w, "  left alone: %s\n", g.Blocked)
		}
		if g.Exists {
			what := "MachineSet " + g.Name
			if g.Master {
				what = "the ControlPlaneMachineSet"
			}
			note := "exists: left as it is"
			if !g.Master && writes(g) != "nothing" {
				note += "; the Machines adopted now join no MachineSet (it would count one too many and delete one)"
			}
			fmt.Fprintf(w, "  %s %s\n", what, note)
		}
		if g.CPMSNote != "" {
			fmt.Fprintf(w, "  %s\n", g.CPMSNote)
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tID\tNODE\tNODE GROUP\tMACHINE\tACTION")
	for _, g := range p.Groups {
		for _, m := range g.Members {
			machine := m.MachineName
			action := m.Action
			switch m.Action {
			case ActAdopt:
				action = "adopt: identity, Machine"
				if g.ClusterID != "" && m.Found.ClusterID == g.ClusterID && m.Found.Machine == m.MachineName {
					action = "adopt: Machine (the server carries its identity)"
				}
			case ActAdopted:
				if m.Restore {
					action = "adopted already: its Machine's identity restored"
				}
			case ActReplace:
				action = "replace: new Machine, drain, evict from the pool"
				machine = "(new)"
			case ActMisfit:
				action = "left alone: " + strings.Join(m.Misfits, "; ")
				machine = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Found.Name, m.Found.ID, m.Node.Name, g.Name, machine, action)
		}
	}
	for _, f := range p.Unmatched {
		fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\tleft alone: no Node runs on it\n", f.Name, f.ID)
	}
	_ = tw.Flush()
	p.printGitOps(w)
}

func maxGroup(g *Group) int {
	if len(g.TakeOver) == 0 {
		return 0
	}
	return g.maxGroup
}

// writes says what adopt writes for a group.
func writes(g *Group) string {
	var out []string
	n := 0
	for _, m := range g.Members {
		if m.Machine != nil {
			n++
		}
	}
	if n > 0 {
		out = append(out, fmt.Sprintf("%d Machines", n))
	}
	if g.MachineSet != nil {
		if g.Mode == Replace {
			out = append(out, fmt.Sprintf("MachineSet (0 → %d replicas)", len(g.Pool.Members)))
		} else {
			out = append(out, fmt.Sprintf("MachineSet (%d replicas)", *g.MachineSet.Spec.Replicas))
		}
	}
	if g.CPMS != nil {
		out = append(out, "ControlPlaneMachineSet (Inactive)")
	}
	if g.UserData.Create != nil {
		out = append(out, "user data secret")
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// Print writes what Apply did.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nDone: %d Machines created, %d servers given the provider's identity, %d anti-affinity groups taken over, %d user data secrets, %d MachineSets, %d ControlPlaneMachineSets, %d pool members replaced",
		r.MachinesCreated, r.IdentitiesSet, r.GroupsTakenOver, r.SecretsCreated, r.MachineSetsCreated, r.CPMSCreated, r.Replaced)
	if !r.Changed() {
		fmt.Fprint(w, " (nothing to change)")
	}
	fmt.Fprintln(w)
	for _, err := range r.Errors {
		fmt.Fprintf(w, "error: %v\n", err)
	}
}
