package cloudscale

import (
	"context"
	"errors"
	"fmt"
	"slices"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// FindServers lists the servers tagged with the Machine's name and cluster.
func (c *Client) FindServers(ctx context.Context, m cloud.MachineRef) ([]cloud.Server, error) {
	if err := checkRef(m); err != nil {
		return nil, err
	}
	return c.listServers(ctx, machineTags(m))
}

// ListServers lists the servers tagged with the cluster.
func (c *Client) ListServers(ctx context.Context, clusterID string) ([]cloud.Server, error) {
	if clusterID == "" {
		return nil, errors.New("cloudscale: listing a cluster's servers needs the cluster ID")
	}
	return c.listServers(ctx, map[string]string{v1beta1.TagClusterID: clusterID})
}

func (c *Client) listServers(ctx context.Context, tags map[string]string) ([]cloud.Server, error) {
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
		if hasTags(list[i].Tags, tags) {
			out = append(out, *toServer(&list[i]))
		}
	}
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

// CreateServer creates the Machine's server and tags its root volume.
//
// Tagging the root volume is best effort here: the server exists once the
// create succeeded, and failing now would only make the caller look for it
// (by its tags) and find it. A failure is logged and left to the first
// SyncServer, which tags the volume when it has no record of having done so.
func (c *Client) CreateServer(ctx context.Context, m cloud.MachineRef, spec cloud.Spec, userData []byte) (*cloud.Server, error) {
	p, err := providerSpec(spec)
	if err != nil {
		return nil, err
	}
	if err := checkRef(m); err != nil {
		return nil, err
	}
	if err := c.knownFlavor(ctx, p.Flavor); err != nil {
		return nil, err
	}
	req := serverRequest(m, p, userData)

	var s *sdk.Server
	if p.AntiAffinityKey != "" {
		s, err = c.createWithAntiAffinity(ctx, m, p, req)
	} else {
		s, err = c.createServer(ctx, req)
	}
	if err != nil {
		return nil, withSecretName(err, secretName(p))
	}
	c.tagNewRootVolume(ctx, m, p, s)
	return toServer(s), nil
}

func (c *Client) createServer(ctx context.Context, req *sdk.ServerRequest, opts ...callOption) (*sdk.Server, error) {
	var s *sdk.Server
	err := c.call(ctx, "server.create", func(ctx context.Context) (err error) {
		s, err = c.sdk.Servers.Create(ctx, req)
		return err
	}, append(opts, redacting(req.UserData))...)
	return s, err
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
		Name:         serverName(m, p),
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

func secretName(p *v1beta1.CloudscaleMachineProviderSpec) string {
	if p.TokenSecret == nil {
		return ""
	}
	return p.TokenSecret.Name
}

// tagNewRootVolume tags the root volume of a server just created, whose
// volume has no tags yet, so no read is needed.
func (c *Client) tagNewRootVolume(ctx context.Context, m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec, s *sdk.Server) {
	if len(s.Volumes) == 0 {
		return
	}
	tags := rootVolumeTags(m, p)
	if err := c.setVolumeTags(ctx, s.Volumes[0].UUID, tags); err != nil {
		logf.FromContext(ctx).Info("Could not tag the root volume of the new server; the next sync retries",
			"server", s.UUID, "volume", s.Volumes[0].UUID, "error", withSecretName(err, secretName(p)).Error())
		return
	}
	c.rememberRootTags(s.UUID, tags)
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
