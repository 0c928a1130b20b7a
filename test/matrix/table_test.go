package matrix

import (
	"fmt"
	"sort"
	"strings"
)

// The checks of a run, in the table's order.
const (
	chkDeployer  = "deployer"
	chkStart     = "start"
	chkWebhooks  = "webhooks"
	chkScaleUp   = "0→3"
	chkNodeRef   = "nodeRef"
	chkStatus    = "MS status"
	chkMHC       = "MHC"
	chkScaleDown = "3→0"
	chkStaysUp   = "stays up"
	chkRBAC      = "403s"
)

var checkOrder = []string{chkDeployer, chkStart, chkWebhooks, chkScaleUp, chkNodeRef, chkStatus, chkMHC, chkScaleDown, chkStaysUp, chkRBAC}

// checkLegend says what each column checks, under the table.
var checkLegend = map[string]string{
	chkDeployer:  "the deployer's pod runs as its service account and renders the release the ClusterVersion names (its ReleaseKnown reason)",
	chkStart:     "every container of the controllers' pod starts and passes its probes, every leader lease is held (seconds)",
	chkWebhooks:  "Machine/MachineSet writes answered by the era's mutating webhooks + the provider's, none failed open or refused",
	chkScaleUp:   "a MachineSet 0 -> 3: three Machines, each with a running server on the emulator (seconds)",
	chkNodeRef:   "every Machine linked to its Node, which the cloud's CCM initialized (nodelink's status write), and Running",
	chkStatus:    "the MachineSet's status: replicas/ready/available (the machineset controller's status write)",
	chkMHC:       "a MachineHealthCheck replaces the Machine whose Node went silent; back to 3 ready (seconds)",
	chkScaleDown: "3 -> 0: no Machine, server or worker Node left, status at 0 (seconds)",
	chkStaysUp:   "no container of the controllers' pod ever exited or restarted, nor the cloud-controller-manager",
	chkRBAC:      "requests of the namespace's service accounts refused by RBAC (the API server's audit log)",
}

type check struct {
	// status is "ok", "FAIL", "-" (not reached) or "" (not run).
	status, detail, why string
}

// result is one era on one cloud.
type result struct {
	era, cloud string
	checks     map[string]*check
	// unused are the verbs the RBAC grants each service account that the
	// run never used.
	unused map[string][]string
	logDir string
}

func newResult(era, cloud string) *result {
	r := &result{era: era, cloud: cloud, checks: map[string]*check{}, unused: map[string][]string{}}
	for _, name := range checkOrder {
		r.checks[name] = &check{}
	}
	return r
}

func (r *result) get(name string) *check { return r.checks[name] }

func (r *result) pass(name, detail string) { *r.checks[name] = check{status: "ok", detail: detail} }

func (r *result) fail(name, detail, why string) {
	*r.checks[name] = check{status: "FAIL", detail: detail, why: why}
}

func (r *result) skip(name string) {
	*r.checks[name] = check{status: "-", why: "not reached: an earlier check failed"}
}

func (r *result) ok(name string) bool { return r.checks[name].status == "ok" }

// passed: every check ran and passed.
func (r *result) passed() bool {
	for _, name := range checkOrder {
		if !r.ok(name) {
			return false
		}
	}
	return true
}

// table prints the results as era x cloud x check, then why each failed
// check failed and the unused grants.
func table(results []*result) string {
	header := append([]string{"era", "cloud"}, checkOrder...)
	rows := [][]string{header}
	for _, r := range results {
		row := []string{r.era, r.cloud}
		for _, name := range checkOrder {
			c := r.checks[name]
			cell := c.status
			switch {
			case cell == "":
				cell = "?"
			case c.detail != "":
				cell += " " + c.detail
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, name := range checkOrder {
		fmt.Fprintf(&b, "  %-10s %s\n", name+":", checkLegend[name])
	}
	for _, r := range results {
		var fails []string
		for _, name := range checkOrder {
			if c := r.checks[name]; c.status == "FAIL" {
				fails = append(fails, fmt.Sprintf("  %s: %s", name, indent(c.why)))
			}
		}
		if len(fails) > 0 {
			fmt.Fprintf(&b, "\n%s on %s failed (logs: %s):\n%s\n", r.era, r.cloud, r.logDir, strings.Join(fails, "\n"))
		}
	}
	unused := map[string][]string{}
	for _, r := range results {
		for sa, verbs := range r.unused {
			k := r.era + " " + sa
			unused[k] = append(unused[k], verbs...)
		}
	}
	if len(unused) > 0 {
		b.WriteString("\ngranted but not used (per era and service account, on any cloud of the run):\n")
		keys := make([]string, 0, len(unused))
		for k := range unused {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %s\n", k, strings.Join(intersectAll(results, k), ", "))
		}
	}
	return b.String()
}

// intersectAll is the verbs unused by service account "era sa" on every
// cloud that ran it.
func intersectAll(results []*result, k string) []string {
	era, sa, _ := strings.Cut(k, " ")
	var sets [][]string
	for _, r := range results {
		if v, ok := r.unused[sa]; ok && r.era == era {
			sets = append(sets, v)
		}
	}
	if len(sets) == 0 {
		return nil
	}
	count := map[string]int{}
	for _, s := range sets {
		for _, v := range s {
			count[v]++
		}
	}
	var out []string
	for v, n := range count {
		if n == len(sets) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n      ") }
