package clouds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
)

// The Exoscale CCM, as exoscale/exoscale-cloud-controller-manager v0.34.0
// behaves (exoscale/exoscale.go, exoscale_config.go, client.go,
// instances.go, zones.go, common.go): not InstancesV2 but the older
// Instances and Zones, so the framework's cloud-node controller takes the
// instance ID from the Node's status.nodeInfo.systemUUID (no cloud call),
// then asks for the addresses (GET /v2/instance/{id}) and the instance type
// (GET /v2/instance/{id} again, GET /v2/instance-type/{id}); the zone is
// the CCM's own zone, returned as the Node's region, with no zone at all.
// At start it lists the zones (GET /v2/zone) and talks to its zone's
// api-endpoint from then on. Credentials and endpoint come from
// EXOSCALE_API_KEY, EXOSCALE_API_SECRET and EXOSCALE_API_ENDPOINT, the zone
// from EXOSCALE_API_ZONE (or EXOSCALE_ZONE; the vendor's last resort, the
// instance's metadata service, does not exist here).
const (
	exoscaleName          = ccm.Exoscale
	exoscaleProviderIDPre = exoscaleName + "://"
)

// labelInvalidChars are removed from an instance type's name before it
// becomes a label value (instances.go).
var labelInvalidChars = regexp.MustCompile(`^[^A-Za-z0-9]|[^A-Za-z0-9]$|([^-A-Za-z0-9_.])`)

type exoscaleCloud struct {
	zone                  string
	key, secret, endpoint string
	client                *v3.Client
	kclient               kubernetes.Interface
}

func newExoscale(config io.Reader) (cloudprovider.Interface, error) {
	if config != nil {
		return nil, errors.New("the local Exoscale CCM is configured by its environment only, not by --cloud-config")
	}
	zone := os.Getenv(ccm.ExoscaleZoneEnv)
	if zone == "" {
		zone = os.Getenv(ccm.ExoscaleLegacyZoneEnv)
	}
	if zone == "" {
		return nil, fmt.Errorf("get metadata: no %s and no metadata service", ccm.ExoscaleZoneEnv)
	}
	return &exoscaleCloud{
		zone: zone, key: os.Getenv(ccm.ExoscaleKeyEnv), secret: os.Getenv(ccm.ExoscaleSecretEnv), endpoint: os.Getenv(ccm.ExoscaleEndpointEnv),
	}, nil
}

