package cloudscale

import (
	"context"
	"fmt"
	"slices"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// flavorTTL is how long the flavor list is trusted: it changes when
// cloudscale.ch launches a flavor, not between two reconciles.
const flavorTTL = 10 * time.Minute

// Flavor describes a flavor from the API's figures; the slug is never
// parsed.
func (c *Client) Flavor(ctx context.Context, zone, name string) (*cloud.Flavor, error) {
	flavors, err := c.flavorList(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(flavors, func(f sdk.Flavor) bool { return f.Slug == name })
	if i < 0 {
		return nil, &cloud.InvalidConfigError{Field: "flavor", Message: fmt.Sprintf("flavor %q does not exist on cloudscale.ch", name)}
	}
	f := flavors[i]
	// A flavor without zones is taken to be everywhere.
	if len(f.Zones) > 0 && !slices.ContainsFunc(f.Zones, func(z sdk.ZoneStub) bool { return z.Slug == zone }) {
		zones := make([]string, 0, len(f.Zones))
		for _, z := range f.Zones {
			zones = append(zones, z.Slug)
		}
		return nil, &cloud.InvalidConfigError{Field: "flavor", Message: fmt.Sprintf("flavor %q is not available in zone %s, only in %v", name, zone, zones)}
	}
	out := &cloud.Flavor{
		Name:      f.Slug,
		VCPUs:     f.VCPUCount,
		MemoryMiB: int64(f.MemoryGB) * 1024,
		Arch:      "amd64",
	}
	if f.GPU != nil && f.GPU.Count > 0 {
		out.GPUs, out.GPUType = f.GPU.Count, f.GPU.Name
	}
	return out, nil
}

// knownFlavor refuses a flavor cloudscale.ch does not have at all, so that
// a Machine with a typo in its flavor costs no refused create (the list is
// cached). Whether the zone offers it the create tells: the zone may be what
// is wrong. Without a list, the create is tried and speaks for itself.
func (c *Client) knownFlavor(ctx context.Context, name string) error {
	flavors, err := c.flavorList(ctx)
	if err != nil || slices.ContainsFunc(flavors, func(f sdk.Flavor) bool { return f.Slug == name }) {
		return nil
	}
	return &cloud.InvalidConfigError{Field: "flavor", Message: fmt.Sprintf("flavor %q does not exist on cloudscale.ch", name)}
}

// flavorList returns the cached list, refreshed after flavorTTL. Callers
// wait for one refresh rather than each making their own. A failed refresh
// falls back to the old list, which is as good as it was a moment ago.
func (c *Client) flavorList(ctx context.Context) ([]sdk.Flavor, error) {
	c.flavorsMu.Lock()
	defer c.flavorsMu.Unlock()
	if c.flavors != nil && c.now().Sub(c.flavorsAt) < flavorTTL {
		return c.flavors, nil
	}
	var list []sdk.Flavor
	err := c.call(ctx, "flavor.list", func(ctx context.Context) (err error) {
		list, err = c.sdk.Flavors.List(ctx)
		return err
	})
	if err != nil {
		if c.flavors != nil {
			logf.FromContext(ctx).Info("Could not refresh the flavor list, using the old one", "error", err.Error())
			return c.flavors, nil
		}
		return nil, err
	}
	if list == nil {
		list = []sdk.Flavor{}
	}
	c.flavors, c.flavorsAt = list, c.now()
	return list, nil
}
