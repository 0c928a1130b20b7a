package clouds_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cssdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm/clouds"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// asCCM, set, makes the test binary the CCM (ccm.Start runs it so): the
// test tests the code it is built from, never a binary built before.
const asCCM = "CLOUDS_TEST_AS_CLOUD_CONTROLLER_MANAGER"

func TestMain(m *testing.M) {
	if os.Getenv(asCCM) != "" {
		os.Exit(clouds.Main(os.Args[1:]))
	}
	// envtest logs through controller-runtime's logger, which, never set,
	// prints a stack trace into the test's output after 30 s.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// statuses records the status of every answer the emulator gave, by
// "METHOD path", so a test can say that every call of the CCM succeeded.
type statuses struct {
	mu   sync.Mutex
	seen []string // "GET /v1/servers/<uuid> 200"
}

func (s *statuses) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.mu.Lock()
		s.seen = append(s.seen, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.code))
		s.mu.Unlock()
	})
}

// failed are the answers that were no 2xx.
func (s *statuses) failed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, x := range s.seen {
		if !strings.HasSuffix(x, " 200") && !strings.HasSuffix(x, " 201") && !strings.HasSuffix(x, " 204") {
			out = append(out, x)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// cloudCase is one cloud: its emulator behind an HTTP server, the CCM's
// environment for it, and a server made and deleted with the cloud's SDK as
// a Machine's would be.
type cloudCase struct {
	name    string
	harness *harness.Harness
	env     []string
	// create makes a running server called name and returns its ID, its
	// addresses, and the labels and providerID its Node should get.
	create func(t *testing.T, name string) (id string, want initialized)
	delete func(t *testing.T, id string)
	stop   func(t *testing.T, id string)
	// register is the Node a kubelet with --cloud-provider=external
	// registers for server id named name.
	register func(name, id string) *corev1.Node
	// initCalls are the API calls initializing one Node makes.
	initCalls map[string]int64
	// lifecycleRoute is the call that finds a NotReady Node's server gone.
	lifecycleRoute string
}

type initialized struct {
	providerID string
	labels     map[string]string
	addresses  []corev1.NodeAddress
}

// kubeletNode is a Node as a kubelet started with --cloud-provider=external
// registers it: tainted uninitialized, no providerID, no addresses, Ready.
func kubeletNode(name, systemUUID string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	n.Status.NodeInfo.SystemUUID = systemUUID
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	return n
}

func cloudscaleCase(t *testing.T, rec *statuses) cloudCase {
	emu, err := emucs.New(emucs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rec.wrap(emu))
	t.Cleanup(srv.Close)
	sdk := cssdk.NewClient(nil)
	sdk.BaseURL, _ = url.Parse(srv.URL + "/")
	sdk.AuthToken = "machine-api"
	ctx := context.Background()
	yes := true
	network, err := sdk.Networks.Create(ctx, &cssdk.NetworkCreateRequest{ZonalResourceRequest: cssdk.ZonalResourceRequest{Zone: "lpg1"}, Name: "cluster", AutoCreateIPV4Subnet: &yes})
	if err != nil {
		t.Fatal(err)
	}
	return cloudCase{
		name: ccm.Cloudscale, harness: emu.Harness(),
		env: ccm.CloudscaleEnv(srv.URL+"/", "ccm-token"),
		create: func(t *testing.T, name string) (string, initialized) {
			ifaces := []cssdk.InterfaceRequest{{Network: "public"}, {Network: network.UUID}}
			s, err := sdk.Servers.Create(ctx, &cssdk.ServerRequest{Name: name, Flavor: "flex-16-4", Image: "debian-12", Zone: "lpg1", VolumeSizeGB: 50, Interfaces: &ifaces})
			if err != nil {
				t.Fatal(err)
			}
			want := initialized{
				providerID: "cloudscale://" + s.UUID,
				labels:     map[string]string{corev1.LabelInstanceTypeStable: "flex-16-4", corev1.LabelTopologyZone: "lpg1", corev1.LabelTopologyRegion: "lpg"},
				addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
			}
			for _, i := range s.Interfaces {
				typ := corev1.NodeInternalIP
				if i.Type == "public" {
					typ = corev1.NodeExternalIP
				}
				for _, a := range i.Addresses {
					want.addresses = append(want.addresses, corev1.NodeAddress{Type: typ, Address: a.Address})
				}
			}
			return s.UUID, want
		},
		delete: func(t *testing.T, id string) {
			if err := sdk.Servers.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		},
		stop: func(t *testing.T, id string) {
			if err := sdk.Servers.Stop(ctx, id); err != nil {
				t.Fatal(err)
			}
		},
		register: func(name, id string) *corev1.Node { return kubeletNode(name, id) },
		// A Node without providerID: the server list, its name matched.
		initCalls:      map[string]int64{"GET /v1/servers": 1},
		lifecycleRoute: "GET /v1/servers/{uuid}",
	}
}

func exoscaleCase(t *testing.T, rec *statuses) cloudCase {
	emu, err := emuexo.New(emuexo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rec.wrap(emu))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	// The zone's endpoint, as the CCM finds it.
	sdk, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret), v3.ClientOptWithEndpoint(v3.Endpoint(srv.URL+"/ch-dk-2/v2")))
	if err != nil {
		t.Fatal(err)
	}
	return cloudCase{
		name: ccm.Exoscale, harness: emu.Harness(),
		env: ccm.ExoscaleEnv(srv.URL+"/v2", emuexo.DefaultAPIKey, emuexo.DefaultAPISecret, "ch-dk-2"),
		create: func(t *testing.T, name string) (string, initialized) {
			tpls, err := sdk.ListTemplates(ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPrivate))
			if err != nil {
				t.Fatal(err)
			}
			rhcos, err := tpls.FindTemplate(emuexo.DefaultTemplates[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			op, err := sdk.CreateInstance(ctx, v3.CreateInstanceRequest{
				Name: name, DiskSize: 50, Template: &v3.Template{ID: rhcos.ID},
				InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.large"))},
			})
			if err != nil {
				t.Fatal(err)
			}
			if op, err = sdk.Wait(ctx, op, v3.OperationStateSuccess); err != nil {
				t.Fatal(err)
			}
			i, err := sdk.GetInstance(ctx, op.Reference.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := initialized{
				providerID: "exoscale://" + string(i.ID),
				// The zone as the region, and no zone label.
				labels:    map[string]string{corev1.LabelInstanceTypeStable: "standard.large", corev1.LabelTopologyRegion: "ch-dk-2"},
				addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
			}
			// The public IPs, also as InternalIPs: no private network.
			for _, ip := range []string{i.PublicIP.String(), i.Ipv6Address} {
				if ip != "" && ip != "<nil>" && net.ParseIP(ip) != nil {
					want.addresses = append(want.addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
				}
			}
			return string(i.ID), want
		},
		delete: func(t *testing.T, id string) {
			op, err := sdk.DeleteInstance(ctx, v3.UUID(id))
			if err == nil {
				_, err = sdk.Wait(ctx, op, v3.OperationStateSuccess)
			}
			if err != nil {
				t.Fatal(err)
			}
		},
		stop: func(t *testing.T, id string) {
			op, err := sdk.StopInstance(ctx, v3.UUID(id))
			if err == nil {
				_, err = sdk.Wait(ctx, op, v3.OperationStateSuccess)
			}
			if err != nil {
				t.Fatal(err)
			}
		},
		// The instance ID is the Node's systemUUID.
		register: func(name, id string) *corev1.Node { return kubeletNode(name, id) },
		// The addresses, then the type: the instance twice, its type once.
		initCalls:      map[string]int64{"GET /v2/instance/{id}": 2, "GET /v2/instance-type/{id}": 1},
		lifecycleRoute: "GET /v2/instance/{id}",
	}
}

// The local control plane's CCM, as a process of its own on each cloud's
// emulator through the cloud's SDK, initializes a Node registered as by a
// kubelet with --cloud-provider=external — uninitialized taint gone,
// providerID, the cloud's labels and addresses as the vendor's CCM sets
// them — with the vendor's calls, every one answered 2xx; and when the
// Node's server is stopped and the Node is NotReady, its
// cloud-node-lifecycle controller taints it shut down, and when the server
// is deleted, deletes the Node, the emulator answering the one 404 the real
// API does. On cloudscale.ch a Node whose kubelet gave it no providerID is
// found by its name only: a server named <node>.<domain> is none of it, and
// that Node stays uninitialized (the baseDomain naming the provider made
// before).
func TestCCMInitializesAndDeletesNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane per cloud")
	}
	for _, c := range []struct {
		name string
		new  func(*testing.T, *statuses) cloudCase
	}{{ccm.Cloudscale, cloudscaleCase}, {ccm.Exoscale, exoscaleCase}} {
		t.Run(c.name, func(t *testing.T) {
			rec := &statuses{}
			testCCM(t, c.new(t, rec), rec)
		})
	}
}

func testCCM(t *testing.T, cc cloudCase, rec *statuses) {
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cluster, err := localcluster.Start(localcluster.Options{BinDir: bin, Dir: dir})
	t.Cleanup(func() {
		if cluster != nil {
			_ = cluster.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, ccm.ProcessName+".log"))
		return string(b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the CCM's log:\n%s", logs())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cluster.Config)

	id, want := cc.create(t, "worker-a")
	var misnamed string
	if cc.name == ccm.Cloudscale {
		// A server named <node>.<domain>, as baseDomain named them before.
		misnamed, _ = cc.create(t, "worker-b.c1.example.com")
		if _, err := cs.CoreV1().Nodes().Create(ctx, cc.register("worker-b", misnamed), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cc.harness.ResetRequests()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := ccm.Start(cluster, ccm.Options{Cloud: cc.name, Env: append(cc.env, asCCM+"=1"), Binary: self})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, cc.register("worker-a", id), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := eventually(t, ctx, proc, "node worker-a initialized", func() (*corev1.Node, bool) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "worker-a", metav1.GetOptions{})
		return n, err == nil && n.Spec.ProviderID != "" && !uninitialized(n) && len(n.Status.Addresses) > 0
	})
	if node.Spec.ProviderID != want.providerID {
		t.Errorf("providerID %q, want %q", node.Spec.ProviderID, want.providerID)
	}
	for k, v := range want.labels {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	if cc.name == ccm.Exoscale {
		if z, ok := node.Labels[corev1.LabelTopologyZone]; ok {
			t.Errorf("zone label %q: the Exoscale CCM sets none", z)
		}
	}
	if !sameAddresses(node.Status.Addresses, want.addresses) {
		t.Errorf("addresses %v, want %v", node.Status.Addresses, want.addresses)
	}
	calls := cc.harness.Requests()
	for route, n := range cc.initCalls {
		if calls[route] < n {
			t.Errorf("initializing made %v, want at least %d %s", calls, n, route)
		}
	}
	if cc.name == ccm.Exoscale && calls["GET /v2/zone"] != 1 {
		t.Errorf("the Exoscale CCM listed the zones %d times at start, want once: %v", calls["GET /v2/zone"], calls)
	}
	if f := rec.failed(); len(f) > 0 {
		t.Errorf("answers that were no 2xx: %v", f)
	}
	if misnamed != "" {
		// The CCM's informer may list worker-a first: its look for
		// worker-b's server may come after worker-a is done.
		eventually(t, ctx, proc, "the CCM saying it found no server for node worker-b", func() (*corev1.Node, bool) {
			return nil, strings.Contains(logs(), "unable to find node worker-b: found none")
		})
		n, err := cs.CoreV1().Nodes().Get(ctx, "worker-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.ProviderID != "" || !uninitialized(n) || len(n.Status.Addresses) > 0 {
			t.Errorf("node worker-b of server worker-b.c1.example.com was initialized: providerID %q, taints %v, addresses %v", n.Spec.ProviderID, n.Spec.Taints, n.Status.Addresses)
		}
	}

	// The server is stopped, and its kubelet with it: NotReady, as the
	// node controller would mark it. The CCM taints the Node shut down.
	cc.stop(t, id)
	// The CCM writes the Node too (its addresses, every status sync): the
	// condition goes onto the Node as it is now.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "worker-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, proc, "node worker-a tainted shut down", func() (*corev1.Node, bool) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "worker-a", metav1.GetOptions{})
		return n, err == nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/shutdown" })
	})

	// The server is deleted: the CCM deletes the Node.
	cc.delete(t, id)
	eventually(t, ctx, proc, "node worker-a deleted", func() (*corev1.Node, bool) {
		_, err := cs.CoreV1().Nodes().Get(ctx, "worker-a", metav1.GetOptions{})
		return nil, apierrors.IsNotFound(err)
	})
	f := rec.failed()
	if len(f) == 0 || slices.ContainsFunc(f, func(x string) bool {
		return !strings.HasPrefix(x, "GET ") || !strings.HasSuffix(x, " 404") || !strings.Contains(x, id)
	}) {
		t.Errorf("answers that were no 2xx: %v; want only 404s of GETs of the deleted server %s", f, id)
	}
	if cc.harness.Count(cc.lifecycleRoute) == 0 {
		t.Errorf("no %s: %v", cc.lifecycleRoute, cc.harness.Requests())
	}
	t.Logf("%s: the CCM's calls %v", cc.name, cc.harness.Requests())
}

// eventually polls cond every 200 ms until it holds, the context ends or the
// CCM process ends.
func eventually(t *testing.T, ctx context.Context, proc *localcluster.Process, what string, cond func() (*corev1.Node, bool)) *corev1.Node {
	t.Helper()
	for {
		n, ok := cond()
		if ok {
			return n
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-proc.Exited():
			t.Fatalf("waiting for %s: the CCM ended: %v", what, proc.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func uninitialized(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/uninitialized" })
}

func sameAddresses(a, b []corev1.NodeAddress) bool {
	key := func(x []corev1.NodeAddress) []string {
		var out []string
		for _, a := range x {
			out = append(out, string(a.Type)+"="+a.Address)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
