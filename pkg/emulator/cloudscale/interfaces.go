package cloudscale

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

type ifaceRequest struct {
	Network   string            `json:"network"`
	Addresses *[]addressRequest `json:"addresses"`
}

type addressRequest struct {
	Subnet  string `json:"subnet"`
	Address string `json:"address"`
}

// Public addresses come from ranges reserved for documentation and
// benchmarking, so an emulated address can never be someone's real host.
var (
	publicV4Base = netip.MustParseAddr("198.18.0.0")
	publicV6Base = netip.MustParseAddr("2001:db8::")
)

// planInterfaces checks the requested interfaces of a server in zone and
// assigns private addresses, without changing the world. self is the server
// being changed, whose own addresses are free for it to keep.
func (w *world) planInterfaces(reqs []ifaceRequest, zone, self string, ipv6 bool) ([]iface, *reply) {
	taken := w.takenAddresses(self)
	out := []iface{}
	fail := func(format string, args ...any) ([]iface, *reply) {
		r := invalid("interfaces", format, args...)
		return nil, &r
	}
	for i, req := range reqs {
		if req.Network == "public" {
			pub := iface{Type: "public", Addresses: w.publicAddressesOf(self)}
			if len(pub.Addresses) == 0 {
				pub.Network = publicMarker(ipv6)
			}
			out = append(out, pub)
			continue
		}
		netID := req.Network
		if netID == "" && req.Addresses != nil && len(*req.Addresses) > 0 {
			if sn := w.Subnets[(*req.Addresses)[0].Subnet]; sn != nil {
				netID = sn.Network
			}
		}
		if netID == "" {
			return fail("Interface %d needs a network (\"public\" or a network UUID) or an address with a subnet.", i)
		}
		n := w.Networks[netID]
		if n == nil {
			return fail("Network %q of interface %d does not exist.", netID, i)
		}
		if n.Zone != zone {
			return fail("Network %q is in zone %s, the server in %s.", netID, n.Zone, zone)
		}
		addrReqs := []addressRequest{}
		switch {
		case req.Addresses != nil:
			addrReqs = *req.Addresses
		default:
			if subnets := w.networkSubnets(netID); len(subnets) > 0 {
				addrReqs = []addressRequest{{Subnet: subnets[0].UUID}}
			}
		}
		addrs := []address{}
		for _, ar := range addrReqs {
			sn := w.Subnets[ar.Subnet]
			if sn == nil {
				return fail("Subnet %q does not exist.", ar.Subnet)
			}
			if sn.Network != netID {
				return fail("Subnet %q does not belong to network %q.", ar.Subnet, netID)
			}
			a, err := allocate(sn, ar.Address, taken)
			if err != nil {
				return fail("%v", err)
			}
			taken[sn.UUID+"/"+a.Address] = true
			addrs = append(addrs, a)
		}
		out = append(out, iface{Type: "private", Network: netID, Addresses: addrs})
	}
	return out, nil
}

// publicMarker remembers, on a public interface that has no addresses yet,
// whether it wants IPv6 too.
func publicMarker(ipv6 bool) string {
	if ipv6 {
		return "public+ipv6"
	}
	return "public"
}

func (w *world) publicAddressesOf(serverID string) []address {
	if s := w.Servers[serverID]; s != nil {
		for _, i := range s.Interfaces {
			if i.Type == "public" {
				return i.Addresses
			}
		}
	}
	return nil
}