// Initialize makes the API client and switches it to the zone's endpoint,
// as the vendor's does; an error there ends the process.
func (p *exoscaleCloud) Initialize(cb cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	p.kclient = kubernetes.NewForConfigOrDie(cb.ConfigOrDie("exoscale-cloud-controller-manager"))
	if p.key == "" || p.secret == "" {
		klog.Fatalf("could not create Exoscale client: incomplete or missing Exoscale API credentials")
	}
	opts := []v3.ClientOpt{v3.ClientOptWithUserAgent("Exoscale-K8s-Cloud-Controller/localcluster")}
	if p.endpoint != "" {
		opts = append(opts, v3.ClientOptWithEndpoint(v3.Endpoint(p.endpoint)))
	}
	client, err := v3.NewClient(credentials.NewStaticCredentials(p.key, p.secret), opts...)
	if err != nil {
		klog.Fatalf("could not create Exoscale client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	endpoint, err := client.GetZoneAPIEndpoint(ctx, v3.ZoneName(p.zone))
	if err != nil {
		klog.Fatalf("could not create Exoscale client: %v", err)
	}
	p.client = client.WithEndpoint(endpoint)
}

func (p *exoscaleCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }
func (p *exoscaleCloud) Instances() (cloudprovider.Instances, bool)       { return p, true }
func (p *exoscaleCloud) InstancesV2() (cloudprovider.InstancesV2, bool)   { return nil, false }
func (p *exoscaleCloud) Zones() (cloudprovider.Zones, bool)               { return p, true }
func (p *exoscaleCloud) Clusters() (cloudprovider.Clusters, bool)         { return nil, false }
func (p *exoscaleCloud) Routes() (cloudprovider.Routes, bool)             { return nil, false }
func (p *exoscaleCloud) ProviderName() string                             { return exoscaleName }
func (p *exoscaleCloud) HasClusterID() bool                               { return false }

// instance is GET /v2/instance/{id} of a providerID with or without the
// exoscale:// prefix (common.go).
func (p *exoscaleCloud) instance(ctx context.Context, providerID string) (*v3.Instance, error) {
	if providerID == "" {
		return nil, errors.New("provider ID cannot be empty")
	}
	return p.client.GetInstance(ctx, v3.UUID(strings.TrimPrefix(providerID, exoscaleProviderIDPre)))
}

func (p *exoscaleCloud) NodeAddresses(ctx context.Context, name types.NodeName) ([]corev1.NodeAddress, error) {
	id, err := p.InstanceID(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.NodeAddressesByProviderID(ctx, id)
}

// NodeAddressesByProviderID: the instance's name as Hostname; an instance
// in a private network has the Node's provided-node-ip annotation (the
// kubelet's --node-ip) as InternalIP, if any; the public IPv4 and IPv6 are
// ExternalIPs, and also InternalIPs when no private one was found.
func (p *exoscaleCloud) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]corev1.NodeAddress, error) {
	instance, err := p.instance(ctx, providerID)
	if err != nil {
		return nil, err
	}
	addrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: instance.Name}}
	internal := false
	if len(instance.PrivateNetworks) > 0 {
		// The vendor's Get result is never nil (client-go returns an empty
		// Node with its error), so a failed lookup is a Node without the
		// annotation; it tries the lower-case name only for a nil Node.
		node, _ := p.kclient.CoreV1().Nodes().Get(ctx, instance.Name, metav1.GetOptions{})
		if ip, ok := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; ok {
			addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
			internal = true
		}
	}
	public := []string{}
	if instance.PublicIP != nil {
		public = append(public, instance.PublicIP.String())
	}
	if instance.Ipv6Address != "" {
		public = append(public, instance.Ipv6Address)
	}
	for _, ip := range public {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
		if !internal {
			addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
	return addrs, nil
}

// InstanceID is the Node's systemUUID, which is the instance's ID: one GET
// of the Node, no cloud call.
func (p *exoscaleCloud) InstanceID(ctx context.Context, name types.NodeName) (string, error) {
	node, err := p.kclient.CoreV1().Nodes().Get(ctx, string(name), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to retrieve node %s from the apiserver: %s", name, err)
	}
	return node.Status.NodeInfo.SystemUUID, nil
}

func (p *exoscaleCloud) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	id, err := p.InstanceID(ctx, name)
	if err != nil {
		return "", err
	}
	return p.InstanceTypeByProviderID(ctx, id)
}

// InstanceTypeByProviderID is <family>.<size> of the instance's type.
func (p *exoscaleCloud) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	instance, err := p.instance(ctx, providerID)
	if err != nil {
		return "", err
	}
	if instance.InstanceType == nil {
		return "", fmt.Errorf("instance %s has no instance type", instance.ID)
	}
	t, err := p.client.GetInstanceType(ctx, instance.InstanceType.ID)
	if err != nil {
		return "", err
	}
	return labelInvalidChars.ReplaceAllString(fmt.Sprintf("%s.%s", t.Family, t.Size), ""), nil
}

func (p *exoscaleCloud) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}

func (p *exoscaleCloud) CurrentNodeName(_ context.Context, hostname string) (types.NodeName, error) {
	return types.NodeName(hostname), nil
}

// InstanceExistsByProviderID: only a 404 says the instance is gone.
func (p *exoscaleCloud) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	if _, err := p.instance(ctx, providerID); err != nil {
		if errors.Is(err, v3.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (p *exoscaleCloud) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	instance, err := p.instance(ctx, providerID)
	if err != nil {
		return false, err
	}
	return instance.State == "stopping" || instance.State == "stopped", nil
}

// GetZone is the zone of the machine the CCM runs on, from the instance
// metadata service (the kubelet's question, never the CCM's controllers').
func (p *exoscaleCloud) GetZone(context.Context) (cloudprovider.Zone, error) {
	return cloudprovider.Zone{}, errors.New("get metadata: no instance metadata service on the local control plane")
}

// GetZoneByProviderID: every Node is in the CCM's zone, given as the
// region; the zone (failure domain) stays empty.
func (p *exoscaleCloud) GetZoneByProviderID(context.Context, string) (cloudprovider.Zone, error) {
	return cloudprovider.Zone{Region: p.zone}, nil
}

func (p *exoscaleCloud) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	node, err := p.kclient.CoreV1().Nodes().Get(ctx, string(name), metav1.GetOptions{})
	if err != nil {
		return cloudprovider.Zone{}, fmt.Errorf("failed to retrieve node %s from the apiserver: %s", name, err)
	}
	return p.GetZoneByProviderID(ctx, node.Status.NodeInfo.SystemUUID)
}
