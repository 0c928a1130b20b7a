package ownaudit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// ClusterLabel is the Machines' cluster label, which says whose they are.
const ClusterLabel = "machine.openshift.io/cluster-api-cluster"

// NodeDeletePolicy is an API server audit policy that records who deleted
// each Node and nothing else; pkg/demo's policy has the same rule.
const NodeDeletePolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources: [{group: "", resources: ["nodes"]}]
- level: None
`

// Source is where a run is audited.
type Source struct {
	// Cloud is the account's emulator's audit (Harness().Audit()).
	Cloud *harness.Audit
	// Config reaches the cluster's API server: its Nodes and Machines are
	// watched from Begin on. nil: none are.
	Config *rest.Config
	// AuditLog is the API server's audit log, which names who deleted a
	// Node (pkg/demo's records every Node delete); "" for none.
	AuditLog string
}

// Recorder watches one cluster and its account from Begin to Check.
type Recorder struct {
	src    Source
	mark   int
	began  time.Time
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// nodes are the Nodes as last seen, by name; deleted those the watch
	// saw go.
	nodes    map[string]*corev1.Node
	deleted  []NodeDelete
	machines map[types.UID]Machine
	// specNamed are the strings the provider specs of the Machines and
	// MachineSets seen name, by the cluster label they carry.
	specNamed map[string]map[string]bool
}

// Begin starts auditing: the cloud's writes from now on, and the cluster's
// Nodes and Machines.
func Begin(t testing.TB, src Source) *Recorder {
	t.Helper()
	r := &Recorder{src: src, began: time.Now(), nodes: map[string]*corev1.Node{}, machines: map[types.UID]Machine{}, specNamed: map[string]map[string]bool{}}
	if src.Cloud != nil {
		r.mark = src.Cloud.Len()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	if src.Config == nil {
		close(r.done)
		return r
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := machinev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := ctrlcache.New(src.Config, ctrlcache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for obj, h := range map[client.Object]toolscache.ResourceEventHandlerFuncs{
		&corev1.Node{}: {
			AddFunc:    func(o any) { r.sawNode(o, false) },
			UpdateFunc: func(_, o any) { r.sawNode(o, false) },
			DeleteFunc: func(o any) { r.sawNode(o, true) },
		},
		&machinev1.Machine{}: {
			AddFunc:    r.sawMachine,
			UpdateFunc: func(_, o any) { r.sawMachine(o) },
			DeleteFunc: r.sawMachine,
		},
		&machinev1.MachineSet{}: {
			AddFunc:    r.sawMachineSet,
			UpdateFunc: func(_, o any) { r.sawMachineSet(o) },
		},
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		defer close(r.done)
		_ = c.Start(ctx)
	}()
	sync, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if !c.WaitForCacheSync(sync) {
		t.Fatal("ownership audit: the watch of Nodes and Machines did not start within a minute")
	}
	return r
}

func (r *Recorder) sawNode(o any, gone bool) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[n.Name] = n
	if gone {
		r.deleted = append(r.deleted, NodeDelete{Node: n.Name, ProviderID: n.Spec.ProviderID, Time: time.Now()})
	}
}

func (r *Recorder) sawMachine(o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	m, ok := o.(*machinev1.Machine)
	if !ok {
		return
	}
	seen := Machine{Namespace: m.Namespace, Name: m.Name, Cluster: m.Labels[ClusterLabel], Deleting: m.DeletionTimestamp != nil}
	if m.Status.NodeRef != nil {
		seen.NodeRef = m.Status.NodeRef.Name
	}
	if m.Spec.ProviderID != nil {
		seen.ProviderID = *m.Spec.ProviderID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if was, ok := r.machines[m.UID]; ok {
		// What a Machine once pointed at stays known: the machine
		// controller deletes the Node its Machine last had.
		seen.Deleting = seen.Deleting || was.Deleting
		if seen.NodeRef == "" {
			seen.NodeRef = was.NodeRef
		}
	}
	r.machines[m.UID] = seen
	if m.Spec.ProviderSpec.Value != nil {
		r.specStrings(seen.Cluster, m.Spec.ProviderSpec.Value.Raw)
	}
}

func (r *Recorder) sawMachineSet(o any) {
	ms, ok := o.(*machinev1.MachineSet)
	if !ok || ms.Spec.Template.Spec.ProviderSpec.Value == nil {
		return
	}
	cluster := ms.Spec.Template.Labels[ClusterLabel]
	if cluster == "" {
		cluster = ms.Labels[ClusterLabel]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specStrings(cluster, ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
}

// specStrings notes the strings of a provider spec of cluster. Callers
// hold r.mu.
func (r *Recorder) specStrings(cluster string, raw []byte) {
	if r.specNamed[cluster] == nil {
		r.specNamed[cluster] = map[string]bool{}
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			r.specNamed[cluster][v] = true
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
}

// Check stops the watch, judges what was recorded since Begin, fails t
// for every foreign write and Node delete (printing each) and logs the
// counts under name.
func (r *Recorder) Check(t testing.TB, name string, o Options) Report {
	t.Helper()
	rep, err := r.Report(o)
	if err != nil {
		t.Errorf("ownership audit %s: %v", name, err)
		return rep
	}
	for _, f := range rep.Foreign {
		t.Errorf("ownership audit %s: foreign write: %s", name, f)
	}
	for _, f := range rep.ForeignNodeDeletes {
		t.Errorf("ownership audit %s: foreign Node delete: %s", name, f)
	}
	t.Logf("ownership audit %s (cluster %s): %s", name, o.ClusterID, rep.Counts())
	return rep
}

// Report stops the watch and judges what was recorded since Begin.
func (r *Recorder) Report(o Options) (Report, error) {
	deletes, err := r.caughtUp()
	r.cancel()
	<-r.done
	if err != nil {
		return Report{}, err
	}
	var writes []harness.Write
	if r.src.Cloud != nil {
		writes = r.src.Cloud.Since(r.mark)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	machines := make([]Machine, 0, len(r.machines))
	for _, m := range r.machines {
		machines = append(machines, m)
	}
	var named []string
	for _, id := range append([]string{o.ClusterID}, o.AlsoOwns...) {
		for s := range r.specNamed[id] {
			named = append(named, s)
		}
	}
	return Judge(o, writes, named, deletes, machines), nil
}

// deleteCollection names the Nodes of a deletecollection.
const deleteCollection = "(every Node a deletecollection matched)"

// caughtUp waits, for at most a minute, until the watch has seen every
// Node delete the audit log holds (it learns the Nodes' provider IDs from
// the watch), and returns the deletes.
func (r *Recorder) caughtUp() ([]NodeDelete, error) {
	if r.src.AuditLog == "" {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Clone(r.deleted), nil
	}
	deadline := time.Now().Add(time.Minute)
	for {
		r.mu.Lock()
		deletes, err := r.auditedDeletes()
		seen := err == nil && !slices.ContainsFunc(deletes, func(d NodeDelete) bool {
			return d.Node != deleteCollection && !slices.ContainsFunc(r.deleted, func(w NodeDelete) bool { return w.Node == d.Node })
		})
		r.mu.Unlock()
		if err != nil || seen || time.Now().After(deadline) {
			return deletes, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditedDeletes are the Node deletes the API server's audit log holds
// since Begin, with who made them; the Nodes' provider IDs are the watch's
// last sight of them. Callers hold r.mu.
func (r *Recorder) auditedDeletes() ([]NodeDelete, error) {
	f, err := os.Open(r.src.AuditLog)
	if err != nil {
		return nil, fmt.Errorf("the API server's audit log: %w", err)
	}
	defer f.Close()
	var out []NodeDelete
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				APIGroup, Resource, Subresource, Name string
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			Stage          string    `json:"stage"`
			StageTimestamp time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("the API server's audit log: %w", err)
		}
		if ev.ObjectRef == nil || ev.ObjectRef.APIGroup != "" || ev.ObjectRef.Resource != "nodes" || ev.ObjectRef.Subresource != "" ||
			(ev.Verb != "delete" && ev.Verb != "deletecollection") || ev.Stage != "ResponseComplete" ||
			ev.ResponseStatus == nil || ev.ResponseStatus.Code >= 300 || ev.StageTimestamp.Before(r.began) {
			continue
		}
		d := NodeDelete{Node: ev.ObjectRef.Name, Time: ev.StageTimestamp, Agent: ev.UserAgent, User: ev.User.Username}
		if ev.Verb == "deletecollection" {
			d.Node = deleteCollection
		}
		if n := r.nodes[ev.ObjectRef.Name]; n != nil {
			d.ProviderID = n.Spec.ProviderID
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// The watch saw every delete the log holds: a Node gone that the log
	// does not name was deleted by no request the log records.
	for _, d := range r.deleted {
		if !slices.ContainsFunc(out, func(a NodeDelete) bool { return a.Node == d.Node }) {
			out = append(out, d)
		}
	}
	return out, nil
}
