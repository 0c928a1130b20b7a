package nodes_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

func node(name, providerID string, ips ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func server(id, name string, ips ...string) cloud.Server {
	s := cloud.Server{ID: id, Name: name}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return s
}

func TestNodesOnAServer(t *testing.T) {
	ix := nodes.New("cloudscale", []corev1.Node{
		node("by-id", "cloudscale://s1"),
		// a Terraform node: no providerID, its hostname the server's
		// name's first label
		node("infra-7a8b", "", "10.0.0.7"),
		node("worker-full.example.com", "", "10.0.0.9"),
		// the same name, but another server's providerID: runs there
		node("infra-9c0d", "cloudscale://s9", "10.0.0.8"),
		// the same name as another server, no address in common: another
		// cluster's node of that name
		node("lookalike", "", "192.168.1.1"),
		node("other-cloud", "exoscale://s1"),
	})
	for _, tc := range []struct {
		server cloud.Server
		want   []string
	}{
		{server("s1", "whatever"), []string{"Node by-id (by providerID)"}},
		{server("s2", "infra-7a8b.green.example.com", "10.0.0.7"), []string{"Node infra-7a8b (by name and address)"}},
		{server("s3", "worker-full.example.com", "10.0.0.9"), []string{"Node worker-full.example.com (by name and address)"}},
		{server("s4", "infra-9c0d.green.example.com", "10.0.0.8"), nil},
		{server("s5", "lookalike", "10.0.0.5"), nil},
		{server("s6", "infra-7a8b", "10.9.9.9"), nil},
	} {
		got := ix.On(tc.server)
		if len(got) != len(tc.want) {
			t.Errorf("%s (%s): %v, want %v", tc.server.ID, tc.server.Name, nodes.Describe(got), tc.want)
			continue
		}
		for i := range got {
			if got[i].String() != tc.want[i] {
				t.Errorf("%s: %s, want %s", tc.server.ID, got[i], tc.want[i])
			}
		}
	}
}
