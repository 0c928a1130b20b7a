// Package e2e runs the whole autoscaling loop on the local control plane
// (see pkg/demo) and asserts it, once per cloud: every test runs as a
// subtest for cloudscale.ch and one for Exoscale (E2E_CLOUDS, comma
// separated, picks some). `make e2e` runs it; plain `go test ./...` skips
// it, as it takes minutes.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/ownaudit"
)

// testLog is the running test's demo.log. controller-runtime's logger is
// process-wide and can be set only once, so it writes here, and each test
// points it at its own file.
var testLog struct {
	sync.Mutex
	w io.Writer
}

func logToTest(prefix, args string) {
	testLog.Lock()
	defer testLog.Unlock()
	if testLog.w != nil {
		fmt.Fprintln(testLog.w, prefix, args)
	}
}

func TestMain(m *testing.M) {
	// Unset, it drops the logs of client-go's informers and prints a stack
	// trace into the test output after 30 s.
	ctrllog.SetLogger(funcr.New(logToTest, funcr.Options{Verbosity: 2, LogTimestamp: true}))
	code := m.Run()
	phaseTimes.print(os.Stdout)
	os.Exit(code)
}

// eachCloud runs test once per cloud, as a subtest named after the cloud,
// so that `go test -run 'TestX/exoscale'` picks one. E2E_CLOUDS (comma
// separated) narrows the clouds; unset, every cloud runs.
func eachCloud(t *testing.T, test func(t *testing.T, cloud string)) {
	clouds := demo.Clouds
	if only := os.Getenv("E2E_CLOUDS"); only != "" {
		clouds = strings.Split(only, ",")
		for _, c := range clouds {
			if !slices.Contains(demo.Clouds, c) {
				t.Fatalf("E2E_CLOUDS: no cloud %q (%s)", c, strings.Join(demo.Clouds, ", "))
			}
		}
	}
	for _, c := range clouds {
		t.Run(c, func(t *testing.T) { test(t, c) })
	}
}

// phaseTimes collects each cloud's phase times, printed together when
// every test is done, so that the clouds can be compared at a glance.
var phaseTimes = &phases{}

type phases struct {
	sync.Mutex
	lines []string
}

func (p *phases) add(cloud, what, times string) {
	p.Lock()
	defer p.Unlock()
	p.lines = append(p.lines, fmt.Sprintf("  %-10s %-14s %s", cloud, what, times))
}

func (p *phases) print(w io.Writer) {
	p.Lock()
	defer p.Unlock()
	if len(p.lines) == 0 {
		return
	}
	fmt.Fprintln(w, "phase times per cloud (autoscaling: since the MachineSet was created; MHC: since the kubelet went silent):")
	for _, l := range p.lines {
		fmt.Fprintln(w, l)
	}
}

