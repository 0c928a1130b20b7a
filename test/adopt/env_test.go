// Package adopt_test brings a cluster that Terraform made under the
// provider, on each cloud's emulator and the local control plane: a world
// built with the official SDKs the way appuio's Terraform modules build one
// (masters, workers, infra nodes, groups, networks, user data), Nodes for
// its servers, and `adopt` (pkg/adopt) planning, applying and applying
// again, its cloud writes counted in the emulator's request log. Then the
// adopted MachineSets scale like any other. The same for a cluster that
// runs appuio's cloudscale.ch provider, switched over and back
// (appuio_test.go). `make e2e` runs it (E2E=1): it takes minutes, the
// tests side by side (each has its own control plane and emulator, and
// mostly waits).
package adopt_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/adopt"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/pkg/userdata"
	"github.com/appuio/machine-api-provider/test/fixture"
	"github.com/appuio/machine-api-provider/test/ownaudit"
)

// testLogs are the running tests' log files. The tests run in parallel,
// each with a control plane of its own, and log there: what their
// environments log with the logger they are given goes to their own file;
// what is logged with the process-wide loggers (controller-runtime's, set
// once, and klog, which demo.Start sets to the latest environment's) goes
// to every running test's file.
var testLogs struct {
	sync.Mutex
	ws map[io.Writer]bool
}

func logToTest(prefix, args string) {
	testLogs.Lock()
	defer testLogs.Unlock()
	for w := range testLogs.ws {
		fmt.Fprintln(w, prefix, args)
	}
}

// fileLog is a writer for one test's log, safe for concurrent use.
type fileLog struct {
	sync.Mutex
	f *os.File
}

func (l *fileLog) log(prefix, args string) {
	l.Lock()
	defer l.Unlock()
	fmt.Fprintln(l.f, prefix, args)
}

func (l *fileLog) Write(p []byte) (int, error) {
	l.Lock()
	defer l.Unlock()
	return l.f.Write(p)
}

func TestMain(m *testing.M) {
	// The provider renders the user data templates adopt writes in a
	// sandbox, which is this binary started again.
	userdata.Main()
	ctrllog.SetLogger(funcr.New(logToTest, funcr.Options{Verbosity: 2, LogTimestamp: true}))
	os.Exit(m.Run())
}

// env is the local control plane with the provider, the machine-api
// controllers and simulated booting, on one cloud's emulator.
type env struct {
	*demo.Env
	t   *testing.T
	ctx context.Context
	log logr.Logger
	// kube is a client of the cluster with every kind adopt knows.
	kube client.Client
	// takeOver is adopt's TakeOverClusterID.
	takeOver string
	// caRotations counts rotateCA's rotations.
	caRotations int
	// made are the Nodes the test made (node), as Terraform's nodes have
	// them.
	made map[string]bool
	// audit is the ownership audit from the end of the world's building
	// on (beginAudit); plans are adopt's plans that run applied, allowed
	// the exceptions the test declares.
	audit   *ownaudit.Recorder
	plans   []*adopt.Plan
	allowed []ownaudit.Exception
	// declared are the legacy cluster IDs the test declared
	// (declareLegacy).
	declared []string
}

