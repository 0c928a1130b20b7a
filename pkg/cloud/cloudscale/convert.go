package cloudscale

import (
	"maps"
	"net/netip"
	"slices"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

func toServer(s *sdk.Server) *cloud.Server {
	return &cloud.Server{
		ID:               s.UUID,
		Name:             s.Name,
		Machine:          s.Tags[v1beta1.TagMachineName],
		ClusterID:        s.Tags[v1beta1.TagClusterID],
		CreatedAt:        s.CreatedAt,
		Status:           s.Status,
		Running:          s.Status == sdk.ServerRunning,
		InstanceType:     s.Flavor.Slug,
		Zone:             s.Zone.Slug,
		Region:           regionOf(s.Zone.Slug),
		Addresses:        nodeAddresses(s),
		AddressesUnknown: unknownAddresses(s),
		Tags:             maps.Clone(map[string]string(s.Tags)),
		Detail:           s,
	}
}

// unknownAddresses names the private interfaces without an address: the
// server was given none on that network (`addresses: []`, or a network
// without a subnet) and configures its own, which the API does not know.
func unknownAddresses(s *sdk.Server) []string {
	var out []string
	for _, i := range s.Interfaces {
		if i.Type != "public" && !slices.ContainsFunc(i.Addresses, func(a sdk.Address) bool { return a.Address != "" }) {
			out = append(out, "private network "+i.Network.UUID)
		}
	}
	return out
}

// nodeAddresses lists internal addresses first, as the kubelet reports them:
// private addresses are InternalIP, public ones ExternalIP, and a server
// without private addresses uses its public IPv4 as InternalIP too (the
// kubelet of such a Node reports that one).
func nodeAddresses(s *sdk.Server) []corev1.NodeAddress {
	var internal, external, publicV4 []corev1.NodeAddress
	for _, i := range s.Interfaces {
		for _, a := range i.Addresses {
			if a.Address == "" {
				continue
			}
			if i.Type != "public" {
				internal = append(internal, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.Address})
				continue
			}
			external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a.Address})
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				publicV4 = append(publicV4, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.Address})
			}
		}
	}
	if len(internal) == 0 {
		internal = publicV4
	}
	return append(internal, external...)
}

// detailOf returns the SDK record a cloud.Server of this package carries.
func detailOf(s *cloud.Server) *sdk.Server {
	if s == nil {
		return nil
	}
	d, _ := s.Detail.(*sdk.Server)
	return d
}
