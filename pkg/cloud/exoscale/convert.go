package exoscale

import (
	"maps"
	"net"
	"sort"

	v3 "github.com/exoscale/egoscale/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// instance is the client's record of an instance, the Detail of its
// cloud.Server: the API's answer and the zone it came from. Full is set
// when it comes from a GET of the instance, which says more than a list
// (disk size, anti-affinity groups, deploy target).
type instance struct {
	v3.Instance
	Zone string
	Full bool
	// stub is set on the record a create makes from its request: the
	// instance's addresses and state are not known until it is read.
	stub bool
}

// fromListItem makes a record of a list's item.
func fromListItem(it v3.ListInstancesResponseInstances, zone string) *instance {
	inst := v3.Instance{
		CreatedAT: it.CreatedAT, ID: it.ID, InstanceType: it.InstanceType, Ipv6Address: it.Ipv6Address,
		Labels: it.Labels, MACAddress: it.MACAddress, Manager: it.Manager, Name: it.Name,
		PublicIP: it.PublicIP, PublicIPAssignment: it.PublicIPAssignment, SecurityGroups: it.SecurityGroups,
		SSHKey: it.SSHKey, SSHKeys: it.SSHKeys, State: it.State, Template: it.Template,
	}
	for _, pn := range it.PrivateNetworks {
		inst.PrivateNetworks = append(inst.PrivateNetworks, v3.InstancePrivateNetworks(pn))
	}
	return &instance{Instance: inst, Zone: zone}
}

// toServer describes an instance to the Machine API. typeName names its
// instance type (family.size) when the client knows it; private are its
// addresses on its private networks, by network ID, as far as known (""
// for a network that leases none): the networks without one are its
// AddressesUnknown.
func toServer(d *instance, typeName string, private map[string]string) *cloud.Server {
	if typeName == "" && d.InstanceType != nil {
		typeName = string(d.InstanceType.ID)
	}
	return &cloud.Server{
		ID:               string(d.ID),
		Name:             d.Name,
		Machine:          d.Labels[v1beta1.LabelMachineName],
		ClusterID:        d.Labels[v1beta1.LabelClusterID],
		CreatedAt:        d.CreatedAT,
		Status:           string(d.State),
		Running:          d.State == v3.InstanceStateRunning,
		InstanceType:     typeName,
		Region:           d.Zone,
		Zone:             d.Zone,
		Addresses:        nodeAddresses(d, private),
		AddressesUnknown: unknownAddresses(d, private),
		Tags:             maps.Clone(map[string]string(d.Labels)),
		Detail:           d,
	}
}

// unknownAddresses names the instance's private networks whose address on
// it is not known: not read yet, or a network that leases none (the
// instance configures its own).
func unknownAddresses(d *instance, private map[string]string) []string {
	var out []string
	for _, n := range d.PrivateNetworks {
		if private[string(n.ID)] == "" {
			out = append(out, "private network "+string(n.ID))
		}
	}
	return out
}

// nodeAddresses lists internal addresses first, as the kubelet reports
// them: private network addresses are InternalIP, public ones ExternalIP,
// and an instance without a private address uses its public IPv4 as
// InternalIP too (the kubelet of such a Node reports that one).
func nodeAddresses(d *instance, private map[string]string) []corev1.NodeAddress {
	var internal, external []corev1.NodeAddress
	var ips []string
	for _, n := range d.PrivateNetworks {
		if ip := private[string(n.ID)]; ip != "" {
			ips = append(ips, ip)
		}
	}
	sort.Strings(ips)
	for _, ip := range ips {
		internal = append(internal, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if v4 := ipString(d.PublicIP); v4 != "" {
		external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: v4})
		if len(internal) == 0 {
			internal = append(internal, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: v4})
		}
	}
	if d.Ipv6Address != "" {
		external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: d.Ipv6Address})
	}
	return append(internal, external...)
}

func ipString(ip net.IP) string {
	if len(ip) == 0 || ip.IsUnspecified() {
		return ""
	}
	return ip.String()
}

// detailOf returns the record a cloud.Server of this package carries.
func detailOf(s *cloud.Server) *instance {
	if s == nil {
		return nil
	}
	d, _ := s.Detail.(*instance)
	return d
}
