package cloudscale

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// A server on a private network without a subnet has an interface the API
// gives no address: the server configures its own, which its Node reports.
// The delete's veto cannot compare that address, so a Node of the server's
// name without a providerID keeps it (by name); one with another server's
// providerID does not.
func TestDeleteVetoOnAnAddressTheCloudDoesNotKnow(t *testing.T) {
	v := newEnv(t, emucs.Config{})
	noSubnet := false
	n, err := v.sdk.Networks.Create(v.ctx, &sdk.NetworkCreateRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "cluster", AutoCreateIPV4Subnet: &noSubnet})
	if err != nil {
		t.Fatal(err)
	}
	s := v.create("worker-a", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Interfaces = append(p.Interfaces, v1beta1.Interface{Type: v1beta1.InterfaceTypePrivate, NetworkUUID: n.UUID})
	}))
	if len(s.AddressesUnknown) != 1 {
		t.Fatalf("the server's unknown addresses %v, want its private network's", s.AddressesUnknown)
	}
	node := func(pid string) nodes.Veto {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-a"}, Spec: corev1.NodeSpec{ProviderID: pid},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.99.0.7"}}}}
		return nodes.Veto{Index: nodes.New(Name, []corev1.Node{n})}
	}
	var vetoed *nodes.VetoedError
	if err := v.client.DeleteServer(v.ctx, ref("worker-a"), s, node("")); !errors.As(err, &vetoed) || vetoed.Nodes[0].By != nodes.ByNameOnly {
		t.Fatalf("delete of a server a Node of its name may run on: %v", err)
	}
	if err := v.client.DeleteServer(v.ctx, ref("worker-a"), s, node("cloudscale://00000000-0000-4000-8000-000000000000")); err != nil {
		t.Fatalf("delete with the Node on another server: %v", err)
	}
	if len(v.servers()) != 0 {
		t.Error("the server is still there")
	}
}