// start starts the cluster whose identity, its infrastructureName, is
// clusterID.
func start(t *testing.T, cloudName, clusterID string, opts ...func(*demo.Options)) *env {
	t.Helper()
	if os.Getenv("E2E") == "" {
		t.Skip("end-to-end test: run `make e2e` (E2E=1)")
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "adopt-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	own := &fileLog{f: logFile}
	testLogs.Lock()
	if testLogs.ws == nil {
		testLogs.ws = map[io.Writer]bool{}
	}
	testLogs.ws[own] = true
	testLogs.Unlock()
	log := funcr.New(own.log, funcr.Options{Verbosity: 2, LogTimestamp: true})
	// Platform None: the clusters Terraform made before APPUiO installed on
	// platform External, whose Nodes have their addresses from the kubelet
	// (the platform External runs are test/e2e's and test/install's).
	o := demo.Options{Cloud: cloudName, ClusterID: clusterID, Platform: configv1.NonePlatformType, BinDir: bin, Dir: dir, BootTime: 2 * time.Second, RegisterDelay: time.Second, Log: log}
	for _, f := range opts {
		f(&o)
	}
	e, err := demo.Start(o)
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
		testLogs.Lock()
		delete(testLogs.ws, own)
		testLogs.Unlock()
		own.Lock()
		logFile.Close()
		own.Unlock()
		if t.Failed() {
			t.Logf("logs are in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// OpenShift has the ControlPlaneMachineSet CRD; the demo's cluster
	// does not (its cluster-autoscaler would take machine.openshift.io/v1
	// for the group's preferred version).
	apiDir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(e.Cluster.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(strings.TrimSpace(string(apiDir)),
		"machine", "v1", "zz_generated.crd-manifests", "0000_10_control-plane-machine-set_01_controlplanemachinesets-Default.crd.yaml")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	scheme, err := adopt.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	// adopt's and the other commands' client: its own user agent tells
	// its requests from the test's in the API server's audit log.
	adoptCfg := rest.CopyConfig(e.Cluster.Config)
	adoptCfg.UserAgent = ownaudit.AgentAdopt
	kube, err := client.New(adoptCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: e, t: t, ctx: context.Background(), log: log, kube: kube}
}

// node registers a Node as a node Terraform made has it: named as the
// server's hostname, Ready (kwok plays its kubelet), with the node role
// labels and the server's addresses; with the provider ID where a cloud
// controller manager set it.
func (e *env) node(name, providerID string, roles []string, ips ...string) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		Annotations: map[string]string{localcluster.KwokNodeAnnotation: "fake"},
	}}
	for _, r := range roles {
		n.Labels["node-role.kubernetes.io/"+r] = ""
	}
	n.Spec.ProviderID = providerID
	addrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
	for _, ip := range ips {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = addrs
	err := e.Client.Create(e.ctx, n)
	if apierrors.IsAlreadyExists(err) {
		// The boot simulation registered it first (its server booted
		// before the test got here, on a busy host): it becomes the Node
		// a node Terraform made has.
		want := n
		n = &corev1.Node{}
		if err := e.Client.Get(e.ctx, client.ObjectKey{Name: name}, n); err != nil {
			e.t.Fatal(err)
		}
		base := n.DeepCopy()
		maps.Copy(n.Labels, want.Labels)
		if n.Spec.ProviderID == "" {
			n.Spec.ProviderID = providerID
		}
		err = e.Client.Patch(e.ctx, n, client.MergeFrom(base))
	}
	if err != nil {
		e.t.Fatal(err)
	}
	if e.made == nil {
		e.made = map[string]bool{}
	}
	e.made[name] = true
	// The API server may drop the status of a create; a merge patch of the
	// status subresource does not conflict with kwok's heartbeats.
	base := n.DeepCopy()
	n.Status.Addresses = addrs
	if err := e.Client.Status().Patch(e.ctx, n, client.MergeFrom(base)); err != nil {
		e.t.Fatal(err)
	}
}

// dropSimulatedTwins deletes the Nodes the boot simulation registered for
// servers the test made a Node for: a look at the Nodes it took just before
// the test's Node was made (a server running before the test got to it, on
// a busy host) has it register a second Node for the server, named as the
// server, which the machine controller could then link the Machine to. A
// kubelet registers one Node; the twin shares the test's Node's provider
// ID or an address. Call it once the servers run: the simulation registers
// no Node for a server whose Node it sees.
func (e *env) dropSimulatedTwins() {
	e.t.Helper()
	var list corev1.NodeList
	if err := e.Client.List(e.ctx, &list); err != nil {
		e.t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, n := range list.Items {
		if !e.made[n.Name] {
			continue
		}
		if n.Spec.ProviderID != "" {
			ours[n.Spec.ProviderID] = true
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ours[a.Address] = true
			}
		}
	}
	for i := range list.Items {
		n := &list.Items[i]
		if e.made[n.Name] {
			continue
		}
		twin := n.Spec.ProviderID != "" && ours[n.Spec.ProviderID]
		for _, a := range n.Status.Addresses {
			twin = twin || a.Type == corev1.NodeInternalIP && ours[a.Address]
		}
		if !twin {
			continue
		}
		e.t.Logf("the boot simulation registered Node %s for a server the test made Node for: deleted", n.Name)
		if err := e.Client.Delete(e.ctx, n); err != nil && !apierrors.IsNotFound(err) {
			e.t.Fatal(err)
		}
	}
}

// adopter is adopt on the cluster, acting with the emulator's credentials.
func (e *env) adopter(c cloud.Cloud, clusterID string, out io.Writer) *adopt.Adopter {
	e.t.Helper()
	return e.adopterWith(e.kube, c, clusterID, out)
}

// adopterWith is adopter with another client of the cluster.
func (e *env) adopterWith(kube client.Client, c cloud.Cloud, clusterID string, out io.Writer) *adopt.Adopter {
	e.t.Helper()
	a, err := adopt.New(e.ctx, kube, c, adopt.Options{ClusterID: clusterID, TakeOverClusterID: e.takeOver, Wait: 3 * time.Minute, Poll: 500 * time.Millisecond, Out: out, Log: e.log})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// run plans and applies, printing both into the test's log, and returns
// the plan, its text, and the report.
func (e *env) run(a *adopt.Adopter) (*adopt.Plan, string, *adopt.Report) {
	e.t.Helper()
	p, err := a.Plan(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.plans = append(e.plans, p)
	var text bytes.Buffer
	p.Print(&text, true)
	e.t.Logf("the plan:\n%s", text.String())
	r, err := a.Apply(e.ctx, p)
	var rep bytes.Buffer
	if r != nil {
		r.Print(&rep)
	}
	e.t.Logf("apply:%s", rep.String())
	if err != nil {
		e.t.Fatalf("apply: %v", err)
	}
	return p, text.String(), r
}

// adoptionDone checks that no server is recorded as being adopted any more
// (pkg/orphans, Adoptions): a run that completed is done with them, and the
// janitor counts them again. What it left alone stays recorded as such.
func (e *env) adoptionDone(cloudName string) {
	e.t.Helper()
	recorded, err := (&orphans.Adoptions{Client: e.Client, Namespace: demo.Namespace, Cloud: cloudName}).List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for id, a := range recorded {
		if a.LeftAlone == "" {
			e.t.Errorf("server %s still recorded as being adopted after a complete run: %+v", id, a)
		}
	}
}

// adopting is how many servers are recorded as being adopted.
func (e *env) adopting(cloudName string) int {
	e.t.Helper()
	var cm corev1.ConfigMap
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: orphans.AdoptionsConfigMapName(cloudName)}, &cm); err != nil {
		return 0
	}
	return len(cm.Data)
}

// writes are the requests of a route set that change something.
func (e *env) writes() map[string]int64 {
	out := map[string]int64{}
	for route, n := range e.Harness().Requests() {
		if !strings.HasPrefix(route, "GET ") {
			out[route] = n
		}
	}
	return out
}

// machine reads a Machine.
func (e *env) machine(name string) *machinev1beta1.Machine {
	e.t.Helper()
	var m machinev1beta1.Machine
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &m); err != nil {
		e.t.Fatalf("Machine %s: %v", name, err)
	}
	return &m
}

// assertAdopted checks an adopted Machine: it records the server, runs on
// its Node, its spec in sync.
func (e *env) assertAdopted(name, providerID, node string) *machinev1beta1.Machine {
	e.t.Helper()
	m := e.machine(name)
	if m.Spec.ProviderID == nil || *m.Spec.ProviderID != providerID {
		e.t.Errorf("Machine %s: providerID %v, want %s", name, m.Spec.ProviderID, providerID)
	}
	if m.Status.NodeRef == nil || m.Status.NodeRef.Name != node {
		e.t.Errorf("Machine %s: nodeRef %v, want %s", name, m.Status.NodeRef, node)
	}
	if m.Status.Phase == nil || *m.Status.Phase != machinev1beta1.PhaseRunning {
		e.t.Errorf("Machine %s: phase %v, want Running", name, m.Status.Phase)
	}
	if c := specInSync(m); c == nil || c.Status != metav1.ConditionTrue {
		e.t.Errorf("Machine %s: SpecInSync %+v, want True", name, c)
	}
	return m
}

func specInSync(m *machinev1beta1.Machine) *metav1.Condition {
	if m.Status.ProviderStatus == nil {
		return nil
	}
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if err := jsonUnmarshal(m.Status.ProviderStatus.Raw, &st); err != nil {
		return nil
	}
	return meta.FindStatusCondition(st.Conditions, "SpecInSync")
}

// machineSetOwns checks that a MachineSet owns exactly these Machines and
// counts them.
func (e *env) machineSetOwns(name string, machines ...string) *machinev1beta1.MachineSet {
	e.t.Helper()
	var ms machinev1beta1.MachineSet
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &ms); err != nil {
		e.t.Fatalf("MachineSet %s: %v", name, err)
	}
	if int(*ms.Spec.Replicas) != len(machines) || int(ms.Status.Replicas) != len(machines) {
		e.t.Errorf("MachineSet %s: %d replicas (status %d), want %d", name, *ms.Spec.Replicas, ms.Status.Replicas, len(machines))
	}
	for _, n := range machines {
		m := e.machine(n)
		if ref := metav1.GetControllerOf(m); ref == nil || ref.UID != ms.UID {
			e.t.Errorf("Machine %s is not MachineSet %s's", n, name)
		}
	}
	return &ms
}

