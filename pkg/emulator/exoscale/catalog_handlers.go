package exoscale

import (
	"net/http"
	"slices"
	"sort"
)

// Instance types, quotas and deploy targets: what an account may run, how
// much of it, and where.

func (c *call) renderInstanceType(it *instanceType) map[string]any {
	m := map[string]any{
		"id":         it.ID,
		"family":     it.Family,
		"size":       it.Size,
		"cpus":       it.CPUs,
		"memory":     it.Memory,
		"authorized": c.authorized(it),
		"zones":      it.Zones,
	}
	// The document says a count is more than 0: types without GPUs have none.
	if it.GPUs > 0 {
		m["gpus"] = it.GPUs
	}
	return m
}

func (e *Emulator) listInstanceTypes(c *call) reply {
	out := []any{}
	for i := range instanceTypes {
		out = append(out, c.renderInstanceType(&instanceTypes[i]))
	}
	return ok(map[string]any{"instance-types": out})
}

func (e *Emulator) getInstanceType(c *call) reply {
	it := findInstanceType(c.params["id"])
	if it == nil {
		return notFound("Instance Type", c.params["id"])
	}
	return ok(c.renderInstanceType(it))
}

// quotaLimit is an account's limit for a resource; -1 is unlimited.
func quotaLimit(conf *Account, resource string) int64 {
	if l, set := conf.Quotas[resource]; set {
		return l
	}
	if l, known := DefaultQuotas[resource]; known {
		return l
	}
	return -1
}

func (a *account) quotaUsage(resource string) int64 {
	switch resource {
	case "instance":
		return int64(len(a.Instances))
	case "gpu":
		return a.gpusInUse()
	case "private-network":
		return int64(len(a.PrivateNetworks))
	case "template":
		return int64(len(a.Templates))
	}
	return 0
}

// checkQuota refuses a change that would bring the account's use of a
// resource to wanted, above its limit.
func (c *call) checkQuota(resource string, wanted int64) *reply {
	limit := quotaLimit(c.conf, resource)
	if limit < 0 || wanted <= limit {
		return nil
	}
	r := message(http.StatusForbidden, "Quota exceeded for %s: the limit is %d and %d are in use (ask Exoscale support to raise it)",
		resource, limit, c.acct.quotaUsage(resource))
	return &r
}

func (c *call) quotaResources() []string {
	var out []string
	for r := range DefaultQuotas {
		out = append(out, r)
	}
	for r := range c.conf.Quotas {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

func (c *call) renderQuota(resource string) map[string]any {
	return map[string]any{"resource": resource, "usage": c.acct.quotaUsage(resource), "limit": quotaLimit(c.conf, resource)}
}

func (e *Emulator) listQuotas(c *call) reply {
	out := []any{}
	for _, r := range c.quotaResources() {
		out = append(out, c.renderQuota(r))
	}
	return ok(map[string]any{"quotas": out})
}

func (e *Emulator) getQuota(c *call) reply {
	r := c.params["entity"]
	if !slices.Contains(c.quotaResources(), r) {
		return notFound("Quota", r)
	}
	return ok(c.renderQuota(r))
}

// deployTargets are the account's deploy targets in the call's zone.
func (c *call) deployTargets() []map[string]any {
	out := []map[string]any{}
	for _, dt := range c.conf.DeployTargets {
		if dt.Zone != c.zone {
			continue
		}
		typ := dt.Type
		if typ == "" {
			typ = "dedicated"
		}
		m := map[string]any{"id": nameUUID("deploy-target", c.conf.Name+"/"+dt.Zone+"/"+dt.Name), "name": dt.Name, "type": typ}
		if dt.Description != "" {
			m["description"] = dt.Description
		}
		out = append(out, m)
	}
	return out
}

func (c *call) deployTarget(id string) map[string]any {
	for _, dt := range c.deployTargets() {
		if dt["id"] == id {
			return dt
		}
	}
	return nil
}

func (e *Emulator) listDeployTargets(c *call) reply {
	return ok(map[string]any{"deploy-targets": c.deployTargets()})
}

func (e *Emulator) getDeployTarget(c *call) reply {
	dt := c.deployTarget(c.params["id"])
	if dt == nil {
		return notFound("Deploy Target", c.params["id"])
	}
	return ok(dt)
}
