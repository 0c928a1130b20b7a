package cloudscale_test

import (
	"net/http"
	"net/netip"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func (v *env) createNetwork(req *cloudscale.NetworkCreateRequest) *cloudscale.Network {
	v.t.Helper()
	n, err := v.client.Networks.Create(v.ctx, req)
	if err != nil {
		v.t.Fatalf("creating network: %v", err)
	}
	return n
}

func publicAndPrivate(netID string, addrs ...cloudscale.AddressRequest) *[]cloudscale.InterfaceRequest {
	priv := cloudscale.InterfaceRequest{Network: netID}
	if len(addrs) > 0 {
		priv.Addresses = &addrs
	}
	return &[]cloudscale.InterfaceRequest{{Network: "public"}, priv}
}

// addrs splits the addresses of a server's interfaces by type and version.
func addrs(t *testing.T, s *cloudscale.Server) (pub4, pub6, priv []cloudscale.Address) {
	t.Helper()
	for _, i := range s.Interfaces {
		for _, a := range i.Addresses {
			switch {
			case i.Type == "public" && a.Version == 4:
				pub4 = append(pub4, a)
			case i.Type == "public" && a.Version == 6:
				pub6 = append(pub6, a)
			case i.Type == "private":
				priv = append(priv, a)
			default:
				t.Fatalf("interface type %q, address %+v", i.Type, a)
			}
		}
	}
	return
}

func TestPrivateNetworking(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	n := v.createNetwork(&cloudscale.NetworkCreateRequest{Name: "cluster"})
	if n.Zone.Slug != "rma1" || n.MTU != 9000 || len(n.Subnets) != 1 {
		t.Fatalf("network %+v, want rma1, MTU 9000 and one automatic subnet", n)
	}
	subnet := n.Subnets[0]
	cidr := netip.MustParsePrefix(subnet.CIDR)

	req := serverReq("a")
	req.Interfaces = publicAndPrivate(n.UUID)
	a := v.createServer(req)
	if len(a.Interfaces) != 2 || a.Interfaces[0].Type != "public" || a.Interfaces[1].Type != "private" {
		t.Fatalf("interfaces %+v, want public then private", a.Interfaces)
	}
	if got := a.Interfaces[1].Network; got.UUID != n.UUID || got.Name != "cluster" {
		t.Fatalf("private interface network %+v, want %s (cluster)", got, n.UUID)
	}
	pub4, pub6, priv := addrs(t, a)
	if len(pub4) != 1 || len(pub6) != 1 || len(priv) != 1 {
		t.Fatalf("addresses: %d public v4, %d public v6, %d private; want 1 each", len(pub4), len(pub6), len(priv))
	}
	if !netip.MustParseAddr(pub4[0].Address).Is4() || !netip.MustParseAddr(pub6[0].Address).Is6() {
		t.Fatalf("public addresses %s, %s", pub4[0].Address, pub6[0].Address)
	}
	privA := netip.MustParseAddr(priv[0].Address)
	if !cidr.Contains(privA) || privA == cidr.Addr() {
		t.Fatalf("private address %s is not a host address of %s", privA, cidr)
	}
	if priv[0].Subnet.UUID != subnet.UUID || priv[0].Subnet.CIDR != subnet.CIDR || priv[0].PrefixLength != cidr.Bits() {
		t.Fatalf("private address %+v, want subnet %s (%s)", priv[0], subnet.UUID, subnet.CIDR)
	}

	// Without IPv6, and a different private address.
	req = serverReq("b")
	req.Interfaces = publicAndPrivate(n.UUID)
	req.UseIPV6 = ptr(false)
	b := v.createServer(req)
	pub4b, pub6b, privB := addrs(t, b)
	if len(pub4b) != 1 || len(pub6b) != 0 || len(privB) != 1 {
		t.Fatalf("use_ipv6=false: %d public v4, %d public v6, %d private; want 1, 0, 1", len(pub4b), len(pub6b), len(privB))
	}
	if privB[0].Address == privA.String() {
		t.Fatalf("two servers got the same private address %s", privA)
	}
	if !cidr.Contains(netip.MustParseAddr(privB[0].Address)) {
		t.Fatalf("private address %s outside %s", privB[0].Address, cidr)
	}
	if pub4b[0].Address == pub4[0].Address {
		t.Fatalf("two servers got the same public address %s", pub4[0].Address)
	}

	// A requested address is honoured, and not handed out twice.
	fixed := cidr.Addr().Next().Next().Next().Next().Next() // .5
	req = serverReq("c")
	req.Interfaces = publicAndPrivate(n.UUID, cloudscale.AddressRequest{Subnet: subnet.UUID, Address: fixed.String()})
	c := v.createServer(req)
	if _, _, privC := addrs(t, c); len(privC) != 1 || privC[0].Address != fixed.String() {
		t.Fatalf("private addresses %+v, want the requested %s", privC, fixed)
	}
	req = serverReq("d")
	req.Interfaces = publicAndPrivate(n.UUID, cloudscale.AddressRequest{Subnet: subnet.UUID, Address: fixed.String()})
	_, err := v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "interfaces")
	req.Interfaces = publicAndPrivate(n.UUID, cloudscale.AddressRequest{Subnet: subnet.UUID, Address: "10.99.0.5"})
	_, err = v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "interfaces")
	if got := serverNames(v.listServers()); len(got) != 3 {
		t.Fatalf("servers %v, want a, b, c only", got)
	}

	// Once c is gone, its address is free again.
	if err := v.client.Servers.Delete(v.ctx, c.UUID); err != nil {
		t.Fatal(err)
	}
	req.Interfaces = publicAndPrivate(n.UUID, cloudscale.AddressRequest{Subnet: subnet.UUID, Address: fixed.String()})
	if _, _, privD := addrs(t, v.createServer(req)); privD[0].Address != fixed.String() {
		t.Fatalf("freed address not reused: got %s", privD[0].Address)
	}

	// A network with servers on it cannot be deleted.
	apiError(t, v.client.Networks.Delete(v.ctx, n.UUID), http.StatusBadRequest)
	if _, err := v.client.Networks.Get(v.ctx, n.UUID); err != nil {
		t.Fatalf("refused delete removed the network: %v", err)
	}
}

