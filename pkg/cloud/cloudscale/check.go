package cloudscale

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// CheckSpec checks the flavor, a custom image (and that the root volume
// fits it), the private networks and the fixed addresses of the spec
// against the account's catalog, from lists cached for catalogTTL (a miss
// lists once more: the image may have been uploaded a moment ago).
// When a list cannot be had, that part is not checked: the create speaks
// for itself.
func (c *Client) CheckSpec(ctx context.Context, spec cloud.Spec) error {
	p, err := providerSpec(spec)
	if err != nil {
		return err
	}
	return c.checkSpec(ctx, p, cloud.MachineRef{})
}

// checkSpec is CheckSpec, and with a cluster (the create's) also checks
// whose the resources the spec names are (pkg/cloud, resources.go): a
// network, subnet, custom image or server group tagged as another
// cluster's is a *cloud.ForeignResourceError. That check does not skip a
// list it cannot have: nothing is joined whose owner is unknown.
func (c *Client) checkSpec(ctx context.Context, p *v1beta1.CloudscaleMachineProviderSpec, m cloud.MachineRef) error {
	if flavors, err := c.flavorList(ctx); err == nil && len(flavors) > 0 {
		if _, err := lookupFlavor(flavors, p.Zone, p.Flavor); err != nil {
			return err
		}
	}
	if err := c.checkImage(ctx, p, m); err != nil {
		return err
	}
	for i, in := range p.Interfaces {
		if in.Type != v1beta1.InterfaceTypePrivate {
			continue
		}
		if in.NetworkUUID != "" {
			if err := c.checkNetwork(ctx, p.Zone, in.NetworkUUID, fmt.Sprintf("interfaces[%d].networkUUID", i), m); err != nil {
				return err
			}
		}
		for j, a := range in.Addresses {
			if err := c.checkAddress(ctx, in.NetworkUUID, a, fmt.Sprintf("interfaces[%d].addresses[%d]", i, j), m); err != nil {
				return err
			}
		}
	}
	for i, id := range p.ServerGroups {
		if err := c.checkServerGroup(ctx, id, fmt.Sprintf("serverGroups[%d]", i), m); err != nil {
			return err
		}
	}
	return nil
}

// unchecked is what a lookup that failed (err) means: nothing for the
// catalog checks, whose part the create speaks for; an error when whose
// the resource is must be known (a cluster is given).
func unchecked(err error, m cloud.MachineRef, field string) error {
	if m.ClusterID == "" {
		return nil
	}
	return fmt.Errorf("%s: whose it is cannot be told now: %w", field, err)
}

// ownedBy checks the cluster tag of a resource the spec names at field
// against m's cluster IDs (none: not checked).
func ownedBy(tags sdk.TagMap, field, what, ref string, m cloud.MachineRef) error {
	if m.ClusterID == "" {
		return nil
	}
	return cloud.CheckResourceCluster(field, what, ref, "tag "+v1beta1.TagClusterID, tags[v1beta1.TagClusterID], m)
}

// checkServerGroup checks whose a server group of the spec's serverGroups
// is. One that does not exist is left to the create, which refuses it.
func (c *Client) checkServerGroup(ctx context.Context, id, field string, m cloud.MachineRef) error {
	if m.ClusterID == "" {
		return nil
	}
	g, ok, err := findCached(ctx, &c.groups, c, "servergroup.list", func(g sdk.ServerGroup) bool { return strings.EqualFold(g.UUID, id) }, func(ctx context.Context) ([]sdk.ServerGroup, error) {
		return c.sdk.ServerGroups.List(ctx)
	})
	switch {
	case err != nil:
		return unchecked(err, m, field)
	case !ok:
		return nil
	}
	return ownedBy(g.Tags, field, "server group", id, m)
}