// scale sets a MachineSet's replicas.
func (e *env) scale(name string, n int32) {
	e.t.Helper()
	var ms machinev1beta1.MachineSet
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &ms); err != nil {
		e.t.Fatal(err)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = &n
	if err := e.Client.Patch(e.ctx, &ms, patch); err != nil {
		e.t.Fatal(err)
	}
}

// scalesLikeAnyOther scales an adopted MachineSet of n replicas up by one
// and back: one server made (its Node's certificates approved), one
// deleted, counted by the cloud's create and delete routes. Right before
// the scale-up the machine-config-operator rotates the machine config
// server's CA (rotateCA): the new server's user data (userDataOf, by the
// server's ID) carries the new CA.
func (e *env) scalesLikeAnyOther(ms string, n int32, createRoute, deleteRoute string, mcsHost string, userDataOf func(id string) []byte) {
	e.t.Helper()
	before := map[string]bool{}
	for _, m := range e.machinesOf(ms) {
		before[m.Name] = true
	}
	ca := e.rotateCA("worker", mcsHost)
	servers := len(e.Servers())
	e.Harness().ResetRequests()
	for _, want := range []int32{n + 1, n} {
		e.scale(ms, want)
		e.eventually(2*time.Minute, fmt.Sprintf("%d Running Machines of %s", want, ms), func() (bool, string) {
			r, all := e.runningMachines(ms)
			return r == int(want) && all == int(want), fmt.Sprintf("%d of %d running", r, all)
		})
		if want > n {
			e.assertApproved()
			for _, m := range e.machinesOf(ms) {
				if before[m.Name] {
					continue
				}
				id := (*m.Spec.ProviderID)[strings.Index(*m.Spec.ProviderID, "://")+3:]
				if got := caSource(userDataOf(id)); got != ca {
					e.t.Errorf("the new Machine %s's server trusts the CA %q, want the rotated one of the managed Secret, %q", m.Name, caText(got), caText(ca))
				} else {
					e.t.Logf("the new Machine %s's server trusts the CA the machine-config-operator rotated to", m.Name)
				}
			}
		}
	}
	if c, d := e.Harness().Count(createRoute), e.Harness().Count(deleteRoute); c != 1 || d != 1 {
		e.t.Errorf("scaling %s %d -> %d -> %d: %d creates, %d deletes, want 1 and 1", ms, n, n+1, n, c, d)
	}
	// The scale-down is over once the cloud no longer has the server: an
	// Exoscale instance is destroyed after its delete was answered.
	e.eventually(2*time.Minute, "the removed Machine's server gone from the cloud", func() (bool, string) {
		have := len(e.Servers())
		return have == servers, fmt.Sprintf("%d servers, %d before the scale-up", have, servers)
	})
}

