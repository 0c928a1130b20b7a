package cloudscale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ListServers lists the servers tagged with the selector's cluster (and
// Machine), with one API call. Servers being deleted are not listed (see
// Client.dying): they are no one's any more.
func (c *Client) ListServers(ctx context.Context, sel cloud.Selector) ([]cloud.Server, error) {
	if sel.ClusterID == "" {
		return nil, errors.New("cloudscale: listing servers needs the cluster ID")
	}
	tags := selectorTags(sel)
	var list []sdk.Server
	sent := time.Now()
	err := c.call(ctx, "server.list", func(ctx context.Context) (err error) {
		list, err = c.sdk.Servers.List(ctx, sdk.WithTagFilter(tags))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := []cloud.Server{}
	for i := range list {
		// Filter again: should the API ever ignore the filter, this must
		// still not hand out other Machines' servers.
		if matchesFilter(list[i].Tags, tags) && !c.dying(list[i].UUID) {
			s := toServer(&list[i])
			s.ReadAt = sent
			out = append(out, *s)
		}
	}
	slices.SortStableFunc(out, func(a, b cloud.Server) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// GetServer reads a server by UUID; one being deleted is not found.
func (c *Client) GetServer(ctx context.Context, id string) (*cloud.Server, error) {
	sent := time.Now()
	s, err := c.getServer(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.dying(s.UUID) {
		return nil, fmt.Errorf("cloudscale: server %s is being deleted: %w", id, cloud.ErrNotFound)
	}
	srv := toServer(s)
	srv.ReadAt = sent
	return srv, nil
}

// ReadAddresses reads the server again: its record has every address the
// API knows (its interfaces'), and names the private interfaces without
// one.
func (c *Client) ReadAddresses(ctx context.Context, s *cloud.Server) error {
	got, err := c.GetServer(ctx, s.ID)
	if err != nil {
		return err
	}
	s.Addresses, s.AddressesUnknown = got.Addresses, got.AddressesUnknown
	return nil
}

func (c *Client) getServer(ctx context.Context, id string) (*sdk.Server, error) {
	if id == "" {
		// The SDK would GET the list instead.
		return nil, fmt.Errorf("cloudscale: server without an ID: %w", cloud.ErrNotFound)
	}
	var s *sdk.Server
	err := c.call(ctx, "server.get", func(ctx context.Context) (err error) {
		s, err = c.sdk.Servers.Get(ctx, id)
		return err
	})
	return s, err
}

// CreateServer creates the Machine's server unless it has one already.
//
// Only what makes the server is on this path: the spec is checked against
// the cached catalog first (so a typo costs no refused create and leaves no
// group behind), the Machine's servers are looked up directly right before
// the create (after the anti-affinity lock, when there is one), and the root
// volume is tagged by the first SyncServer after the server runs, off the
// critical path.
func (c *Client) CreateServer(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, userData []byte) (*cloud.Server, bool, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, false, err
	}
	if err := checkRef(m); err != nil {
		return nil, false, err
	}
	ctx = cloud.WithRedaction(ctx, string(userData))
	// The catalog, and whose the groups, networks, subnets and image the
	// spec names are: before anything is written (an anti-affinity group).
	if err := c.checkSpec(ctx, p, m); err != nil {
		return nil, false, err
	}
	req := serverRequest(m, p, userData)
	steps := cloud.CreateSteps{
		Look: func(ctx context.Context) ([]cloud.Server, error) {
			return c.ListServers(ctx, cloud.Selector{ClusterID: m.ClusterID, Machine: m.Name})
		},
		Send: func(ctx context.Context, group string) (*cloud.Server, error) {
			return c.sendCreate(ctx, p, req, group)
		},
	}
	var key *cloud.GroupKey
	if p.AntiAffinityKey != "" {
		key = &cloud.GroupKey{ClusterID: m.ClusterID, Key: p.AntiAffinityKey, Zone: p.Zone}
		steps.Place = func(ctx context.Context) (string, bool, error) { return c.placementGroup(ctx, *key) }
		steps.Unplace = func(ctx context.Context, group string) {
			if _, err := c.deleteGroupIfEmptyLocked(ctx, group, ""); err != nil {
				cloud.Warn(ctx, "Deleting the anti-affinity group made for a refused create failed; the cleanup retries", err, "group", group)
			}
		}
	}
	return cloud.Create(ctx, c.gate, &c.groupLocks, key, steps)
}

// sendCreate sends the create, into the anti-affinity group when there is
// one, and remembers that the new server's root volume is untagged.
func (c *Client) sendCreate(ctx context.Context, p *v1beta1.CloudscaleMachineProviderSpec, req *sdk.ServerRequest, group string) (*cloud.Server, error) {
	opts := []callOption{redacting(req.UserData)}
	if group != "" {
		req.ServerGroups = append(slices.Clone(p.ServerGroups), group)
		opts = append(opts, reclassifying(func(err error) error {
			// Another process (an old leader, a second cluster's provider
			// with the same token) may have filled or deleted the group
			// since it was listed: placing the server again will do. A
			// refusal naming one of the user's serverGroups is their
			// business.
			var invalid *cloud.InvalidConfigError
			if !errors.As(err, &invalid) || invalid.Field != "serverGroups" || (namesAny(invalid.Message, p.ServerGroups) && !strings.Contains(invalid.Message, group)) {
				return err
			}
			return &cloud.RetryableError{NotPerformed: true, Err: fmt.Errorf("cloudscale.ch server.create: anti-affinity group %s for %q refused the server, it is placed again: %s", group, p.AntiAffinityKey, invalid.Message)}
		}))
	}
	var s *sdk.Server
	err := c.call(ctx, "server.create", func(ctx context.Context) (err error) {
		s, err = c.sdk.Servers.Create(ctx, req)
		return err
	}, opts...)
	if err != nil {
		return nil, err
	}
	c.rootTagsMu.Lock()
	c.untagged[s.UUID] = true
	c.rootTagsMu.Unlock()
	return toServer(s), nil
}

func serverRequest(m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec, userData []byte) *sdk.ServerRequest {
	tags := serverTags(m, p)
	ifaces := make([]sdk.InterfaceRequest, 0, len(p.Interfaces))
	for _, in := range p.Interfaces {
		if in.Type == v1beta1.InterfaceTypePublic {
			ifaces = append(ifaces, sdk.InterfaceRequest{Network: "public"})
			continue
		}
		ir := sdk.InterfaceRequest{Network: in.NetworkUUID}
		if len(in.Addresses) > 0 {
			addrs := make([]sdk.AddressRequest, 0, len(in.Addresses))
			for _, a := range in.Addresses {
				addrs = append(addrs, sdk.AddressRequest{Subnet: a.SubnetUUID, Address: a.Address})
			}
			ir.Addresses = &addrs
		}
		ifaces = append(ifaces, ir)
	}
	req := &sdk.ServerRequest{
		Name:         serverName(m.Name, p),
		Flavor:       p.Flavor,
		Image:        p.Image,
		Zone:         p.Zone,
		VolumeSizeGB: p.RootVolumeSizeGB,
		// Never null: the API wants a list.
		SSHKeys:      append([]string{}, p.SSHKeys...),
		UseIPV6:      p.UseIPV6,
		Interfaces:   &ifaces,
		ServerGroups: slices.Clone(p.ServerGroups),
		UserData:     string(userData),
	}
	req.Tags = &tags
	return req
}

// DeleteServer deletes the server, then the provider's anti-affinity groups
// it leaves empty. Only a server that carries the Machine's identity at
// that moment, and that no Node runs on (veto, asked with that record: a
// list's record has every address the API knows, as a read by ID does), is
// deleted (a *cloud.NotOwnedError or the veto's error otherwise, and
// nothing is sent). That record is s when s is a read sent for this delete
// (cloud.ProvenOwned: the list of the Machines being deleted); otherwise
// the server is read again now.
func (c *Client) DeleteServer(ctx context.Context, m cloud.MachineRef, s *cloud.Server, veto cloud.NodeVeto) error {
	if s == nil || s.ID == "" {
		return errors.New("cloudscale: DeleteServer needs a server with an ID")
	}
	if veto == nil {
		return cloud.ErrNoVeto
	}
	if err := checkRef(m); err != nil {
		return err
	}
	// The fresh record also names the groups the server is in.
	detail := detailOf(s)
	if detail == nil || !cloud.ProvenOwned(ctx, m, s) {
		var err error
		detail, err = c.owned(ctx, m, s.ID)
		if cloud.IsNotFound(err) {
			c.forgetRootTags(s.ID)
			return nil
		}
		if err != nil {
			return err
		}
	}
	if err := cloud.CheckVeto(ctx, veto, toServer(detail), nil); err != nil {
		return err
	}
	err := c.call(ctx, "server.delete", func(ctx context.Context) error {
		return c.sdk.Servers.Delete(ctx, s.ID)
	})
	if err != nil && !cloud.IsNotFound(err) {
		return err
	}
	c.markDeleted(s.ID)
	c.forgetRootTags(s.ID)
	// The server is gone: a failure from here on must not fail its
	// delete, which would be retried from the start. Groups left behind
	// are the cleanup's (Client.CleanupGroups), which follows every
	// Machine's delete and runs in the janitor.
	if err := c.deleteEmptyGroups(ctx, m, detail); err != nil {
		cloud.Warn(ctx, "Deleting the server's empty anti-affinity groups failed; the cleanup retries", err, "server", s.ID)
	}
	return nil
}
