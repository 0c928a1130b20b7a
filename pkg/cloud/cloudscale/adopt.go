package cloudscale

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// What adopt (pkg/adopt) needs of cloudscale.ch: the account's servers as
// specs, and their identity. appuio/terraform-openshift4-cloudscale makes
// each node a server named <role>-<4 hex>.<cluster domain> with one private
// interface (an address of the cluster's subnet), in a server group
// <role>-group of at most four; with make_*_adoptable_by_provider it tags
// them with the provider's own tag keys already.

var _ cloud.Adopter = (*Client)(nil)

// Survey lists every server of the account (the API lists them for all
// zones at once) with the spec that describes it.
func (c *Client) Survey(ctx context.Context, zones []string) ([]cloud.Found, error) {
	var servers []sdk.Server
	err := c.call(ctx, "server.list", func(ctx context.Context) (err error) {
		servers, err = c.sdk.Servers.List(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	var groups []sdk.ServerGroup
	err = c.call(ctx, "servergroup.list", func(ctx context.Context) (err error) {
		groups, err = c.sdk.ServerGroups.List(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	var images []sdk.CustomImage
	err = c.call(ctx, "customimage.list", func(ctx context.Context) (err error) {
		images, err = c.sdk.CustomImages.List(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	byID := map[string]sdk.ServerGroup{}
	for _, g := range groups {
		byID[g.UUID] = g
	}
	var out []cloud.Found
	for i := range servers {
		s := &servers[i]
		if len(zones) > 0 && !slices.Contains(zones, s.Zone.Slug) {
			continue
		}
		f := cloud.Found{Server: *toServer(s), Spec: specOf(s, images)}
		for _, stub := range s.ServerGroups {
			g, ok := byID[stub.UUID]
			if !ok {
				continue
			}
			fg := cloud.FoundGroup{ID: g.UUID, Name: g.Name, Key: g.Tags[v1beta1.TagAntiAffinityKey], ClusterID: g.Tags[v1beta1.TagClusterID]}
			for _, m := range g.Servers {
				fg.Members = append(fg.Members, m.UUID)
			}
			f.Groups = append(f.Groups, fg)
		}
		out = append(out, f)
	}
	return out, nil
}

// specOf is the provider spec of a server as it is. Its groups are not in
// it: adopt decides whether they become the spec's antiAffinityKey.
func specOf(s *sdk.Server, images []sdk.CustomImage) map[string]any {
	spec := map[string]any{
		"apiVersion": v1beta1.APIVersion,
		"kind":       v1beta1.SpecKind,
		"zone":       s.Zone.Slug,
		"flavor":     s.Flavor.Slug,
		"image":      imageOf(s.Image.Slug, images),
	}
	if len(s.Volumes) > 0 {
		spec["rootVolumeSizeGB"] = s.Volumes[0].SizeGB
	}
	if _, domain, ok := strings.Cut(s.Name, "."); ok {
		spec["baseDomain"] = domain
	}
	var interfaces []any
	public, v6 := false, false
	for _, i := range s.Interfaces {
		if i.Type == "public" {
			public = true
			for _, a := range i.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is6() {
					v6 = true
				}
			}
			interfaces = append(interfaces, map[string]any{"type": string(v1beta1.InterfaceTypePublic)})
			continue
		}
		// The subnets of its addresses, without the addresses: the
		// Terraform modules give each node a free address of the
		// cluster's subnet, and so does a Machine.
		var addrs []any
		var subnets []string
		for _, a := range i.Addresses {
			if a.Subnet.UUID != "" && !slices.Contains(subnets, a.Subnet.UUID) {
				subnets = append(subnets, a.Subnet.UUID)
				addrs = append(addrs, map[string]any{"subnetUUID": a.Subnet.UUID})
			}
		}
		iface := map[string]any{"type": string(v1beta1.InterfaceTypePrivate)}
		if len(addrs) > 0 {
			iface["addresses"] = addrs
		} else {
			iface["networkUUID"] = i.Network.UUID
		}
		interfaces = append(interfaces, iface)
	}
	if len(interfaces) > 0 {
		spec["interfaces"] = interfaces
	}
	if public {
		spec["useIPV6"] = v6
	}
	if tags := cloud.UserKeys(s.Tags, v1beta1.ReservedTags); len(tags) > 0 {
		spec["tags"] = tags
	}
	return spec
}

// imageOf names a server's image as a spec does: custom images as
// custom:<slug>. The API names a custom image by its slug (the emulator
// with the prefix already).
func imageOf(slug string, images []sdk.CustomImage) string {
	if strings.HasPrefix(slug, "custom:") {
		return slug
	}
	if slices.ContainsFunc(images, func(im sdk.CustomImage) bool { return im.Slug == slug }) {
		return "custom:" + slug
	}
	return slug
}

// Misfits lists what a Machine with spec would report as drift
// (SpecInSync), and tags the sync would change besides the identity.
func (c *Client) Misfits(_ context.Context, m cloud.MachineRef, spec cloud.Spec, f *cloud.Found) ([]string, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, err
	}
	d := detailOf(&f.Server)
	if d == nil {
		return nil, errors.New("cloudscale: a found server without its record")
	}
	misfits := driftOf(m, p, d)
	if !maps.Equal(cloud.UserKeys(d.Tags, v1beta1.ReservedTags), cloud.UserKeys(serverTags(m, p), v1beta1.ReservedTags)) {
		misfits = append(misfits, "tags")
	}
	return misfits, nil
}

// Identify sets the server's tags to those of the Machine: its own tags
// (the spec's) and the provider's two, once a fresh read shows the server
// as adopt surveyed it.
func (c *Client) Identify(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, f *cloud.Found) (bool, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return false, err
	}
	if err := checkRef(m); err != nil {
		return false, err
	}
	want := serverTags(m, p)
	if maps.Equal(map[string]string(f.Tags), map[string]string(want)) {
		return false, nil
	}
	// Read right before the write: only a server whose identity is still
	// what adopt planned with is taken over.
	now, err := c.getServer(ctx, f.ID)
	if err != nil {
		return false, err
	}
	if err := cloud.CheckSurveyed(f, toServer(now), m); err != nil {
		return false, err
	}
	req := &sdk.ServerUpdateRequest{}
	req.Tags = &want
	err = c.call(ctx, "server.update", func(ctx context.Context) error {
		return c.sdk.Servers.Update(ctx, f.ID, req)
	})
	if err != nil {
		return false, err
	}
	f.Tags = maps.Clone(map[string]string(want))
	f.Machine, f.ClusterID = m.Name, m.ClusterID
	return true, nil
}

// GroupTakeover: cloudscale.ch's server groups carry tags, by which the
// provider knows its own.
func (c *Client) GroupTakeover() (bool, string) { return true, "" }

// MaxGroupSize is cloudscale.ch's limit for an anti-affinity server group.
func (c *Client) MaxGroupSize() int { return maxServersPerGroup }

// TakeOverGroup tags the server group as the provider's own group of the
// key, keeping its other tags. Without the creation tag it counts as older
// than any group the provider makes: it is filled first.
func (c *Client) TakeOverGroup(ctx context.Context, clusterID, key string, g cloud.FoundGroup) (bool, error) {
	if clusterID == "" || key == "" {
		return false, errors.New("cloudscale: taking over a group needs the cluster ID and the key")
	}
	if g.ClusterID == clusterID && g.Key == key {
		return false, nil
	}
	var cur *sdk.ServerGroup
	err := c.call(ctx, "servergroup.get", func(ctx context.Context) (err error) {
		cur, err = c.sdk.ServerGroups.Get(ctx, g.ID)
		return err
	})
	if err != nil {
		return false, err
	}
	tags := sdk.TagMap{}
	maps.Copy(tags, cur.Tags)
	tags[v1beta1.TagClusterID] = clusterID
	tags[v1beta1.TagAntiAffinityKey] = key
	req := &sdk.ServerGroupRequest{}
	req.Tags = &tags
	return true, c.call(ctx, "servergroup.update", func(ctx context.Context) error {
		return c.sdk.ServerGroups.Update(ctx, g.ID, req)
	})
}

// EvictPoolMember: cloudscale.ch has no instance pools.
func (c *Client) EvictPoolMember(context.Context, cloud.FoundPool, string, cloud.NodeVeto) error {
	return errors.New("cloudscale.ch has no instance pools")
}
