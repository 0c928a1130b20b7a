package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// A cluster's steady state: every Machine Running, which it is once its
// Node registered and the nodelink controller linked them. A Machine left
// Provisioned is reconciled every 30 s by the machine controller ("has no
// node yet, requeuing": machine-api-operator, pkg/controller/machine,
// controller.go), which no settled cluster does; the benchmarks link a
// Node to every Machine instead, as the nodelink controller would
// (nodeLinker).
//
// The figures of a steady state are measured between the janitor's sweeps,
// which every interval list the cluster's servers and its groups: a window
// of steadyWindow starts steadyOffset after a sweep, so that it holds
// exactly steadyWindow/janitorInterval sweeps, none at its edges, whatever
// the machine's load. The sync period's resync is measured on its own
// (resync) and the manager runs with a sync period longer than the
// benchmark, so that none falls into another window.
const (
	janitorInterval = time.Minute // the manager's --janitor-interval default
	steadyWindow    = 2 * janitorInterval
	steadyOffset    = 5 * time.Second
	// syncPeriod is the manager's --sync-period default: a settled
	// Machine is reconciled that often.
	syncPeriod = 10 * time.Minute
	// benchSyncPeriod is the one the benchmarks' managers run with.
	benchSyncPeriod = time.Hour
)

// nodeLinker gives each Machine a Node reference as soon as it is
// Provisioned, as the nodelink controller does once the server's kubelet
// registered (a real Node comes minutes later; the benchmark's come at
// once, so that how long a scale-up takes does not change how often the
// machine controller requeues Machines without a Node, 30 s apart). No
// Node object is made: the machine controller's drain and its Node
// deletion take a missing Node as gone already, and a Node would only feed
// the provider's Node veto, which holds no delete of a Machine's own
// server anyway.
type nodeLinker struct {
	c    client.Client
	work chan types.NamespacedName
	wg   sync.WaitGroup

	mu    sync.Mutex
	err   error
	count int
}

// startNodeLinker links the Nodes of the Machines tl sees Provisioned.
func startNodeLinker(b testing.TB, c client.Client, tl *timeline) *nodeLinker {
	l := &nodeLinker{c: c, work: make(chan types.NamespacedName, 1<<16)}
	for range 4 {
		l.wg.Add(1)
		go l.run()
	}
	tl.provisioned = func(namespace, name string) {
		l.work <- types.NamespacedName{Namespace: namespace, Name: name}
	}
	b.Cleanup(func() {
		tl.provisioned = nil
		close(l.work)
		l.wg.Wait()
	})
	return l
}

func (l *nodeLinker) run() {
	defer l.wg.Done()
	for key := range l.work {
		m := &machinev1.Machine{}
		m.Namespace, m.Name = key.Namespace, key.Name
		patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"status":{"nodeRef":{"apiVersion":"v1","kind":"Node","name":%q}}}`, key.Name)))
		err := l.c.Status().Patch(context.Background(), m, patch)
		l.mu.Lock()
		switch {
		case err == nil:
			l.count++
		case !apierrors.IsNotFound(err) && l.err == nil:
			l.err = fmt.Errorf("linking the Node of Machine %s: %w", key, err)
		}
		l.mu.Unlock()
	}
}

// linked is how many Nodes the linker linked, and its first failure.
func (l *nodeLinker) linked() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count, l.err
}

// echoes is how long after a Machine went Running the machine controller
// may still reconcile it once: each reconcile before asked to be
// requeued after 30 s ("created instance, requeuing", "has no node yet").
const echoes = 30*time.Second + 2*time.Second

// awaitSweep waits for the janitor's next sweep, which lists the
// anti-affinity groups (route): nothing else does while no Machine with an
// anti-affinity key is deleted.
func awaitSweep(b testing.TB, h *harness.Harness, route string) time.Time {
	n := h.Count(route)
	deadline := time.Now().Add(janitorInterval + 30*time.Second)
	for h.Count(route) == n {
		if time.Now().After(deadline) {
			b.Fatalf("no janitor sweep (%s) within %s", route, janitorInterval+30*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Now()
}
