package exoscale

import (
	"net/netip"
	"slices"
)

// Anti-affinity groups and security groups are global to an account, as on
// the real cloud; their members are instances of any zone, and membership is
// held by the instance.

var groupFields = map[string]fieldDoc{
	"name":        {"Group name", "a String of 1 to 255 characters"},
	"description": {"Group description", "a String of at most 255 characters"},
}

type groupRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

func (c *call) decodeGroup() (groupRequest, *reply) {
	var req groupRequest
	if r := c.decode(&req, groupFields); r != nil {
		return req, r
	}
	if req.Name == nil || !optionalString(req.Name, 1, 255) {
		r := groupFields["name"].invalid("name")
		return req, &r
	}
	if !optionalString(req.Description, 0, 255) {
		r := groupFields["description"].invalid("description")
		return req, &r
	}
	return req, nil
}

func (e *Emulator) createAntiAffinityGroup(c *call) reply {
	req, r := c.decodeGroup()
	if r != nil {
		return *r
	}
	for _, g := range c.acct.AntiAffinityGroups {
		if g.Name == *req.Name {
			return conflict("An Anti-affinity Group named %q already exists", g.Name)
		}
	}
	g := &antiAffinityGroup{meta: e.newMeta(), Name: *req.Name}
	if req.Description != nil {
		g.Description = *req.Description
	}
	c.acct.AntiAffinityGroups[g.ID] = g
	return c.opReply(c.operation("create-anti-affinity-group", "anti-affinity-group", g.ID, c.now))
}

func (c *call) findAntiAffinityGroup() (*antiAffinityGroup, *reply) {
	return lookup(c, c.acct.AntiAffinityGroups, "Anti-affinity Group", nil)
}

func (e *Emulator) getAntiAffinityGroup(c *call) reply {
	g, r := c.findAntiAffinityGroup()
	if r != nil {
		return *r
	}
	return ok(c.renderAntiAffinityGroup(g))
}

func (e *Emulator) listAntiAffinityGroups(c *call) reply {
	out := []any{}
	for _, g := range sorted(c.acct.AntiAffinityGroups) {
		out = append(out, c.renderAntiAffinityGroup(g))
	}
	return ok(map[string]any{"anti-affinity-groups": out})
}

func (e *Emulator) deleteAntiAffinityGroup(c *call) reply {
	g, r := c.findAntiAffinityGroup()
	if r != nil {
		return *r
	}
	if n := len(c.acct.groupMembers(g.ID)); n > 0 {
		return conflict("Anti-affinity Group %s still holds %d instances: delete them first", g.ID, n)
	}
	delete(c.acct.AntiAffinityGroups, g.ID)
	return c.opReply(c.operation("delete-anti-affinity-group", "anti-affinity-group", g.ID, c.now))
}

func (c *call) renderAntiAffinityGroup(g *antiAffinityGroup) map[string]any {
	m := map[string]any{"id": g.ID, "name": g.Name}
	if g.Description != "" {
		m["description"] = g.Description
	}
	if members := c.acct.groupMembers(g.ID); len(members) > 0 {
		ids := []idRef{}
		for _, inst := range members {
			ids = append(ids, idRef{inst.ID})
		}
		m["instances"] = ids
	}
	return m
}

// ensureDefaultSecurityGroup returns the account's "default" security group,
// creating it (empty, with an ID derived from the account) when missing:
// every Exoscale organization has one, and it takes the instances created
// without security groups.
func (e *Emulator) ensureDefaultSecurityGroup(a *account) *securityGroup {
	for _, g := range a.SecurityGroups {
		if g.Name == "default" {
			return g
		}
	}
	g := &securityGroup{meta: e.newMeta(), Name: "default", Description: "Default Security Group", Rules: []sgRule{}, ExternalSources: []string{}}
	g.ID = nameUUID("security-group", a.Name+"/default")
	a.SecurityGroups[g.ID] = g
	return g
}

