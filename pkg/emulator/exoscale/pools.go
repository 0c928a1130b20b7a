package exoscale

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Instance pools, as far as bringing a Terraform-made cluster under the
// provider needs them (docs/adopt.md): a pool owns its members. It makes
// them from its own configuration, keeps as many running as its size says
// (a member deleted directly is replaced), and lets one go only by shrinking:
// evict-instance-pool-members names the members to remove and the pool
// shrinks by as many, scale-instance-pool says how many to keep. Either way
// a member that leaves the pool is destroyed: the API has no operation that
// takes an instance out of its pool alive. Members carry the pool in their
// "manager" (type instance-pool), and the instance list filters on it.
//
// The vendor's document says a pool's size is more than 0 (its schema has
// exclusiveMinimum on size), so the emulator refuses to shrink a pool to
// nothing: delete the pool instead, which destroys what is left of it.
//
// Members are named <instance-prefix>-<5 characters of the pool's ID>-<5
// characters of the member's ID>: the prefix is the client's (default
// "pool"), the rest is this emulator's own choice of a unique suffix.

type instancePool struct {
	meta
	Zone               string            `json:"zone"`
	Name               string            `json:"name"`
	Description        string            `json:"description,omitempty"`
	Size               int64             `json:"size"`
	Prefix             string            `json:"prefix"`
	Type               string            `json:"type"`
	Template           string            `json:"template"`
	DiskSize           int64             `json:"disk_size"`
	UserData           string            `json:"user_data,omitempty"`
	SecurityGroups     []string          `json:"security_groups"`
	AntiAffinityGroups []string          `json:"anti_affinity_groups"`
	PrivateNetworks    []string          `json:"private_networks"`
	SSHKey             string            `json:"ssh_key,omitempty"`
	SSHKeys            []string          `json:"ssh_keys"`
	PublicIPAssignment string            `json:"public_ip_assignment"`
	DeployTarget       string            `json:"deploy_target,omitempty"`
	Labels             map[string]string `json:"labels"`
	// DestroyAt is when a deleted pool is gone (zero while it lives).
	DestroyAt time.Time `json:"destroy_at,omitzero"`
}

type createPoolRequest struct {
	memberRequest
	Name            *string `json:"name"`
	Description     *string `json:"description"`
	Size            *int64  `json:"size"`
	InstancePrefix  *string `json:"instance-prefix"`
	PrivateNetworks []idRef `json:"private-networks"`
}

// poolFields are the pool's request fields, for the real API's 400s.
var poolFields = map[string]fieldDoc{
	"name":                 {"Instance Pool name", "a String of 1 to 255 characters"},
	"description":          {"Instance Pool description", "a String of 1 to 255 characters"},
	"size":                 {"Number of Instances", "an Integer greater than 0"},
	"instance-type":        {"Instances type", "an Object with the id of an Instance Type"},
	"template":             {"Instances template", "an Object with the id of a Template"},
	"disk-size":            {"Instances disk size in GiB", "an Integer between 10 51200"},
	"instance-prefix":      {"Prefix to apply to Instances names (default: pool)", "a String of 1 to 30 letters, digits and \"-\""},
	"user-data":            {"Instances Cloud-init user-data", "a base64-encoded String of 1 to 32768 characters"},
	"security-groups":      {"Instance Pool Security Groups", "an Array of Security Group references"},
	"anti-affinity-groups": {"Instance Pool Anti-affinity Groups", "an Array of Anti-affinity Group references"},
	"private-networks":     {"Instance Pool Private Networks", "an Array of Private Network references"},
	"ssh-key":              {"Instances SSH key", "an Object with the name of an SSH key"},
	"ssh-keys":             {"Instances SSH Keys", "an Array of SSH key references"},
	"public-ip-assignment": {"Instance Pool public IP assignment", "one of inet4, dual, none"},
	"ipv6-enabled":         {"Enable IPv6 for instances", "a Boolean"},
	"labels":               {"Instance Pool Labels", "an Object of String values, keys of 1 to 255 characters"},
	"deploy-target":        {"Instance Pool Deploy Target", "an Object with the id of a Deploy Target"},
	"instances":            {"Instances to evict", "an Array of Instance IDs, members of the Instance Pool"},
}

func invalidPoolField(field string) reply { return poolFields[field].invalid(field) }

