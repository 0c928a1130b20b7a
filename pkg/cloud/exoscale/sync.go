package exoscale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// SyncServer brings the instance's labels in line with spec, attaches the
// security groups and private networks the spec names and the instance is
// not in (a create whose attach failed, or a crash between the create and
// the attach, is repaired here), fills in the instance's private addresses,
// and reports the immutable fields in which the instance differs from the
// spec: instanceType, template, diskSize, zone, privateNetworks. In steady
// state, with the instance's record from a list in s.Detail, it makes no API
// call. The drift is returned even when syncing failed.
func (c *Client) SyncServer(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, s *cloud.Server) ([]string, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, err
	}
	if err := checkRef(m); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("exoscale: SyncServer needs a server")
	}
	d := detailOf(s)
	// The record of a create is synced as it is while the account's calls
	// are needed elsewhere (a burst of creates): it holds what the create
	// sent, all the drift and the attachments need, but not the public
	// address, which a later sync reads, or the shared view's next list
	// brings.
	fresh := false
	if d == nil || (d.stub && c.gate.Spare()) {
		// Not read yet (the record of a create): read it once, for its
		// addresses and state.
		got, err := c.GetServer(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		*s = *got
		d = detailOf(got)
		fresh = true
	}
	// Only an instance with the Machine's identity is synced (pkg/cloud,
	// owner.go): the record says so here, and a fresh read right before
	// the first write (owned).
	if err := cloud.CheckOwned(m, toServer(d, "", nil)); err != nil {
		return nil, err
	}
	owned := c.ownedOnce(m, d, fresh)
	drift, networks := c.drift(ctx, p, d)
	var errs []error
	if err := c.syncLabels(ctx, m, p, s, d, owned); err != nil {
		errs = append(errs, err)
	}
	if d.Zone == p.Zone {
		if err := c.attachSecurityGroups(ctx, m, p, d, owned); err != nil {
			errs = append(errs, err)
		}
		if zc, err := c.zoneClient(ctx, d.Zone); err != nil {
			errs = append(errs, err)
		} else if err := c.attachNetworks(ctx, zc, d, networks, m, owned); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.learnPrivateIPs(ctx, d); err != nil {
		errs = append(errs, err)
	}
	private := c.privateIPMap(s.ID)
	s.Addresses, s.AddressesUnknown = nodeAddresses(d, private), unknownAddresses(d, private)
	return drift, errors.Join(errs...)
}

// ownedOnce returns the check made right before a sync's first write: a
// fresh read of the instance, which must still carry the Machine's identity
// (the record of a list may be seconds old, and labels can change in
// between: another cluster's provider, a person, Terraform). A record this
// very sync read is fresh already. The answer holds for the sync's further
// writes.
func (c *Client) ownedOnce(m cloud.MachineRef, d *instance, fresh bool) func(context.Context) error {
	return func(ctx context.Context) error {
		if fresh {
			return nil
		}
		now, err := c.getInstance(cloud.ProvingOwnership(ctx), d.Zone, string(d.ID))
		if err != nil {
			return err
		}
		if err := cloud.CheckOwned(m, toServer(now, "", nil)); err != nil {
			return err
		}
		fresh = true
		return nil
	}
}

// drift lists the immutable fields in which the instance differs from the
// spec, and returns the spec's private networks as far as they resolve. A
// field whose reference cannot be resolved now (the template was deleted
// since, a list cannot be had) is not compared: an instance that runs is
// not failed for what its spec meant when it was made.
func (c *Client) drift(ctx context.Context, p *v1beta1.ExoscaleMachineProviderSpec, d *instance) ([]string, []resolvedNetwork) {
	var drift []string
	if t, err := c.instanceType(ctx, p.Zone, p.InstanceType); err == nil && d.InstanceType != nil && t.ID != d.InstanceType.ID {
		drift = append(drift, "instanceType")
	}
	var networks []resolvedNetwork
	if zc, err := c.zoneClient(ctx, p.Zone); err == nil {
		r := &resolved{zone: zc}
		if err := c.resolveTemplate(ctx, p, r); err == nil && d.Template != nil && r.template.ID != d.Template.ID {
			drift = append(drift, "template")
		}
		for _, n := range p.PrivateNetworks {
			found, err := lookupItem(ctx, c, c.networkList(p.Zone), c.listNetworks(zc), v1beta1.ResourceRef{ID: n.ID, Name: n.Name}, "privateNetworks", "private network", p.Zone,
				func(pn v3.PrivateNetwork) (v3.UUID, string) { return pn.ID, pn.Name })
			if err != nil {
				networks = nil
				break
			}
			cluster, mark := networkCluster(found)
			networks = append(networks, resolvedNetwork{ID: found.ID, IP: n.IP, Managed: len(found.StartIP) > 0,
				Ref: describe(n.ID, n.Name), Cluster: cluster, Mark: mark})
		}
	}
	disk, known := c.knownDisk(string(d.ID))
	if d.Full {
		disk, known = d.DiskSize, true
	}
	if !known {
		if full, err := c.getInstance(ctx, d.Zone, string(d.ID)); err == nil {
			disk, known = full.DiskSize, true
		}
	}
	if known && disk != p.DiskSize {
		drift = append(drift, "diskSize")
	}
	if d.Zone != p.Zone {
		drift = append(drift, "zone")
	} else if networks != nil || len(p.PrivateNetworks) == 0 {
		// Attached to a network the spec does not name, or with another
		// address than the spec fixes: only a new instance has the
		// networks the spec asks for. Missing ones are attached instead.
		ips := c.privateIPMap(string(d.ID))
		for _, have := range d.PrivateNetworks {
			i := slices.IndexFunc(networks, func(n resolvedNetwork) bool { return n.ID == have.ID })
			if i < 0 || networks[i].IP != "" && ips[string(have.ID)] != "" && ips[string(have.ID)] != networks[i].IP {
				drift = append(drift, "privateNetworks")
				break
			}
		}
	}
	return drift, networks
}

func (c *Client) syncLabels(ctx context.Context, m cloud.MachineRef, p *v1beta1.ExoscaleMachineProviderSpec, s *cloud.Server, d *instance, owned func(context.Context) error) error {
	want := instanceLabels(m, p)
	if maps.Equal(map[string]string(d.Labels), want) {
		return nil
	}
	if err := owned(ctx); err != nil {
		return err
	}
	zc, err := c.zoneClient(ctx, d.Zone)
	if err != nil {
		return err
	}
	err = c.zcall(ctx, zc, "instance.update", func(ctx context.Context) error {
		_, err := zc.UpdateInstance(ctx, d.ID, v3.UpdateInstanceRequest{Labels: want})
		return err
	})
	if err != nil {
		return err
	}
	d.Labels = maps.Clone(want)
	s.Tags = maps.Clone(want)
	return nil
}

// attachSecurityGroups puts the instance into the spec's security groups
// it is not in, unless one carries another cluster's identity than
// m's cluster (resources.go): then nothing is attached, and the field is
// named. Groups it is in besides are left: someone put it there.
func (c *Client) attachSecurityGroups(ctx context.Context, m cloud.MachineRef, p *v1beta1.ExoscaleMachineProviderSpec, d *instance, owned func(context.Context) error) error {
	for i, ref := range p.SecurityGroups {
		g, err := lookupItem(ctx, c, &c.securityGroups, c.listSecurityGroups, ref, "securityGroups", "security group", "",
			func(g v3.SecurityGroup) (v3.UUID, string) { return g.ID, g.Name })
		if err != nil {
			continue
		}
		id := g.ID
		if slices.ContainsFunc(d.SecurityGroups, func(g v3.SecurityGroup) bool { return g.ID == id }) {
			continue
		}
		if err := cloud.CheckResourceCluster(fmt.Sprintf("securityGroups[%d]", i), "security group", describe(ref.ID, ref.Name), markDescription, DescribedClusterID(g.Description), m); err != nil {
			return err
		}
		if err := owned(ctx); err != nil {
			return err
		}
		err = c.call(ctx, "securitygroup.attach", func(ctx context.Context) error {
			_, err := c.base.AttachInstanceToSecurityGroup(ctx, id, v3.AttachInstanceToSecurityGroupRequest{Instance: &v3.Instance{ID: d.ID}})
			return err
		}, alreadyDone)
		var invalid *cloud.InvalidConfigError
		if errors.As(err, &invalid) {
			return &cloud.IncompleteError{Err: &cloud.InvalidConfigError{Field: "securityGroups", Message: invalid.Message}}
		}
		if err != nil {
			return err
		}
		d.SecurityGroups = append(d.SecurityGroups, v3.SecurityGroup{ID: id})
	}
	return nil
}

// attachNetworks attaches the instance to the networks it is not on, with
// the spec's fixed address where there is one; none that carries another
// cluster's identity than m's cluster (resources.go).
func (c *Client) attachNetworks(ctx context.Context, zc *v3.Client, d *instance, networks []resolvedNetwork, m cloud.MachineRef, owned func(context.Context) error) error {
	for i, n := range networks {
		if slices.ContainsFunc(d.PrivateNetworks, func(have v3.InstancePrivateNetworks) bool { return have.ID == n.ID }) {
			continue
		}
		if err := cloud.CheckResourceCluster(fmt.Sprintf("privateNetworks[%d]", i), "private network", n.Ref, n.Mark, n.Cluster, m); err != nil {
			return err
		}
		if err := owned(ctx); err != nil {
			return err
		}
		req := v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: d.ID}}
		if n.IP != "" {
			req.IP = net.ParseIP(n.IP)
		}
		err := c.zcall(ctx, zc, "privatenetwork.attach", func(ctx context.Context) error {
			_, err := zc.AttachInstanceToPrivateNetwork(ctx, n.ID, req)
			return err
		}, alreadyDone)
		var invalid *cloud.InvalidConfigError
		if errors.As(err, &invalid) {
			// Name the spec's entry: networks are in its order.
			field := fmt.Sprintf("privateNetworks[%d]", i)
			if n.IP != "" {
				field += ".ip"
			}
			return &cloud.IncompleteError{Err: &cloud.InvalidConfigError{Field: field, Message: invalid.Message}}
		}
		if err != nil {
			return err
		}
		d.PrivateNetworks = append(d.PrivateNetworks, v3.InstancePrivateNetworks{ID: n.ID})
		if n.IP != "" {
			c.rememberPrivateIP(string(d.ID), string(n.ID), n.IP)
		}
	}
	return nil
}

