package clouds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	"github.com/google/uuid"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
)

// The cloudscale.ch CCM, as cloudscale-ch/cloudscale-cloud-controller-manager
// 1.3.0 behaves (pkg/cloudscale_ccm/cloud.go, instances.go,
// server_mapper.go, provider_id.go, pkg/internal/limiter/limiter.go):
// InstancesV2 only; a Node with a providerID is GET /v1/servers/{uuid}
// (404: none; a providerID of another cloud or without a UUID: an error), a
// Node without one is GET /v1/servers and the server whose name equals the
// Node's name exactly; addresses are the server's name as Hostname, every
// address of a public interface as ExternalIP and of any other interface as
// InternalIP; the instance type is the flavor's slug, the zone the zone's
// slug and the region the zone without its digits. It has no cluster ID
// (--allow-untagged-cloud), reads the token from CLOUDSCALE_ACCESS_TOKEN and
// the API from CLOUDSCALE_API_URL (the SDK's NewClient does), and times
// calls out after CLOUDSCALE_API_TIMEOUT seconds (default 20).
const cloudscaleName = ccm.Cloudscale

type cloudscaleCloud struct {
	instances *cloudscaleInstances
}

func newCloudscale(config io.Reader) (cloudprovider.Interface, error) {
	if config != nil {
		klog.Warning("--cloud-config received but ignored")
	}
	token := os.Getenv(ccm.CloudscaleTokenEnv)
	if token == "" {
		return nil, fmt.Errorf("no %s configured", ccm.CloudscaleTokenEnv)
	}
	timeout := 20 * time.Second
	if s := os.Getenv(ccm.CloudscaleTimeoutEnv); s != "" {
		var n int
		if _, err := fmt.Sscan(s, &n); err == nil && n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}))
	hc.Timeout = timeout
	return &cloudscaleCloud{instances: &cloudscaleInstances{client: sdk.NewClient(hc)}}, nil
}

func (c *cloudscaleCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer: the vendor's has one; the local control plane runs only the
// Node controllers.
func (c *cloudscaleCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }
func (c *cloudscaleCloud) Instances() (cloudprovider.Instances, bool)       { return nil, false }
func (c *cloudscaleCloud) InstancesV2() (cloudprovider.InstancesV2, bool)   { return c.instances, true }
func (c *cloudscaleCloud) Zones() (cloudprovider.Zones, bool)               { return nil, false }
func (c *cloudscaleCloud) Clusters() (cloudprovider.Clusters, bool)         { return nil, false }
func (c *cloudscaleCloud) Routes() (cloudprovider.Routes, bool)             { return nil, false }
func (c *cloudscaleCloud) ProviderName() string                             { return cloudscaleName }
func (c *cloudscaleCloud) HasClusterID() bool                               { return false }

type cloudscaleInstances struct {
	client *sdk.Client
}

// InstanceExists: a Node without a providerID is an error, not "gone": a
// name is too weak to delete a Node on (instances.go).
func (i *cloudscaleInstances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" {
		return false, fmt.Errorf("node %s has no ProviderID", node.Name)
	}
	servers, err := i.findByNode(ctx, node)
	if err != nil {
		return false, fmt.Errorf("unable to find node %s: %w", node.Name, err)
	}
	switch len(servers) {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("unable to find node %s: found more than one", node.Name)
}

// InstanceShutdown: stopped is shut down.
func (i *cloudscaleInstances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" {
		return false, fmt.Errorf("node %s has no ProviderID", node.Name)
	}
	server, err := i.one(ctx, node)
	if err != nil {
		return false, err
	}
	return server.Status == "stopped", nil
}

func (i *cloudscaleInstances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	server, err := i.one(ctx, node)
	if err != nil {
		return nil, err
	}
	id, err := uuid.Parse(server.UUID)
	if err != nil {
		return nil, fmt.Errorf("invalid server UUID: %s", server.UUID)
	}
	addrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: server.Name}}
	for _, iface := range server.Interfaces {
		typ := corev1.NodeInternalIP
		if iface.Type == "public" {
			typ = corev1.NodeExternalIP
		}
		for _, a := range iface.Addresses {
			addrs = append(addrs, corev1.NodeAddress{Type: typ, Address: a.Address})
		}
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    cloudscaleName + "://" + id.String(),
		InstanceType:  server.Flavor.Slug,
		NodeAddresses: addrs,
		Zone:          server.Zone.Slug,
		Region:        strings.TrimRight(server.Zone.Slug, "0123456789"),
	}, nil
}

// one is the Node's server, an error when there is none or more than one.
func (i *cloudscaleInstances) one(ctx context.Context, node *corev1.Node) (*sdk.Server, error) {
	servers, err := i.findByNode(ctx, node)
	if err == nil && len(servers) != 1 {
		err = errors.New("found none")
		if len(servers) > 1 {
			err = errors.New("found more than one")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("unable to find node %s: %w", node.Name, err)
	}
	return &servers[0], nil
}

// findByNode: by providerID when the Node has one, else every server whose
// name is the Node's (server_mapper.go).
func (i *cloudscaleInstances) findByNode(ctx context.Context, node *corev1.Node) ([]sdk.Server, error) {
	if node.Spec.ProviderID != "" {
		id, err := parseCloudscaleProviderID(node.Spec.ProviderID)
		if err != nil {
			return nil, fmt.Errorf("%s is not a valid cloudscale provider id: %w", node.Spec.ProviderID, err)
		}
		server, err := i.client.Servers.Get(ctx, id.String())
		if err != nil {
			var resp *sdk.ErrorResponse
			if errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound {
				return nil, nil
			}
			return nil, err
		}
		return []sdk.Server{*server}, nil
	}
	all, err := i.client.Servers.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []sdk.Server
	for _, s := range all {
		if s.Name == node.Name {
			out = append(out, s)
		}
	}
	return out, nil
}

// parseCloudscaleProviderID accepts "cloudscale://<uuid>", spaces around
// either part allowed (provider_id.go).
func parseCloudscaleProviderID(text string) (uuid.UUID, error) {
	scheme, id, ok := strings.Cut(text, "://")
	if !ok {
		return uuid.UUID{}, fmt.Errorf("bad providerID: %s has no '://'", text)
	}
	scheme, id = strings.TrimSpace(scheme), strings.TrimSpace(id)
	switch {
	case scheme == "":
		return uuid.UUID{}, fmt.Errorf("bad providerID: no provider in %s", text)
	case scheme != cloudscaleName:
		return uuid.UUID{}, fmt.Errorf("not a cloudscale providerID: %s", text)
	case id == "":
		return uuid.UUID{}, fmt.Errorf("bad providerID: no id in %s", text)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("bad providerID (no uuid at end): %s", text)
	}
	return u, nil
}