func TestPrivateNetworkChecks(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	lpg := v.createNetwork(&cloudscale.NetworkCreateRequest{Name: "far", ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "lpg1"}})
	req := serverReq("x")
	req.Interfaces = publicAndPrivate(lpg.UUID)
	_, err := v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "interfaces")

	req.Interfaces = publicAndPrivate(unknownUUID)
	_, err = v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "interfaces")

	if n := len(v.listServers()); n != 0 {
		t.Fatalf("%d servers after refused creates", n)
	}
}

func TestSubnetWithGateway(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	n := v.createNetwork(&cloudscale.NetworkCreateRequest{Name: "manual", MTU: 1500, AutoCreateIPV4Subnet: ptr(false)})
	if len(n.Subnets) != 0 || n.MTU != 1500 {
		t.Fatalf("network %+v, want MTU 1500 and no subnet", n)
	}
	sn, err := v.client.Subnets.Create(v.ctx, &cloudscale.SubnetCreateRequest{Network: n.UUID, CIDR: "10.20.0.0/24", GatewayAddress: "10.20.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if sn.CIDR != "10.20.0.0/24" || sn.GatewayAddress != "10.20.0.1" || sn.Network.UUID != n.UUID || len(sn.DNSServers) == 0 {
		t.Fatalf("subnet %+v", sn)
	}
	_, err = v.client.Subnets.Create(v.ctx, &cloudscale.SubnetCreateRequest{Network: n.UUID, CIDR: "10.20.0.128/25"})
	fieldError(t, err, "cidr")

	req := serverReq("only-private")
	req.Interfaces = &[]cloudscale.InterfaceRequest{{Network: n.UUID}}
	s := v.createServer(req)
	pub4, pub6, priv := addrs(t, s)
	if len(pub4)+len(pub6) != 0 || len(priv) != 1 {
		t.Fatalf("a private-only server got %d public and %d private addresses", len(pub4)+len(pub6), len(priv))
	}
	// The network address and the gateway are skipped.
	if priv[0].Address != "10.20.0.2" || priv[0].Gateway != "10.20.0.1" {
		t.Fatalf("private address %s via %s, want 10.20.0.2 via 10.20.0.1", priv[0].Address, priv[0].Gateway)
	}

	// A subnet with addresses in use cannot go; without, it can, and the
	// network with it.
	apiError(t, v.client.Subnets.Delete(v.ctx, sn.UUID), http.StatusBadRequest)
	if err := v.client.Servers.Delete(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	if err := v.client.Networks.Delete(v.ctx, n.UUID); err != nil {
		t.Fatalf("deleting the unused network: %v", err)
	}
	_, err = v.client.Subnets.Get(v.ctx, sn.UUID)
	apiError(t, err, http.StatusNotFound)
}

func TestNoPublicNetwork(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	req := serverReq("dark")
	req.UsePublicNetwork = ptr(false)
	s := v.createServer(req)
	if len(s.Interfaces) != 0 {
		t.Fatalf("use_public_network=false gave interfaces %+v", s.Interfaces)
	}
	def := v.createServer(serverReq("lit"))
	if len(def.Interfaces) != 1 || def.Interfaces[0].Type != "public" {
		t.Fatalf("default interfaces %+v, want one public", def.Interfaces)
	}
}

func TestFloatingIPFollowsServer(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	s := v.createServer(serverReq("ingress"))
	pub4, _, _ := addrs(t, s)
	fip, err := v.client.FloatingIPs.Create(v.ctx, &cloudscale.FloatingIPCreateRequest{IPVersion: 4, Server: s.UUID})
	if err != nil {
		t.Fatal(err)
	}
	if fip.Server == nil || fip.Server.UUID != s.UUID || fip.NextHop != pub4[0].Address {
		t.Fatalf("floating IP %+v, want assigned to %s with next hop %s", fip, s.UUID, pub4[0].Address)
	}
	got, err := v.client.FloatingIPs.Get(v.ctx, fip.IP())
	if err != nil || got.Network != fip.Network {
		t.Fatalf("get by IP %s: %+v, %v", fip.IP(), got, err)
	}
	if err := v.client.Servers.Delete(v.ctx, s.UUID); err != nil {
		t.Fatal(err)
	}
	got, err = v.client.FloatingIPs.Get(v.ctx, fip.IP())
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != nil || got.NextHop != "" {
		t.Fatalf("floating IP still assigned after its server was deleted: %+v", got)
	}
}
