package adopt

import (
	"fmt"
	"slices"
	"strings"
)

// Refused permissions. The survey lists what it may, and a list the
// credentials' role refuses costs what it would have told (a name becomes
// an ID, a pool goes unnamed), never the plan: the plan names the refusal
// with each group it touches, and a group that cannot be carried out
// without the permission is left alone, the others go on. Exoscale's IAM
// decides per operation (docs/exoscale.md: the provider's role, and adopt's
// addition for instance pools); a cloudscale.ch token reads everything.

// reportRefused warns a group of what its members' survey was refused, and
// leaves a pool's replacement alone without the pools' permissions.
func reportRefused(g *Group) {
	var refused []string
	for _, m := range g.Members {
		for _, p := range m.Found.Refused {
			if !slices.Contains(refused, p) {
				refused = append(refused, p)
			}
		}
	}
	if len(refused) == 0 {
		return
	}
	slices.Sort(refused)
	g.Warnings = append(g.Warnings, fmt.Sprintf("the credentials were refused %s: the spec names by ID what these would have named; grant them to the role of the key adopt uses (docs/exoscale.md#iam-role-for-adopt)",
		strings.Join(refused, ", ")))
	if g.Pool != nil && slices.Contains(refused, "list-instance-pools") {
		g.Blocked = "its instance pool cannot be replaced without adopt's addition to the key's role (list-instance-pools, get-instance-pool, evict-instance-pool-members, delete-instance-pool, get-operation: docs/exoscale.md#iam-role-for-adopt)"
	}
}
