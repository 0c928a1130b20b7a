package exoscale

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// MaxInstancesPerAntiAffinityGroup is how many instances an anti-affinity
// group holds at most: one per hypervisor of a zone's placement domain.
const MaxInstancesPerAntiAffinityGroup = 8

type idRef struct {
	ID string `json:"id"`
}

type nameRef struct {
	Name string `json:"name"`
}

type createInstanceRequest struct {
	memberRequest
	Name         *string `json:"name"`
	AutoStart    *bool   `json:"auto-start"`
	SecureBoot   *bool   `json:"secureboot-enabled"`
	TPM          *bool   `json:"tpm-enabled"`
	AppSnapshots *bool   `json:"application-consistent-snapshot-enabled"`
}

// instanceFields are the create and update fields, for the real API's 400s.
var instanceFields = map[string]fieldDoc{
	"name":                 {"Instance name", "a String of 1 to 255 letters, digits, \"-\" and \".\" (no \"_\")"},
	"instance-type":        {"Instance Type", "an Object with the id of an Instance Type"},
	"template":             {"Instance Template", "an Object with the id of a Template"},
	"disk-size":            {"Instance disk size in GiB", "an Integer between 10 51200"},
	"user-data":            {"Instance Cloud-init user-data (base64 encoded)", "a base64-encoded String of 1 to 32768 characters"},
	"security-groups":      {"Instance Security Groups", "an Array of Security Group references"},
	"anti-affinity-groups": {"Instance Anti-affinity Groups", "an Array of Anti-affinity Group references"},
	"ssh-key":              {"Instance SSH Key", "an Object with the name of an SSH key"},
	"ssh-keys":             {"Instance SSH Keys", "an Array of SSH key references"},
	"public-ip-assignment": {"Assign public IP to the Instance", "one of inet4, dual, none"},
	"ipv6-enabled":         {"Enable IPv6. DEPRECATED: use `public-ip-assignments`.", "a Boolean"},
	"labels":               {"Resource labels", "an Object of String values, keys of 1 to 255 characters"},
	"deploy-target":        {"Instance Deploy Target", "an Object with the id of a Deploy Target"},
	"auto-start":           {"Start Instance on creation (default: true)", "a Boolean"},
	"secureboot-enabled":   {"Enable secure boot", "a Boolean"},
	"tpm-enabled":          {"Enable Trusted Platform Module (TPM)", "a Boolean"},
	"application-consistent-snapshot-enabled": {"Enable application-consistent snapshot for the instance", "a Boolean"},
}

func invalidField(field string) reply { return instanceFields[field].invalid(field) }

// refused is a 400 about a field whose value is well formed but refers to
// something that cannot be used: "Invalid value in template: ...".
func refused(field, format string, args ...any) reply {
	return badRequest("Invalid value in %s: %s", field, fmt.Sprintf(format, args...))
}