// machinesOf lists a MachineSet's Machines.
func (e *env) machinesOf(ms string) []machinev1beta1.Machine {
	e.t.Helper()
	var list machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &list, client.InNamespace(demo.Namespace), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": ms}); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// rotateCA writes the pool's managed Secret as the machine-config-operator
// does once it has rotated the machine config server's CA
// (openshift/machine-config-operator, pkg/operator/sync.go and
// manifests/userdata_secret.yaml): <pool>-user-data-managed in the
// Machine API's namespace, labelled, with the pool's pointer Ignition
// naming the new CA bundle as a data URL. It returns that CA source.
func (e *env) rotateCA(pool, mcsHost string) string {
	e.t.Helper()
	e.caRotations++
	ca := fmt.Sprintf("-----BEGIN CERTIFICATE-----\nMIIBrotated%dByTheMachineConfigOperator\n-----END CERTIFICATE-----\n", e.caRotations)
	source := "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(ca))
	ign, err := json.Marshal(map[string]any{"ignition": map[string]any{
		"version":  "3.5.0",
		"config":   map[string]any{"merge": []any{map[string]any{"source": "https://" + mcsHost + "/config/" + pool}}},
		"security": map[string]any{"tls": map[string]any{"certificateAuthorities": []any{map[string]any{"source": source}}}},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: pool + actuator.ManagedUserDataSuffix, Namespace: demo.Namespace}}
	if err := e.Client.Get(e.ctx, client.ObjectKeyFromObject(s), s); err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	s.Labels = map[string]string{actuator.ManagedUserDataLabel: ""}
	s.Type = corev1.SecretTypeOpaque
	s.Data = map[string][]byte{"userData": ign, "disableTemplating": []byte("true\n")}
	if s.UID == "" {
		err = e.Client.Create(e.ctx, s)
	} else {
		err = e.Client.Update(e.ctx, s)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return source
}

// caText is the PEM of a CA source (a base64 data URL), for messages.
func caText(source string) string {
	_, b64, _ := strings.Cut(source, ";base64,")
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return source
	}
	return string(b)
}

// caSource is the first CA source of an Ignition config, "" if none.
func caSource(userData []byte) string {
	var ign struct {
		Ignition struct {
			Security struct {
				TLS struct {
					CertificateAuthorities []struct {
						Source string `json:"source"`
					} `json:"certificateAuthorities"`
				} `json:"tls"`
			} `json:"security"`
		} `json:"ignition"`
	}
	if json.Unmarshal(userData, &ign) != nil || len(ign.Ignition.Security.TLS.CertificateAuthorities) == 0 {
		return ""
	}
	return ign.Ignition.Security.TLS.CertificateAuthorities[0].Source
}

// eventually polls cond every 500 ms until it holds or timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(500 * time.Millisecond)
	}
	e.t.Fatalf("timed out after %s waiting for %s (last: %s)", timeout, what, last)
}