// alreadyDone makes an attach that finds the instance attached already a
// success: an earlier attempt whose answer was lost did it. Only that: an
// address "leased to another instance already" is a refusal.
func alreadyDone(err error) error {
	var invalid *cloud.InvalidConfigError
	if !errors.As(err, &invalid) {
		return err
	}
	msg := strings.ToLower(invalid.Message)
	if strings.Contains(msg, "already") && strings.Contains(msg, "attached") {
		return nil
	}
	return err
}

// private addresses: the instance's record names its private networks but
// not its addresses on them; a managed network's leases do. They are read
// once per instance and network and remembered (an address changes only
// with update-ip, which the provider does not do).
type privateAddrs struct {
	mu sync.Mutex
	// m is instance ID -> network ID -> address ("" for a network that
	// leases none).
	m map[string]map[string]string
}

func (c *Client) rememberPrivateIP(instanceID, networkID, ip string) {
	c.addrs.mu.Lock()
	defer c.addrs.mu.Unlock()
	if c.addrs.m == nil {
		c.addrs.m = map[string]map[string]string{}
	}
	if c.addrs.m[instanceID] == nil {
		c.addrs.m[instanceID] = map[string]string{}
	}
	c.addrs.m[instanceID][networkID] = ip
}

func (c *Client) forgetPrivateIP(instanceID, networkID string) {
	c.addrs.mu.Lock()
	defer c.addrs.mu.Unlock()
	delete(c.addrs.m[instanceID], networkID)
}

