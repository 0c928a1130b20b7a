package exoscale

import (
	"net/netip"
	"slices"
)

// Private networks are zone-local. A managed one (start-ip, end-ip and
// netmask set) leases each attached instance an address of its range, the
// lowest free one or the one asked for; an unmanaged one leases nothing.

var privateNetworkFields = map[string]fieldDoc{
	"name":        {"Private Network name", "a String of 1 to 255 characters"},
	"description": {"Private Network description", "a String of at most 255 characters"},
	"netmask":     {"Private Network netmask", "an IPv4 netmask, given with start-ip and end-ip"},
	"start-ip":    {"Private Network start IP address", "an IPv4 address, in the netmask's network with end-ip, at most end-ip"},
	"end-ip":      {"Private Network end IP address", "an IPv4 address, in the netmask's network with start-ip, at least start-ip"},
	"labels":      {"Resource labels", "an Object of String values, keys of 1 to 255 characters"},
	"options":     {"DHCP options", "an Object of routers, dns-servers, ntp-servers (IPv4 addresses) and domain-search (Strings)"},
	"instance":    {"Compute instance", "an Object with the id of an instance"},
	"ip":          {"Static IP address lease for the corresponding network interface", "an IPv4 address in the network's range"},
}

type privateNetworkRequest struct {
	Name        *string           `json:"name"`
	Description *string           `json:"description"`
	Netmask     *string           `json:"netmask"`
	StartIP     *string           `json:"start-ip"`
	EndIP       *string           `json:"end-ip"`
	Labels      map[string]string `json:"labels"`
	Options     *pnOptions        `json:"options"`
}

func (c *call) decodePrivateNetwork(create bool) (privateNetworkRequest, *reply) {
	var req privateNetworkRequest
	bad := func(f string) (privateNetworkRequest, *reply) {
		r := privateNetworkFields[f].invalid(f)
		return req, &r
	}
	if r := c.decode(&req, privateNetworkFields); r != nil {
		return req, r
	}
	if (create && req.Name == nil) || !optionalString(req.Name, 1, 255) {
		return bad("name")
	}
	if !optionalString(req.Description, 0, 255) {
		return bad("description")
	}
	if !validLabels(req.Labels) {
		return bad("labels")
	}
	for f, p := range map[string]*string{"netmask": req.Netmask, "start-ip": req.StartIP, "end-ip": req.EndIP} {
		if p != nil {
			if a, err := netip.ParseAddr(*p); err != nil || !a.Is4() {
				return bad(f)
			}
		}
	}
	if o := req.Options; o != nil {
		for _, list := range [][]string{o.Routers, o.DNSServers, o.NTPServers} {
			for _, s := range list {
				if a, err := netip.ParseAddr(s); err != nil || !a.Is4() {
					return bad("options")
				}
			}
		}
	}
	return req, nil
}

// ipRange checks a managed network's range: start and end in the netmask's
// network, start at most end.
func ipRange(start, end, mask string) (netip.Addr, netip.Addr, string) {
	s, _ := netip.ParseAddr(start)
	e, _ := netip.ParseAddr(end)
	m, _ := netip.ParseAddr(mask)
	bits := 0
	mb := m.As4()
	v := uint32(mb[0])<<24 | uint32(mb[1])<<16 | uint32(mb[2])<<8 | uint32(mb[3])
	for v&(1<<31) != 0 {
		bits++
		v <<= 1
	}
	if v != 0 || bits == 0 {
		return s, e, "netmask"
	}
	ps, _ := s.Prefix(bits)
	pe, _ := e.Prefix(bits)
	if ps != pe {
		return s, e, "end-ip"
	}
	if e.Less(s) {
		return s, e, "start-ip"
	}
	return s, e, ""
}

func (e *Emulator) createPrivateNetwork(c *call) reply {
	req, r := c.decodePrivateNetwork(true)
	if r != nil {
		return *r
	}
	pn := &privateNetwork{meta: e.newMeta(), Zone: c.zone, Name: *req.Name, Labels: cloneLabels(req.Labels), Options: req.Options, Leases: map[string]string{}}
	if req.Description != nil {
		pn.Description = *req.Description
	}
	if rep := pn.setRange(req.StartIP, req.EndIP, req.Netmask); rep != nil {
		return *rep
	}
	if r := c.checkQuota("private-network", int64(len(c.acct.PrivateNetworks))+1); r != nil {
		return *r
	}
	c.acct.PrivateNetworks[pn.ID] = pn
	return c.opReply(c.operation("create-private-network", "private-network", pn.ID, c.now))
}

