package exoscale

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// resolved is a spec's references turned into the IDs the API takes.
type resolved struct {
	// ref is the Machine whose cluster's resources the references were
	// checked to be (or to be no cluster's); no ClusterID when not
	// checked.
	ref                cloud.MachineRef
	zone               *v3.Client
	instanceType       v3.InstanceType
	template           v3.Template
	securityGroups     []v3.UUID
	antiAffinityGroups []v3.UUID
	networks           []resolvedNetwork
	deployTarget       v3.UUID
}

type resolvedNetwork struct {
	ID      v3.UUID
	IP      string
	Managed bool
	// Ref is how the spec names it; Cluster the cluster whose identity
	// it carries ("" for none), Mark where (resources.go).
	Ref, Cluster, Mark string
}

// CheckSpec checks the zone, instance type, template, security groups,
// anti-affinity groups, private networks, deploy target and SSH keys of the
// spec against the account's catalogue, from lists cached for catalogTTL (a
// miss lists once more). When a list cannot be had, that part is not
// checked: the create speaks for itself. It makes no change anywhere.
func (c *Client) CheckSpec(ctx context.Context, spec cloud.Spec) error {
	p, err := providerSpec(spec)
	if err != nil {
		return err
	}
	_, err = c.resolve(ctx, p, false, cloud.MachineRef{})
	return err
}

// resolve looks the spec's references up. A reference to nothing, or a name
// more than one thing has, is an InvalidConfigError naming the field. A
// list that cannot be had is an error when strict (the create needs the
// IDs), else that reference is skipped. With a cluster (the create's),
// a resource that carries another cluster's identity is a
// *cloud.ForeignResourceError naming the field (resources.go).
func (c *Client) resolve(ctx context.Context, p *v1beta1.ExoscaleMachineProviderSpec, strict bool, m cloud.MachineRef) (*resolved, error) {
	r := resolved{ref: m}
	owned := func(field, what, ref, cluster, mark string) error {
		if m.ClusterID == "" {
			return nil
		}
		return cloud.CheckResourceCluster(field, what, ref, mark, cluster, m)
	}
	skip := func(err error) error {
		if _, invalid := err.(*cloud.InvalidConfigError); invalid || strict {
			return err
		}
		return nil
	}
	zc, err := c.zoneClient(ctx, p.Zone)
	if err != nil {
		if err := skip(err); err != nil {
			return nil, err
		}
		// Without the zone's endpoint nothing zonal can be looked up.
		return &r, nil
	}
	r.zone = zc
	c.zones.used.add(p.Zone)
	if err := c.resolveType(ctx, p, &r); skip(err) != nil {
		return nil, err
	}
	if err := c.resolveTemplate(ctx, p, &r); skip(err) != nil {
		return nil, err
	} else if err == nil {
		if err := checkDisk(p, r.template); err != nil {
			return nil, err
		}
		if err := owned("template", "template", describe(p.Template.ID, p.Template.Name), DescribedClusterID(r.template.Description), markDescription); err != nil {
			return nil, err
		}
	}
	for i, ref := range p.SecurityGroups {
		field := fmt.Sprintf("securityGroups[%d]", i)
		g, err := lookupItem(ctx, c, &c.securityGroups, c.listSecurityGroups, ref, field, "security group", "",
			func(g v3.SecurityGroup) (v3.UUID, string) { return g.ID, g.Name })
		if skip(err) != nil {
			return nil, err
		}
		if err == nil {
			if err := owned(field, "security group", describe(ref.ID, ref.Name), DescribedClusterID(g.Description), markDescription); err != nil {
				return nil, err
			}
		}
		r.securityGroups = append(r.securityGroups, g.ID)
	}
	for i, ref := range p.AntiAffinityGroups {
		field := fmt.Sprintf("antiAffinityGroups[%d]", i)
		g, err := lookupItem(ctx, c, &c.userGroups, c.listGroupsForLookup, ref, field, "anti-affinity group", "",
			func(g v3.AntiAffinityGroup) (v3.UUID, string) { return g.ID, g.Name })
		if skip(err) != nil {
			return nil, err
		}
		if err == nil {
			if err := owned(field, "anti-affinity group", describe(ref.ID, ref.Name), DescribedClusterID(g.Description), markDescription); err != nil {
				return nil, err
			}
		}
		r.antiAffinityGroups = append(r.antiAffinityGroups, g.ID)
	}
	for i, n := range p.PrivateNetworks {
		field := fmt.Sprintf("privateNetworks[%d]", i)
		ref := describe(n.ID, n.Name)
		found, err := lookupItem(ctx, c, c.networkList(p.Zone), c.listNetworks(zc), v1beta1.ResourceRef{ID: n.ID, Name: n.Name}, field, "private network", p.Zone,
			func(pn v3.PrivateNetwork) (v3.UUID, string) { return pn.ID, pn.Name })
		if skip(err) != nil {
			return nil, err
		}
		id := found.ID
		cluster, mark := networkCluster(found)
		if err == nil {
			if err := owned(field, "private network", ref, cluster, mark); err != nil {
				return nil, err
			}
		}
		managed := len(found.StartIP) > 0
		if n.IP != "" && err == nil && found.ID != "" && !managed {
			return nil, &cloud.InvalidConfigError{Field: field + ".ip", Message: fmt.Sprintf("private network %s is not managed (it has no address range): it leases no addresses, so none can be fixed", describe(n.ID, n.Name))}
		}
		if n.IP != "" && err == nil && managed {
			if err := checkInRange(n.IP, found, field+".ip", describe(n.ID, n.Name)); err != nil {
				return nil, err
			}
		}
		r.networks = append(r.networks, resolvedNetwork{ID: id, IP: n.IP, Managed: managed, Ref: ref, Cluster: cluster, Mark: mark})
	}
	if p.DeployTarget != nil {
		dt, err := lookupItem(ctx, c, c.deployTargetList(p.Zone), c.listDeployTargets(zc), *p.DeployTarget, "deployTarget", "deploy target", p.Zone,
			func(d v3.DeployTarget) (v3.UUID, string) { return d.ID, d.Name })
		if skip(err) != nil {
			return nil, err
		}
		if err == nil {
			if err := owned("deployTarget", "deploy target", describe(p.DeployTarget.ID, p.DeployTarget.Name), DescribedClusterID(dt.Description), markDescription); err != nil {
				return nil, err
			}
		}
		r.deployTarget = dt.ID
	}
	for i, name := range p.SSHKeys {
		_, err := lookup(ctx, c, &c.sshKeys, c.listSSHKeys, v1beta1.ResourceRef{Name: name}, fmt.Sprintf("sshKeys[%d]", i), "SSH key", "",
			func(k v3.SSHKey) (v3.UUID, string) { return v3.UUID(k.Name), k.Name })
		if skip(err) != nil {
			return nil, err
		}
	}
	return &r, nil
}

