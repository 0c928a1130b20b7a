package cloudscale

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

type floatingIPRequest struct {
	IPVersion    int                `json:"ip_version"`
	Server       string             `json:"server"`
	LoadBalancer string             `json:"load_balancer"`
	Region       string             `json:"region"`
	Type         string             `json:"type"`
	PrefixLength int                `json:"prefix_length"`
	ReversePtr   string             `json:"reverse_ptr"`
	Tags         *map[string]string `json:"tags"`
}

// Floating IPs come from documentation ranges, like public addresses.
var (
	floatingV4Base = netip.MustParseAddr("203.0.113.0")
	floatingV6Base = netip.MustParseAddr("2001:db8:ffff::")
)

func (e *Emulator) createFloatingIP(c *call) reply {
	w := e.world
	var req floatingIPRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	if req.IPVersion != 4 && req.IPVersion != 6 {
		return invalid("ip_version", "Must be 4 or 6.")
	}
	if req.Type == "" {
		req.Type = "regional"
	}
	switch req.Type {
	case "regional":
		if req.Region == "" {
			req.Region = regionOfZone(defaultZone)
		}
		if !regionExists(req.Region) {
			return invalid("region", "Region %q does not exist; valid regions are rma and lpg.", req.Region)
		}
	case "global":
		req.Region = ""
	default:
		return invalid("type", "Must be \"regional\" or \"global\".")
	}
	if req.LoadBalancer != "" {
		return invalid("load_balancer", "Load balancers are not emulated.")
	}
	if req.Server != "" && w.Servers[req.Server] == nil {
		return invalid("server", "Server %q does not exist.", req.Server)
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	meta := e.newMeta(tagsOrEmpty(req.Tags))
	var network string
	if req.IPVersion == 4 {
		if req.PrefixLength != 0 && req.PrefixLength != 32 {
			return invalid("prefix_length", "IPv4 floating IPs are single addresses (/32).")
		}
		b := floatingV4Base.As4()
		binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])+uint32(meta.Seq%250)+1)
		network = netip.AddrFrom4(b).String() + "/32"
	} else {
		if req.PrefixLength == 0 {
			req.PrefixLength = 128
		}
		if req.PrefixLength != 128 && req.PrefixLength != 56 {
			return invalid("prefix_length", "IPv6 floating networks are /128 or /56.")
		}
		b := floatingV6Base.As16()
		binary.BigEndian.PutUint32(b[6:10], uint32(meta.Seq)<<8)
		network = fmt.Sprintf("%s/%d", netip.AddrFrom16(b), req.PrefixLength)
	}
	if w.floatingIPByNetwork(network) != nil {
		return detail(409, "No floating IP address is free; delete one first.")
	}
	ip := netip.MustParsePrefix(network).Addr().String()
	meta.UUID = ip
	f := &floatingIP{meta: meta, Network: network, IPVersion: req.IPVersion, Region: req.Region, Type: req.Type, Server: req.Server, ReversePtr: req.ReversePtr}
	w.FloatingIPs[ip] = f
	return created(e.renderFloatingIP(c, f))
}

func regionExists(slug string) bool {
	for _, r := range regions {
		if r.Slug == slug {
			return true
		}
	}
	return false
}

func (w *world) floatingIPByNetwork(network string) *floatingIP {
	for _, f := range w.FloatingIPs {
		if f.Network == network {
			return f
		}
	}
	return nil
}

func (e *Emulator) listFloatingIPs(c *call) reply {
	return list(c, e.world.FloatingIPs, func(*floatingIP) string { return "" }, e.renderFloatingIP)
}

func (e *Emulator) updateFloatingIP(c *call) reply {
	f, r := find(c, e.world.FloatingIPs)
	if r != nil {
		return *r
	}
	var req floatingIPRequest
	set, r := c.patch(&req, false)
	if r != nil {
		return *r
	}
	if set["server"] && req.Server != "" && e.world.Servers[req.Server] == nil {
		return invalid("server", "Server %q does not exist.", req.Server)
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if set["server"] {
		f.Server = req.Server
	}
	if set["reverse_ptr"] {
		f.ReversePtr = req.ReversePtr
	}
	f.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteFloatingIP(c *call) reply {
	ip := c.r.PathValue("ip")
	if e.world.FloatingIPs[ip] == nil {
		return notFound()
	}
	delete(e.world.FloatingIPs, ip)
	return noContent
}

func (e *Emulator) renderFloatingIP(c *call, f *floatingIP) map[string]any {
	m := map[string]any{
		"href": c.href("floating-ips", f.UUID), "network": f.Network, "ip_version": f.IPVersion,
		"next_hop": nil, "server": nil, "load_balancer": nil, "region": nil, "type": f.Type,
		"reverse_ptr": f.ReversePtr, "created_at": f.CreatedAt, "tags": f.Tags,
	}
	if f.Region != "" {
		m["region"] = map[string]string{"slug": f.Region}
	}
	if s := e.world.Servers[f.Server]; s != nil {
		m["server"] = map[string]string{"href": c.href("servers", s.UUID), "uuid": s.UUID, "name": s.Name}
		if pub := e.world.publicAddressesOf(s.UUID); len(pub) > 0 {
			m["next_hop"] = pub[0].Address
		}
	}
	return m
}
