package bootsim_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	"github.com/appuio/machine-api-provider/pkg/demo"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// emulated is one cloud's emulator, driven through its real SDK, and the
// boot simulation's view of it (pkg/demo's).
type emulated struct {
	view bootsim.Cloud
	// create makes a server named name, 4 vCPUs, 50 GiB disk, with user
	// data (none if ""), and returns its ID; delete deletes it.
	create func(t *testing.T, name, userData string) string
	delete func(t *testing.T, id string)
	// cloudHostname is the hostname the cloud gives a server named name
	// whose user data sets none.
	cloudHostname func(name string) string
	scheme        string
	// What the Node of such a server has.
	memory, instanceType, zone, region string
}

func cloudscaleEmulator(t *testing.T) emulated {
	emu, err := emucs.New(emucs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	sdk := cloudscale.NewClient(nil)
	sdk.BaseURL, _ = url.Parse(srv.URL + "/")
	sdk.AuthToken = "t"
	return emulated{
		view: demo.CloudscaleServers(emu), scheme: "cloudscale",
		create: func(t *testing.T, name, userData string) string {
			s, err := sdk.Servers.Create(context.Background(), &cloudscale.ServerRequest{Name: name, Flavor: "flex-16-4", Image: "debian-12", Zone: "lpg1", VolumeSizeGB: 50, UserData: userData})
			if err != nil {
				t.Fatal(err)
			}
			return s.UUID
		},
		delete: func(t *testing.T, id string) {
			if err := sdk.Servers.Delete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		},
		// Nothing known names an RHCOS server on cloudscale.ch
		// (pkg/demo's cloudscaleView).
		cloudHostname: func(string) string { return bootsim.DefaultHostname },
		memory:        "16Gi", instanceType: "flex-16-4", zone: "lpg1", region: "lpg",
	}
}

func exoscaleEmulator(t *testing.T) emulated {
	emu, err := emuexo.New(emuexo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	sdk, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret),
		v3.ClientOptWithEndpoint(v3.Endpoint(srv.URL+"/v2")))
	if err != nil {
		t.Fatal(err)
	}
	return emulated{
		view: demo.ExoscaleServers(emu), scheme: "exoscale",
		create: func(t *testing.T, name, userData string) string {
			ctx := context.Background()
			tpls, err := sdk.ListTemplates(ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPrivate))
			if err != nil {
				t.Fatal(err)
			}
			rhcos, err := tpls.FindTemplate(emuexo.DefaultTemplates[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			req := v3.CreateInstanceRequest{
				Name: name, DiskSize: 50, Template: &v3.Template{ID: rhcos.ID},
				InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.large"))},
			}
			if userData != "" {
				req.UserData = base64.StdEncoding.EncodeToString([]byte(userData))
			}
			op, err := sdk.CreateInstance(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return string(op.Reference.ID)
		},
		delete: func(t *testing.T, id string) {
			if _, err := sdk.DeleteInstance(context.Background(), v3.UUID(id)); err != nil {
				t.Fatal(err)
			}
		},
		// afterburn names the instance as the metadata's local-hostname.
		cloudHostname: func(name string) string { return name },
		// Exoscale has no regions: its CCM labels the zone as the region.
		memory: "8Gi", instanceType: "standard.large", zone: "ch-gva-2", region: "ch-gva-2",
	}
}

// kubeClient is a client of a new API server with the Machine API.
func kubeClient(t *testing.T) client.Client {
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t))
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A running server gets the Node its kubelet would register — named by
// the hostname its user data sets, with its provider ID, capacity and
// addresses, marked for kwok — and a deleted server's Node stops
// heartbeating; on either cloud, through the cloud's view of its emulator.
func TestNodesFollowServers(t *testing.T) {
	eachCloud(t, testNodesFollowServers)
}

// eachCloud runs test once per cloud, as a subtest named after it, on a
// fresh emulator of that cloud.
func eachCloud(t *testing.T, test func(*testing.T, emulated)) {
	for _, c := range []struct {
		name string
		emu  func(*testing.T) emulated
	}{{"cloudscale", cloudscaleEmulator}, {"exoscale", exoscaleEmulator}} {
		t.Run(c.name, func(t *testing.T) { test(t, c.emu(t)) })
	}
}

// hostnameIgnition is a pointer Ignition (3.x) that writes /etc/hostname,
// as the Terraform modules' and the provider's user data do.
func hostnameIgnition(hostname string) string {
	return fmt.Sprintf(`{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]}},"storage":{"files":[{"path":"/etc/hostname","mode":420,"overwrite":true,"contents":{"source":"data:,%s"}}]}}`, hostname)
}

func testNodesFollowServers(t *testing.T, emu emulated) {
	ctx := context.Background()
	c := kubeClient(t)
	id := emu.create(t, "worker-a", hostnameIgnition("worker-a.c1.example.com"))
	providerID := emu.scheme + "://" + id

	slow := bootsim.New(c, emu.view, bootsim.Options{RegisterDelay: time.Hour})
	if err := slow.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-a.c1.example.com"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Node registered before the register delay passed (%v)", err)
	}

	sim := bootsim.New(c, emu.view, bootsim.Options{})
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-a.c1.example.com"}, &node); err != nil {
		t.Fatalf("no Node named as the user data's hostname: %v", err)
	}
	if node.Spec.ProviderID != providerID || node.Annotations[localcluster.KwokNodeAnnotation] != "fake" {
		t.Errorf("providerID %q, kwok annotation %q", node.Spec.ProviderID, node.Annotations[localcluster.KwokNodeAnnotation])
	}
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: emu.memory, corev1.ResourceEphemeralStorage: "50Gi", corev1.ResourcePods: "250"}
	for name, q := range want {
		if got := node.Status.Capacity[name]; got.Cmp(resource.MustParse(q)) != 0 {
			t.Errorf("capacity %s = %s, want %s (%s, 50 GiB disk)", name, got.String(), q, emu.instanceType)
		}
	}
	if node.Labels["topology.kubernetes.io/zone"] != emu.zone || node.Labels["topology.kubernetes.io/region"] != emu.region || node.Labels["node.kubernetes.io/instance-type"] != emu.instanceType {
		t.Errorf("labels %v; want zone %s, region %s, instance type %s", node.Labels, emu.zone, emu.region, emu.instanceType)
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

	emu.delete(t, id)
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
	emu.create(t, "worker-b", hostnameIgnition("worker-b"))
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var nodeB corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-b"}, &nodeB); err != nil {
		t.Fatalf("no Node for server worker-b: %v", err)
	}
	if err := c.Delete(ctx, &nodeB); err != nil {
		t.Fatal(err)
	}
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-b"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted Node worker-b registered again (%v)", err)
	}
}

