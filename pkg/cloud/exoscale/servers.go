package exoscale

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ListServers lists the instances labelled with the selector's cluster (and
// Machine), with one labels-filtered list per zone the cluster's lists
// cover (zones.go), asked at once, oldest first. Instances being destroyed
// are not listed: they are no one's any more.
//
// Zones that fail are reported, not fatal (zones.go): when some zones
// answered, the list of theirs comes with a *cloud.PartialListError naming
// every zone that failed; when none did, the first failure is the error.
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
	started, sent := c.now(), time.Now()
	filter := selectorLabels(sel)
	lists, failed, keyErr := c.listEachZone(ctx, zones, filter)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if keyErr != nil {
		// The credentials are refused: no zone's list says anything.
		return nil, keyErr
	}
	if len(lists) == 0 && len(failed) > 0 {
		return nil, failed[0]
	}
	out := []cloud.Server{}
	for _, z := range zones {
		for _, it := range lists[z] {
			// Filter again: should the API ever ignore the filter, this
			// must still not hand out other Machines' instances.
			if !matches(it.Labels, filter) || dying(it.State) {
				continue
			}
			d := fromListItem(it, z)
			c.zones.seen(string(d.ID), z)
			s := c.server(d)
			s.ReadAt = sent
			out = append(out, *s)
		}
	}
	if full && sel.Machine == "" {
		// Zones that failed are listed again as soon as their wait is
		// over (listZones): the sweep need not start over for them.
		c.sweptAt(sel.ClusterID, started)
	}
	slices.SortStableFunc(out, func(a, b cloud.Server) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if len(failed) > 0 {
		// Every zone that could not be read is named, also one no
		// Machine is known to use: an orphan, or the server of a Machine
		// whose spec moved to another zone, may be there, and nothing
		// may take a server for absent from a zone it could not read.
		// The Machines of the zones that answered go on (the View
		// answers per zone).
		return out, &cloud.PartialListError{Failed: failed}
	}
	return out, nil
}

// dying reports the states of an instance being destroyed: it will not
// come back, and whatever looks for a Machine's server must not take it.
func dying(state v3.InstanceState) bool {
	switch state {
	case v3.InstanceStateDestroying, v3.InstanceStateDestroyed, v3.InstanceStateExpunging:
		return true
	}
	return false
}

// zoneList is what one zone's list answered.
type zoneList struct {
	zone  string
	items []v3.ListInstancesResponseInstances
	err   error
}

// listEachZone lists the instances labelled with filter in every zone at
// once: the lists of the zones that answered, by zone, and the failures
// of the others (zones.go: a zone that failed lately is not asked, one
// that keeps the others waiting is given up on).
func (c *Client) listEachZone(ctx context.Context, zones []string, filter map[string]string) (map[string][]v3.ListInstancesResponseInstances, []*cloud.ZoneError, error) {
	lists := map[string][]v3.ListInstancesResponseInstances{}
	var failed []*cloud.ZoneError
	var keyErr error
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan zoneList, len(zones))
	pending := 0
	for _, z := range zones {
		if ze := c.zones.downNow(z, c.now()); ze != nil {
			failed = append(failed, ze)
			continue
		}
		pending++
		go func() {
			items, err := c.listZone(callCtx, z, filter)
			results <- zoneList{zone: z, items: items, err: err}
		}()
	}
	var straggle <-chan time.Time
	cut := false
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			switch {
			case r.err == nil:
				c.zones.answered(r.zone)
				lists[r.zone] = r.items
			case ctx.Err() != nil:
				// The caller gave up: no zone's fault.
			case refusedKey(r.err):
				// The key refused is no zone's failure: no zone is
				// left out for it (the account's gate holds every
				// call back meanwhile), and the list fails with it.
				keyErr = r.err
			default:
				err := r.err
				if cut {
					err = &cloud.ZoneError{Zone: r.zone, Confined: true, Err: &cloud.RetryableError{Err: fmt.Errorf("%s instance.list: zone %s did not answer within %s of the other zones", displayName, r.zone, stragglerWait)}}
				}
				failed = append(failed, c.zones.failed(r.zone, err, c.now()))
			}
			if pending > 0 && straggle == nil && !cut && len(lists) > 0 {
				t := time.NewTimer(stragglerWait)
				defer t.Stop()
				straggle = t.C
			}
		case <-straggle:
			cut, straggle = true, nil
			cancel()
		}
	}
	for i, f := range failed {
		// A zone that failed before the others of this list answered
		// is no less confined for it.
		failed[i] = c.confined(f)
	}
	slices.SortFunc(failed, func(a, b *cloud.ZoneError) int { return strings.Compare(a.Zone, b.Zone) })
	return lists, failed, keyErr
}