func (c *Client) privateIPMap(instanceID string) map[string]string {
	c.addrs.mu.Lock()
	defer c.addrs.mu.Unlock()
	return maps.Clone(c.addrs.m[instanceID])
}

// learnPrivateIPs reads the leases of the instance's networks whose address
// it does not know yet.
func (c *Client) learnPrivateIPs(ctx context.Context, d *instance) error {
	return c.readPrivateIPs(ctx, d, c.privateIPMap(string(d.ID)))
}

// readPrivateIPs reads the leases of the instance's networks, but those
// whose address known holds, and remembers them.
func (c *Client) readPrivateIPs(ctx context.Context, d *instance, known map[string]string) error {
	for _, n := range d.PrivateNetworks {
		if _, ok := known[string(n.ID)]; ok {
			continue
		}
		zc, err := c.zoneClient(ctx, d.Zone)
		if err != nil {
			return err
		}
		var pn *v3.PrivateNetwork
		err = c.zcall(ctx, zc, "privatenetwork.get", func(ctx context.Context) (err error) {
			pn, err = zc.GetPrivateNetwork(ctx, n.ID)
			return err
		})
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		ip := ""
		for _, l := range pn.Leases {
			if l.InstanceID == d.ID {
				ip = ipString(l.IP)
			}
		}
		if ip == "" && len(pn.StartIP) > 0 {
			// A managed network that has not leased the address yet:
			// look again next time.
			c.forgetPrivateIP(string(d.ID), string(n.ID))
			continue
		}
		c.rememberPrivateIP(string(d.ID), string(n.ID), ip)
	}
	return nil
}

// readLeases gives a fresh record of an instance every address its private
// networks' leases say it has now (not what the client remembers): the
// Node veto's read before a delete (cloud.CheckVeto).
func (c *Client) readLeases(ctx context.Context, s *cloud.Server) error {
	d := detailOf(s)
	if d == nil {
		return fmt.Errorf("exoscale: instance %s has no record", s.ID)
	}
	if err := c.readPrivateIPs(ctx, d, nil); err != nil {
		return err
	}
	private := c.privateIPMap(s.ID)
	s.Addresses, s.AddressesUnknown = nodeAddresses(d, private), unknownAddresses(d, private)
	return nil
}

// ReadAddresses reads the instance again, and the leases of its private
// networks (cloud.Client).
func (c *Client) ReadAddresses(ctx context.Context, s *cloud.Server) error {
	got, err := c.GetServer(ctx, s.ID)
	if err != nil {
		return err
	}
	if err := c.readLeases(ctx, got); err != nil {
		return err
	}
	s.Addresses, s.AddressesUnknown = got.Addresses, got.AddressesUnknown
	return nil
}