// On platform External a Node registers as a kubelet started with
// --cloud-provider=external registers it — tainted uninitialized, without
// providerID, addresses or the cloud's labels, with the instance ID as its
// systemUUID, Ready — unless the kubelet is given its providerID; and the
// Node of a deleted server stops heartbeating also when no CCM ever gave it
// a providerID.
func TestExternalNodes(t *testing.T) {
	eachCloud(t, testExternalNodes)
}

func testExternalNodes(t *testing.T, emu emulated) {
	ctx := context.Background()
	c := kubeClient(t)
	a := emu.create(t, "worker-a", hostnameIgnition("worker-a"))
	sim := bootsim.New(c, emu.view, bootsim.Options{External: true})
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-a"}, &node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != "" || len(node.Status.Addresses) > 0 {
		t.Errorf("providerID %q, addresses %v: the kubelet sets neither", node.Spec.ProviderID, node.Status.Addresses)
	}
	if !slices.Contains(node.Spec.Taints, bootsim.UninitializedTaint) {
		t.Errorf("taints %v, want %v", node.Spec.Taints, bootsim.UninitializedTaint)
	}
	for _, k := range []string{"node.kubernetes.io/instance-type", "topology.kubernetes.io/zone", "topology.kubernetes.io/region"} {
		if v, ok := node.Labels[k]; ok {
			t.Errorf("label %s=%s: the CCM's, not the kubelet's", k, v)
		}
	}
	if node.Status.NodeInfo.SystemUUID != a || node.Labels["kubernetes.io/hostname"] != "worker-a" {
		t.Errorf("systemUUID %q (want the server's ID %s), labels %v", node.Status.NodeInfo.SystemUUID, a, node.Labels)
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
	}
	if !ready || node.Annotations[localcluster.KwokNodeAnnotation] != "fake" {
		t.Errorf("conditions %v, annotations %v: want Ready, kept so by kwok", node.Status.Conditions, node.Annotations)
	}

	// A kubelet given its providerID (a MachineConfig's KUBELET_PROVIDERID).
	b := emu.create(t, "worker-b", hostnameIgnition("worker-b"))
	withID := bootsim.New(c, emu.view, bootsim.Options{External: true, KubeletProviderID: true})
	if err := withID.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-b"}, &node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != emu.scheme+"://"+b || !slices.Contains(node.Spec.Taints, bootsim.UninitializedTaint) {
		t.Errorf("providerID %q, taints %v: want the server's, still uninitialized", node.Spec.ProviderID, node.Spec.Taints)
	}

	emu.delete(t, a)
	if err := sim.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-a"}, &node); err != nil {
		t.Fatal(err)
	}
	if _, managed := node.Annotations[localcluster.KwokNodeAnnotation]; managed {
		t.Errorf("the Node of a deleted server, without providerID, still has its kubelet (kwok annotation)")
	}
}

