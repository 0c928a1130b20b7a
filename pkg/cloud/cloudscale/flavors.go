package cloudscale

import (
	"context"
	"fmt"
	"slices"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// catalogTTL is how long the flavor, custom image and network lists are
// trusted: they change when someone adds to them, not between two
// reconciles.
const catalogTTL = 10 * time.Minute

// Flavor describes a flavor from the API's figures; the slug is never
// parsed.
func (c *Client) Flavor(ctx context.Context, zone, name string) (*cloud.Flavor, error) {
	f, err := c.flavorIn(ctx, zone, name)
	if err != nil {
		return nil, err
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

// flavorIn finds a flavor offered in zone.
func (c *Client) flavorIn(ctx context.Context, zone, name string) (*sdk.Flavor, error) {
	flavors, err := c.flavorList(ctx)
	if err != nil {
		return nil, err
	}
	return lookupFlavor(flavors, zone, name)
}

// lookupFlavor finds a flavor offered in zone in the list.
func lookupFlavor(flavors []sdk.Flavor, zone, name string) (*sdk.Flavor, error) {
	zones := map[string]bool{}
	for _, f := range flavors {
		for _, z := range f.Zones {
			zones[z.Slug] = true
		}
	}
	if len(zones) > 0 && !zones[zone] {
		known := make([]string, 0, len(zones))
		for z := range zones {
			known = append(known, z)
		}
		slices.Sort(known)
		return nil, &cloud.InvalidConfigError{Field: "zone", Message: fmt.Sprintf("zone %q does not exist on cloudscale.ch; the zones are %v", zone, known)}
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
	return &f, nil
}

func (c *Client) flavorList(ctx context.Context) ([]sdk.Flavor, error) {
	return c.flavors.Get(ctx, c.now(), catalogTTL, func(ctx context.Context) (list []sdk.Flavor, err error) {
		err = c.call(ctx, "flavor.list", func(ctx context.Context) (err error) {
			list, err = c.sdk.Flavors.List(ctx)
			return err
		})
		return list, err
	})
}