// checkAddress checks a fixed address against its subnet: the subnet must
// exist and be of the interface's network, and the address one the subnet
// can give a server (inside its range; not its network, broadcast or
// gateway address).
func (c *Client) checkAddress(ctx context.Context, networkUUID string, a v1beta1.Address, field string, m cloud.MachineRef) error {
	if a.SubnetUUID == "" {
		return nil
	}
	sn, ok, err := findCached(ctx, &c.subnets, c, "subnet.list", func(sn sdk.Subnet) bool { return strings.EqualFold(sn.UUID, a.SubnetUUID) }, func(ctx context.Context) ([]sdk.Subnet, error) {
		return c.sdk.Subnets.List(ctx)
	})
	switch {
	case err != nil:
		return unchecked(err, m, field+".subnetUUID")
	case !ok:
		return &cloud.InvalidConfigError{Field: field + ".subnetUUID", Message: fmt.Sprintf("subnet %s does not exist in this cloudscale.ch account", a.SubnetUUID)}
	case networkUUID != "" && sn.Network.UUID != "" && !strings.EqualFold(sn.Network.UUID, networkUUID):
		return &cloud.InvalidConfigError{Field: field + ".subnetUUID", Message: fmt.Sprintf("subnet %s is of network %s, not of the interface's network %s", a.SubnetUUID, sn.Network.UUID, networkUUID)}
	}
	if err := ownedBy(sn.Tags, field+".subnetUUID", "subnet", a.SubnetUUID, m); err != nil {
		return err
	}
	if a.Address == "" {
		return nil
	}
	prefix, perr := netip.ParsePrefix(sn.CIDR)
	addr, aerr := netip.ParseAddr(a.Address)
	if perr != nil || aerr != nil {
		return nil
	}
	prefix = prefix.Masked()
	usable := prefix.Contains(addr) && addr != prefix.Addr() && addr.String() != sn.GatewayAddress
	if addr.Is4() && usable {
		usable = addr != lastAddr(prefix)
	}
	if !usable {
		return &cloud.InvalidConfigError{Field: field + ".address", Message: fmt.Sprintf("%s is not an address subnet %s (%s, gateway %s) can give a server", a.Address, a.SubnetUUID, sn.CIDR, orNone(sn.GatewayAddress))}
	}
	return nil
}

// lastAddr is the last address of a prefix (an IPv4 subnet's broadcast).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := 32 - p.Bits()
	for i := 3; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	return netip.AddrFrom4(b)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// checkImage checks a custom image (custom:<slug> or a UUID); public image
// slugs have no list in the SDK and are left to the create.
func (c *Client) checkImage(ctx context.Context, p *v1beta1.CloudscaleMachineProviderSpec, m cloud.MachineRef) error {
	slug, custom := strings.CutPrefix(p.Image, "custom:")
	byUUID := uuidPattern.MatchString(p.Image)
	if !custom && !byUUID {
		return nil
	}
	match := func(im sdk.CustomImage) bool {
		if byUUID {
			return strings.EqualFold(im.UUID, p.Image)
		}
		return im.Slug == slug
	}
	image, ok, err := findCached(ctx, &c.images, c, "customimage.list", match, func(ctx context.Context) ([]sdk.CustomImage, error) {
		return c.sdk.CustomImages.List(ctx)
	})
	if err != nil || !ok {
		if err == nil {
			return &cloud.InvalidConfigError{Field: "image", Message: fmt.Sprintf("custom image %q does not exist in this cloudscale.ch account", p.Image)}
		}
		return unchecked(err, m, "image")
	}
	if err := ownedBy(image.Tags, "image", "custom image", fmt.Sprintf("%q", p.Image), m); err != nil {
		return err
	}
	if len(image.Zones) > 0 && !slices.ContainsFunc(image.Zones, func(z sdk.ZoneStub) bool { return z.Slug == p.Zone }) {
		return &cloud.InvalidConfigError{Field: "image", Message: fmt.Sprintf("custom image %q is not available in zone %s", p.Image, p.Zone)}
	}
	if image.SizeGB > 0 && p.RootVolumeSizeGB < image.SizeGB {
		return &cloud.InvalidConfigError{Field: "rootVolumeSizeGB", Message: fmt.Sprintf("custom image %q needs a root volume of at least %d GB, the spec asks for %d", p.Image, image.SizeGB, p.RootVolumeSizeGB)}
	}
	return nil
}

func (c *Client) checkNetwork(ctx context.Context, zone, id, field string, m cloud.MachineRef) error {
	n, ok, err := findCached(ctx, &c.networks, c, "network.list", func(n sdk.Network) bool { return strings.EqualFold(n.UUID, id) }, func(ctx context.Context) ([]sdk.Network, error) {
		return c.sdk.Networks.List(ctx)
	})
	switch {
	case err != nil:
		return unchecked(err, m, field)
	case !ok:
		return &cloud.InvalidConfigError{Field: field, Message: fmt.Sprintf("network %s does not exist in this cloudscale.ch account", id)}
	case n.Zone.Slug != "" && n.Zone.Slug != zone:
		return &cloud.InvalidConfigError{Field: field, Message: fmt.Sprintf("network %s is in zone %s, not in %s", id, n.Zone.Slug, zone)}
	}
	return ownedBy(n.Tags, field, "network", id, m)
}

// findCached looks for an item in a cached catalog, listing again once when
// it is not there.
func findCached[T any](ctx context.Context, l *cloud.Catalog[T], c *Client, op string, match func(T) bool, list func(ctx context.Context) ([]T, error)) (T, bool, error) {
	fetch := func(ctx context.Context) (out []T, err error) {
		err = c.call(ctx, op, func(ctx context.Context) (err error) {
			out, err = list(ctx)
			return err
		})
		return out, err
	}
	var zero T
	found, err := l.Find(ctx, c.now(), catalogTTL, fetch, match)
	if err != nil || len(found) == 0 {
		return zero, false, err
	}
	return found[0], true, nil
}
