package nodes_test

import (
	"errors"
	"strings"
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

// A Node vetoes by every address it reports, of any type and however it
// is written, and, where the cloud cannot tell an address of the server
// (a private network whose lease it does not know, an interface the server
// configures itself), by its name alone: a Node of the server's name that
// reports only such an address keeps the server.
func TestVetoByEveryAddress(t *testing.T) {
	ext := node("db-1", "", "2001:db8::1:0:0:1")
	ext.Status.Addresses[0].Type = corev1.NodeExternalIP
	ix := nodes.New("exoscale", []corev1.Node{
		node("worker-1", "", "172.18.200.101"),
		ext,
		node("by-id", "exoscale://i-9"),
	})
	public := server("i-1", "worker-1", "194.182.1.1")
	if got := ix.Vetoes(public); len(got) != 0 {
		t.Errorf("a server whose every address is known, none the Node's: %v", nodes.Describe(got))
	}
	private := public
	private.AddressesUnknown = []string{"private network n-1"}
	got := ix.Vetoes(private)
	if len(got) != 1 || got[0].By != nodes.ByNameOnly || !strings.Contains(got[0].String(), "private network n-1") {
		t.Errorf("private addresses unknown: %v, want Node worker-1 by name", nodes.Describe(got))
	}
	if len(ix.On(private)) != 0 {
		t.Error("On matched by name alone: adopt would pair a server with a Node by its name")
	}
	known := server("i-1", "worker-1", "194.182.1.1", "172.18.200.101")
	if got := ix.Vetoes(known); len(got) != 1 || got[0].By != nodes.ByName {
		t.Errorf("the private address read: %v, want Node worker-1 by name and address", nodes.Describe(got))
	}
	if got := ix.Vetoes(server("i-2", "db-1.example.com", "2001:db8:0:0:1::1")); len(got) != 1 {
		t.Errorf("an ExternalIP written another way: %v, want Node db-1", nodes.Describe(got))
	}

	veto := nodes.Veto{Index: ix}
	if veto.NeedsAddresses(&cloud.Server{ID: "i-9", Name: "by-id"}) {
		t.Error("a server with no Node of its name without a providerID needs its addresses read")
	}
	if !veto.NeedsAddresses(&private) {
		t.Error("a server with a Node of its name without a providerID needs no address read")
	}
	var vetoed *nodes.VetoedError
	if err := veto.Check(&cloud.Server{ID: "i-9", Name: "x"}); !errors.As(err, &vetoed) || vetoed.Nodes[0].Node.Name != "by-id" {
		t.Errorf("Check of a server a Node runs on by providerID: %v", err)
	}
	mine := nodes.Veto{Index: ix, Except: func(m nodes.Match) bool { return m.Node.Name == "by-id" }}
	if err := mine.Check(&cloud.Server{ID: "i-9", Name: "x"}); err != nil {
		t.Errorf("the Node the veto lets be: %v", err)
	}
}
