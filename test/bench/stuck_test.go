package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/test/fixture"
)

// behind names the Machines, not gone, that have not reached the step, with
// the last step each reached; at most that many, sorted.
func (t *timeline) behind(step, most int) (names []string, last map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	last = map[string]string{}
	for key, marks := range t.machines {
		if !marks[step].IsZero() || !marks[stepGone].IsZero() {
			continue
		}
		name := t.names[key]
		names = append(names, name)
		for s := step - 1; s >= stepSeen; s-- {
			if !marks[s].IsZero() {
				last[name] = stepNames[s]
				break
			}
		}
	}
	slices.Sort(names)
	return names[:min(len(names), most)], last
}

// waitStep waits until n Machines reached the step. When they do not in
// time, the benchmark fails saying which did not and what they show
// (phase, error, provider ID, their last events) and the end of the
// manager's log: a run of an hour that ends on "timed out" alone cannot be
// told from a product fault.
func (s *scaling) waitStep(step int, timeout time.Duration) {
	b, tl := s.b, s.tl
	deadline := time.Now().Add(timeout)
	for tl.now(step) < s.n {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %d Machines %s: %d there\n%s\nthe end of the manager's log:\n%s",
				timeout, s.n, stepNames[step], tl.now(step), s.stuck(step), tail(s.mgr.log, 30))
		}
		time.Sleep(s.poll)
	}
}

// stuck describes the first few Machines that have not reached the step.
func (s *scaling) stuck(step int) string {
	names, last := s.tl.behind(step, 5)
	var out strings.Builder
	ctx := context.Background()
	for _, key := range names {
		ns, name, _ := strings.Cut(key, "/")
		fmt.Fprintf(&out, "- %s (last step seen: %s)", key, last[key])
		m := &machinev1.Machine{}
		if err := s.e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m); err != nil {
			fmt.Fprintf(&out, ": %v\n", err)
			continue
		}
		fmt.Fprintf(&out, ": phase %q, providerID %q, error %q, annotations %v\n", fixture.Phase(m), deref(m.Spec.ProviderID), deref(m.Status.ErrorMessage), m.Annotations)
		if events, err := s.e.EventsOf(name); err == nil {
			for _, ev := range events[max(0, len(events)-3):] {
				fmt.Fprintf(&out, "    event %s %s: %s\n", ev.Type, ev.Reason, ev.Message)
			}
		}
	}
	return out.String()
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(raw), n)
}

// lastLines is the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestTimelineNamesTheMachinesBehind(t *testing.T) {
	tl := newTimeline()
	machine := func(name, phase string) *machinev1.Machine {
		m := &machinev1.Machine{}
		m.Namespace, m.Name = "ns", name
		if phase != "" {
			m.Status.Phase = &phase
		}
		return m
	}
	tl.observe(machine("a", machinev1.PhaseProvisioned), false)
	tl.observe(machine("c", ""), false)
	tl.observe(machine("b", machinev1.PhaseProvisioning), false)
	tl.observe(machine("d", ""), false)
	tl.observe(machine("d", ""), true)
	names, last := tl.behind(stepProvisioned, 5)
	if want := []string{"ns/b", "ns/c"}; !slices.Equal(names, want) {
		t.Fatalf("behind Provisioned: %v, want %v (d is gone)", names, want)
	}
	if last["ns/b"] != "Provisioning" || last["ns/c"] != "seen" {
		t.Errorf("last steps %v, want b at Provisioning and c at seen", last)
	}
	if names, _ := tl.behind(stepProvisioned, 1); len(names) != 1 {
		t.Errorf("at most 1 asked, %d given", len(names))
	}
}

// A scale-up whose MachineSet gives a new Machine the name of one gone in
// an earlier scale-up: the new Machine counts, and its Node is linked.
// Keyed by name, the timeline took it for the gone one, and the run waited
// ten minutes for a Machine it would never count.
func TestTimelineTellsAReusedNameApart(t *testing.T) {
	tl := newTimeline()
	var linked []string
	tl.provisioned = func(namespace, name string) { linked = append(linked, namespace+"/"+name) }
	machine := func(uid, phase string) *machinev1.Machine {
		m := &machinev1.Machine{}
		m.Namespace, m.Name, m.UID = "ns", "workers-khj6f", types.UID(uid)
		if phase != "" {
			m.Status.Phase = &phase
		}
		return m
	}
	tl.observe(machine("old", machinev1.PhaseProvisioned), false)
	tl.observe(machine("old", machinev1.PhaseRunning), true)
	tl.observe(machine("new", ""), false)
	if names, _ := tl.behind(stepProvisioned, 5); !slices.Equal(names, []string{"ns/workers-khj6f"}) {
		t.Errorf("behind Provisioned: %v, want the new Machine under the old name", names)
	}
	tl.observe(machine("new", machinev1.PhaseProvisioned), false)
	if n := tl.now(stepProvisioned); n != 1 {
		t.Errorf("%d Machines Provisioned and not gone, want 1: the new one", n)
	}
	if n, _ := tl.reached(stepProvisioned); n != 2 {
		t.Errorf("Provisioned reached %d times, want 2", n)
	}
	if want := []string{"ns/workers-khj6f", "ns/workers-khj6f"}; !slices.Equal(linked, want) {
		t.Errorf("Nodes linked for %v, want one for each Machine", linked)
	}
}
