package bootsim_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// A running server gets the Node its kubelet would register — named as its
// Machine's NodeInternalDNS, with its provider ID, capacity and addresses,
// marked for kwok — and a deleted server's Node stops heartbeating.
func TestNodesFollowServers(t *testing.T) {
	ctx := context.Background()
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t))
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	emu, err := emucs.New(emucs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	sdk := cloudscale.NewClient(nil)
	sdk.BaseURL, _ = url.Parse(srv.URL + "/")
	sdk.AuthToken = "t"
	server, err := sdk.Servers.Create(ctx, &cloudscale.ServerRequest{Name: "worker-a", Flavor: "flex-16-4", Image: "debian-12", Zone: "lpg1", VolumeSizeGB: 50})
	if err != nil {
		t.Fatal(err)
	}

	// The Machine says what the Node's name will be.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-machine-api"}}); err != nil {
		t.Fatal(err)
	}
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", Namespace: "openshift-machine-api"}}
	m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{}`)}
	providerID := "cloudscale://" + server.UUID
	m.Spec.ProviderID = &providerID
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalDNS, Address: "worker-a.c1.example.com"}}
	if err := c.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}

	slow := bootsim.New(c, emu, bootsim.Options{RegisterDelay: time.Hour})
	if err := slow.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-a.c1.example.com"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Node registered before the register delay passed (%v)", err)
	}

	sim := bootsim.New(c, emu, bootsim.Options{})
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-a.c1.example.com"}, &node); err != nil {
		t.Fatalf("no Node named as the Machine's NodeInternalDNS: %v", err)
	}
	if node.Spec.ProviderID != providerID || node.Annotations[localcluster.KwokNodeAnnotation] != "fake" {
		t.Errorf("providerID %q, kwok annotation %q", node.Spec.ProviderID, node.Annotations[localcluster.KwokNodeAnnotation])
	}
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", corev1.ResourceEphemeralStorage: "50Gi", corev1.ResourcePods: "250"}
	for name, q := range want {
		if got := node.Status.Capacity[name]; got.Cmp(resource.MustParse(q)) != 0 {
			t.Errorf("capacity %s = %s, want %s (flex-16-4, 50 GB root volume)", name, got.String(), q)
		}
	}
	if node.Labels["topology.kubernetes.io/zone"] != "lpg1" || node.Labels["topology.kubernetes.io/region"] != "lpg" || node.Labels["node.kubernetes.io/instance-type"] != "flex-16-4" {
		t.Errorf("labels %v", node.Labels)
	}
	var internal, external bool
	for _, a := range node.Status.Addresses {
		internal = internal || a.Type == corev1.NodeInternalIP
		external = external || a.Type == corev1.NodeExternalIP
	}
	if !internal || !external {
		t.Errorf("addresses %v lack an InternalIP or ExternalIP", node.Status.Addresses)
	}

	// A second step registers nothing twice.
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}

	if err := sdk.Servers.Delete(ctx, server.UUID); err != nil {
		t.Fatal(err)
	}
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &node); err != nil {
		t.Fatal(err)
	}
	if _, managed := node.Annotations[localcluster.KwokNodeAnnotation]; managed {
		t.Errorf("the Node of a deleted server still has its kubelet (kwok annotation)")
	}

	// A kubelet registers its Node once: a Node deleted while the simulator
	// still sees its server running stays deleted. (The machine controller
	// deletes the Node right after the server; a look at the emulator from
	// just before must not bring the Node back for good.)
	other, err := sdk.Servers.Create(ctx, &cloudscale.ServerRequest{Name: "worker-b", Flavor: "flex-16-4", Image: "debian-12", Zone: "lpg1", VolumeSizeGB: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var nodeB corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: other.Name}, &nodeB); err != nil {
		t.Fatalf("no Node for server %s: %v", other.Name, err)
	}
	if err := c.Delete(ctx, &nodeB); err != nil {
		t.Fatal(err)
	}
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: other.Name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted Node %s registered again (%v)", other.Name, err)
	}
}
