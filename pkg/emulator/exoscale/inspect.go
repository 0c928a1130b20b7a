package exoscale

import (
	"maps"
	"slices"
	"time"
)

// In-process observers (tests, benchmarks, the demo's boot simulation) see
// the emulated world here, without an API call to count or a signature to
// make. Everything is a copy.

// InstanceInfo is what an observer sees of an instance.
type InstanceInfo struct {
	ID, Name, State, Zone string
	// Account is the owning account's name.
	Account string
	// InstanceType is "family.size"; CPUs, MemoryBytes and GPUs are its.
	InstanceType             string
	CPUs, MemoryBytes, GPUs  int64
	DiskSizeGiB              int64
	TemplateID, TemplateName string
	// PublicIPv4 and PublicIPv6 ("" without); PrivateIPs are the leases of
	// its managed private networks, PrivateNetworks the IDs of all of them.
	PublicIPv4, PublicIPv6 string
	PrivateIPs             []string
	PrivateNetworks        []string
	SecurityGroups         []string
	AntiAffinityGroups     []string
	Labels                 map[string]string
	// UserData as the client sent it (base64).
	UserData  string
	CreatedAt time.Time
	// Pool is the ID of the instance pool that owns it ("" for none).
	Pool string
}

// Instances returns the instances of every account and zone, oldest first.
func (e *Emulator) Instances() []InstanceInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(e.now())
	type item struct {
		seq  int64
		info InstanceInfo
	}
	var items []item
	for _, a := range e.sortedAccounts() {
		for _, inst := range a.Instances {
			items = append(items, item{inst.Seq, a.info(inst)})
		}
	}
	slices.SortFunc(items, func(x, y item) int { return int(x.seq - y.seq) })
	out := make([]InstanceInfo, 0, len(items))
	for _, it := range items {
		out = append(out, it.info)
	}
	return out
}

// Instance returns one instance by ID.
func (e *Emulator) Instance(id string) (InstanceInfo, bool) {
	for _, i := range e.Instances() {
		if i.ID == id {
			return i, true
		}
	}
	return InstanceInfo{}, false
}

// CountInstances counts the instances in the given states, all of them
// without a state.
func (e *Emulator) CountInstances(states ...string) int {
	n := 0
	for _, i := range e.Instances() {
		if len(states) == 0 || slices.Contains(states, i.State) {
			n++
		}
	}
	return n
}

func (a *account) info(inst *instance) InstanceInfo {
	i := InstanceInfo{
		ID: inst.ID, Name: inst.Name, State: inst.State, Zone: inst.Zone, Account: a.Name,
		DiskSizeGiB: inst.DiskSize, TemplateID: inst.Template,
		PublicIPv4: inst.PublicIPv4, PublicIPv6: inst.PublicIPv6,
		SecurityGroups:     slices.Clone(inst.SecurityGroups),
		AntiAffinityGroups: slices.Clone(inst.AntiAffinityGroups),
		Labels:             maps.Clone(inst.Labels),
		UserData:           inst.UserData,
		CreatedAt:          inst.CreatedAt,
		Pool:               inst.Manager,
	}
	if it := findInstanceType(inst.Type); it != nil {
		i.InstanceType, i.CPUs, i.MemoryBytes, i.GPUs = it.Name(), it.CPUs, it.Memory, it.GPUs
	}
	if p := findPublicTemplate(inst.Template); p != nil {
		i.TemplateName = p.Name
	} else if t := a.Templates[inst.Template]; t != nil {
		i.TemplateName = t.Name
	}
	for _, n := range inst.NICs {
		i.PrivateNetworks = append(i.PrivateNetworks, n.Network)
		if pn := a.PrivateNetworks[n.Network]; pn != nil && pn.Leases[inst.ID] != "" {
			i.PrivateIPs = append(i.PrivateIPs, pn.Leases[inst.ID])
		}
	}
	return i
}

// AntiAffinityGroupInfo is what an observer sees of an anti-affinity group.
type AntiAffinityGroupInfo struct {
	ID, Name, Account string
	// Members are the IDs of its instances, oldest first.
	Members []string
}

// AntiAffinityGroups returns the anti-affinity groups of every account.
func (e *Emulator) AntiAffinityGroups() []AntiAffinityGroupInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(e.now())
	out := []AntiAffinityGroupInfo{}
	for _, a := range e.sortedAccounts() {
		for _, g := range sorted(a.AntiAffinityGroups) {
			info := AntiAffinityGroupInfo{ID: g.ID, Name: g.Name, Account: a.Name, Members: []string{}}
			for _, inst := range a.groupMembers(g.ID) {
				info.Members = append(info.Members, inst.ID)
			}
			out = append(out, info)
		}
	}
	return out
}

// TemplateInfo is what an observer sees of a private template.
type TemplateInfo struct {
	ID, Name, Zone, Account string
}

// Templates returns the private templates of every account.
func (e *Emulator) Templates() []TemplateInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(e.now())
	out := []TemplateInfo{}
	for _, a := range e.sortedAccounts() {
		for _, t := range sorted(a.Templates) {
			out = append(out, TemplateInfo{ID: t.ID, Name: t.Name, Zone: t.Zone, Account: a.Name})
		}
	}
	return out
}

// TemplateID returns the ID of the private template of an account in a zone
// by name ("" when there is none): what a MachineSet names for RHCOS.
func (e *Emulator) TemplateID(account, zone, name string) string {
	for _, t := range e.Templates() {
		if t.Account == account && t.Zone == zone && t.Name == name {
			return t.ID
		}
	}
	return ""
}

// PendingOperations counts the operations not done yet, of every account.
func (e *Emulator) PendingOperations() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(e.now())
	n := 0
	for _, a := range e.world.Accounts {
		for _, op := range a.Operations {
			if op.State == "pending" {
				n++
			}
		}
	}
	return n
}

// InstanceTypeID returns the ID of an instance type by "family.size"; ""
// when there is none.
func InstanceTypeID(name string) string {
	if it := findInstanceTypeByName(name); it != nil {
		return it.ID
	}
	return ""
}

func (e *Emulator) sortedAccounts() []*account {
	out := []*account{}
	for _, conf := range e.accounts {
		if a := e.world.Accounts[conf.Name]; a != nil {
			out = append(out, a)
		}
	}
	return out
}
