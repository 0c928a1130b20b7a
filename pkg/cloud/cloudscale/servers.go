package cloudscale

import (
	"context"
	"errors"
	"fmt"
	"slices"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ListServers lists the servers tagged with the selector's cluster (and
// Machine), with one API call.
func (c *Client) ListServers(ctx context.Context, sel cloud.Selector) ([]cloud.Server, error) {
	if sel.ClusterID == "" {
		return nil, errors.New("cloudscale: listing servers needs the cluster ID")
	}
	tags := selectorTags(sel)
	var list []sdk.Server
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
		if matchesFilter(list[i].Tags, tags) {
			out = append(out, *toServer(&list[i]))
		}
	}
	slices.SortStableFunc(out, func(a, b cloud.Server) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// GetServer reads a server by UUID.
func (c *Client) GetServer(ctx context.Context, id string) (*cloud.Server, error) {
	s, err := c.getServer(ctx, id)
	if err != nil {
		return nil, err
	}
	return toServer(s), nil
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
// volume is tagged by the first SyncServer, off the critical path.
func (c *Client) CreateServer(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, userData []byte) (*cloud.Server, bool, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, false, err
	}
	if err := checkRef(m); err != nil {
		return nil, false, err
	}
	ctx = cloud.WithRedaction(ctx, string(userData))
	if err := c.CheckSpec(ctx, spec); err != nil {
		return nil, false, err
	}
	req := serverRequest(m, p, userData)
	if p.AntiAffinityKey != "" {
		return c.createWithAntiAffinity(ctx, m, p, req)
	}
	return c.createIfAbsent(ctx, m, req)
}

// createIfAbsent looks for the Machine's servers and creates one only when
// there is none.
func (c *Client) createIfAbsent(ctx context.Context, m cloud.MachineRef, req *sdk.ServerRequest, opts ...callOption) (*cloud.Server, bool, error) {
	// The look and the create pass the rate limit together: the look must
	// not go stale while the create waits.
	ctx, err := c.gate.Prepay(ctx, 2)
	if err != nil {
		return nil, false, err
	}
	found, err := c.ListServers(ctx, cloud.Selector{ClusterID: m.ClusterID, Machine: m.Name})
	if err != nil {
		return nil, false, err
	}
	if len(found) > 0 {
		return &found[0], false, nil
	}
	var s *sdk.Server
	err = c.call(ctx, "server.create", func(ctx context.Context) (err error) {
		s, err = c.sdk.Servers.Create(ctx, req)
		return err
	}, append(opts, redacting(req.UserData))...)
	if err != nil {
		return nil, false, err
	}
	c.rootTagsMu.Lock()
	c.untagged[s.UUID] = true
	c.rootTagsMu.Unlock()
	return toServer(s), true, nil
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
// it leaves empty.
func (c *Client) DeleteServer(ctx context.Context, m cloud.MachineRef, s *cloud.Server) error {
	if s == nil || s.ID == "" {
		return errors.New("cloudscale: DeleteServer needs a server with an ID")
	}
	detail := detailOf(s)
	if detail == nil {
		// The groups are only known from the server's record.
		d, err := c.getServer(ctx, s.ID)
		if cloud.IsNotFound(err) {
			c.forgetRootTags(s.ID)
			return nil
		}
		if err != nil {
			return err
		}
		detail = d
	}
	err := c.call(ctx, "server.delete", func(ctx context.Context) error {
		return c.sdk.Servers.Delete(ctx, s.ID)
	})
	if err != nil && !cloud.IsNotFound(err) {
		return err
	}
	c.forgetRootTags(s.ID)
	return c.deleteEmptyGroups(ctx, m, detail)
}