// setRange makes the network managed with the given range, all three set,
// or keeps it as it is when none is; its leases must fit the new range.
func (pn *privateNetwork) setRange(start, end, mask *string) *reply {
	n := 0
	for _, p := range []*string{start, end, mask} {
		if p != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if n != 3 {
		r := refused("netmask", "a managed network needs start-ip, end-ip and netmask together")
		return &r
	}
	s, e, bad := ipRange(*start, *end, *mask)
	if bad != "" {
		r := privateNetworkFields[bad].invalid(bad)
		return &r
	}
	for inst, ip := range pn.Leases {
		a, _ := netip.ParseAddr(ip)
		if a.Less(s) || e.Less(a) {
			r := refused("start-ip", "instance %s leases %s, outside the new range", inst, ip)
			return &r
		}
	}
	pn.StartIP, pn.EndIP, pn.Netmask = s.String(), e.String(), *mask
	return nil
}

func (pn *privateNetwork) managed() bool { return pn.StartIP != "" }

func (c *call) findPrivateNetwork() (*privateNetwork, *reply) {
	return lookup(c, c.acct.PrivateNetworks, "Private Network", func(pn *privateNetwork) bool { return pn.Zone == c.zone })
}

func (e *Emulator) getPrivateNetwork(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	return ok(renderPrivateNetwork(pn))
}

func (e *Emulator) listPrivateNetworks(c *call) reply {
	out := []any{}
	for _, pn := range sorted(c.acct.PrivateNetworks) {
		if pn.Zone == c.zone {
			out = append(out, renderPrivateNetwork(pn))
		}
	}
	return ok(map[string]any{"private-networks": out})
}

func (e *Emulator) updatePrivateNetwork(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	req, r := c.decodePrivateNetwork(false)
	if r != nil {
		return *r
	}
	next := *pn
	if rep := next.setRange(req.StartIP, req.EndIP, req.Netmask); rep != nil {
		return *rep
	}
	*pn = next
	if req.Name != nil {
		pn.Name = *req.Name
	}
	if req.Description != nil {
		pn.Description = *req.Description
	}
	if raw, set := c.fields()["labels"]; set && string(raw) != "null" {
		pn.Labels = cloneLabels(req.Labels)
	}
	if req.Options != nil {
		pn.Options = req.Options
	}
	return c.opReply(c.operation("update-private-network", "private-network", pn.ID, c.now))
}

func (e *Emulator) deletePrivateNetwork(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	for _, inst := range sorted(c.acct.Instances) {
		if inst.attachedTo(pn.ID) {
			return conflict("Private Network %s is in use by instance %s: detach it first", pn.ID, inst.ID)
		}
	}
	delete(c.acct.PrivateNetworks, pn.ID)
	return c.opReply(c.operation("delete-private-network", "private-network", pn.ID, c.now))
}

func (e *Emulator) resetPrivateNetworkField(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	if f := c.params["field"]; f != "labels" {
		return badRequest("Invalid value in field (%s) - should be one of labels", f)
	}
	pn.Labels = map[string]string{}
	return c.opReply(c.operation("reset-private-network-field", "private-network", pn.ID, c.now))
}

func (inst *instance) attachedTo(network string) bool {
	return slices.ContainsFunc(inst.NICs, func(n nic) bool { return n.Network == network })
}

// leaseRequest is the body of attach and update-ip.
func (c *call) leaseRequest() (*instance, *netip.Addr, *reply) {
	var req struct {
		Instance *idRef  `json:"instance"`
		IP       *string `json:"ip"`
	}
	bad := func(f string) (*instance, *netip.Addr, *reply) {
		r := privateNetworkFields[f].invalid(f)
		return nil, nil, &r
	}
	if r := c.decode(&req, privateNetworkFields); r != nil {
		return nil, nil, r
	}
	if req.Instance == nil || req.Instance.ID == "" {
		return bad("instance")
	}
	var ip *netip.Addr
	if req.IP != nil {
		a, err := netip.ParseAddr(*req.IP)
		if err != nil || !a.Is4() {
			return bad("ip")
		}
		ip = &a
	}
	inst := c.acct.Instances[req.Instance.ID]
	if inst == nil || inst.Zone != c.zone {
		r := refused("instance", "Instance %s not found in zone %s", req.Instance.ID, c.zone)
		return nil, nil, &r
	}
	return inst, ip, nil
}

// lease finds the address for inst on pn: the one asked for if it is in the
// range and free, else the lowest free one.
func (pn *privateNetwork) lease(inst string, want *netip.Addr) (string, *reply) {
	start, _ := netip.ParseAddr(pn.StartIP)
	end, _ := netip.ParseAddr(pn.EndIP)
	taken := map[string]string{}
	for id, ip := range pn.Leases {
		if id != inst {
			taken[ip] = id
		}
	}
	if want != nil {
		if want.Less(start) || end.Less(*want) {
			r := refused("ip", "%s is outside the range %s-%s of Private Network %s", want, pn.StartIP, pn.EndIP, pn.ID)
			return "", &r
		}
		if other, used := taken[want.String()]; used {
			r := conflict("%s is leased to instance %s already", want, other)
			return "", &r
		}
		return want.String(), nil
	}
	for a := start; !end.Less(a); a = a.Next() {
		if _, used := taken[a.String()]; !used {
			return a.String(), nil
		}
	}
	r := conflict("Private Network %s has no free address left in %s-%s", pn.ID, pn.StartIP, pn.EndIP)
	return "", &r
}

func (e *Emulator) attachPrivateNetwork(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	inst, want, r := c.leaseRequest()
	if r != nil {
		return *r
	}
	if inst.State == "destroying" {
		return busy("Instance", inst.ID, inst.State)
	}
	if inst.attachedTo(pn.ID) {
		return conflict("Instance %s is attached to Private Network %s already", inst.ID, pn.ID)
	}
	if want != nil && !pn.managed() {
		return refused("ip", "Private Network %s is not managed: it leases no addresses", pn.ID)
	}
	if pn.managed() {
		ip, r := pn.lease(inst.ID, want)
		if r != nil {
			return *r
		}
		pn.Leases[inst.ID] = ip
	}
	inst.NICs = append(slices.Clone(inst.NICs), nic{Network: pn.ID, MAC: e.world.newMAC()})
	return c.opReply(c.operation("attach-instance-to-private-network", "private-network", pn.ID, c.now))
}

func (e *Emulator) detachPrivateNetwork(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	inst, r := c.instanceInBody()
	if r != nil {
		return *r
	}
	if !inst.attachedTo(pn.ID) {
		return refused("instance", "Instance %s is not attached to Private Network %s", inst.ID, pn.ID)
	}
	inst.NICs = slices.DeleteFunc(slices.Clone(inst.NICs), func(n nic) bool { return n.Network == pn.ID })
	delete(pn.Leases, inst.ID)
	return c.opReply(c.operation("detach-instance-from-private-network", "private-network", pn.ID, c.now))
}

func (e *Emulator) updatePrivateNetworkIP(c *call) reply {
	pn, r := c.findPrivateNetwork()
	if r != nil {
		return *r
	}
	inst, want, r := c.leaseRequest()
	if r != nil {
		return *r
	}
	if !pn.managed() {
		return refused("ip", "Private Network %s is not managed: it leases no addresses", pn.ID)
	}
	if !inst.attachedTo(pn.ID) {
		return refused("instance", "Instance %s is not attached to Private Network %s", inst.ID, pn.ID)
	}
	if want == nil {
		return privateNetworkFields["ip"].invalid("ip")
	}
	ip, r := pn.lease(inst.ID, want)
	if r != nil {
		return *r
	}
	pn.Leases[inst.ID] = ip
	return c.opReply(c.operation("update-private-network-instance-ip", "private-network", pn.ID, c.now))
}

func renderPrivateNetwork(pn *privateNetwork) map[string]any {
	m := map[string]any{"id": pn.ID, "name": pn.Name}
	if pn.Description != "" {
		m["description"] = pn.Description
	}
	if len(pn.Labels) > 0 {
		m["labels"] = pn.Labels
	}
	if pn.Options != nil {
		m["options"] = pn.Options
	}
	if pn.managed() {
		m["start-ip"], m["end-ip"], m["netmask"] = pn.StartIP, pn.EndIP, pn.Netmask
		leases := []any{}
		for _, id := range sortedKeys(pn.Leases) {
			leases = append(leases, map[string]string{"ip": pn.Leases[id], "instance-id": id})
		}
		if len(leases) > 0 {
			m["leases"] = leases
		}
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
