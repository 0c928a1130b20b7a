package exoscale_test

import (
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestManagedPrivateNetwork(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{ActionTime: time.Second})
	c := v.client
	op := v.op(c.CreatePrivateNetwork(v.ctx, v3.CreatePrivateNetworkRequest{
		Name:    "cluster",
		StartIP: net.ParseIP("172.16.0.10"),
		EndIP:   net.ParseIP("172.16.0.12"),
		Netmask: net.ParseIP("255.255.255.0"),
		Labels:  v3.Labels{"cluster": "c1"},
		Options: &v3.PrivateNetworkOptions{DNSServers: []net.IP{net.ParseIP("172.16.0.1")}, DomainSearch: []string{"c1.internal"}},
	}))
	pnID := op.Reference.ID
	var ids []v3.UUID
	for _, name := range []string{"a", "b", "c", "d"} {
		_, id := v.create(c, instanceReq(name))
		ids = append(ids, id)
	}

	// Leases: the lowest free address, or the one asked for.
	v.op(c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[0]}}))
	v.op(c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[1]}, IP: net.ParseIP("172.16.0.12")}))
	_, err := c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[2]}, IP: net.ParseIP("172.16.0.12")})
	wantContains(t, apiError(t, err, v3.ErrConflict), "leased to instance")
	_, err = c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[2]}, IP: net.ParseIP("172.16.1.1")})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "outside the range")
	_, err = c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[0]}})
	wantContains(t, apiError(t, err, v3.ErrConflict), "attached to Private Network")
	v.op(c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[2]}}))
	_, err = c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: ids[3]}})
	wantContains(t, apiError(t, err, v3.ErrConflict), "no free address")

	pn, err := c.GetPrivateNetwork(v.ctx, pnID)
	if err != nil {
		t.Fatal(err)
	}
	leases := map[v3.UUID]string{}
	for _, l := range pn.Leases {
		leases[l.InstanceID] = l.IP.String()
	}
	if leases[ids[0]] != "172.16.0.10" || leases[ids[1]] != "172.16.0.12" || leases[ids[2]] != "172.16.0.11" {
		t.Fatalf("leases %v", leases)
	}
	if pn.Options == nil || len(pn.Options.DNSServers) != 1 || pn.Labels["cluster"] != "c1" {
		t.Fatalf("network %+v", pn)
	}
	inst := v.getInstance(c, ids[0])
	if len(inst.PrivateNetworks) != 1 || inst.PrivateNetworks[0].ID != pnID || inst.PrivateNetworks[0].MACAddress == "" {
		t.Fatalf("instance private networks %+v", inst.PrivateNetworks)
	}
	if info, _ := v.emu.Instance(string(ids[0])); !slices.Equal(info.PrivateIPs, []string{"172.16.0.10"}) {
		t.Fatalf("introspected private IPs %v", info.PrivateIPs)
	}

	// Detach b; a takes b's address; then a goes, and its lease with it.
	v.op(c.DetachInstanceFromPrivateNetwork(v.ctx, pnID, v3.DetachInstanceFromPrivateNetworkRequest{Instance: &v3.Instance{ID: ids[1]}}))
	_, err = c.DetachInstanceFromPrivateNetwork(v.ctx, pnID, v3.DetachInstanceFromPrivateNetworkRequest{Instance: &v3.Instance{ID: ids[1]}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "not attached")
	v.op(c.UpdatePrivateNetworkInstanceIP(v.ctx, pnID, v3.UpdatePrivateNetworkInstanceIPRequest{Instance: &v3.UpdatePrivateNetworkInstanceIPRequestInstance{ID: ids[0]}, IP: net.ParseIP("172.16.0.12")}))
	if info, _ := v.emu.Instance(string(ids[0])); !slices.Equal(info.PrivateIPs, []string{"172.16.0.12"}) {
		t.Fatalf("private IPs after update-ip %v", info.PrivateIPs)
	}
	_, err = c.UpdatePrivateNetworkInstanceIP(v.ctx, pnID, v3.UpdatePrivateNetworkInstanceIPRequest{Instance: &v3.UpdatePrivateNetworkInstanceIPRequestInstance{ID: ids[0]}, IP: net.ParseIP("172.16.0.11")})
	wantContains(t, apiError(t, err, v3.ErrConflict), "leased to instance")
	_, err = c.UpdatePrivateNetworkInstanceIP(v.ctx, pnID, v3.UpdatePrivateNetworkInstanceIPRequest{Instance: &v3.UpdatePrivateNetworkInstanceIPRequestInstance{ID: ids[1]}, IP: net.ParseIP("172.16.0.10")})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "not attached")
	v.op(c.DeleteInstance(v.ctx, ids[0]))
	v.clock.Advance(time.Second)
	pn, _ = c.GetPrivateNetwork(v.ctx, pnID)
	if len(pn.Leases) != 1 || pn.Leases[0].InstanceID != ids[2] {
		t.Fatalf("leases after detach and delete: %+v", pn.Leases)
	}
	// c is still attached: the network cannot go.
	_, err = c.DeletePrivateNetwork(v.ctx, pnID)
	wantContains(t, apiError(t, err, v3.ErrConflict), "in use by instance")

	// Update: a range that drops c's lease is refused; labels as for
	// instances; reset.
	_, err = c.UpdatePrivateNetwork(v.ctx, pnID, v3.UpdatePrivateNetworkRequest{StartIP: net.ParseIP("172.16.0.20"), EndIP: net.ParseIP("172.16.0.30"), Netmask: net.ParseIP("255.255.255.0")})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "outside the new range")
	v.op(c.UpdatePrivateNetwork(v.ctx, pnID, v3.UpdatePrivateNetworkRequest{Name: "renamed", EndIP: net.ParseIP("172.16.0.50"), StartIP: net.ParseIP("172.16.0.10"), Netmask: net.ParseIP("255.255.255.0")}))
	pn, _ = c.GetPrivateNetwork(v.ctx, pnID)
	if pn.Name != "renamed" || pn.EndIP.String() != "172.16.0.50" || pn.Labels["cluster"] != "c1" {
		t.Fatalf("after update %+v", pn)
	}
	v.op(c.ResetPrivateNetworkField(v.ctx, pnID, v3.ResetPrivateNetworkFieldFieldLabels))
	if pn, _ := c.GetPrivateNetwork(v.ctx, pnID); len(pn.Labels) != 0 {
		t.Fatalf("labels after reset %v", pn.Labels)
	}
	v.op(c.DetachInstanceFromPrivateNetwork(v.ctx, pnID, v3.DetachInstanceFromPrivateNetworkRequest{Instance: &v3.Instance{ID: ids[2]}}))
	v.op(c.DeletePrivateNetwork(v.ctx, pnID))
	_, err = c.GetPrivateNetwork(v.ctx, pnID)
	apiError(t, err, v3.ErrNotFound)
}

