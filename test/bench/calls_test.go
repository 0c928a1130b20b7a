package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// What the cloud calls are for, told apart by their route as the
// emulators count them (harness.Requests): counts by route are exact and
// need nothing from the code under test, so a change on any path (a new
// read before a delete, a check before a create) shows up in the figures
// without being declared. Which of the reads of a server were made to prove
// ownership the manager says itself
// (machine_api_provider_cloud_ownership_reads_total, pkg/cloud owner.go).
const (
	purposeList    = "list servers"
	purposeSweep   = "list other zones"
	purposeCreate  = "create"
	purposeRead    = "read a server"
	purposeUpdate  = "update a server"
	purposeDelete  = "delete"
	purposeVolume  = "root volume"
	purposeAttach  = "attach"
	purposeGroups  = "anti-affinity groups"
	purposeCatalog = "catalogue"
	purposeOp      = "operation"
	purposeOther   = "other"
)

// purposes in the order the figures print them.
var purposes = []string{purposeList, purposeSweep, purposeCreate, purposeRead, purposeUpdate, purposeDelete, purposeVolume, purposeAttach, purposeGroups, purposeCatalog, purposeOp, purposeOther}

// purposeOf names what a call of route ("GET /v1/servers/{uuid}",
// "PUT /v2/security-group/{id}:attach") is for, on either cloud.
func purposeOf(route string) string {
	method, path, _ := strings.Cut(route, " ")
	if rest, ok := strings.CutPrefix(path, "/{zone}"); ok {
		// Another zone's endpoint (routeOf): where no Machine of the
		// benchmarks is, and which only a sweep of every zone lists.
		if p := purposeOf(method + " " + rest); p != purposeList {
			return p
		}
		return purposeSweep
	}
	path = strings.TrimPrefix(strings.TrimPrefix(path, "/v1/"), "/v2/")
	segs := strings.Split(path, "/")
	resource := segs[0]
	byID := len(segs) > 1
	action := strings.Contains(path, ":") || (byID && len(segs) > 2)
	switch resource {
	case "servers", "instance":
		switch {
		case action && method == "DELETE":
			return purposeUpdate // an Exoscale field reset
		case action:
			return purposeOther // start, stop, reboot, scale
		case method == "GET" && !byID:
			return purposeList
		case method == "GET":
			return purposeRead
		case method == "POST":
			return purposeCreate
		case method == "DELETE":
			return purposeDelete
		default:
			return purposeUpdate
		}
	case "volumes":
		return purposeVolume
	case "server-groups", "anti-affinity-group":
		return purposeGroups
	case "operation":
		return purposeOp
	case "security-group", "private-network":
		if strings.HasSuffix(path, ":attach") {
			return purposeAttach
		}
		if method == "GET" {
			return purposeCatalog
		}
	case "flavors", "regions", "custom-images", "networks", "subnets", "zone", "template", "instance-type", "ssh-key", "deploy-target", "quota":
		if method == "GET" {
			return purposeCatalog
		}
	}
	return purposeOther
}

// calls are the cloud calls of one phase: by route, as the emulator
// counted them, and how many the manager made to prove ownership.
type calls struct {
	routes    map[string]int64
	ownership float64
}

func (c calls) total() int64 {
	var n int64
	for _, v := range c.routes {
		n += v
	}
	return n
}

// withoutSweeps is the total but the lists of other zones that a sweep of
// every zone makes (every fullSweepEvery, amortized on their own).
func (c calls) withoutSweeps() int64 {
	return c.total() - c.byPurpose()[purposeSweep]
}

// byPurpose sums the routes by purpose.
func (c calls) byPurpose() map[string]int64 {
	out := map[string]int64{}
	for r, v := range c.routes {
		out[purposeOf(r)] += v
	}
	return out
}

// perMachine describes the calls per Machine, by purpose, with the
// ownership reads among the reads: "2.01 = list servers 0.01, create 1.00,
// read a server 1.00 (ownership 1.00)". A sweep of every zone, which comes
// every fullSweepEvery whatever the Machines do, is no Machine's.
func (c calls) perMachine(n int) string {
	if n <= 0 {
		return "-"
	}
	per := func(v float64) string { return fmt.Sprintf("%.3f", v/float64(n)) }
	by := c.byPurpose()
	var parts []string
	for _, p := range purposes {
		if by[p] == 0 || p == purposeSweep {
			continue
		}
		s := p + " " + per(float64(by[p]))
		if p == purposeRead && c.ownership > 0 {
			s += " (ownership " + per(c.ownership) + ")"
		}
		parts = append(parts, s)
	}
	if c.ownership > 0 && by[purposeRead] == 0 {
		// A cloud whose ownership reads are lists (none today).
		parts = append(parts, "ownership "+per(c.ownership))
	}
	s := per(float64(c.withoutSweeps())) + " = " + strings.Join(parts, ", ")
	if n := by[purposeSweep]; n > 0 {
		s += fmt.Sprintf(" (and %d lists of other zones: a sweep of every zone, counted per hour instead)", n)
	}
	return s
}

// routeList is the routes and their counts, most first.
func (c calls) routeList() string {
	keys := slices.Collect(maps.Keys(c.routes))
	slices.SortFunc(keys, func(a, b string) int {
		if c.routes[a] != c.routes[b] {
			return int(c.routes[b] - c.routes[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, c.routes[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ownershipReads is the manager's count of ownership reads between two
// scrapes.
func ownershipReads(d delta) float64 {
	return d.counter("machine_api_provider_cloud_ownership_reads_total", nil)
}
