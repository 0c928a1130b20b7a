package exoscale

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// What adopt (pkg/adopt) needs of Exoscale. appuio/terraform-openshift4-
// exoscale makes masters, infra and storage nodes as instances named
// <role>-<4 hex>.<cluster domain>, with the security groups
// <cluster>_all_machines and <cluster>_<role>, the anti-affinity group
// <cluster>_<role>, the SSH key <cluster>-admin, the RHCOS private template
// and, with use_privnet, the private network <cluster>_clusternet; no
// labels. Its workers are an instance pool <cluster>_<role>-<n> by default.

var _ cloud.Adopter = (*Client)(nil)

// poolPoll is how often an eviction's operation is looked at.
const poolPoll = 500 * time.Millisecond

// Survey lists the instances of the zones (every zone without any), each
// read in full (the list lacks the disk size, the groups and the user
// data), with the spec that describes it.
func (c *Client) Survey(ctx context.Context, zones []string) ([]cloud.Found, error) {
	if len(zones) == 0 {
		all, err := c.allZones(ctx)
		if err != nil {
			return nil, err
		}
		zones = all
	}
	// A list the credentials' role refuses costs what it would have named
	// (names become IDs, groups go unseen), never the survey: the plan
	// reports the refusal with each group it touches (refused.go).
	var refused []string
	sgs, err := c.listSecurityGroups(ctx)
	if err = tolerate(err, &refused); err != nil {
		return nil, err
	}
	groups, err := c.listGroups(ctx)
	if err = tolerate(err, &refused); err != nil {
		return nil, err
	}
	_, err = find(ctx, c.now(), &c.instanceTypes, c.listInstanceTypes, func(v3.InstanceType) bool { return true })
	if err = tolerate(err, &refused); err != nil {
		return nil, err
	}
	var out []cloud.Found
	for _, z := range zones {
		found, err := c.surveyZone(ctx, z, sgs, groups, refused)
		if err != nil {
			return nil, fmt.Errorf("zone %s: %w", z, err)
		}
		out = append(out, found...)
	}
	return out, nil
}

func (c *Client) surveyZone(ctx context.Context, zone string, sgs []v3.SecurityGroup, groups []v3.AntiAffinityGroup, refused []string) ([]cloud.Found, error) {
	refused = slices.Clone(refused)
	zc, err := c.zoneClient(ctx, zone)
	if err != nil {
		return nil, err
	}
	var list []v3.ListInstancesResponseInstances
	err = c.zcall(ctx, zc, "instance.list", func(ctx context.Context) error {
		resp, err := zc.ListInstances(ctx)
		if err == nil {
			list = resp.Instances
		}
		return err
	})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	var pools []v3.InstancePool
	err = c.zcall(ctx, zc, "instancepool.list", func(ctx context.Context) error {
		resp, err := zc.ListInstancePools(ctx)
		if err == nil {
			pools = resp.InstancePools
		}
		return err
	})
	// Only the pools' members need the pools (their names, sizes): the
	// refusal goes with them.
	var poolsRefused []string
	if err = tolerate(err, &poolsRefused); err != nil {
		return nil, err
	}
	networks, err := c.listNetworks(zc)(ctx)
	if err = tolerate(err, &refused); err != nil {
		return nil, err
	}
	var templates []v3.Template
	for _, vis := range []v1beta1.TemplateVisibility{v1beta1.TemplateVisibilityPrivate, v1beta1.TemplateVisibilityPublic} {
		l, err := c.listTemplates(zc, vis)(ctx)
		if err = tolerate(err, &refused); err != nil {
			return nil, err
		}
		templates = append(templates, l...)
	}
	var out []cloud.Found
	for _, it := range list {
		if it.State == v3.InstanceStateDestroying {
			continue
		}
		d, err := c.getInstance(ctx, zone, string(it.ID))
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		mine := slices.Clone(refused)
		if err := tolerate(c.learnPrivateIPs(ctx, d), &mine); err != nil {
			return nil, err
		}
		f := cloud.Found{Server: *c.server(d), Spec: c.specOf(d, sgs, networks, templates), Refused: mine}
		for _, ref := range d.AntiAffinityGroups {
			i := slices.IndexFunc(groups, func(g v3.AntiAffinityGroup) bool { return g.ID == ref.ID })
			if i < 0 {
				continue
			}
			g := groups[i]
			fg := cloud.FoundGroup{ID: string(g.ID), Name: g.Name}
			if k, _, ours := parseGroup(g.Name, g.Description); ours {
				fg.Key, fg.ClusterID = k.Key, k.ClusterID
			}
			for _, m := range g.Instances {
				fg.Members = append(fg.Members, string(m.ID))
			}
			f.Groups = append(f.Groups, fg)
		}
		if d.Manager != nil && d.Manager.Type == v3.ManagerTypeInstancePool {
			f.Pool = &cloud.FoundPool{ID: string(d.Manager.ID), Zone: zone}
			f.Refused = append(f.Refused, poolsRefused...)
			if i := slices.IndexFunc(pools, func(p v3.InstancePool) bool { return p.ID == d.Manager.ID }); i >= 0 {
				f.Pool.Name, f.Pool.Size = pools[i].Name, int(pools[i].Size)
			}
		}
		if d.UserData != "" {
			if b, err := base64.StdEncoding.DecodeString(d.UserData); err == nil {
				f.UserData = b
			}
		}
		out = append(out, f)
	}
	// A pool's members, as far as they are not being destroyed.
	for i := range out {
		p := out[i].Pool
		if p == nil {
			continue
		}
		for _, o := range out {
			if o.Pool != nil && o.Pool.ID == p.ID {
				p.Members = append(p.Members, o.ID)
			}
		}
	}
	return out, nil
}

