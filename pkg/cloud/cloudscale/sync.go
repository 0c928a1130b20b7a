package cloudscale

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// SyncServer brings the tags of the server and its root volume in line with
// spec and reports drift. With the server's SDK record in s.Detail (as every
// Server of this package has) and nothing to change, it makes no API call.
// s.Tags is updated when the server's tags are. The drift is returned even
// when syncing the tags failed: it does not depend on them.
func (c *Client) SyncServer(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, s *cloud.Server) ([]string, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, err
	}
	if err := checkRef(m); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("cloudscale: SyncServer needs a server")
	}
	d := detailOf(s)
	if d == nil {
		if d, err = c.getServer(ctx, s.ID); err != nil {
			return nil, err
		}
	}
	// Only a server with the Machine's identity is synced (pkg/cloud,
	// owner.go): the record says so here, and a fresh read right before
	// each write (owned).
	if err := cloud.CheckOwned(m, toServer(d)); err != nil {
		return nil, err
	}
	drift := driftOf(m, p, d)
	return drift, c.syncTags(ctx, m, p, s, d)
}

// owned reads the server afresh and returns a *cloud.NotOwnedError unless
// it still carries the Machine's identity: the check right before a write
// or a delete, as the record of a list may be seconds old and tags can
// change in between (another cluster's provider, a person, Terraform).
func (c *Client) owned(ctx context.Context, m cloud.MachineRef, id string) (*sdk.Server, error) {
	d, err := c.getServer(cloud.ProvingOwnership(ctx), id)
	if err != nil {
		return nil, err
	}
	if err := cloud.CheckOwned(m, toServer(d)); err != nil {
		return nil, err
	}
	return d, nil
}

func (c *Client) syncTags(ctx context.Context, m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec, s *cloud.Server, d *sdk.Server) error {
	// The fresh read before the sync's first write holds for the others:
	// one read, not one per write.
	checked := false
	owned := func() error {
		if checked {
			return nil
		}
		_, err := c.owned(ctx, m, d.UUID)
		checked = err == nil
		return err
	}
	want := serverTags(m, p)
	changed := !maps.Equal(d.Tags, want)
	if changed {
		if err := owned(); err != nil {
			return err
		}
		req := &sdk.ServerUpdateRequest{}
		req.Tags = &want
		err := c.call(ctx, "server.update", func(ctx context.Context) error {
			return c.sdk.Servers.Update(ctx, d.UUID, req)
		})
		if err != nil {
			return err
		}
		d.Tags = maps.Clone(want)
		s.Tags = maps.Clone(map[string]string(want))
	}
	if len(d.Volumes) == 0 {
		return nil
	}
	// The root volume is looked at when this process has no record of its
	// tags (first sync, changed rootVolumeTags) or when the server's tags
	// had been changed behind its back, which suggests the volume's were too.
	// The volume of a server this process just created has no tags yet: it
	// is tagged without reading it first, once the server runs and the
	// account has calls to spare. Until then Machines are being
	// provisioned, maybe hundreds, and every call spent on tags is one the
	// rate limit does not give to a create; a later sync tags it.
	root := rootVolumeTags(m, p)
	if !changed && c.rootTagsCurrent(d.UUID, root) {
		return nil
	}
	if c.isUntagged(d.UUID) {
		if d.Status != sdk.ServerRunning || !c.gate.Spare() {
			return nil
		}
		if err := c.setVolumeTags(ctx, d.Volumes[0].UUID, root); err != nil {
			// Nor does a failure hold the Machine back (the machine
			// controller retries a failed update only after 30s): the
			// next sync tags it.
			cloud.Warn(ctx, "Tagging the root volume of a new server failed; the next update retries", err, "server", d.UUID)
			return nil
		}
		c.takeUntagged(d.UUID)
	} else if err := c.syncVolumeTags(ctx, d.Volumes[0].UUID, root, owned); err != nil {
		return err
	}
	c.rememberRootTags(d.UUID, root)
	return nil
}

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// driftOf lists, by their provider spec names, the fields that cannot change
// on an existing server and differ from spec.
func driftOf(m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec, d *sdk.Server) []string {
	var drift []string
	if d.Flavor.Slug != p.Flavor {
		drift = append(drift, "flavor")
	}
	if imageDiffers(p.Image, d.Image.Slug) {
		drift = append(drift, "image")
	}
	if d.Zone.Slug != p.Zone {
		drift = append(drift, "zone")
	}
	if len(d.Volumes) > 0 && d.Volumes[0].SizeGB != p.RootVolumeSizeGB {
		drift = append(drift, "rootVolumeSizeGB")
	}
	if interfacesDiffer(p.Interfaces, d.Interfaces) {
		drift = append(drift, "interfaces")
	}
	if !inGroups(d.ServerGroups, p.ServerGroups) {
		drift = append(drift, "serverGroups")
	}
	if !ownName(d.Name, m.Name, p) {
		// Only baseDomain can account for another name.
		drift = append(drift, "baseDomain")
	}
	return drift
}

// imageDiffers compares the spec's image with the server's. A custom image
// given by UUID cannot be compared: servers report a slug.
func imageDiffers(want, have string) bool {
	if have == "" || uuidPattern.MatchString(want) {
		return false
	}
	return want != have && want != "custom:"+have
}

func interfacesDiffer(want []v1beta1.Interface, have []sdk.Interface) bool {
	if len(want) != len(have) {
		return true
	}
	for i, w := range want {
		h := have[i]
		if w.Type == v1beta1.InterfaceTypePublic {
			if h.Type != "public" {
				return true
			}
			continue
		}
		if h.Type == "public" || (w.NetworkUUID != "" && h.Network.UUID != w.NetworkUUID) {
			return true
		}
		for _, a := range w.Addresses {
			if !slices.ContainsFunc(h.Addresses, func(ha sdk.Address) bool {
				return ha.Subnet.UUID == a.SubnetUUID && (a.Address == "" || ha.Address == a.Address)
			}) {
				return true
			}
		}
	}
	return false
}

// inGroups reports whether the server is in every group the spec lists.
// Other groups (the anti-affinity group) are the provider's own.
func inGroups(have []sdk.ServerGroupStub, want []string) bool {
	for _, id := range want {
		if !slices.ContainsFunc(have, func(g sdk.ServerGroupStub) bool { return g.UUID == id }) {
			return false
		}
	}
	return true
}