func (e *Emulator) createSecurityGroup(c *call) reply {
	req, r := c.decodeGroup()
	if r != nil {
		return *r
	}
	for _, g := range c.acct.SecurityGroups {
		if g.Name == *req.Name {
			return conflict("A Security Group named %q already exists", g.Name)
		}
	}
	g := &securityGroup{meta: e.newMeta(), Name: *req.Name, Rules: []sgRule{}, ExternalSources: []string{}}
	if req.Description != nil {
		g.Description = *req.Description
	}
	c.acct.SecurityGroups[g.ID] = g
	return c.opReply(c.operation("create-security-group", "security-group", g.ID, c.now))
}

func (c *call) findSecurityGroup() (*securityGroup, *reply) {
	return lookup(c, c.acct.SecurityGroups, "Security Group", nil)
}

func (e *Emulator) getSecurityGroup(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	return ok(c.renderSecurityGroup(g))
}

func (e *Emulator) listSecurityGroups(c *call) reply {
	vis := c.r.URL.Query().Get("visibility")
	if vis != "" && vis != "private" && vis != "public" {
		return badRequest("Invalid value in visibility - should be one of private, public")
	}
	out := []any{}
	// Exoscale's public security groups (its services' addresses) are not
	// emulated: the public list is empty.
	if vis != "public" {
		for _, g := range sorted(c.acct.SecurityGroups) {
			out = append(out, c.renderSecurityGroup(g))
		}
	}
	return ok(map[string]any{"security-groups": out})
}

func (e *Emulator) deleteSecurityGroup(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	if g.Name == "default" {
		return badRequest("The default Security Group cannot be deleted")
	}
	for _, inst := range c.acct.Instances {
		if slices.Contains(inst.SecurityGroups, g.ID) {
			return conflict("Security Group %s is in use by instance %s: detach it first", g.ID, inst.ID)
		}
	}
	for _, other := range c.acct.SecurityGroups {
		for _, rule := range other.Rules {
			if other != g && rule.Group == g.ID {
				return conflict("Security Group %s is referenced by a rule of Security Group %s", g.ID, other.ID)
			}
		}
	}
	delete(c.acct.SecurityGroups, g.ID)
	return c.opReply(c.operation("delete-security-group", "security-group", g.ID, c.now))
}

var ruleFields = map[string]fieldDoc{
	"flow-direction": {"Network flow direction to match", "one of ingress, egress"},
	"protocol":       {"Network protocol", "one of tcp, esp, icmp, udp, gre, ah, ipip, icmpv6"},
	"description":    {"Security Group rule description", "a String of at most 255 characters"},
	"network":        {"CIDR-formatted network allowed", "a CIDR network, e.g. 0.0.0.0/0"},
	"security-group": {"Security Group allowed", "an Object with the id (or name) of a Security Group"},
	"start-port":     {"Start port of the range", "an Integer between 1 65535"},
	"end-port":       {"End port of the range", "an Integer between 1 65535, at least start-port"},
	"icmp":           {"ICMP details (default: -1 (ANY))", "an Object with type and code, Integers between -1 254"},
}

type ruleRequest struct {
	FlowDirection *string `json:"flow-direction"`
	Protocol      *string `json:"protocol"`
	Description   *string `json:"description"`
	Network       *string `json:"network"`
	SecurityGroup *struct {
		ID         string `json:"id"`
		Name       string `json:"name"`
		Visibility string `json:"visibility"`
	} `json:"security-group"`
	ICMP *struct {
		Code *int64 `json:"code"`
		Type *int64 `json:"type"`
	} `json:"icmp"`
	StartPort *int64 `json:"start-port"`
	EndPort   *int64 `json:"end-port"`
}

