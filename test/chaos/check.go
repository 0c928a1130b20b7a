package chaos

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
)

// state is the cluster and the cloud compared at one moment.
type state struct {
	machines []machinev1.Machine
	inv      Inventory
	// byMachine are the cluster's servers by Machine name ("" for servers
	// with the cluster's identity but no Machine's).
	byMachine map[string][]Server
	servers   int
	groups    []Group // the cluster's groups
}

// newState compares the Machines with the inventory.
func newState(machines []machinev1.Machine, inv Inventory) *state {
	s := &state{machines: machines, inv: inv, byMachine: map[string][]Server{}}
	for _, srv := range inv.Servers {
		if srv.ClusterID == ClusterID {
			s.byMachine[srv.Machine] = append(s.byMachine[srv.Machine], srv)
			s.servers++
		}
	}
	for _, g := range inv.Groups {
		if groupOfCluster(g, ClusterID) {
			s.groups = append(s.groups, g)
		}
	}
	return s
}

// settled says whether the phase has reached its target: n Machines, each
// ready with exactly one server and no other server of the cluster; at 0,
// nothing of the cluster left in the cloud, groups included.
func (s *state) settled(n int) bool {
	if len(s.machines) != n {
		return false
	}
	if n == 0 {
		return s.servers == 0 && len(s.groups) == 0
	}
	names := map[string]bool{}
	for i := range s.machines {
		m := &s.machines[i]
		if !ready(m) || len(s.byMachine[m.Name]) != 1 {
			return false
		}
		names[m.Name] = true
	}
	for name := range s.byMachine {
		if !names[name] {
			return false
		}
	}
	return true
}

// evaluate counts what is wrong at the end of a phase: duplicates (at any
// time of the phase, dupsEver, or now), orphans, empty groups older than
// leakAge, and Machines not ready at N or not gone at 0.
func evaluate(res *phaseResult, s *state, dupsEver map[string][]string, groupAge func(id string) time.Duration, leakAge time.Duration) {
	res.Machines, res.Servers = len(s.machines), s.servers
	names := map[string]bool{}
	for i := range s.machines {
		names[s.machines[i].Name] = true
	}

	// Duplicates: at any time of the phase, and now.
	dups := maps.Clone(dupsEver)
	if dups == nil {
		dups = map[string][]string{}
	}
	for name, srvs := range s.byMachine {
		if name != "" && len(srvs) > 1 && dups[name] == nil {
			for _, srv := range srvs {
				dups[name] = append(dups[name], srv.ID)
			}
		}
	}
	for _, name := range sortedKeys(dups) {
		res.Violations = append(res.Violations, fmt.Sprintf("duplicate: Machine %s had servers %s", name, strings.Join(dups[name], ", ")))
	}
	res.Duplicates = len(dups)

	// Orphans: servers with the cluster's identity and no Machine.
	for _, name := range sortedKeys(s.byMachine) {
		if name != "" && names[name] {
			continue
		}
		for _, srv := range s.byMachine[name] {
			res.Orphans++
			res.Violations = append(res.Violations, fmt.Sprintf("orphan: server %s (%s) is tagged for Machine %q, which does not exist", srv.ID, srv.Name, name))
		}
	}

	// Leaked groups: empty groups of the cluster the provider has had
	// time to delete.
	for _, g := range s.groups {
		age := groupAge(g.ID)
		if len(g.Members) == 0 && age > leakAge {
			res.LeakedGroups++
			res.Violations = append(res.Violations, fmt.Sprintf("leaked group: %s (%s) is empty, first seen %s ago", g.Name, g.ID, age.Round(time.Second)))
		}
	}

	// Stuck Machines: not ready at N, not gone at 0.
	for i := range s.machines {
		m := &s.machines[i]
		if res.To > 0 && ready(m) {
			continue
		}
		res.Stuck++
		phase := "no phase"
		if m.Status.Phase != nil {
			phase = *m.Status.Phase
		}
		msg := ""
		if m.Status.ErrorMessage != nil {
			msg = ": " + *m.Status.ErrorMessage
		}
		deleting := ""
		if m.DeletionTimestamp != nil {
			deleting = ", being deleted since " + m.DeletionTimestamp.Format(time.RFC3339)
		}
		res.Violations = append(res.Violations, fmt.Sprintf("stuck: Machine %s in phase %s%s, %d server(s)%s", m.Name, phase, deleting, len(s.byMachine[m.Name]), msg))
	}
	if res.To > 0 && len(s.machines) < res.To {
		res.Violations = append(res.Violations, fmt.Sprintf("the MachineSet has %d Machines, not %d", len(s.machines), res.To))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