func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func validUserData(s string) bool {
	if s == "" || len(s) > 32768 {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}

func validLabels(m map[string]string) bool {
	for k, v := range m {
		if k == "" || len(k) > 255 || len(v) > 255 {
			return false
		}
	}
	return true
}

func (e *Emulator) createInstance(c *call) reply {
	var req createInstanceRequest
	if r := c.decode(&req, instanceFields); r != nil {
		return *r
	}
	a := c.acct
	name := ""
	if req.Name != nil {
		if !validName(*req.Name) {
			return invalidField("name")
		}
		name = *req.Name
	}
	m, r := e.checkMembers(c, &req.memberRequest, 1, invalidField)
	if r != nil {
		return *r
	}
	if len(m.SecurityGroups) == 0 {
		// Without security groups an instance is in the account's default
		// group, as on the real cloud.
		m.SecurityGroups = append(m.SecurityGroups, e.ensureDefaultSecurityGroup(a).ID)
	}

	// Everything is valid: commit.
	inst := &instance{
		meta:               e.newMeta(),
		Zone:               c.zone,
		Name:               name,
		Type:               m.Type.ID,
		Template:           m.Template,
		DiskSize:           m.DiskSize,
		UserData:           m.UserData,
		Labels:             m.Labels,
		PublicIPAssignment: m.PublicIPAssignment,
		SecurityGroups:     m.SecurityGroups,
		AntiAffinityGroups: m.AntiAffinityGroups,
		SSHKey:             m.SSHKey,
		SSHKeys:            m.SSHKeys,
		DeployTarget:       m.DeployTarget,
		NICs:               []nic{},
		SecureBoot:         req.SecureBoot != nil && *req.SecureBoot,
		TPM:                req.TPM != nil && *req.TPM,
		AppSnapshots:       req.AppSnapshots != nil && *req.AppSnapshots,
	}
	if inst.Name == "" {
		inst.Name = "vm-" + inst.ID
	}
	inst.MAC = e.world.newMAC()
	e.world.allocatePublic(inst)
	a.Instances[inst.ID] = inst
	if req.AutoStart != nil && !*req.AutoStart {
		inst.State = "stopped"
		return c.opReply(c.transition(inst, "stopped", "stopped", 0, "create-instance"))
	}
	inst.State = "starting"
	return c.opReply(c.transition(inst, "starting", "running", e.cfg.BootTime, "create-instance"))
}

// usableType finds an instance type the account may run in the call's zone.
func (e *Emulator) usableType(c *call, id string) (*instanceType, *reply) {
	it := findInstanceType(id)
	if it == nil {
		r := refused("instance-type", "Instance Type %s not found", id)
		return nil, &r
	}
	if !slices.Contains(it.Zones, c.zone) {
		r := refused("instance-type", "Instance Type %s is not available in zone %s", it.Name(), c.zone)
		return nil, &r
	}
	if !c.authorized(it) {
		r := message(http.StatusForbidden, "Instance Type %s requires an authorization this organization does not have (its gpu quota is 0)", it.Name())
		return nil, &r
	}
	return it, nil
}

// authorized says whether the account may run the type: GPU types need a
// GPU quota.
func (c *call) authorized(it *instanceType) bool {
	return it.GPUs == 0 || quotaLimit(c.conf, "gpu") != 0
}

// usableTemplate finds a template the account can boot in the call's zone
// and returns its size in bytes.
func (c *call) usableTemplate(id string) (int64, *reply) {
	if findPublicTemplate(id) != nil {
		return publicTemplateSize, nil
	}
	t := c.acct.Templates[id]
	if t == nil {
		r := refused("template", "Template %s not found", id)
		return 0, &r
	}
	if t.Zone != c.zone {
		r := refused("template", "Template %s is in zone %s, not %s", id, t.Zone, c.zone)
		return 0, &r
	}
	return t.Size, nil
}

// findInstance looks up the instance the path names, in the call's zone:
// instances are zone-local.
func (c *call) findInstance() (*instance, *reply) {
	return lookup(c, c.acct.Instances, "Instance", func(i *instance) bool { return i.Zone == c.zone })
}

func (e *Emulator) getInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	return ok(c.renderInstance(inst, true))
}

func (e *Emulator) listInstances(c *call) reply {
	q := c.r.URL.Query()
	want := map[string]string{}
	if s := q.Get("labels"); s != "" {
		for _, term := range strings.Fields(s) {
			k, v, found := strings.Cut(term, "=")
			if !found || k == "" {
				return badRequest("Invalid value in labels: %q is not key=value (the filter is key=value pairs separated by spaces)", term)
			}
			want[k] = v
		}
	}
	mt, mid := q.Get("manager-type"), q.Get("manager-id")
	if mt != "" && mt != "instance-pool" {
		return badRequest("Invalid value in manager-type - should be one of instance-pool")
	}
	ip := q.Get("ip-address")
	out := []any{}
	for _, inst := range sorted(c.acct.Instances) {
		if inst.Zone != c.zone {
			continue
		}
		// Instance pools are the only managers.
		if (mt != "" && inst.Manager == "") || (mid != "" && inst.Manager != mid) {
			continue
		}
		if ip != "" && !c.acct.hasAddress(inst, ip) {
			continue
		}
		match := true
		for k, v := range want {
			if got, has := inst.Labels[k]; !has || got != v {
				match = false
			}
		}
		if match {
			out = append(out, c.renderInstance(inst, false))
		}
	}
	return ok(map[string]any{"instances": out})
}

func (a *account) hasAddress(inst *instance, ip string) bool {
	if inst.PublicIPv4 == ip || inst.PublicIPv6 == ip {
		return true
	}
	for _, n := range inst.NICs {
		if pn := a.PrivateNetworks[n.Network]; pn != nil && pn.Leases[inst.ID] == ip {
			return true
		}
	}
	return false
}

type updateInstanceRequest struct {
	Name               *string           `json:"name"`
	UserData           *string           `json:"user-data"`
	PublicIPAssignment *string           `json:"public-ip-assignment"`
	Labels             map[string]string `json:"labels"`
	AppSnapshots       *bool             `json:"application-consistent-snapshot-enabled"`
}