// refusedKey reports a refusal of the key itself (an unknown key, a bad
// signature): the account's failure, not a zone's.
func refusedKey(err error) bool {
	var auth *cloud.AuthError
	return errors.As(err, &auth)
}

// listZone lists the instances labelled with filter in one zone.
func (c *Client) listZone(ctx context.Context, zone string, filter map[string]string) ([]v3.ListInstancesResponseInstances, error) {
	zc, err := c.zoneClient(ctx, zone)
	if err != nil {
		return nil, c.confined(&cloud.ZoneError{Zone: zone, Err: err})
	}
	var list []v3.ListInstancesResponseInstances
	err = c.zcall(ctx, zc, "instance.list", func(ctx context.Context) error {
		resp, err := zc.ListInstances(ctx, v3.ListInstancesWithLabels(labelFilter(filter)))
		if err == nil {
			list = resp.Instances
		}
		return err
	}, c.inZone(zone))
	return list, err
}

// inZone marks the failures of a call to a zone's endpoint as that zone's
// (cloud.ZoneError), before the account's gate sees them; but not a refusal
// of the key itself (cloud.AuthError): every zone checks the same key, so
// that is the account's, never a zone's outage.
// It is the zone's outage (Confined) only when other zones answered the
// same credentials lately.
func (c *Client) inZone(zone string) func(error) error {
	return func(err error) error {
		var auth *cloud.AuthError
		if err == nil || cloud.ZoneOf(err) != "" || errors.As(err, &auth) {
			return err
		}
		return c.confined(&cloud.ZoneError{Zone: zone, Err: err})
	}
}

// server describes an instance with what the client knows of its type and
// private addresses.
func (c *Client) server(d *instance) *cloud.Server {
	var typeName string
	if d.InstanceType != nil {
		typeName = c.typeName(d.InstanceType.ID)
	}
	return toServer(d, typeName, c.privateIPMap(string(d.ID)))
}

// GetServer reads an instance by ID, in its zone if the client knows it,
// else in every zone until it is found (a zone whose list just failed is
// not asked: its failure stands). An instance being destroyed is not
// found. When it is in no zone that answered and some zone failed, that
// zone's failure is the answer, not ErrNotFound: an instance that cannot be
// seen is never taken for gone.
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
	var zoneErr error
	for _, z := range zones {
		sent := time.Now()
		if ze := c.zones.downNow(z, c.now()); ze != nil && len(zones) > 1 {
			// Its list just failed: asking it would cost its timeout
			// (and the read retries) for the failure the list got.
			if zoneErr == nil {
				zoneErr = c.confined(ze)
			}
			continue
		}
		d, err := c.getInstance(ctx, z, id)
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			if cloud.ZoneOf(err) != "" && len(zones) > 1 && ctx.Err() == nil {
				// The other zones may still have it.
				if zoneErr == nil {
					zoneErr = err
				}
				continue
			}
			return nil, err
		}
		if dying(d.State) {
			return nil, fmt.Errorf("exoscale: instance %s is %s: %w", id, d.State, cloud.ErrNotFound)
		}
		s := c.server(d)
		s.ReadAt = sent
		return s, nil
	}
	if zoneErr != nil {
		return nil, zoneErr
	}
	return nil, fmt.Errorf("exoscale: instance %s: %w", id, cloud.ErrNotFound)
}