func validPrefix(s string) bool {
	if s == "" || len(s) > 30 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func (e *Emulator) createInstancePool(c *call) reply {
	var req createPoolRequest
	if r := c.decode(&req, poolFields); r != nil {
		return *r
	}
	a := c.acct
	if req.Name == nil || *req.Name == "" || len(*req.Name) > 255 {
		return invalidPoolField("name")
	}
	if req.Description != nil && (*req.Description == "" || len(*req.Description) > 255) {
		return invalidPoolField("description")
	}
	if req.Size == nil || *req.Size < 1 {
		return invalidPoolField("size")
	}
	prefix := "pool"
	if req.InstancePrefix != nil {
		if !validPrefix(*req.InstancePrefix) {
			return invalidPoolField("instance-prefix")
		}
		prefix = *req.InstancePrefix
	}
	m, r := e.checkMembers(c, &req.memberRequest, *req.Size, invalidPoolField)
	if r != nil {
		return *r
	}
	p := &instancePool{
		Zone: c.zone, Name: *req.Name, Size: *req.Size, Prefix: prefix,
		Type: m.Type.ID, Template: m.Template, DiskSize: m.DiskSize, UserData: m.UserData,
		PublicIPAssignment: m.PublicIPAssignment, Labels: m.Labels,
		SecurityGroups: m.SecurityGroups, AntiAffinityGroups: m.AntiAffinityGroups, PrivateNetworks: []string{},
		SSHKey: m.SSHKey, SSHKeys: m.SSHKeys, DeployTarget: m.DeployTarget,
	}
	if req.Description != nil {
		p.Description = *req.Description
	}
	for _, ref := range req.PrivateNetworks {
		pn := a.PrivateNetworks[ref.ID]
		if pn == nil || pn.Zone != c.zone {
			return refused("private-networks", "Private Network %s not found in zone %s", ref.ID, c.zone)
		}
		if !slices.Contains(p.PrivateNetworks, ref.ID) {
			p.PrivateNetworks = append(p.PrivateNetworks, ref.ID)
		}
	}
	// Every member can be made (the leases of managed networks included):
	// commit.
	for _, id := range p.PrivateNetworks {
		if pn := a.PrivateNetworks[id]; pn.managed() && freeAddresses(pn) < p.Size {
			return conflict("Private Network %s has not %d free addresses left in %s-%s", pn.ID, p.Size, pn.StartIP, pn.EndIP)
		}
	}
	p.meta = e.newMeta()
	a.Pools[p.ID] = p
	for range p.Size {
		e.spawnMember(a, p, c.now)
	}
	return c.opReply(c.operation("create-instance-pool", "instance-pool", p.ID, c.now.Add(e.cfg.BootTime)))
}

// freeAddresses counts the addresses a managed network can still lease.
func freeAddresses(pn *privateNetwork) int64 {
	start, err1 := netip.ParseAddr(pn.StartIP)
	end, err2 := netip.ParseAddr(pn.EndIP)
	if err1 != nil || err2 != nil {
		return 0
	}
	var n int64
	for a := start; !end.Less(a); a = a.Next() {
		n++
	}
	return n - int64(len(pn.Leases))
}

// spawnMember makes one member of p from its configuration, booting.
func (e *Emulator) spawnMember(a *account, p *instancePool, now time.Time) *instance {
	inst := &instance{
		meta:               e.newMeta(),
		Zone:               p.Zone,
		Type:               p.Type,
		Template:           p.Template,
		DiskSize:           p.DiskSize,
		Labels:             map[string]string{},
		PublicIPAssignment: p.PublicIPAssignment,
		SecurityGroups:     slices.Clone(p.SecurityGroups),
		AntiAffinityGroups: slices.Clone(p.AntiAffinityGroups),
		SSHKey:             p.SSHKey,
		SSHKeys:            slices.Clone(p.SSHKeys),
		UserData:           p.UserData,
		DeployTarget:       p.DeployTarget,
		NICs:               []nic{},
		Manager:            p.ID,
	}
	if len(inst.SecurityGroups) == 0 {
		inst.SecurityGroups = []string{e.ensureDefaultSecurityGroup(a).ID}
	}
	inst.Name = fmt.Sprintf("%s-%s-%s", p.Prefix, p.ID[:5], inst.ID[:5])
	inst.MAC = e.world.newMAC()
	e.world.allocatePublic(inst)
	for _, id := range p.PrivateNetworks {
		pn := a.PrivateNetworks[id]
		if pn == nil {
			continue
		}
		if pn.managed() {
			ip, r := pn.lease(inst.ID, nil)
			if r != nil {
				// No address left: the member comes up without one, as a
				// member on an unmanaged network would.
				continue
			}
			pn.Leases[inst.ID] = ip
		}
		inst.NICs = append(inst.NICs, nic{Network: id, MAC: e.world.newMAC()})
	}
	inst.State = "starting"
	inst.Pending = &transition{To: "running", From: "starting", At: now.Add(e.cfg.BootTime)}
	a.Instances[inst.ID] = inst
	return inst
}

// destroyMember starts the end of a member, as its pool's shrinking does.
func (e *Emulator) destroyMember(inst *instance, now time.Time) {
	if inst.State == "destroying" {
		return
	}
	inst.Pending = &transition{To: "", From: inst.State, At: now.Add(e.cfg.ActionTime)}
	inst.State = "destroying"
}

// members are the pool's instances that are not on their way out, oldest
// first.
func (a *account) members(poolID string) []*instance {
	var out []*instance
	for _, inst := range sorted(a.Instances) {
		if inst.Manager == poolID && inst.State != "destroying" {
			out = append(out, inst)
		}
	}
	return out
}

// allMembers are every instance the pool manages, those being destroyed too.
func (a *account) allMembers(poolID string) []*instance {
	var out []*instance
	for _, inst := range sorted(a.Instances) {
		if inst.Manager == poolID {
			out = append(out, inst)
		}
	}
	return out
}

// settlePools keeps every live pool at its size (a member deleted directly
// is replaced) and removes deleted pools once their members are gone.
func (e *Emulator) settlePools(a *account, now time.Time) {
	for _, p := range sorted(a.Pools) {
		if !p.DestroyAt.IsZero() {
			if !now.Before(p.DestroyAt) && len(a.allMembers(p.ID)) == 0 {
				delete(a.Pools, p.ID)
			}
			continue
		}
		for n := int64(len(a.members(p.ID))); n < p.Size; n++ {
			e.spawnMember(a, p, now)
		}
	}
}

func (c *call) findPool() (*instancePool, *reply) {
	return lookup(c, c.acct.Pools, "Instance Pool", func(p *instancePool) bool { return p.Zone == c.zone })
}

func (e *Emulator) getInstancePool(c *call) reply {
	p, r := c.findPool()
	if r != nil {
		return *r
	}
	return ok(c.renderPool(p))
}

func (e *Emulator) listInstancePools(c *call) reply {
	out := []any{}
	for _, p := range sorted(c.acct.Pools) {
		if p.Zone == c.zone {
			out = append(out, c.renderPool(p))
		}
	}
	return ok(map[string]any{"instance-pools": out})
}

func (e *Emulator) scaleInstancePool(c *call) reply {
	p, r := c.findPool()
	if r != nil {
		return *r
	}
	var req struct {
		Size *int64 `json:"size"`
	}
	if r := c.decode(&req, poolFields); r != nil {
		return *r
	}
	if req.Size == nil || *req.Size < 0 {
		return invalidPoolField("size")
	}
	if *req.Size == 0 {
		return badRequest("Invalid value in size: an Instance Pool keeps at least 1 instance; delete the Instance Pool to remove them all")
	}
	if !p.DestroyAt.IsZero() {
		return busy("Instance Pool", p.ID, "destroying")
	}
	a := c.acct
	members := a.members(p.ID)
	if grow := *req.Size - int64(len(members)); grow > 0 {
		if r := c.checkQuota("instance", int64(len(a.Instances))+grow); r != nil {
			return *r
		}
	}
	p.Size = *req.Size
	// Shrinking removes the newest members: the client did not say which.
	for i := len(members) - 1; i >= 0 && int64(i) >= p.Size; i-- {
		e.destroyMember(members[i], c.now)
	}
	e.settlePools(a, c.now)
	return c.opReply(c.operation("scale-instance-pool", "instance-pool", p.ID, c.now.Add(e.cfg.ActionTime)))
}

func (e *Emulator) evictInstancePoolMembers(c *call) reply {
	p, r := c.findPool()
	if r != nil {
		return *r
	}
	var req struct {
		Instances []string `json:"instances"`
	}
	if r := c.decode(&req, poolFields); r != nil {
		return *r
	}
	if len(req.Instances) == 0 {
		return invalidPoolField("instances")
	}
	if !p.DestroyAt.IsZero() {
		return busy("Instance Pool", p.ID, "destroying")
	}
	a := c.acct
	var evict []*instance
	for _, id := range req.Instances {
		inst := a.Instances[id]
		if inst == nil || inst.Manager != p.ID || inst.State == "destroying" {
			return badRequest("Invalid value in instances: instance %s is not a member of Instance Pool %s", id, p.ID)
		}
		if !slices.Contains(evict, inst) {
			evict = append(evict, inst)
		}
	}
	if left := int64(len(a.members(p.ID)) - len(evict)); left < 1 {
		return badRequest("Invalid value in instances: evicting them would leave Instance Pool %s without instances; delete the Instance Pool instead", p.ID)
	}
	p.Size -= int64(len(evict))
	if p.Size < 1 {
		p.Size = 1
	}
	for _, inst := range evict {
		e.destroyMember(inst, c.now)
	}
	return c.opReply(c.operation("evict-instance-pool-members", "instance-pool", p.ID, c.now.Add(e.cfg.ActionTime)))
}

func (e *Emulator) deleteInstancePool(c *call) reply {
	p, r := c.findPool()
	if r != nil {
		return *r
	}
	if p.DestroyAt.IsZero() {
		p.DestroyAt = c.now.Add(e.cfg.ActionTime)
		for _, inst := range c.acct.allMembers(p.ID) {
			e.destroyMember(inst, c.now)
		}
	}
	return c.opReply(c.operation("delete-instance-pool", "instance-pool", p.ID, p.DestroyAt))
}

// poolState is what the pool is doing, from its members.
func (a *account) poolState(p *instancePool) string {
	if !p.DestroyAt.IsZero() {
		return "destroying"
	}
	state := "running"
	for _, inst := range a.allMembers(p.ID) {
		switch inst.State {
		case "starting":
			return "scaling-up"
		case "destroying":
			state = "scaling-down"
		}
	}
	return state
}

func (c *call) renderPool(p *instancePool) map[string]any {
	a := c.acct
	refs := func(ids []string) []idRef {
		out := []idRef{}
		for _, id := range ids {
			out = append(out, idRef{id})
		}
		return out
	}
	instances := refs(nil)
	for _, inst := range a.allMembers(p.ID) {
		instances = append(instances, idRef{inst.ID})
	}
	m := map[string]any{
		"id":                   p.ID,
		"name":                 p.Name,
		"size":                 p.Size,
		"state":                a.poolState(p),
		"instance-type":        idRef{p.Type},
		"template":             idRef{p.Template},
		"disk-size":            p.DiskSize,
		"instance-prefix":      p.Prefix,
		"public-ip-assignment": p.PublicIPAssignment,
		"ipv6-enabled":         p.PublicIPAssignment == "dual",
		"instances":            instances,
	}
	if p.Description != "" {
		m["description"] = p.Description
	}
	if p.UserData != "" {
		m["user-data"] = p.UserData
	}
	if len(p.Labels) > 0 {
		m["labels"] = p.Labels
	}
	if len(p.SecurityGroups) > 0 {
		m["security-groups"] = refs(p.SecurityGroups)
	}
	if len(p.AntiAffinityGroups) > 0 {
		m["anti-affinity-groups"] = refs(p.AntiAffinityGroups)
	}
	if len(p.PrivateNetworks) > 0 {
		m["private-networks"] = refs(p.PrivateNetworks)
	}
	if p.SSHKey != "" {
		m["ssh-key"] = map[string]string{"name": p.SSHKey}
	}
	if len(p.SSHKeys) > 0 {
		keys := []any{}
		for _, k := range p.SSHKeys {
			keys = append(keys, map[string]string{"name": k})
		}
		m["ssh-keys"] = keys
	}
	if p.DeployTarget != "" {
		m["deploy-target"] = idRef{p.DeployTarget}
	}
	return m
}

// InstancePoolInfo is what an observer sees of an instance pool.
type InstancePoolInfo struct {
	ID, Name, Zone, Account string
	Size                    int64
	// Members are the IDs of its instances that are not being destroyed,
	// oldest first.
	Members []string
}

// InstancePools returns the instance pools of every account.
func (e *Emulator) InstancePools() []InstancePoolInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(e.now())
	var out []InstancePoolInfo
	for _, a := range e.sortedAccounts() {
		for _, p := range sorted(a.Pools) {
			info := InstancePoolInfo{ID: p.ID, Name: p.Name, Zone: p.Zone, Account: a.Name, Size: p.Size}
			for _, inst := range a.members(p.ID) {
				info.Members = append(info.Members, inst.ID)
			}
			out = append(out, info)
		}
	}
	return out
}