func (e *Emulator) updateInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	var req updateInstanceRequest
	if r := c.decode(&req, instanceFields); r != nil {
		return *r
	}
	if req.Name != nil && !validName(*req.Name) {
		return invalidField("name")
	}
	if req.UserData != nil && !validUserData(*req.UserData) {
		return invalidField("user-data")
	}
	if req.PublicIPAssignment != nil && !slices.Contains([]string{"inet4", "dual", "none"}, *req.PublicIPAssignment) {
		return invalidField("public-ip-assignment")
	}
	if !validLabels(req.Labels) {
		return invalidField("labels")
	}
	if inst.State == "destroying" {
		return busy("Instance", inst.ID, inst.State)
	}
	if req.Name != nil {
		inst.Name = *req.Name
	}
	if req.UserData != nil {
		inst.UserData = *req.UserData
	}
	if req.PublicIPAssignment != nil && *req.PublicIPAssignment != inst.PublicIPAssignment {
		inst.PublicIPAssignment = *req.PublicIPAssignment
		e.world.allocatePublic(inst)
	}
	// "labels": null (or absent) leaves them; an object replaces them all.
	if raw, set := c.fields()["labels"]; set && string(raw) != "null" {
		inst.Labels = cloneLabels(req.Labels)
	}
	if req.AppSnapshots != nil {
		inst.AppSnapshots = *req.AppSnapshots
	}
	return c.opReply(c.operation("update-instance", "instance", inst.ID, c.now))
}

func (e *Emulator) resetInstanceField(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	if f := c.params["field"]; f != "labels" {
		return badRequest("Invalid value in field (%s) - should be one of labels", f)
	}
	inst.Labels = map[string]string{}
	return c.opReply(c.operation("reset-instance-field", "instance", inst.ID, c.now))
}

func (e *Emulator) startInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	if len(c.body) > 0 {
		var req struct {
			RescueProfile *string `json:"rescue-profile"`
		}
		if r := c.decode(&req, nil); r != nil {
			return *r
		}
		if req.RescueProfile != nil && *req.RescueProfile != "netboot" && *req.RescueProfile != "netboot-efi" {
			return badRequest("Invalid value in rescue-profile (description: `Boot in Rescue Mode, using named profile (supported: netboot, netboot-efi)`) - should be one of netboot-efi, netboot")
		}
	}
	switch inst.State {
	case "running":
		return c.opReply(c.operation("start-instance", "instance", inst.ID, c.now))
	case "stopped", "error":
		return c.opReply(c.transition(inst, "starting", "running", e.cfg.BootTime, "start-instance"))
	}
	return busy("Instance", inst.ID, inst.State)
}

func (e *Emulator) stopInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	switch inst.State {
	case "stopped":
		return c.opReply(c.operation("stop-instance", "instance", inst.ID, c.now))
	case "running", "error":
		return c.opReply(c.transition(inst, "stopping", "stopped", e.cfg.ActionTime, "stop-instance"))
	}
	return busy("Instance", inst.ID, inst.State)
}

func (e *Emulator) rebootInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	switch inst.State {
	case "running":
		return c.opReply(c.transition(inst, "starting", "running", e.cfg.ActionTime, "reboot-instance"))
	case "stopped":
		return badRequest("Instance %s is stopped: only a running instance can be rebooted", inst.ID)
	}
	return busy("Instance", inst.ID, inst.State)
}

func (e *Emulator) deleteInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	if inst.State == "destroying" && inst.Pending != nil && inst.Pending.To == "" {
		// Already going: another operation that ends with the first.
		op := &operation{meta: e.newMeta(), Zone: c.zone, Command: "delete-instance", Kind: "instance", Ref: inst.ID, State: "pending", DoneAt: inst.Pending.At}
		c.acct.Operations[op.ID] = op
		return c.opReply(op)
	}
	return c.opReply(c.transition(inst, "destroying", "", e.cfg.ActionTime, "delete-instance"))
}

// removeInstance is the end of an instance: its leases go, its groups
// forget it (membership is the instance's), its addresses are never reused.
func (e *Emulator) removeInstance(a *account, inst *instance) {
	for _, n := range inst.NICs {
		if pn := a.PrivateNetworks[n.Network]; pn != nil {
			delete(pn.Leases, inst.ID)
		}
	}
	delete(a.Instances, inst.ID)
}

type scaleRequest struct {
	InstanceType *idRef `json:"instance-type"`
}

// scalableTogether are the families an instance may move between by scaling;
// any other family only to its own sizes.
var scalableTogether = []string{"standard", "cpu", "memory"}

func (e *Emulator) scaleInstance(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	var req scaleRequest
	if r := c.decode(&req, instanceFields); r != nil {
		return *r
	}
	if req.InstanceType == nil || req.InstanceType.ID == "" {
		return invalidField("instance-type")
	}
	it, r := e.usableType(c, req.InstanceType.ID)
	if r != nil {
		return *r
	}
	cur := findInstanceType(inst.Type)
	if cur.Family != it.Family && !(slices.Contains(scalableTogether, cur.Family) && slices.Contains(scalableTogether, it.Family)) {
		return refused("instance-type", "an instance of family %s cannot be scaled to %s", cur.Family, it.Name())
	}
	if inst.State != "stopped" {
		return badRequest("Instance %s is %s: stop it before scaling", inst.ID, inst.State)
	}
	if it.GPUs > cur.GPUs {
		if r := c.checkQuota("gpu", c.acct.gpusInUse()-cur.GPUs+it.GPUs); r != nil {
			return *r
		}
	}
	inst.Type = it.ID
	return c.opReply(c.operation("scale-instance", "instance", inst.ID, c.now))
}

