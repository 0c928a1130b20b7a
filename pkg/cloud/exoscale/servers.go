package exoscale

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ListServers lists the instances labelled with the selector's cluster (and
// Machine), with one labels-filtered list per zone the cluster's lists
// cover (zones.go), oldest first.
func (c *Client) ListServers(ctx context.Context, sel cloud.Selector) ([]cloud.Server, error) {
	if sel.ClusterID == "" {
		return nil, errors.New("exoscale: listing servers needs the cluster ID")
	}
	if !filterable(sel) {
		return nil, fmt.Errorf("exoscale: cannot filter on cluster %q, Machine %q: the label filter takes no spaces or \"=\"", sel.ClusterID, sel.Machine)
	}
	zones, full, err := c.listZones(ctx, sel.ClusterID)
	if err != nil {
		return nil, err
	}
	started := c.now()
	filter := selectorLabels(sel)
	out := []cloud.Server{}
	for _, z := range zones {
		zc, err := c.zoneClient(ctx, z)
		if err != nil {
			return nil, err
		}
		var list []v3.ListInstancesResponseInstances
		err = c.call(ctx, "instance.list", func(ctx context.Context) error {
			resp, err := zc.ListInstances(ctx, v3.ListInstancesWithLabels(labelFilter(filter)))
			if err == nil {
				list = resp.Instances
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, it := range list {
			// Filter again: should the API ever ignore the filter, this
			// must still not hand out other Machines' instances.
			if !matches(it.Labels, filter) {
				continue
			}
			d := fromListItem(it, z)
			c.zones.seen(string(d.ID), z)
			out = append(out, *c.server(d))
		}
	}
	if full && sel.Machine == "" {
		c.sweptAt(sel.ClusterID, started)
	}
	slices.SortStableFunc(out, func(a, b cloud.Server) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// server describes an instance with what the client knows of its type and
// private addresses.
func (c *Client) server(d *instance) *cloud.Server {
	var typeName string
	if d.InstanceType != nil {
		typeName = c.typeName(d.InstanceType.ID)
	}
	return toServer(d, typeName, c.privateIPs(string(d.ID)))
}

// GetServer reads an instance by ID, in its zone if the client knows it,
// else in every zone until it is found.
func (c *Client) GetServer(ctx context.Context, id string) (*cloud.Server, error) {
	if id == "" {
		return nil, fmt.Errorf("exoscale: server without an ID: %w", cloud.ErrNotFound)
	}
	var zones []string
	if z := c.zones.zoneOf(id); z != "" {
		zones = []string{z}
	} else {
		all, err := c.allZones(ctx)
		if err != nil {
			return nil, err
		}
		// The zones in use first: that is where it most likely is.
		used := append(c.cloud.zones.list(), c.zones.used.list()...)
		for _, z := range all {
			if slices.Contains(used, z) {
				zones = append(zones, z)
			}
		}
		for _, z := range all {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	for _, z := range zones {
		d, err := c.getInstance(ctx, z, id)
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return c.server(d), nil
	}
	return nil, fmt.Errorf("exoscale: instance %s: %w", id, cloud.ErrNotFound)
}

// getInstance reads an instance in full.
func (c *Client) getInstance(ctx context.Context, zone, id string) (*instance, error) {
	zc, err := c.zoneClient(ctx, zone)
	if err != nil {
		return nil, err
	}
	var inst *v3.Instance
	err = c.call(ctx, "instance.get", func(ctx context.Context) (err error) {
		inst, err = zc.GetInstance(ctx, v3.UUID(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	d := &instance{Instance: *inst, Zone: zone, Full: true}
	c.zones.seen(id, zone)
	c.rememberDisk(id, inst.DiskSize)
	c.rememberGroups(id, inst.AntiAffinityGroups)
	return d, nil
}

// CreateServer creates the Machine's instance unless it has one already.
//
// The spec's references are resolved from the cached catalogue first (so a
// typo costs no refused create and leaves no group behind), the Machine's
// instances are looked up directly right before the create (after the
// anti-affinity lock, when there is one), and the create is sent once: the
// instance's ID is taken from the operation's reference at once, without
// waiting for the operation. The private networks are attached right after;
// what that leaves undone, SyncServer does.
func (c *Client) CreateServer(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, userData []byte) (*cloud.Server, bool, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, false, err
	}
	if err := checkRef(m); err != nil {
		return nil, false, err
	}
	if err := v1beta1.ValidateUserDataSize(userData); err != nil {
		return nil, false, &cloud.InvalidConfigError{Field: "userDataSecret", Message: err.Error()}
	}
	if len(userData) > 0 {
		ctx = cloud.WithRedaction(ctx, string(userData))
	}
	c.zones.used.add(p.Zone)
	r, err := c.resolve(ctx, p, true)
	if err != nil {
		return nil, false, err
	}
	req := createRequest(m, p, r, userData)
	steps := cloud.CreateSteps{
		Look: func(ctx context.Context) ([]cloud.Server, error) {
			return c.ListServers(ctx, cloud.Selector{ClusterID: m.ClusterID, Machine: m.Name})
		},
		Send: func(ctx context.Context, group string) (*cloud.Server, error) {
			if group == "" {
				return c.createInstance(ctx, p, r, req)
			}
			withGroup := req
			withGroup.AntiAffinityGroups = append(slices.Clone(req.AntiAffinityGroups), v3.AntiAffinityGroup{ID: v3.UUID(group)})
			return c.createInstance(ctx, p, r, withGroup, func(err error) error {
				// Another process (an old leader, another cluster's
				// provider with the same account) may have filled or
				// deleted the group since it was listed: placing the
				// instance again will do. A refusal about one of the
				// user's antiAffinityGroups is the user's business.
				var invalid *cloud.InvalidConfigError
				if !errors.As(err, &invalid) || invalid.Field != "antiAffinityGroups" || !strings.Contains(invalid.Message, group) {
					return err
				}
				return &cloud.RetryableError{NotPerformed: true, Err: fmt.Errorf("%s instance.create: anti-affinity group %s for %q refused the instance, it is placed again: %s", displayName, group, p.AntiAffinityKey, invalid.Message)}
			})
		},
	}
	var key *cloud.GroupKey
	if p.AntiAffinityKey != "" {
		k := groupKey(m.ClusterID, p.AntiAffinityKey)
		key = &k
		steps.Place = func(ctx context.Context) (string, bool, error) {
			id, isNew, err := c.placementGroup(ctx, k)
			return string(id), isNew, err
		}
		steps.Unplace = func(ctx context.Context, group string) {
			if _, err := c.deleteGroupIfEmptyLocked(ctx, group); err != nil {
				cloud.Warn(ctx, "Deleting the anti-affinity group made for a refused create failed; the cleanup retries", err, "group", group)
			}
		}
	}
	return cloud.Create(ctx, c.gate, &c.groupLocks, key, steps)
}

func createRequest(m cloud.MachineRef, p *v1beta1.ExoscaleMachineProviderSpec, r *resolved, userData []byte) v3.CreateInstanceRequest {
	req := v3.CreateInstanceRequest{
		Name:               m.Name,
		InstanceType:       &v3.InstanceType{ID: r.instanceType.ID},
		Template:           &v3.Template{ID: r.template.ID},
		DiskSize:           p.DiskSize,
		Labels:             instanceLabels(m, p),
		PublicIPAssignment: v3.PublicIPAssignment(p.PublicIPAssignment),
	}
	for _, id := range r.securityGroups {
		req.SecurityGroups = append(req.SecurityGroups, v3.SecurityGroup{ID: id})
	}
	for _, id := range r.antiAffinityGroups {
		req.AntiAffinityGroups = append(req.AntiAffinityGroups, v3.AntiAffinityGroup{ID: id})
	}
	for _, k := range p.SSHKeys {
		req.SSHKeys = append(req.SSHKeys, v3.SSHKey{Name: k})
	}
	if r.deployTarget != "" {
		req.DeployTarget = &v3.DeployTarget{ID: r.deployTarget}
	}
	if len(userData) > 0 {
		req.UserData = base64.StdEncoding.EncodeToString(userData)
	}
	return req
}

// createInstance sends the create, once, and describes the instance from
// the request and the operation's reference.
func (c *Client) createInstance(ctx context.Context, p *v1beta1.ExoscaleMachineProviderSpec, r *resolved, req v3.CreateInstanceRequest, reclassify ...func(error) error) (*cloud.Server, error) {
	var op *v3.Operation
	err := c.call(ctx, "instance.create", func(ctx context.Context) (err error) {
		op, err = r.zone.CreateInstance(ctx, req)
		return err
	}, reclassify...)
	if err != nil {
		return nil, err
	}
	if err := c.operationFailed(ctx, op, "instance.create"); err != nil {
		return nil, err
	}
	if op.Reference == nil || op.Reference.ID == "" {
		// It was made, but which one it is the next list will tell.
		return nil, &cloud.RetryableError{Err: fmt.Errorf("%s instance.create: the operation %s names no instance", displayName, op.ID)}
	}
	id := string(op.Reference.ID)
	d := &instance{Zone: p.Zone, Full: true, stub: true, Instance: v3.Instance{
		ID: op.Reference.ID, Name: req.Name, CreatedAT: c.now(), State: v3.InstanceStateStarting,
		InstanceType: &v3.InstanceType{ID: r.instanceType.ID}, Template: &v3.Template{ID: r.template.ID},
		DiskSize: req.DiskSize, Labels: req.Labels, PublicIPAssignment: req.PublicIPAssignment,
		SecurityGroups: req.SecurityGroups, AntiAffinityGroups: req.AntiAffinityGroups, DeployTarget: req.DeployTarget,
	}}
	c.zones.seen(id, p.Zone)
	c.rememberDisk(id, req.DiskSize)
	c.rememberGroups(id, req.AntiAffinityGroups)
	if len(r.networks) > 0 {
		if err := c.attachNetworks(ctx, r.zone, d, r.networks); err != nil {
			// The instance exists: the create succeeded. The next
			// SyncServer attaches what is missing.
			cloud.Warn(ctx, "Attaching the private networks after the create failed; the next update retries", err, "instance", id)
		}
	}
	return c.server(d), nil
}

// operationFailed turns an operation already answered as failed into an
// error: a failure the API explains by the request is the spec's problem,
// others are retried. Either way the instance was never made, so the retry
// need not wait for it. The operation's message is scrubbed as an error's
// is (a failed create may quote its user data).
func (c *Client) operationFailed(ctx context.Context, op *v3.Operation, what string) error {
	if op == nil || op.State != v3.OperationStateFailure {
		return nil
	}
	detail := c.scrub(op.Message, cloud.Redactions(ctx))
	msg := fmt.Sprintf("Exoscale %s: the operation %s failed (%s): %s", what, op.ID, op.Reason, detail)
	switch op.Reason {
	case v3.OperationReasonIncorrect, v3.OperationReasonForbidden, v3.OperationReasonNotFound, v3.OperationReasonUnsupported:
		return &cloud.InvalidConfigError{Message: msg}
	}
	return &cloud.RetryableError{Err: errors.New(msg), NotPerformed: true}
}

// DeleteServer deletes the instance, then the provider's anti-affinity
// groups it leaves empty. An instance already gone is no error.
func (c *Client) DeleteServer(ctx context.Context, m cloud.MachineRef, s *cloud.Server) error {
	if s == nil || s.ID == "" {
		return errors.New("exoscale: DeleteServer needs a server with an ID")
	}
	d := detailOf(s)
	if groups, ok := c.knownGroups(s.ID); ok && d != nil && !d.Full && d.Zone != "" {
		// The groups are known without a read: this process made or
		// read the instance.
		full := *d
		full.AntiAffinityGroups = groups
		d = &full
	} else if d == nil || !d.Full {
		// The groups are known only from the instance's full record.
		got, err := c.GetServer(ctx, s.ID)
		if cloud.IsNotFound(err) {
			c.forgetInstance(s.ID)
			return nil
		}
		if err != nil {
			return err
		}
		if d = detailOf(got); d == nil {
			return fmt.Errorf("exoscale: instance %s has no record", s.ID)
		}
	}
	zc, err := c.zoneClient(ctx, d.Zone)
	if err != nil {
		return err
	}
	var op *v3.Operation
	err = c.call(ctx, "instance.delete", func(ctx context.Context) (err error) {
		op, err = zc.DeleteInstance(ctx, v3.UUID(s.ID))
		return err
	})
	if err != nil && !cloud.IsNotFound(err) {
		return err
	}
	if err == nil {
		if err := c.operationFailed(ctx, op, "instance.delete"); err != nil {
			return err
		}
	}
	c.forgetInstance(s.ID)
	// The server is gone: a failure from here on must not fail its
	// delete, which would be retried from the start. Groups left behind
	// are the cleanup's (Client.CleanupGroups), which follows every
	// Machine's delete and runs in the janitor.
	if err := c.deleteEmptyGroups(ctx, m, d); err != nil {
		cloud.Warn(ctx, "Deleting the server's empty anti-affinity groups failed; the cleanup retries", err, "server", s.ID)
	}
	return nil
}