// A Node is named by the hostname its server boots with, never by its
// Machine: what the user data's Ignition writes to /etc/hostname (3.x or
// 2.x, in its own files or in a config it merges from a data URL), else
// what the cloud gives — on cloudscale.ch nothing known (localhost), on
// Exoscale the instance's name. A Machine whose NodeInternalDNS says
// otherwise changes nothing: a test whose user data sets no hostname does
// not get Nodes named as its Machines for free.
func TestNodeNameIsTheBootHostname(t *testing.T) {
	eachCloud(t, testNodeNameIsTheBootHostname)
}

func testNodeNameIsTheBootHostname(t *testing.T, emu emulated) {
	ctx := context.Background()
	c := kubeClient(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-machine-api"}}); err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	pointer := `{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]}}}`
	for _, tc := range []struct {
		server, userData, want string
	}{
		{"srv-ud", hostnameIgnition("From-User-Data"), "from-user-data"},
		{"srv-pointer", pointer, emu.cloudHostname("srv-pointer")},
		{"srv-v2", `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/hostname","mode":420,"contents":{"source":"data:,v2-host"}}]}}`, "v2-host"},
		{"srv-merged", `{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"},{"source":"data:;base64,` + b64(hostnameIgnition("merged-host")) + `"}]}}}`, "merged-host"},
	} {
		t.Run(tc.server, func(t *testing.T) {
			id := emu.create(t, tc.server, tc.userData)
			// The Machine says another name: the boot does not ask it.
			m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: tc.server, Namespace: "openshift-machine-api"}}
			m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{}`)}
			providerID := emu.scheme + "://" + id
			m.Spec.ProviderID = &providerID
			if err := c.Create(ctx, m); err != nil {
				t.Fatal(err)
			}
			m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalDNS, Address: tc.server + "-machine"}}
			if err := c.Status().Update(ctx, m); err != nil {
				t.Fatal(err)
			}
			if err := bootsim.New(c, emu.view, bootsim.Options{}).Step(ctx); err != nil {
				t.Fatal(err)
			}
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range nodes.Items {
				if n.Spec.ProviderID == providerID {
					names = append(names, n.Name)
				}
			}
			if len(names) != 1 || names[0] != tc.want {
				t.Errorf("the Nodes of %s are %v, want exactly %q", tc.server, names, tc.want)
			}
		})
	}
}
