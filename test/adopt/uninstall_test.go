package adopt_test

import (
	"bytes"
	"context"
	"sync"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/adopt"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/uninstall"
)

// Stopping and leaving without losing a node (`machine-api-provider
// uninstall`, `adopt --undo`): every Machine, MachineSet and
// ControlPlaneMachineSet goes, every server and Node stays, counted by the
// emulator's request log (not a single write to the cloud) and a watch of
// the Nodes (not a single deletion); then the provider comes back and adopt
// finds every server again under its Machine's name, without a create.

// demoStopper stops the environment's provider and machine-api controllers
// as uninstall stops their Deployments on a cluster (the environment runs
// them in the test's process).
type demoStopper struct{ e *env }

func (s demoStopper) Describe() []string {
	return []string{"the provider and the machine-api controllers"}
}

func (s demoStopper) Stop(_ context.Context, progress func(string, ...any)) error {
	s.e.StopMachineAPI()
	progress("the provider and the machine-api controllers stopped")
	return nil
}

func (s demoStopper) Start(_ context.Context, progress func(string, ...any)) error {
	progress("the provider and the machine-api controllers started")
	return s.e.StartMachineAPI()
}

// nodeWatch records the Nodes deleted while it runs.
type nodeWatch struct {
	w       watch.Interface
	mu      sync.Mutex
	deleted []string
	done    chan struct{}
}

func (e *env) watchNodes() *nodeWatch {
	e.t.Helper()
	wc, err := client.NewWithWatch(e.Cluster.Config, client.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := wc.Watch(e.ctx, &corev1.NodeList{})
	if err != nil {
		e.t.Fatal(err)
	}
	nw := &nodeWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(nw.done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Deleted {
				nw.mu.Lock()
				nw.deleted = append(nw.deleted, n.Name)
				nw.mu.Unlock()
			}
		}
	}()
	return nw
}

func (nw *nodeWatch) stop() []string {
	nw.w.Stop()
	<-nw.done
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.deleted
}

// nodesNow are the Nodes by name, with their UIDs.
func (e *env) nodesNow() map[string]types.UID {
	e.t.Helper()
	var nodes corev1.NodeList
	if err := e.Client.List(e.ctx, &nodes); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, n := range nodes.Items {
		if n.DeletionTimestamp != nil || n.Spec.Unschedulable {
			e.t.Errorf("Node %s is being deleted or cordoned", n.Name)
		}
		out[n.Name] = n.UID
	}
	return out
}

// machinesByServer are the Machines by the server they record.
func (e *env) machinesByServer() map[string]string {
	e.t.Helper()
	var list machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &list, client.InNamespace(demo.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Items {
		if m.Spec.ProviderID != nil {
			out[*m.Spec.ProviderID] = m.Name
		}
	}
	return out
}

// release runs uninstall (or, adoptedOnly, adopt --undo) with the demo's
// stopper and checks that it left every server and Node as it was, wrote
// nothing to the cloud, and released what it should. It returns the
// Machines (by server) it released.
func (e *env) release(cloudName string, adoptedOnly bool) map[string]string {
	e.t.Helper()
	before := e.machinesByServer()
	nodes := e.nodesNow()
	servers := len(e.Servers())
	o := uninstall.Options{Namespace: demo.Namespace, Cloud: cloudName, AdoptedOnly: adoptedOnly, Stopper: demoStopper{e}, Log: e.log}
	if !adoptedOnly {
		remove, err := uninstall.ProviderObjects(demo.Namespace, cloudName)
		if err != nil {
			e.t.Fatal(err)
		}
		o.Remove = remove
	}
	var out bytes.Buffer
	o.Out = &out
	u, err := uninstall.New(e.kube, o)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := u.Plan(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	p.Print(&out, true)
	nw := e.watchNodes()
	e.Harness().ResetRequests()
	r, err := u.Apply(e.ctx, p)
	r.Print(&out)
	e.t.Logf("release (adopted only: %v):\n%s", adoptedOnly, out.String())
	if err != nil {
		e.t.Fatalf("release: %v", err)
	}
	if deleted := nw.stop(); len(deleted) != 0 {
		e.t.Errorf("Nodes deleted while releasing: %v", deleted)
	}
	if w := e.writes(); len(w) != 0 {
		e.t.Errorf("cloud writes while releasing (want none: no server delete, no tag or label change): %v", w)
	}
	if n := len(e.Servers()); n != servers {
		e.t.Errorf("%d servers after releasing, %d before", n, servers)
	}
	after := e.nodesNow()
	for name, uid := range nodes {
		if after[name] != uid {
			e.t.Errorf("Node %s: gone or made anew by the release", name)
		}
	}
	// What is left of ours.
	left := e.machinesByServer()
	released := map[string]string{}
	for server, name := range before {
		if _, ok := left[server]; !ok {
			released[server] = name
		}
	}
	if len(released) != r.Machines || r.Machines == 0 {
		e.t.Errorf("%d Machines released by the report, %d gone", r.Machines, len(released))
	}
	var sets machinev1beta1.MachineSetList
	if err := e.Client.List(e.ctx, &sets, client.InNamespace(demo.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	var cpms machinev1.ControlPlaneMachineSetList
	if err := e.kube.List(e.ctx, &cpms, client.InNamespace(demo.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	if !adoptedOnly && (len(left) != 0 || len(sets.Items) != 0 || len(cpms.Items) != 0) {
		e.t.Errorf("after uninstall: %d Machines, %d MachineSets, %d ControlPlaneMachineSets left, want none", len(left), len(sets.Items), len(cpms.Items))
	}
	for _, ms := range sets.Items {
		if ms.Annotations[adopt.WrittenAnnotation] != "" {
			e.t.Errorf("MachineSet %s, written by adopt, is left", ms.Name)
		}
	}
	return released
}

// comeBack starts the provider again when uninstall stopped it, and adopts
// again: every released server gets its Machine of the same name back, in
// place, without a create or a delete.
func (e *env) comeBack(c cloud.Cloud, clusterID string, released map[string]string, createRoute, deleteRoute string) {
	e.t.Helper()
	if !e.MachineAPIRunning() {
		if err := e.StartMachineAPI(); err != nil {
			e.t.Fatal(err)
		}
	}
	e.Harness().ResetRequests()
	var out bytes.Buffer
	p, _, r := e.run(e.adopter(c, clusterID, &out))
	if c, d := e.Harness().Count(createRoute), e.Harness().Count(deleteRoute); c != 0 || d != 0 {
		e.t.Errorf("adopting again: %d creates, %d deletes, want none", c, d)
	}
	again := e.machinesByServer()
	for server, name := range released {
		if again[server] != name {
			e.t.Errorf("server %s: Machine %q after adopting again, was %q", server, again[server], name)
		}
	}
	if r.MachinesCreated != len(released) {
		e.t.Errorf("adopting again made %d Machines, want the %d released", r.MachinesCreated, len(released))
	}
	for _, g := range p.Groups {
		if g.MachineSet == nil && !g.Master && g.Blocked == "" && !g.Exists {
			e.t.Errorf("group %s adopted again without a MachineSet", g.Name)
		}
	}
}