// getInstance reads an instance in full.
func (c *Client) getInstance(ctx context.Context, zone, id string) (*instance, error) {
	zc, err := c.zoneClient(ctx, zone)
	if err != nil {
		return nil, c.confined(&cloud.ZoneError{Zone: zone, Err: err})
	}
	var inst *v3.Instance
	err = c.zcall(ctx, zc, "instance.get", func(ctx context.Context) (err error) {
		inst, err = zc.GetInstance(ctx, v3.UUID(id))
		return err
	}, c.inZone(zone))
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
	// The catalogue, and whose the groups, networks, template and deploy
	// target the spec names are: before anything is written (an
	// anti-affinity group, the instance).
	r, err := c.resolve(ctx, p, true, m)
	if err != nil {
		return nil, false, err
	}
	req := createRequest(m, p, r, userData)
	steps := cloud.CreateSteps{
		Look: func(ctx context.Context) ([]cloud.Server, error) {
			found, err := c.ListServers(ctx, cloud.Selector{ClusterID: m.ClusterID, Machine: m.Name})
			var partial *cloud.PartialListError
			if errors.As(err, &partial) && !partial.Has(p.Zone) {
				// Another zone fails; the Machine's server is made in
				// its own, which answered.
				return found, nil
			}
			return found, err
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
	err := c.zcall(ctx, r.zone, "instance.create", func(ctx context.Context) (err error) {
		op, err = r.zone.CreateInstance(ctx, req)
		return err
	}, append(reclassify, c.inZone(p.Zone))...)
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
		// This very call made the instance, with the Machine's labels:
		// nothing to check before attaching it.
		if err := c.attachNetworks(ctx, r.zone, d, r.networks, r.ref, func(context.Context) error { return nil }); err != nil {
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
// groups it leaves empty. An instance already gone is no error. Only an
// instance that carries the Machine's identity at that moment, and that no
// Node runs on (veto, asked with that record and, when a Node could run on
// it by address, the leases of its private networks read then), is
// deleted (a *cloud.NotOwnedError or the veto's error otherwise, and
// nothing is sent). That record is s when s is a read sent for this delete
// (cloud.ProvenOwned: the list of the Machines being deleted, which names
// the instance's private networks as a read by ID does) and the client
// knows the instance's groups; otherwise the instance is read again now.
func (c *Client) DeleteServer(ctx context.Context, m cloud.MachineRef, s *cloud.Server, veto cloud.NodeVeto) error {
	if s == nil || s.ID == "" {
		return errors.New("exoscale: DeleteServer needs a server with an ID")
	}
	if veto == nil {
		return cloud.ErrNoVeto
	}
	if err := checkRef(m); err != nil {
		return err
	}
	// The fresh record names the instance's groups too.
	var (
		got *cloud.Server
		d   *instance
	)
	if given := detailOf(s); given != nil && cloud.ProvenOwned(ctx, m, s) {
		if d = c.withGroups(given); d != nil {
			// The veto's read of the leases fills in the record it is
			// given: the caller's stays as it was.
			cp := *s
			got = &cp
		}
	}
	if d == nil {
		var err error
		got, err = c.GetServer(cloud.ProvingOwnership(ctx), s.ID)
		if cloud.IsNotFound(err) {
			c.forgetInstance(s.ID)
			return nil
		}
		if err != nil {
			return err
		}
		if err := cloud.CheckOwned(m, got); err != nil {
			return err
		}
		if d = detailOf(got); d == nil {
			return fmt.Errorf("exoscale: instance %s has no record", s.ID)
		}
	}
	if err := cloud.CheckVeto(ctx, veto, got, c.readLeases); err != nil {
		return err
	}
	zc, err := c.zoneClient(ctx, d.Zone)
	if err != nil {
		return err
	}
	var op *v3.Operation
	err = c.zcall(ctx, zc, "instance.delete", func(ctx context.Context) (err error) {
		op, err = zc.DeleteInstance(ctx, v3.UUID(s.ID))
		return err
	}, c.inZone(d.Zone))
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
