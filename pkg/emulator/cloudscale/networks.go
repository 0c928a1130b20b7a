package cloudscale

import (
	"encoding/json"
	"net/http"
	"net/netip"
)

type networkRequest struct {
	Name                 string             `json:"name"`
	Zone                 string             `json:"zone"`
	MTU                  int                `json:"mtu"`
	AutoCreateIPV4Subnet *bool              `json:"auto_create_ipv4_subnet"`
	Tags                 *map[string]string `json:"tags"`
}

const autoSubnetCIDR = "172.16.0.0/24"

func (e *Emulator) createNetwork(c *call) reply {
	var req networkRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	if req.Zone == "" {
		req.Zone = defaultZone
	}
	if !zoneExists(req.Zone) {
		return invalid("zone", "Zone %q does not exist.", req.Zone)
	}
	if req.MTU == 0 {
		req.MTU = 9000
	}
	if r := checkMTU(req.MTU); r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	n := &network{meta: e.newMeta(tagsOrEmpty(req.Tags)), Name: req.Name, Zone: req.Zone, MTU: req.MTU}
	e.world.Networks[n.UUID] = n
	if req.AutoCreateIPV4Subnet == nil || *req.AutoCreateIPV4Subnet {
		sn := &subnet{meta: e.newMeta(nil), Network: n.UUID, CIDR: autoSubnetCIDR, DNSServers: defaultDNSServers}
		e.world.Subnets[sn.UUID] = sn
	}
	return created(e.renderNetwork(c, n))
}

func checkMTU(mtu int) *reply {
	if mtu < 1280 || mtu > 9000 {
		r := invalid("mtu", "Ensure this value is between 1280 and 9000; got %d.", mtu)
		return &r
	}
	return nil
}

func (e *Emulator) listNetworks(c *call) reply {
	return list(c, e.world.Networks, func(n *network) string { return n.Name }, e.renderNetwork)
}

func (e *Emulator) updateNetwork(c *call) reply {
	n, r := find(c, e.world.Networks)
	if r != nil {
		return *r
	}
	var req networkRequest
	set, r := c.patch(&req, false)
	if r != nil {
		return *r
	}
	if set["mtu"] {
		if r := checkMTU(req.MTU); r != nil {
			return *r
		}
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if set["name"] {
		n.Name = req.Name
	}
	if set["mtu"] {
		n.MTU = req.MTU
	}
	n.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteNetwork(c *call) reply {
	w := e.world
	n, r := find(c, w.Networks)
	if r != nil {
		return *r
	}
	for _, s := range w.Servers {
		for _, i := range s.Interfaces {
			if i.Network == n.UUID {
				return detail(http.StatusBadRequest, "The network is attached to server "+s.UUID+"; detach it first.")
			}
		}
	}
	for _, sn := range w.networkSubnets(n.UUID) {
		delete(w.Subnets, sn.UUID)
	}
	delete(w.Networks, n.UUID)
	return noContent
}

func (w *world) networkSubnets(networkID string) []*subnet {
	out := []*subnet{}
	for _, sn := range sorted(w.Subnets) {
		if sn.Network == networkID {
			out = append(out, sn)
		}
	}
	return out
}

func (e *Emulator) renderNetwork(c *call, n *network) map[string]any {
	subnets := []any{}
	for _, sn := range e.world.networkSubnets(n.UUID) {
		subnets = append(subnets, map[string]string{"href": c.href("subnets", sn.UUID), "cidr": sn.CIDR, "uuid": sn.UUID})
	}
	return map[string]any{
		"href": c.href("networks", n.UUID), "uuid": n.UUID, "name": n.Name, "created_at": n.CreatedAt,
		"zone": map[string]string{"slug": n.Zone}, "mtu": n.MTU, "subnets": subnets, "tags": n.Tags,
	}
}

type subnetRequest struct {
	Network        string             `json:"network"`
	CIDR           string             `json:"cidr"`
	GatewayAddress string             `json:"gateway_address"`
	Tags           *map[string]string `json:"tags"`
}

func (e *Emulator) createSubnet(c *call) reply {
	w := e.world
	body, fields, r := c.fields()
	if r != nil {
		return *r
	}
	var req subnetRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return invalid("non_field_errors", "Invalid data: %v", err)
		}
	}
	if req.Network == "" {
		return invalid("network", "This field is required.")
	}
	if w.Networks[req.Network] == nil {
		return invalid("network", "Network %q does not exist.", req.Network)
	}
	prefix, err := netip.ParsePrefix(req.CIDR)
	if err != nil || prefix.Masked() != prefix {
		return invalid("cidr", "%q is not a network in CIDR notation (e.g. 192.168.1.0/24).", req.CIDR)
	}
	for _, other := range w.networkSubnets(req.Network) {
		if netip.MustParsePrefix(other.CIDR).Overlaps(prefix) {
			return invalid("cidr", "%s overlaps subnet %s of the same network.", req.CIDR, other.CIDR)
		}
	}
	if req.GatewayAddress != "" {
		if r := checkGateway(prefix, req.GatewayAddress); r != nil {
			return *r
		}
	}
	dns, r := dnsServers(fields, defaultDNSServers)
	if r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	sn := &subnet{meta: e.newMeta(tagsOrEmpty(req.Tags)), Network: req.Network, CIDR: prefix.String(), Gateway: req.GatewayAddress, DNSServers: dns}
	w.Subnets[sn.UUID] = sn
	return created(e.renderSubnet(c, sn))
}