// specOf is the provider spec of an instance as it is, naming what it can
// by name (security groups, networks, the template when its name is unique
// in the zone). Its anti-affinity groups are not in it: adopt decides.
func (c *Client) specOf(d *instance, sgs []v3.SecurityGroup, networks []v3.PrivateNetwork, templates []v3.Template) map[string]any {
	spec := map[string]any{
		"apiVersion":         v1beta1.APIVersion,
		"kind":               v1beta1.SpecKind,
		"zone":               d.Zone,
		"diskSize":           d.DiskSize,
		"publicIPAssignment": string(d.PublicIPAssignment),
	}
	if spec["publicIPAssignment"] == "" {
		delete(spec, "publicIPAssignment")
	}
	if d.InstanceType != nil {
		if name := c.typeName(d.InstanceType.ID); name != "" {
			spec["instanceType"] = name
		} else {
			spec["instanceType"] = string(d.InstanceType.ID)
		}
	}
	if d.Template != nil {
		spec["template"] = map[string]any{"id": string(d.Template.ID)}
		if i := slices.IndexFunc(templates, func(t v3.Template) bool { return t.ID == d.Template.ID }); i >= 0 {
			t := templates[i]
			same := 0
			for _, o := range templates {
				if o.Name == t.Name && o.Visibility == t.Visibility {
					same++
				}
			}
			if same == 1 && t.Name != "" {
				spec["template"] = map[string]any{"name": t.Name, "visibility": string(t.Visibility)}
			}
		}
	}
	var keys []any
	if d.SSHKey != nil && d.SSHKey.Name != "" {
		keys = append(keys, d.SSHKey.Name)
	}
	for _, k := range d.SSHKeys {
		if !slices.Contains(keys, any(k.Name)) {
			keys = append(keys, k.Name)
		}
	}
	if len(keys) > 0 {
		spec["sshKeys"] = keys
	}
	var refs []any
	for _, g := range d.SecurityGroups {
		ref := map[string]any{"id": string(g.ID)}
		if i := slices.IndexFunc(sgs, func(s v3.SecurityGroup) bool { return s.ID == g.ID }); i >= 0 && sgs[i].Name != "" {
			ref = map[string]any{"name": sgs[i].Name}
		}
		refs = append(refs, ref)
	}
	if len(refs) > 0 {
		spec["securityGroups"] = refs
	}
	var pns []any
	for _, n := range d.PrivateNetworks {
		ref := map[string]any{"id": string(n.ID)}
		if i := slices.IndexFunc(networks, func(p v3.PrivateNetwork) bool { return p.ID == n.ID }); i >= 0 && networks[i].Name != "" {
			ref = map[string]any{"name": networks[i].Name}
		}
		pns = append(pns, ref)
	}
	if len(pns) > 0 {
		spec["privateNetworks"] = pns
	}
	if d.DeployTarget != nil && d.DeployTarget.ID != "" {
		spec["deployTarget"] = map[string]any{"id": string(d.DeployTarget.ID)}
	}
	if labels := cloud.UserKeys(d.Labels, v1beta1.ReservedLabels); len(labels) > 0 {
		spec["labels"] = labels
	}
	return spec
}

