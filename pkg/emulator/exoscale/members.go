package exoscale

import "slices"

// memberRequest is what a create of an instance and a create of an
// instance pool say alike: what the instances are made of. The API checks
// it the same way on both endpoints; only the words of its 400s differ
// (each endpoint documents its fields itself), hence invalid.
type memberRequest struct {
	InstanceType       *idRef            `json:"instance-type"`
	Template           *idRef            `json:"template"`
	DiskSize           *int64            `json:"disk-size"`
	UserData           *string           `json:"user-data"`
	SecurityGroups     []idRef           `json:"security-groups"`
	AntiAffinityGroups []idRef           `json:"anti-affinity-groups"`
	SSHKey             *nameRef          `json:"ssh-key"`
	SSHKeys            []nameRef         `json:"ssh-keys"`
	PublicIPAssignment *string           `json:"public-ip-assignment"`
	IPv6Enabled        *bool             `json:"ipv6-enabled"`
	Labels             map[string]string `json:"labels"`
	DeployTarget       *idRef            `json:"deploy-target"`
}

// members is a memberRequest checked against the account: every reference
// found, duplicates dropped, defaults filled in.
type members struct {
	Type               *instanceType
	Template           string
	DiskSize           int64
	UserData           string
	SecurityGroups     []string
	AntiAffinityGroups []string
	SSHKey             string
	SSHKeys            []string
	PublicIPAssignment string
	DeployTarget       string
	Labels             map[string]string
}

// checkMembers checks a request for count new instances, the account's
// quotas included, and writes nothing.
func (e *Emulator) checkMembers(c *call, req *memberRequest, count int64, invalid func(field string) reply) (members, *reply) {
	fail := func(r reply) (members, *reply) { return members{}, &r }
	if req.DiskSize == nil || *req.DiskSize < 10 || *req.DiskSize > 51200 {
		return fail(invalid("disk-size"))
	}
	if req.InstanceType == nil || req.InstanceType.ID == "" {
		return fail(invalid("instance-type"))
	}
	if req.Template == nil || req.Template.ID == "" {
		return fail(invalid("template"))
	}
	it, r := e.usableType(c, req.InstanceType.ID)
	if r != nil {
		return members{}, r
	}
	tplSize, r := c.usableTemplate(req.Template.ID)
	if r != nil {
		return members{}, r
	}
	if need := (tplSize + gib - 1) / gib; *req.DiskSize < need {
		return fail(refused("disk-size", "the template needs a disk of at least %d GiB, %d GiB requested", need, *req.DiskSize))
	}
	m := members{Type: it, Template: req.Template.ID, DiskSize: *req.DiskSize, PublicIPAssignment: "inet4",
		SecurityGroups: []string{}, AntiAffinityGroups: []string{}, SSHKeys: []string{}, Labels: cloneLabels(req.Labels)}
	if req.UserData != nil {
		if !validUserData(*req.UserData) {
			return fail(invalid("user-data"))
		}
		m.UserData = *req.UserData
	}
	if req.IPv6Enabled != nil && *req.IPv6Enabled {
		m.PublicIPAssignment = "dual"
	}
	if req.PublicIPAssignment != nil {
		if !slices.Contains([]string{"inet4", "dual", "none"}, *req.PublicIPAssignment) {
			return fail(invalid("public-ip-assignment"))
		}
		m.PublicIPAssignment = *req.PublicIPAssignment
	}
	if !validLabels(req.Labels) {
		return fail(invalid("labels"))
	}
	a := c.acct
	for _, ref := range req.SecurityGroups {
		if a.SecurityGroups[ref.ID] == nil {
			return fail(refused("security-groups", "Security Group %s not found", ref.ID))
		}
		if !slices.Contains(m.SecurityGroups, ref.ID) {
			m.SecurityGroups = append(m.SecurityGroups, ref.ID)
		}
	}
	for _, ref := range req.AntiAffinityGroups {
		if a.AntiAffinityGroups[ref.ID] == nil {
			return fail(refused("anti-affinity-groups", "Anti-affinity Group %s not found", ref.ID))
		}
		if n := int64(len(a.groupMembers(ref.ID))); n+count > MaxInstancesPerAntiAffinityGroup {
			if count == 1 {
				return fail(refused("anti-affinity-groups", "Anti-affinity Group %s already holds %d instances, the most a group can hold is %d",
					ref.ID, n, MaxInstancesPerAntiAffinityGroup))
			}
			return fail(refused("anti-affinity-groups", "Anti-affinity Group %s holds %d instances and the pool would add %d, the most a group can hold is %d",
				ref.ID, n, count, MaxInstancesPerAntiAffinityGroup))
		}
		if !slices.Contains(m.AntiAffinityGroups, ref.ID) {
			m.AntiAffinityGroups = append(m.AntiAffinityGroups, ref.ID)
		}
	}
	for _, ref := range req.SSHKeys {
		if a.SSHKeys[ref.Name] == nil {
			return fail(refused("ssh-keys", "SSH key %q not found", ref.Name))
		}
		if !slices.Contains(m.SSHKeys, ref.Name) {
			m.SSHKeys = append(m.SSHKeys, ref.Name)
		}
	}
	if req.SSHKey != nil {
		if a.SSHKeys[req.SSHKey.Name] == nil {
			return fail(refused("ssh-key", "SSH key %q not found", req.SSHKey.Name))
		}
		m.SSHKey = req.SSHKey.Name
	}
	if req.DeployTarget != nil {
		if c.deployTarget(req.DeployTarget.ID) == nil {
			return fail(refused("deploy-target", "Deploy Target %s not found in zone %s", req.DeployTarget.ID, c.zone))
		}
		m.DeployTarget = req.DeployTarget.ID
	}
	if r := c.checkQuota("instance", int64(len(a.Instances))+count); r != nil {
		return members{}, r
	}
	if it.GPUs > 0 {
		if r := c.checkQuota("gpu", a.gpusInUse()+it.GPUs*count); r != nil {
			return members{}, r
		}
	}
	return m, nil
}