func checkGateway(prefix netip.Prefix, gw string) *reply {
	a, err := netip.ParseAddr(gw)
	if err != nil || !prefix.Contains(a) {
		r := invalid("gateway_address", "%q is not an address in %s.", gw, prefix)
		return &r
	}
	return nil
}

// dnsServers reads dns_servers: absent keeps current, null means the
// cloud's defaults, a list is taken as given.
func dnsServers(fields map[string]json.RawMessage, current []string) ([]string, *reply) {
	raw, present := fields["dns_servers"]
	if !present {
		return current, nil
	}
	var list *[]string
	if err := json.Unmarshal(raw, &list); err != nil {
		r := invalid("dns_servers", "Expected a list of IP addresses or null.")
		return nil, &r
	}
	if list == nil {
		return defaultDNSServers, nil
	}
	for _, s := range *list {
		a, err := netip.ParseAddr(s)
		if err != nil || a.IsUnspecified() {
			r := invalid("dns_servers", "%q is not a valid DNS server address.", s)
			return nil, &r
		}
	}
	return append([]string{}, *list...), nil
}

func (e *Emulator) listSubnets(c *call) reply {
	return list(c, e.world.Subnets, func(*subnet) string { return "" }, e.renderSubnet)
}

func (e *Emulator) updateSubnet(c *call) reply {
	sn, r := find(c, e.world.Subnets)
	if r != nil {
		return *r
	}
	body, fields, r := c.fields()
	if r != nil {
		return *r
	}
	var req subnetRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return invalid("non_field_errors", "Invalid data: %v", err)
		}
	}
	_, gwSet := fields["gateway_address"]
	if gwSet && req.GatewayAddress != "" {
		if r := checkGateway(netip.MustParsePrefix(sn.CIDR), req.GatewayAddress); r != nil {
			return *r
		}
	}
	dns, r := dnsServers(fields, sn.DNSServers)
	if r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if gwSet {
		sn.Gateway = req.GatewayAddress
	}
	sn.DNSServers = dns
	sn.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteSubnet(c *call) reply {
	w := e.world
	sn, r := find(c, w.Subnets)
	if r != nil {
		return *r
	}
	for key := range w.takenAddresses("") {
		if len(key) > len(sn.UUID) && key[:len(sn.UUID)] == sn.UUID {
			return detail(http.StatusBadRequest, "Addresses of this subnet are in use by servers.")
		}
	}
	delete(w.Subnets, sn.UUID)
	return noContent
}

func (e *Emulator) renderSubnet(c *call, sn *subnet) map[string]any {
	n := e.world.Networks[sn.Network]
	return map[string]any{
		"href": c.href("subnets", sn.UUID), "uuid": sn.UUID, "cidr": sn.CIDR,
		"network":         map[string]string{"href": c.href("networks", n.UUID), "uuid": n.UUID, "name": n.Name},
		"gateway_address": nullable(sn.Gateway), "dns_servers": sn.DNSServers, "tags": sn.Tags,
	}
}