// start starts the environment on cloud, on platform External (the cloud's
// CCM initializes every Node) unless an option says otherwise.
func start(t *testing.T, cloud string, autoscaler bool, opts ...func(*demo.Options)) *demo.Env {
	t.Helper()
	if os.Getenv("E2E") == "" {
		t.Skip("end-to-end test: run `make e2e` (E2E=1)")
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: the logs of a failed run must outlive the test.
	dir, err := os.MkdirTemp("", "e2e-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	testLog.Lock()
	testLog.w = logFile
	testLog.Unlock()
	log := funcr.New(logToTest, funcr.Options{Verbosity: 2, LogTimestamp: true})
	o := demo.Options{
		Cloud:  cloud,
		BinDir: bin, Dir: dir, BootTime: 3 * time.Second, RegisterDelay: 2 * time.Second, Autoscaler: autoscaler, Log: log,
		// Short, so that scaling down to zero is part of the test.
		ScaleDownUnneeded: 10 * time.Second, ScaleDownDelayAfterAdd: 10 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	e, err := demo.Start(o)
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
		testLog.Lock()
		testLog.w = nil
		testLog.Unlock()
		logFile.Close()
		if t.Failed() {
			t.Logf("logs are in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The ownership audit (test/ownaudit) of everything the test does
	// from here on, held to the cluster's identity at its end.
	audit := ownaudit.Begin(t, ownaudit.Source{Cloud: e.Harness().Audit(), Config: e.Cluster.Config, AuditLog: e.AuditLog()})
	t.Cleanup(func() {
		// The legacy cluster IDs the test declared are the cluster's too.
		ids, err := e.DeclaredIDs()
		if err != nil {
			t.Errorf("the ownership audit: the declared legacy cluster IDs: %v", err)
		}
		audit.Check(t, t.Name(), ownaudit.Options{ClusterID: e.Options.ClusterID, AlsoOwns: ids.Legacy})
	})
	return e
}

func watch(t *testing.T, e *demo.Env, m *demo.Milestones, timeout time.Duration, what string, until func(demo.State) bool) demo.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := ""
	st, err := e.Watch(ctx, m, time.Second, func(el time.Duration, st demo.State) {
		if s := st.String(); s != last {
			t.Logf("[%5.1fs] %s", el.Seconds(), s)
			last = s
		}
	}, until)
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, st)
	}
	return st
}

// awaitEvent waits up to 30s for an event of reason about the object name
// (in ns, "" for all) that match (if not nil) accepts: events are recorded
// asynchronously, so the state they report can be seen before them. If
// none comes it fails the test, not at once, listing the object's events.
func awaitEvent(t *testing.T, c client.Client, ns, name, reason string, match func(corev1.Event) bool) bool {
	t.Helper()
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list corev1.EventList
		err := c.List(context.Background(), &list, opts...)
		var seen []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name != name {
				continue
			}
			if ev.Reason == reason && (match == nil || match(ev)) {
				return true
			}
			seen = append(seen, fmt.Sprintf("%s %s %s (%s): %s", ev.InvolvedObject.Kind, ev.Type, ev.Reason, ev.Source.Component, ev.Message))
		}
		if time.Now().After(deadline) {
			t.Errorf("no %s event about %s within 30s (last list error: %v); its events:\n%s", reason, name, err, strings.Join(seen, "\n"))
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Machines, servers and Nodes line up: every Machine's NodeInternalDNS is
// its Node's name, the Node's providerID is the Machine's, and its server
// is named as the Node (the name the cloudscale.ch CCM finds a Node's
// server by). On platform External every Node was initialized by the CCM.
func assertLinked(t *testing.T, e *demo.Env) {
	t.Helper()
	ctx := context.Background()
	var machines machinev1.MachineList
	if err := e.Client.List(ctx, &machines, client.InNamespace(demo.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		if m.Status.NodeRef == nil {
			t.Errorf("machine %s has no node", m.Name)
			continue
		}
		dns := ""
		for _, a := range m.Status.Addresses {
			if a.Type == corev1.NodeInternalDNS {
				dns = a.Address
			}
		}
		var node corev1.Node
		if err := e.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &node); err != nil {
			t.Errorf("machine %s: node %s: %v", m.Name, m.Status.NodeRef.Name, err)
			continue
		}
		if dns != node.Name {
			t.Errorf("machine %s: NodeInternalDNS %q, node name %q", m.Name, dns, node.Name)
		}
		// The hostname the server booted with (the boot simulation reads
		// it from the user data: the installer's pointer Ignition, which
		// sets none, with the one the provider adds).
		if node.Name != m.Name {
			t.Errorf("machine %s: its node is named %q, not as the Machine", m.Name, node.Name)
		}
		if m.Spec.ProviderID == nil || node.Spec.ProviderID != *m.Spec.ProviderID {
			t.Errorf("machine %s: providerID %v, node's %q", m.Name, m.Spec.ProviderID, node.Spec.ProviderID)
		}
		for _, s := range e.Servers() {
			if m.Spec.ProviderID != nil && s.ProviderID == *m.Spec.ProviderID && s.Name != node.Name {
				t.Errorf("machine %s: server named %q, its node %q", m.Name, s.Name, node.Name)
			}
		}
		if e.Options.External() {
			assertInitialized(t, &node)
		}
	}
}

// assertInitialized: the Node was initialized by the cloud's CCM, as on a
// cluster on platform External: the uninitialized taint is gone, and its
// providerID, the cloud's labels and its addresses were written by the CCM
// process (the field manager of its writes), which alone sets them: the
// simulated kubelet registered the Node without any of them.
func assertInitialized(t *testing.T, n *corev1.Node) {
	t.Helper()
	for _, taint := range n.Spec.Taints {
		if taint.Key == bootsim.UninitializedTaint.Key {
			t.Errorf("node %s is still tainted %s", n.Name, taint.Key)
		}
	}
	var ccmFields string
	for _, f := range n.ManagedFields {
		if f.Manager == ccm.ProcessName && f.FieldsV1 != nil {
			ccmFields += string(f.FieldsV1.Raw)
		}
	}
	for _, field := range []string{`"f:providerID"`, `"f:` + corev1.LabelInstanceTypeStable + `"`, `"f:` + corev1.LabelTopologyRegion + `"`, `"f:addresses"`} {
		if !strings.Contains(ccmFields, field) {
			t.Errorf("node %s: %s not written by the %s (its fields: %s)", n.Name, field, ccm.ProcessName, ccmFields)
		}
	}
	if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool {
		return a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP
	}) {
		t.Errorf("node %s has no IP address: %v", n.Name, n.Status.Addresses)
	}
}

func TestMachineSetScaledByHand(t *testing.T) { eachCloud(t, testMachineSetScaledByHand) }

// On cloudscale.ch the MachineSet has a baseDomain, as MachineSets of
// appuio's provider and adopted Terraform clusters do: its servers are still
// named as their Nodes, so the CCM finds each Node's server by the Node's
// name (the kubelet gave it no providerID), and every Node is initialized
// and linked (before, the servers were named <machine>.<baseDomain> and the
// Nodes stayed uninitialized, without providerID or address).
func testMachineSetScaledByHand(t *testing.T, cloud string) {
	e := start(t, cloud, false)
	ctx := context.Background()
	ms := e.MachineSet("")
	if cloud == demo.Cloudscale {
		setSpec(t, ms, "baseDomain", "c1.example.com")
	}
	if err := e.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))
	if err := e.Client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	var m demo.Milestones
	watch(t, e, &m, 3*time.Minute, "2 Machines Running with Ready Nodes", func(s demo.State) bool {
		return s.Machines["Running"] == 2 && s.NodesReady == 2
	})
	assertLinked(t, e)
}

// setSpec sets a field of the MachineSet's provider spec.
func setSpec(t *testing.T, ms *machinev1.MachineSet, field string, value any) {
	t.Helper()
	spec := map[string]any{}
	if err := json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &spec); err != nil {
		t.Fatal(err)
	}
	spec[field] = value
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ms.Spec.Template.Spec.ProviderSpec.Value.Raw = raw
}