// checkDisk refuses a disk smaller than the template's image: the API
// refuses the instance for it.
func checkDisk(p *v1beta1.ExoscaleMachineProviderSpec, t v3.Template) error {
	const gib = 1 << 30
	if need := (t.Size + gib - 1) / gib; t.Size > 0 && p.DiskSize < need {
		return &cloud.InvalidConfigError{Field: "diskSize", Message: fmt.Sprintf("template %q needs a disk of at least %d GiB, the spec asks for %d", t.Name, need, p.DiskSize)}
	}
	return nil
}

// checkInRange refuses a fixed address outside the managed network's range
// (start-ip to end-ip): the attach, after the instance exists, would be
// refused. Whether another instance holds it is left to the attach: a
// lease read now says nothing of the moment of the attach, and the
// actuator deletes an instance whose attach is refused for good.
func checkInRange(ip string, pn v3.PrivateNetwork, field, what string) error {
	addr, err := netip.ParseAddr(ip)
	start, okStart := netip.AddrFromSlice(pn.StartIP.To4())
	end, okEnd := netip.AddrFromSlice(pn.EndIP.To4())
	if err != nil || !okStart || !okEnd {
		return nil
	}
	if addr.Less(start) || end.Less(addr) {
		return &cloud.InvalidConfigError{Field: field, Message: fmt.Sprintf("%s is outside the address range %s-%s of private network %s", ip, start, end, what)}
	}
	return nil
}

func describe(id, name string) string {
	if id != "" {
		return id
	}
	return fmt.Sprintf("%q", name)
}

