package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/client-go/tools/cache"

	"github.com/appuio/machine-api-provider/pkg/actuator"
)

// The steps of a Machine's life the timeline marks, in order: the first time
// the benchmark's informer sees each.
const (
	stepSeen         = iota // the MachineSet controller created it
	stepFinalizer           // the machine controller added its finalizer
	stepProvisioning        // phase Provisioning
	stepIntent              // the provider recorded its create intent: the create starts
	stepProviderID          // the provider recorded the server
	stepProvisioned         // phase Provisioned
	stepRunning             // phase Running: its Node is linked
	stepDeleting            // deletion requested
	stepGone                // the Machine is gone
	steps
)

var stepNames = [steps]string{"seen", "finalizer", "Provisioning", "create intent", "providerID", "Provisioned", "Running", "deletion requested", "gone"}

// timeline records, per Machine, when each step was first seen, from the
// watch events of Machines: the evidence of where the time goes between
// "Machine created" and "Provisioned". Machines are told apart by UID, not
// by name: the MachineSet controller's generated names (5 random
// characters) come again across the scale-ups of a run of 1000 Machines
// often enough (about one run in five), and a new Machine under a gone
// one's name must count as new.
type timeline struct {
	mu       sync.Mutex
	machines map[string]*[steps]time.Time
	// names are the Machines' namespace/name, by the key of machines.
	names map[string]string
	count [steps]int
	last  [steps]time.Time
	// provisioned, when set, is told of each Machine the first time it
	// is seen Provisioned (outside the lock).
	provisioned func(namespace, name string)
}

func newTimeline() *timeline {
	return &timeline{machines: map[string]*[steps]time.Time{}, names: map[string]string{}}
}

func (t *timeline) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj, false) },
		UpdateFunc: func(_, obj any) { t.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			t.observe(obj, true)
		},
	}
}

func (t *timeline) observe(obj any, gone bool) {
	m, ok := obj.(*machinev1.Machine)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	newlyProvisioned := false
	defer func() {
		t.mu.Unlock()
		if newlyProvisioned && t.provisioned != nil {
			t.provisioned(m.Namespace, m.Name)
		}
	}()
	name := m.Namespace + "/" + m.Name
	key := string(m.UID)
	if key == "" {
		key = name
	}
	marks := t.machines[key]
	if marks == nil {
		marks = &[steps]time.Time{}
		t.machines[key] = marks
		t.names[key] = name
	}
	phase := ""
	if m.Status.Phase != nil {
		phase = *m.Status.Phase
	}
	_, intent := m.Annotations[actuator.CreateIntentAnnotation]
	reached := [steps]bool{
		stepSeen:         true,
		stepFinalizer:    slices.Contains(m.Finalizers, machinev1.MachineFinalizer),
		stepProvisioning: phase != "",
		stepIntent:       intent,
		stepProviderID:   m.Spec.ProviderID != nil && *m.Spec.ProviderID != "",
		stepProvisioned:  phase == machinev1.PhaseProvisioned || phase == machinev1.PhaseRunning,
		stepRunning:      phase == machinev1.PhaseRunning,
		stepDeleting:     m.DeletionTimestamp != nil,
		stepGone:         gone,
	}
	// A step passed between two events (the create intent is written and
	// removed within one reconcile when the answer is quick) counts as
	// reached when a later one is, at that later time.
	for s := stepProvisioned - 1; s >= stepSeen; s-- {
		reached[s] = reached[s] || reached[s+1]
	}
	for s := range reached {
		if reached[s] && marks[s].IsZero() {
			marks[s] = now
			t.count[s]++
			t.last[s] = now
			newlyProvisioned = newlyProvisioned || s == stepProvisioned && !gone && m.DeletionTimestamp == nil && !reached[stepRunning]
		}
	}
}

// reached reports how many Machines reached the step, and when the last
// of them did.
func (t *timeline) reached(step int) (int, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[step], t.last[step]
}

// now counts the Machines that reached the step and are not gone.
func (t *timeline) now(step int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, marks := range t.machines {
		if !marks[step].IsZero() && marks[stepGone].IsZero() {
			n++
		}
	}
	return n
}

// spans returns, for consecutive steps from..to, how long the Machines took
// from one to the next.
func (t *timeline) spans(from, to int) [][]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([][]time.Duration, to-from)
	for _, marks := range t.machines {
		for s := from; s < to; s++ {
			if !marks[s].IsZero() && !marks[s+1].IsZero() {
				out[s-from] = append(out[s-from], marks[s+1].Sub(marks[s]))
			}
		}
	}
	return out
}

// since returns, per Machine, how long after start it reached the step.
func (t *timeline) since(start time.Time, step int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, marks := range t.machines {
		if !marks[step].IsZero() {
			out = append(out, marks[step].Sub(start))
		}
	}
	return out
}

// breakdown describes the steps from..to as median, 90th percentile and
// maximum of each span.
func (t *timeline) breakdown(from, to int) string {
	var b strings.Builder
	for i, d := range t.spans(from, to) {
		fmt.Fprintf(&b, "    %-34s %s\n", stepNames[from+i]+" -> "+stepNames[from+i+1]+":", quantiles(d))
	}
	return b.String()
}

func quantiles(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return fmt.Sprintf("p50 %6.3fs  p90 %6.3fs  max %6.3fs  (n=%d)", q(0.5).Seconds(), q(0.9).Seconds(), d[len(d)-1].Seconds(), len(d))
}