func (e *Emulator) addSecurityGroupRule(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	var req ruleRequest
	if r := c.decode(&req, ruleFields); r != nil {
		return *r
	}
	bad := func(f string) reply { return ruleFields[f].invalid(f) }
	if req.FlowDirection == nil || (*req.FlowDirection != "ingress" && *req.FlowDirection != "egress") {
		return bad("flow-direction")
	}
	protocols := []string{"tcp", "esp", "icmp", "udp", "gre", "ah", "ipip", "icmpv6"}
	if req.Protocol == nil || !slices.Contains(protocols, *req.Protocol) {
		return bad("protocol")
	}
	if !optionalString(req.Description, 0, 255) {
		return bad("description")
	}
	rule := sgRule{ID: newUUID(), FlowDirection: *req.FlowDirection, Protocol: *req.Protocol}
	if req.Description != nil {
		rule.Description = *req.Description
	}
	switch {
	case req.Network != nil && req.SecurityGroup != nil:
		return refused("network", "a rule allows either a network or a security-group, not both")
	case req.Network != nil:
		p, err := netip.ParsePrefix(*req.Network)
		if err != nil {
			return bad("network")
		}
		rule.Network = p.Masked().String()
	case req.SecurityGroup != nil:
		ref := req.SecurityGroup
		switch {
		case ref.Visibility == "public" && ref.Name != "":
			rule.Public = ref.Name
		case ref.ID != "" && c.acct.SecurityGroups[ref.ID] != nil:
			rule.Group = ref.ID
		case ref.ID == "" && ref.Name != "":
			for _, other := range c.acct.SecurityGroups {
				if other.Name == ref.Name {
					rule.Group = other.ID
				}
			}
			if rule.Group == "" {
				return refused("security-group", "Security Group %q not found", ref.Name)
			}
		default:
			return refused("security-group", "Security Group %s not found", ref.ID)
		}
	default:
		return refused("network", "a rule needs a network or a security-group to allow")
	}
	switch rule.Protocol {
	case "tcp", "udp":
		if req.StartPort == nil || *req.StartPort < 1 || *req.StartPort > 65535 {
			return bad("start-port")
		}
		rule.StartPort, rule.EndPort = *req.StartPort, *req.StartPort
		if req.EndPort != nil {
			if *req.EndPort < *req.StartPort || *req.EndPort > 65535 {
				return bad("end-port")
			}
			rule.EndPort = *req.EndPort
		}
	case "icmp", "icmpv6":
		typ, code := int64(-1), int64(-1) // -1 is any
		if req.ICMP != nil {
			if req.ICMP.Type != nil {
				typ = *req.ICMP.Type
			}
			if req.ICMP.Code != nil {
				code = *req.ICMP.Code
			}
		}
		if typ < -1 || typ > 254 || code < -1 || code > 254 {
			return bad("icmp")
		}
		rule.ICMPType, rule.ICMPCode = &typ, &code
	}
	for _, existing := range g.Rules {
		if sameRule(existing, rule) {
			return conflict("Security Group %s has this rule already (%s)", g.ID, existing.ID)
		}
	}
	g.Rules = append(g.Rules, rule)
	return c.opReply(c.operation("add-rule-to-security-group", "security-group", g.ID, c.now))
}

func sameRule(a, b sgRule) bool {
	a.ID, b.ID, a.Description, b.Description = "", "", "", ""
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	icmpSame := eq(a.ICMPType, b.ICMPType) && eq(a.ICMPCode, b.ICMPCode)
	a.ICMPType, a.ICMPCode, b.ICMPType, b.ICMPCode = nil, nil, nil, nil
	return a == b && icmpSame
}

func (e *Emulator) deleteSecurityGroupRule(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	id := c.params["rule-id"]
	i := slices.IndexFunc(g.Rules, func(r sgRule) bool { return r.ID == id })
	if i < 0 {
		return notFound("Security Group rule", id)
	}
	g.Rules = slices.Delete(slices.Clone(g.Rules), i, i+1)
	return c.opReply(c.operation("delete-rule-from-security-group", "security-group", g.ID, c.now))
}

// instanceInBody finds the instance a request body names
// ({"instance": {"id": ...}}) in the call's zone.
func (c *call) instanceInBody() (*instance, *reply) {
	var req struct {
		Instance *idRef `json:"instance"`
	}
	docs := map[string]fieldDoc{"instance": {"Compute instance", "an Object with the id of an instance"}}
	if r := c.decode(&req, docs); r != nil {
		return nil, r
	}
	if req.Instance == nil || req.Instance.ID == "" {
		r := docs["instance"].invalid("instance")
		return nil, &r
	}
	inst := c.acct.Instances[req.Instance.ID]
	if inst == nil || inst.Zone != c.zone {
		r := refused("instance", "Instance %s not found in zone %s", req.Instance.ID, c.zone)
		return nil, &r
	}
	return inst, nil
}