// lookup finds one item of a cached list by ID or by name, and returns its
// ID (lookupItem).
func lookup[T any](ctx context.Context, c *Client, l *cloud.Catalog[T], fetch func(ctx context.Context) ([]T, error), ref v1beta1.ResourceRef, field, what, zone string, key func(T) (v3.UUID, string)) (v3.UUID, error) {
	it, err := lookupItem(ctx, c, l, fetch, ref, field, what, zone, key)
	if err != nil {
		return "", err
	}
	id, _ := key(it)
	return id, nil
}

// lookupItem finds one item of a cached list by ID or by name. Names must
// be unique: a name two items have is an error, never a guess.
func lookupItem[T any](ctx context.Context, c *Client, l *cloud.Catalog[T], fetch func(ctx context.Context) ([]T, error), ref v1beta1.ResourceRef, field, what, zone string, key func(T) (v3.UUID, string)) (T, error) {
	var zero T
	match := func(it T) bool {
		id, name := key(it)
		if ref.ID != "" {
			return strings.EqualFold(string(id), ref.ID)
		}
		return name == ref.Name
	}
	found, err := find(ctx, c.now(), l, fetch, match)
	if err != nil {
		return zero, err
	}
	where := "in this Exoscale account"
	if zone != "" {
		where = "in zone " + zone
	}
	switch len(found) {
	case 0:
		return zero, &cloud.InvalidConfigError{Field: field, Message: fmt.Sprintf("no %s %s exists %s", what, describe(ref.ID, ref.Name), where)}
	case 1:
		return found[0], nil
	}
	ids := make([]string, 0, len(found))
	for _, it := range found {
		id, _ := key(it)
		ids = append(ids, string(id))
	}
	return zero, &cloud.InvalidConfigError{Field: field, Message: fmt.Sprintf("%d %ss are named %q %s (%s): name one by its id", len(found), what, ref.Name, where, strings.Join(ids, ", "))}
}

// resolveType finds the instance type by family.size or ID, offered in the
// zone and authorized for the account.
func (c *Client) resolveType(ctx context.Context, p *v1beta1.ExoscaleMachineProviderSpec, r *resolved) error {
	t, err := c.instanceType(ctx, p.Zone, p.InstanceType)
	if err != nil {
		return err
	}
	r.instanceType = *t
	return nil
}

// resolveTemplate finds the template by ID (private or public) or by name
// among the templates of its visibility in the zone.
func (c *Client) resolveTemplate(ctx context.Context, p *v1beta1.ExoscaleMachineProviderSpec, r *resolved) error {
	zc := r.zone
	if p.Template.ID != "" {
		for _, vis := range []v1beta1.TemplateVisibility{v1beta1.TemplateVisibilityPrivate, v1beta1.TemplateVisibilityPublic} {
			found, err := find(ctx, c.now(), c.templateList(p.Zone, vis), c.listTemplates(zc, vis), func(t v3.Template) bool {
				return strings.EqualFold(string(t.ID), p.Template.ID)
			})
			if err != nil {
				return err
			}
			if len(found) > 0 {
				r.template = found[0]
				return nil
			}
		}
		return &cloud.InvalidConfigError{Field: "template", Message: fmt.Sprintf("no template %s exists in zone %s", p.Template.ID, p.Zone)}
	}
	vis := p.Template.Visibility
	found, err := find(ctx, c.now(), c.templateList(p.Zone, vis), c.listTemplates(zc, vis), func(t v3.Template) bool {
		return t.Name == p.Template.Name
	})
	if err != nil {
		return err
	}
	switch len(found) {
	case 0:
		return &cloud.InvalidConfigError{Field: "template", Message: fmt.Sprintf("no %s template named %q exists in zone %s", vis, p.Template.Name, p.Zone)}
	case 1:
		r.template = found[0]
		return nil
	}
	ids := make([]string, 0, len(found))
	for _, t := range found {
		ids = append(ids, string(t.ID))
	}
	slices.Sort(ids)
	return &cloud.InvalidConfigError{Field: "template", Message: fmt.Sprintf("%d %s templates are named %q in zone %s (%s): name one by its id", len(found), vis, p.Template.Name, p.Zone, strings.Join(ids, ", "))}
}