func TestUnmanagedPrivateNetwork(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	pnID := v.op(c.CreatePrivateNetwork(v.ctx, v3.CreatePrivateNetworkRequest{Name: "plain", Description: "no DHCP"})).Reference.ID
	_, id := v.create(c, instanceReq("a"))
	_, err := c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: id}, IP: net.ParseIP("10.0.0.1")})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "not managed")
	v.op(c.AttachInstanceToPrivateNetwork(v.ctx, pnID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: id}}))
	pn, err := c.GetPrivateNetwork(v.ctx, pnID)
	if err != nil || len(pn.Leases) != 0 || pn.StartIP != nil || pn.Description != "no DHCP" {
		t.Fatalf("unmanaged network %+v, %v", pn, err)
	}
	_, err = c.UpdatePrivateNetworkInstanceIP(v.ctx, pnID, v3.UpdatePrivateNetworkInstanceIPRequest{Instance: &v3.UpdatePrivateNetworkInstanceIPRequestInstance{ID: id}, IP: net.ParseIP("10.0.0.1")})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "not managed")

	// Half a range, a range across networks, and a private network of
	// another zone.
	for _, req := range []v3.CreatePrivateNetworkRequest{
		{Name: "half", StartIP: net.ParseIP("10.0.0.1")},
		{Name: "across", StartIP: net.ParseIP("10.0.0.1"), EndIP: net.ParseIP("10.0.1.1"), Netmask: net.ParseIP("255.255.255.0")},
		{Name: "reversed", StartIP: net.ParseIP("10.0.0.9"), EndIP: net.ParseIP("10.0.0.1"), Netmask: net.ParseIP("255.255.255.0")},
		{Name: "badmask", StartIP: net.ParseIP("10.0.0.1"), EndIP: net.ParseIP("10.0.0.9"), Netmask: net.ParseIP("255.0.255.0")},
	} {
		_, err := c.CreatePrivateNetwork(v.ctx, req)
		wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in")
	}
	fra := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "de-fra-1")
	if l, err := fra.ListPrivateNetworks(v.ctx); err != nil || len(l.PrivateNetworks) != 0 {
		t.Fatalf("de-fra-1 lists %+v, %v", l, err)
	}
	_, err = fra.GetPrivateNetwork(v.ctx, pnID)
	apiError(t, err, v3.ErrNotFound)
	l, err := c.ListPrivateNetworks(v.ctx)
	if err != nil || len(l.PrivateNetworks) != 1 {
		t.Fatalf("ch-gva-2 lists %+v, %v", l, err)
	}
	resp, body := v.raw("DELETE", "/v2/private-network/"+string(pnID)+"/name", nil, true)
	wantStatus(t, resp, body, http.StatusBadRequest)

	// The quota.
	q := newEnv(t, emu.Config{Accounts: []emu.Account{{Name: "q", Key: "k", Secret: "s", Quotas: map[string]int64{"private-network": 0}}}})
	_, err = q.client.CreatePrivateNetwork(q.ctx, v3.CreatePrivateNetworkRequest{Name: "none"})
	wantContains(t, apiError(t, err, v3.ErrForbidden), "Quota exceeded for private-network")
}