func (e *Emulator) attachSecurityGroup(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	inst, r := c.instanceInBody()
	if r != nil {
		return *r
	}
	if inst.State == "destroying" {
		return busy("Instance", inst.ID, inst.State)
	}
	if !slices.Contains(inst.SecurityGroups, g.ID) {
		inst.SecurityGroups = append(slices.Clone(inst.SecurityGroups), g.ID)
	}
	return c.opReply(c.operation("attach-instance-to-security-group", "security-group", g.ID, c.now))
}

func (e *Emulator) detachSecurityGroup(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	inst, r := c.instanceInBody()
	if r != nil {
		return *r
	}
	inst.SecurityGroups = remove(inst.SecurityGroups, g.ID)
	return c.opReply(c.operation("detach-instance-from-security-group", "security-group", g.ID, c.now))
}

func (c *call) sourceInBody() (string, *reply) {
	var req struct {
		CIDR *string `json:"cidr"`
	}
	docs := map[string]fieldDoc{"cidr": {"CIDR-formatted network", "a CIDR network, e.g. 192.0.2.0/24"}}
	if r := c.decode(&req, docs); r != nil {
		return "", r
	}
	if req.CIDR == nil {
		r := docs["cidr"].invalid("cidr")
		return "", &r
	}
	p, err := netip.ParsePrefix(*req.CIDR)
	if err != nil {
		r := docs["cidr"].invalid("cidr")
		return "", &r
	}
	return p.Masked().String(), nil
}

func (e *Emulator) addSecurityGroupSource(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	cidr, r := c.sourceInBody()
	if r != nil {
		return *r
	}
	if !slices.Contains(g.ExternalSources, cidr) {
		g.ExternalSources = append(slices.Clone(g.ExternalSources), cidr)
	}
	return c.opReply(c.operation("add-external-source-to-security-group", "security-group", g.ID, c.now))
}

func (e *Emulator) removeSecurityGroupSource(c *call) reply {
	g, r := c.findSecurityGroup()
	if r != nil {
		return *r
	}
	cidr, r := c.sourceInBody()
	if r != nil {
		return *r
	}
	if !slices.Contains(g.ExternalSources, cidr) {
		return refused("cidr", "%s is not an external source of Security Group %s", cidr, g.ID)
	}
	g.ExternalSources = remove(g.ExternalSources, cidr)
	return c.opReply(c.operation("remove-external-source-from-security-group", "security-group", g.ID, c.now))
}

func (c *call) renderSecurityGroup(g *securityGroup) map[string]any {
	m := map[string]any{"id": g.ID, "name": g.Name}
	if g.Description != "" {
		m["description"] = g.Description
	}
	if len(g.ExternalSources) > 0 {
		m["external-sources"] = g.ExternalSources
	}
	rules := []any{}
	for _, r := range g.Rules {
		rm := map[string]any{"id": r.ID, "flow-direction": r.FlowDirection, "protocol": r.Protocol}
		if r.Description != "" {
			rm["description"] = r.Description
		}
		if r.Network != "" {
			rm["network"] = r.Network
		}
		if r.Group != "" {
			ref := map[string]any{"id": r.Group}
			if other := c.acct.SecurityGroups[r.Group]; other != nil {
				ref["name"] = other.Name
			}
			rm["security-group"] = ref
		}
		if r.Public != "" {
			rm["security-group"] = map[string]any{"name": r.Public, "visibility": "public"}
		}
		if r.StartPort != 0 {
			rm["start-port"], rm["end-port"] = r.StartPort, r.EndPort
		}
		if r.ICMPType != nil {
			rm["icmp"] = map[string]any{"type": *r.ICMPType, "code": *r.ICMPCode}
		}
		rules = append(rules, rm)
	}
	if len(rules) > 0 {
		m["rules"] = rules
	}
	return m
}
