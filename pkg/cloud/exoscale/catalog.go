package exoscale

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// The account's catalogue, each list cached for catalogTTL. Zonal lists are
// read from the zone's endpoint, the others from the configured one.

func (c *Client) listSecurityGroups(ctx context.Context) (out []v3.SecurityGroup, err error) {
	err = c.call(ctx, "securitygroup.list", func(ctx context.Context) error {
		resp, err := c.base.ListSecurityGroups(ctx)
		if err == nil {
			out = resp.SecurityGroups
		}
		return err
	})
	return out, err
}

func (c *Client) listSSHKeys(ctx context.Context) (out []v3.SSHKey, err error) {
	err = c.call(ctx, "sshkey.list", func(ctx context.Context) error {
		resp, err := c.base.ListSSHKeys(ctx)
		if err == nil {
			out = resp.SSHKeys
		}
		return err
	})
	return out, err
}

// listGroupsForLookup lists the anti-affinity groups to find the user's by
// name or ID (cached: they are the user's, made before the MachineSet).
func (c *Client) listGroupsForLookup(ctx context.Context) ([]v3.AntiAffinityGroup, error) {
	return c.listGroups(ctx)
}

func (c *Client) listNetworks(zc *v3.Client) func(ctx context.Context) ([]v3.PrivateNetwork, error) {
	return func(ctx context.Context) (out []v3.PrivateNetwork, err error) {
		err = c.zcall(ctx, zc, "privatenetwork.list", func(ctx context.Context) error {
			resp, err := zc.ListPrivateNetworks(ctx)
			if err == nil {
				out = resp.PrivateNetworks
			}
			return err
		})
		return out, err
	}
}

func (c *Client) listDeployTargets(zc *v3.Client) func(ctx context.Context) ([]v3.DeployTarget, error) {
	return func(ctx context.Context) (out []v3.DeployTarget, err error) {
		err = c.zcall(ctx, zc, "deploytarget.list", func(ctx context.Context) error {
			resp, err := zc.ListDeployTargets(ctx)
			if err == nil {
				out = resp.DeployTargets
			}
			return err
		})
		return out, err
	}
}

func (c *Client) listTemplates(zc *v3.Client, vis v1beta1.TemplateVisibility) func(ctx context.Context) ([]v3.Template, error) {
	return func(ctx context.Context) (out []v3.Template, err error) {
		err = c.zcall(ctx, zc, "template.list", func(ctx context.Context) error {
			resp, err := zc.ListTemplates(ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibility(vis)))
			if err == nil {
				out = resp.Templates
			}
			return err
		})
		return out, err
	}
}

func (c *Client) listInstanceTypes(ctx context.Context) (out []v3.InstanceType, err error) {
	err = c.call(ctx, "instancetype.list", func(ctx context.Context) error {
		resp, err := c.base.ListInstanceTypes(ctx)
		if err == nil {
			out = resp.InstanceTypes
		}
		return err
	})
	return out, err
}

func zonal[T any](c *Client, m map[string]*cloud.Catalog[T], key string) *cloud.Catalog[T] {
	c.catalogMu.Lock()
	defer c.catalogMu.Unlock()
	l := m[key]
	if l == nil {
		l = &cloud.Catalog[T]{}
		m[key] = l
	}
	return l
}

func (c *Client) networkList(zone string) *cloud.Catalog[v3.PrivateNetwork] {
	return zonal(c, c.networks, zone)
}

func (c *Client) deployTargetList(zone string) *cloud.Catalog[v3.DeployTarget] {
	return zonal(c, c.deployTargets, zone)
}

func (c *Client) templateList(zone string, vis v1beta1.TemplateVisibility) *cloud.Catalog[v3.Template] {
	return zonal(c, c.templates, zone+"/"+string(vis))
}

// typeName is the family.size of an instance type ID, from the cached list
// without calling the API; "" when it is not known yet.
func (c *Client) typeName(id v3.UUID) string {
	for _, t := range c.instanceTypes.Cached() {
		if t.ID == id {
			return typeNameOf(t)
		}
	}
	return ""
}

func typeNameOf(t v3.InstanceType) string { return string(t.Family) + "." + string(t.Size) }

// instanceType finds an instance type by family.size or ID, offered in the
// zone and authorized for the account.
func (c *Client) instanceType(ctx context.Context, zone, name string) (*v3.InstanceType, error) {
	found, err := find(ctx, c.now(), &c.instanceTypes, c.listInstanceTypes, func(t v3.InstanceType) bool {
		return strings.EqualFold(string(t.ID), name) || typeNameOf(t) == name
	})
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, &cloud.InvalidConfigError{Field: "instanceType", Message: fmt.Sprintf("instance type %q does not exist on Exoscale (or is not offered to this account)", name)}
	}
	t := found[0]
	if len(t.Zones) > 0 && !slices.Contains(t.Zones, v3.ZoneName(zone)) {
		zones := make([]string, 0, len(t.Zones))
		for _, z := range t.Zones {
			zones = append(zones, string(z))
		}
		return nil, &cloud.InvalidConfigError{Field: "instanceType", Message: fmt.Sprintf("instance type %s is not available in zone %s, only in %s", typeNameOf(t), zone, strings.Join(zones, ", "))}
	}
	if t.Authorized != nil && !*t.Authorized {
		return nil, &cloud.InvalidConfigError{Field: "instanceType", Message: fmt.Sprintf("instance type %s requires an authorization this account does not have (for GPU types: a GPU quota; ask Exoscale support)", typeNameOf(t))}
	}
	return &t, nil
}