// runningMachines counts a MachineSet's Machines that run on their Node.
func (e *env) runningMachines(ms string) (int, int) {
	var list machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &list, client.InNamespace(demo.Namespace), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": ms}); err != nil {
		e.t.Fatal(err)
	}
	running := 0
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil && m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil {
			running++
		}
	}
	return running, len(list.Items)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// assertApproved holds every Machine that runs on a Node to
// cluster-machine-approver's rules (test/fixture): adopted ones for the
// serving certificates their Nodes renew, new ones for both.
func (e *env) assertApproved() {
	e.t.Helper()
	var machines machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &machines, client.InNamespace(demo.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := e.Client.List(e.ctx, &nodes); err != nil {
		e.t.Fatal(err)
	}
	linked := 0
	for _, m := range machines.Items {
		if m.Status.NodeRef != nil {
			linked++
		}
	}
	if linked == 0 {
		e.t.Fatal("no Machine runs on a Node")
	}
	for _, err := range fixture.ApproverWouldApprove(machines.Items, nodes.Items) {
		e.t.Errorf("cluster-machine-approver: %v", err)
	}
}

// cloudscaleUserData is the user data a server of the cloudscale.ch
// emulator was made with.
func (e *env) cloudscaleUserData(id string) []byte {
	for _, s := range e.Cloudscale.Servers() {
		if s.UUID == id {
			return []byte(s.UserData)
		}
	}
	e.t.Fatalf("no server %s", id)
	return nil
}

// exoscaleUserData is the user data an instance of the Exoscale emulator
// was made with.
func (e *env) exoscaleUserData(id string) []byte {
	for _, in := range e.Exoscale.Instances() {
		if in.ID == id {
			b, err := base64.StdEncoding.DecodeString(in.UserData)
			if err != nil {
				e.t.Fatal(err)
			}
			return b
		}
	}
	e.t.Fatalf("no instance %s", id)
	return nil
}

// beginAudit starts the ownership audit (test/ownaudit) once the test has
// built its world as Terraform or appuio's provider left it: every cloud
// write and Node delete from then on, adopt's, the switch's, the
// provider's, the CCM's and the test's own, is held to the cluster's
// identity when the test ends. adopt's take-over of what its applied
// plans name and what the test allows (allow) are the exceptions.
func (e *env) beginAudit() {
	e.t.Helper()
	e.audit = ownaudit.Begin(e.t, ownaudit.Source{Cloud: e.Harness().Audit(), Config: e.Cluster.Config, AuditLog: e.AuditLog()})
	e.t.Cleanup(func() {
		adopters := []string{harness.CallerToken(adoptToken), harness.CallerKey(adoptKey)}
		exceptions := slices.Clone(e.allowed)
		for _, caller := range adopters {
			exceptions = append(exceptions, takeOver(caller, e.plans))
		}
		e.audit.Check(e.t, e.t.Name(), ownaudit.Options{ClusterID: e.Options.ClusterID, AlsoOwns: e.auditIDs(), Exceptions: exceptions, AdoptCallers: adopters})
	})
}

// auditIDs are the legacy cluster IDs the test declared (declareLegacy)
// and those the Infrastructure declares now: what carries them is the
// cluster's, to the ownership audit as to the provider.
func (e *env) auditIDs() []string {
	e.t.Helper()
	ids := slices.Clone(e.declared)
	now, err := e.DeclaredIDs()
	if err != nil {
		e.t.Errorf("the ownership audit: the declared legacy cluster IDs: %v", err)
	}
	for _, id := range now.Legacy {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// adoptToken is the cloudscale.ch token adopt runs with (cloudscale_test.go).
const adoptToken = "adopt"

// allow declares a write the test makes happen on purpose to an object
// that is not the cluster's.
func (e *env) allow(ex ownaudit.Exception) { e.allowed = append(e.allowed, ex) }

// takeOver is adopt's explicit take-over: what the plans it applied say
// they take over (the servers it adopts or replaces, the groups it takes
// over, the instance pools it replaces), written by adopt's credentials
// (caller). Once adopt has retagged them they are the cluster's.
func takeOver(caller string, plans []*adopt.Plan) ownaudit.Exception {
	ex := ownaudit.Exception{Reason: "adopt's take-over of what its plan names", Caller: caller}
	for _, p := range plans {
		for _, g := range p.Groups {
			if g.Blocked != "" {
				continue
			}
			for _, m := range g.Members {
				if m.Action == adopt.ActAdopt || m.Action == adopt.ActReplace {
					ex.Objects = append(ex.Objects, m.Found.ID)
				}
			}
			for _, tg := range g.TakeOver {
				ex.Objects = append(ex.Objects, tg.ID)
			}
			if g.Pool != nil && g.Mode == adopt.Replace {
				ex.Objects = append(ex.Objects, g.Pool.ID)
			}
		}
	}
	return ex
}