// Misfits lists what a Machine with spec would report as drift
// (SpecInSync), and what the sync would change besides the identity:
// security groups and private networks it would attach, labels it would
// set.
func (c *Client) Misfits(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, f *cloud.Found) ([]string, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, err
	}
	d := detailOf(&f.Server)
	if d == nil || !d.Full {
		return nil, errors.New("exoscale: a found instance without its full record")
	}
	misfits, networks := c.drift(ctx, p, d)
	for _, ref := range p.SecurityGroups {
		id, err := lookup(ctx, c, &c.securityGroups, c.listSecurityGroups, ref, "securityGroups", "security group", "",
			func(g v3.SecurityGroup) (v3.UUID, string) { return g.ID, g.Name })
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(d.SecurityGroups, func(g v3.SecurityGroup) bool { return g.ID == id }) {
			misfits = append(misfits, "securityGroups")
			break
		}
	}
	if len(networks) != len(p.PrivateNetworks) {
		// A network of the spec that cannot be resolved: a new Machine
		// could not have it either.
		misfits = append(misfits, "privateNetworks")
	}
	for _, n := range networks {
		if !slices.ContainsFunc(d.PrivateNetworks, func(h v3.InstancePrivateNetworks) bool { return h.ID == n.ID }) && !slices.Contains(misfits, "privateNetworks") {
			misfits = append(misfits, "privateNetworks")
		}
	}
	if !maps.Equal(cloud.UserKeys(d.Labels, v1beta1.ReservedLabels), p.Labels) && (len(p.Labels) > 0 || len(cloud.UserKeys(d.Labels, v1beta1.ReservedLabels)) > 0) {
		misfits = append(misfits, "labels")
	}
	return misfits, nil
}

// Identify sets the instance's labels to those of the Machine: its own
// (the spec's) and the provider's two.
func (c *Client) Identify(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, f *cloud.Found) (bool, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return false, err
	}
	if err := checkRef(m); err != nil {
		return false, err
	}
	d := detailOf(&f.Server)
	if d == nil {
		return false, errors.New("exoscale: a found instance without its record")
	}
	want := instanceLabels(m, p)
	if maps.Equal(map[string]string(d.Labels), want) {
		return false, nil
	}
	// Read right before the write: only an instance whose identity is
	// still what adopt planned with is taken over.
	now, err := c.getInstance(ctx, d.Zone, string(d.ID))
	if err != nil {
		return false, err
	}
	if err := cloud.CheckSurveyed(f, toServer(now, "", nil), m); err != nil {
		return false, err
	}
	zc, err := c.zoneClient(ctx, d.Zone)
	if err != nil {
		return false, err
	}
	err = c.zcall(ctx, zc, "instance.update", func(ctx context.Context) error {
		_, err := zc.UpdateInstance(ctx, d.ID, v3.UpdateInstanceRequest{Labels: want})
		return err
	})
	if err != nil {
		return false, err
	}
	d.Labels = maps.Clone(want)
	f.Tags = maps.Clone(want)
	f.Machine, f.ClusterID = m.Name, m.ClusterID
	return true, nil
}

// GroupTakeover: Exoscale's anti-affinity groups have neither labels nor a
// way to rename or describe them anew, and the provider knows its own by
// name and description.
func (c *Client) GroupTakeover() (bool, string) {
	return false, "Exoscale's anti-affinity groups can be neither labelled nor renamed; they keep their members, new Machines go into the provider's own groups"
}