func (e *Emulator) resizeInstanceDisk(c *call) reply {
	inst, r := c.findInstance()
	if r != nil {
		return *r
	}
	var req struct {
		DiskSize *int64 `json:"disk-size"`
	}
	if r := c.decode(&req, instanceFields); r != nil {
		return *r
	}
	if req.DiskSize == nil || *req.DiskSize < 10 || *req.DiskSize > 51200 {
		return invalidField("disk-size")
	}
	if *req.DiskSize <= inst.DiskSize {
		return refused("disk-size", "a disk can only grow: it has %d GiB, %d GiB requested", inst.DiskSize, *req.DiskSize)
	}
	if inst.State != "stopped" {
		return badRequest("Instance %s is %s: stop it before resizing its disk", inst.ID, inst.State)
	}
	inst.DiskSize = *req.DiskSize
	return c.opReply(c.operation("resize-instance-disk", "instance", inst.ID, c.now))
}

// renderInstance answers an instance as GET /v2/instance/{id} does (full),
// or as an item of the list, which has fewer fields.
func (c *call) renderInstance(inst *instance, full bool) map[string]any {
	a := c.acct
	m := map[string]any{
		"id":                   inst.ID,
		"name":                 inst.Name,
		"state":                inst.State,
		"created-at":           inst.CreatedAt,
		"instance-type":        idRef{inst.Type},
		"template":             idRef{inst.Template},
		"public-ip-assignment": inst.PublicIPAssignment,
		"mac-address":          inst.MAC,
	}
	if len(inst.Labels) > 0 {
		m["labels"] = inst.Labels
	}
	if inst.Manager != "" {
		m["manager"] = map[string]string{"id": inst.Manager, "type": "instance-pool"}
	}
	if inst.PublicIPv4 != "" {
		m["public-ip"] = inst.PublicIPv4
	}
	if inst.PublicIPv6 != "" {
		m["ipv6-address"] = inst.PublicIPv6
	}
	if len(inst.SecurityGroups) > 0 {
		sgs := []idRef{}
		for _, id := range inst.SecurityGroups {
			sgs = append(sgs, idRef{id})
		}
		m["security-groups"] = sgs
	}
	if len(inst.NICs) > 0 {
		pns := []any{}
		for _, n := range inst.NICs {
			pns = append(pns, map[string]string{"id": n.Network, "mac-address": n.MAC})
		}
		m["private-networks"] = pns
	}
	renderKey := func(name string) map[string]string {
		k := map[string]string{"name": name}
		if key := a.SSHKeys[name]; key != nil {
			k["fingerprint"] = key.Fingerprint
		}
		return k
	}
	if len(inst.SSHKeys) > 0 {
		keys := []any{}
		for _, name := range inst.SSHKeys {
			keys = append(keys, renderKey(name))
		}
		m["ssh-keys"] = keys
	}
	if inst.SSHKey != "" {
		m["ssh-key"] = renderKey(inst.SSHKey)
	}
	if !full {
		return m
	}
	m["disk-size"] = inst.DiskSize
	m["secureboot-enabled"] = inst.SecureBoot
	m["tpm-enabled"] = inst.TPM
	m["application-consistent-snapshot-enabled"] = inst.AppSnapshots
	if len(inst.AntiAffinityGroups) > 0 {
		groups := []idRef{}
		for _, id := range inst.AntiAffinityGroups {
			groups = append(groups, idRef{id})
		}
		m["anti-affinity-groups"] = groups
	}
	if inst.UserData != "" {
		m["user-data"] = inst.UserData
	}
	if inst.DeployTarget != "" {
		m["deploy-target"] = idRef{inst.DeployTarget}
	}
	return m
}

// groupMembers lists the instances in an anti-affinity group, in creation
// order.
func (a *account) groupMembers(groupID string) []*instance {
	out := []*instance{}
	for _, inst := range sorted(a.Instances) {
		if slices.Contains(inst.AntiAffinityGroups, groupID) {
			out = append(out, inst)
		}
	}
	return out
}

func (a *account) gpusInUse() int64 {
	var n int64
	for _, inst := range a.Instances {
		if it := findInstanceType(inst.Type); it != nil {
			n += it.GPUs
		}
	}
	return n
}