// commitPublicAddresses gives the public interfaces of s that lack them
// fresh addresses. Public addresses are never handed out twice.
func (w *world) commitPublicAddresses(s *server) {
	for i := range s.Interfaces {
		pi := &s.Interfaces[i]
		if pi.Type != "public" || len(pi.Addresses) > 0 {
			continue
		}
		n := w.NextPublic
		w.NextPublic++
		v4 := publicV4Base.As4()
		binary.BigEndian.PutUint32(v4[:], binary.BigEndian.Uint32(v4[:])+uint32(n/250)*256+uint32(n%250)+2)
		addr4 := netip.AddrFrom4(v4)
		gw := addr4.As4()
		gw[3] = 1
		pi.Addresses = []address{{Version: 4, Address: addr4.String(), PrefixLength: 24, Gateway: netip.AddrFrom4(gw).String()}}
		if pi.Network == "public+ipv6" {
			v6 := publicV6Base.As16()
			binary.BigEndian.PutUint32(v6[4:8], uint32(n)+1)
			v6[15] = 1
			pi.Addresses = append(pi.Addresses, address{Version: 6, Address: netip.AddrFrom16(v6).String(), PrefixLength: 64, Gateway: "fe80::1"})
		}
		pi.Network = ""
	}
}

// takenAddresses lists the private addresses in use, but those of except.
func (w *world) takenAddresses(except string) map[string]bool {
	taken := map[string]bool{}
	for _, s := range w.Servers {
		if s.UUID == except {
			continue
		}
		for _, i := range s.Interfaces {
			for _, a := range i.Addresses {
				if a.Subnet != "" {
					taken[a.Subnet+"/"+a.Address] = true
				}
			}
		}
	}
	return taken
}

// allocate picks the requested address of sn, or the first free one.
func allocate(sn *subnet, want string, taken map[string]bool) (address, error) {
	prefix := netip.MustParsePrefix(sn.CIDR)
	version := 4
	if prefix.Addr().Is6() {
		version = 6
	}
	mk := func(a netip.Addr) address {
		return address{Version: version, Address: a.String(), PrefixLength: prefix.Bits(), Gateway: sn.Gateway, Subnet: sn.UUID}
	}
	usable := func(a netip.Addr) bool {
		if !prefix.Contains(a) || a == prefix.Addr() || a.String() == sn.Gateway {
			return false
		}
		if version == 4 && a == lastAddr(prefix) {
			return false
		}
		return true
	}
	if want != "" {
		a, err := netip.ParseAddr(want)
		if err != nil || !usable(a) {
			return address{}, fmt.Errorf("address %q is not a usable address of subnet %s", want, sn.CIDR)
		}
		if taken[sn.UUID+"/"+a.String()] {
			return address{}, fmt.Errorf("address %s is already in use", a)
		}
		return mk(a), nil
	}
	for a := prefix.Addr().Next(); prefix.Contains(a); a = a.Next() {
		if usable(a) && !taken[sn.UUID+"/"+a.String()] {
			return mk(a), nil
		}
	}
	return address{}, fmt.Errorf("subnet %s has no free address left", sn.CIDR)
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])|host)
	return netip.AddrFrom4(b)
}

func (w *world) renderInterfaces(c *call, ifaces []iface, reversePtr string) []any {
	out := []any{}
	for _, i := range ifaces {
		addrs := []any{}
		for _, a := range i.Addresses {
			m := map[string]any{"version": a.Version, "address": a.Address, "prefix_length": a.PrefixLength, "gateway": nullable(a.Gateway), "reverse_ptr": ""}
			if i.Type == "public" {
				m["reverse_ptr"] = reversePtr
				m["subnet"] = map[string]string{"href": "", "cidr": publicCIDR(a), "uuid": ""}
			} else if sn := w.Subnets[a.Subnet]; sn != nil {
				m["subnet"] = map[string]string{"href": c.href("subnets", sn.UUID), "cidr": sn.CIDR, "uuid": sn.UUID}
			}
			addrs = append(addrs, m)
		}
		rendered := map[string]any{"type": i.Type, "addresses": addrs}
		if n := w.Networks[i.Network]; n != nil {
			rendered["network"] = map[string]string{"href": c.href("networks", n.UUID), "uuid": n.UUID, "name": n.Name}
		} else {
			rendered["network"] = map[string]string{"name": "public"}
		}
		out = append(out, rendered)
	}
	return out
}

func publicCIDR(a address) string {
	p, err := netip.ParseAddr(a.Address)
	if err != nil {
		return ""
	}
	pref, _ := p.Prefix(a.PrefixLength)
	return pref.String()
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