// MaxGroupSize is Exoscale's limit for an anti-affinity group.
func (c *Client) MaxGroupSize() int { return maxInstancesPerGroup }

// TakeOverGroup cannot be done on Exoscale (GroupTakeover).
func (c *Client) TakeOverGroup(context.Context, string, string, cloud.FoundGroup) (bool, error) {
	_, why := c.GroupTakeover()
	return false, errors.New(why)
}

// EvictPoolMember evicts the member from its pool, which destroys it; the
// last member goes with the pool, since a pool keeps at least one. It
// waits for the operation. The member is read right before, and veto asked
// about it with the leases of its private networks read then, as every
// delete does (cloud.CheckVeto).
func (c *Client) EvictPoolMember(ctx context.Context, pool cloud.FoundPool, member string, veto cloud.NodeVeto) error {
	if veto == nil {
		return cloud.ErrNoVeto
	}
	zc, err := c.zoneClient(ctx, pool.Zone)
	if err != nil {
		return err
	}
	var p *v3.InstancePool
	err = c.zcall(ctx, zc, "instancepool.get", func(ctx context.Context) (err error) {
		p, err = zc.GetInstancePool(ctx, v3.UUID(pool.ID))
		return err
	})
	if cloud.IsNotFound(err) {
		// Deleted with its last member already (an earlier run whose
		// answer was lost).
		return nil
	}
	if err != nil {
		return err
	}
	var live []v3.UUID
	for _, inst := range p.Instances {
		live = append(live, inst.ID)
	}
	if !slices.Contains(live, v3.UUID(member)) {
		// Evicted already (an earlier run whose answer was lost).
		return nil
	}
	// The pool lists its members being destroyed too, and refuses to
	// evict them: one is leaving already.
	d, err := c.getInstance(ctx, pool.Zone, member)
	switch {
	case cloud.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case d.State == v3.InstanceStateDestroying:
		return nil
	}
	if err := cloud.CheckVeto(ctx, veto, c.server(d), c.readLeases); err != nil {
		return err
	}
	var op *v3.Operation
	if len(live) == 1 {
		err = c.zcall(ctx, zc, "instancepool.delete", func(ctx context.Context) (err error) {
			op, err = zc.DeleteInstancePool(ctx, p.ID)
			return err
		})
	} else {
		err = c.zcall(ctx, zc, "instancepool.evict", func(ctx context.Context) (err error) {
			op, err = zc.EvictInstancePoolMembers(ctx, p.ID, v3.EvictInstancePoolMembersRequest{Instances: []v3.UUID{v3.UUID(member)}})
			return err
		})
	}
	if err != nil {
		return err
	}
	return c.awaitOperation(ctx, zc, op, "evicting an instance pool member")
}

// awaitOperation follows an operation until it ends.
func (c *Client) awaitOperation(ctx context.Context, zc *v3.Client, op *v3.Operation, what string) error {
	for op.State == v3.OperationStatePending || op.State == "" {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poolPoll):
		}
		id := op.ID
		err := c.zcall(ctx, zc, "operation.get", func(ctx context.Context) (err error) {
			op, err = zc.GetOperation(ctx, id)
			return err
		})
		if err != nil {
			return err
		}
	}
	if op.State != v3.OperationStateSuccess {
		return fmt.Errorf("exoscale %s: the operation %s ended %s (%s): %s", what, op.ID, op.State, op.Reason, cloud.Truncate(op.Message))
	}
	return nil
}

// tolerate turns a refusal by the credentials' role into a record of the
// refused permission (the IAM operation) and no error; any other error is
// returned.
func tolerate(err error, refused *[]string) error {
	var perm *cloud.PermissionError
	if !errors.As(err, &perm) {
		return err
	}
	name := perm.Permission
	if name == "" {
		name = perm.Op
	}
	if !slices.Contains(*refused, name) {
		*refused = append(*refused, name)
	}
	return nil
}
