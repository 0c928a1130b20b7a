package chaos

import (
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The run's verdict is only as good as its comparison: these hold it to
// each kind of violation, without a cluster or a cloud.

func machine(name, phase string) machinev1.Machine {
	m := machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}
	if phase != "" {
		m.Status.Phase = &phase
	}
	return m
}

func server(id, machine string) Server {
	return Server{ID: id, Name: machine, Machine: machine, ClusterID: ClusterID}
}

func group(n string, members ...string) Group {
	return Group{ID: "g" + n, Name: ClusterID + "-" + AntiAffinityKey + "-" + n, Members: members}
}

func TestEvaluateFindsEveryViolation(t *testing.T) {
	inv := Inventory{
		Servers: []Server{
			server("s1", "m1"),
			server("s2a", "m2"), server("s2b", "m2"), // duplicate now
			server("s9", "gone"),              // orphan: no such Machine
			{ID: "s10", ClusterID: ClusterID}, // orphan: the cluster's, no Machine's
			{ID: "other", Machine: "m1", ClusterID: "another-cluster"},
		},
		Groups: []Group{
			group("1", "s1", "s2a", "s2b"),
			group("2"), // empty and old: leaked
			group("3"), // empty and young: not yet
			{ID: "user", Name: "someone-elses"},
		},
	}
	machines := []machinev1.Machine{machine("m1", machinev1.PhaseRunning), machine("m2", machinev1.PhaseProvisioned), machine("m3", machinev1.PhaseProvisioning), machine("m4", machinev1.PhaseFailed)}
	s := newState(machines, inv)
	if s.settled(4) {
		t.Error("settled with duplicates, orphans and Machines not ready")
	}
	ages := map[string]time.Duration{"g2": 5 * time.Minute, "g3": 10 * time.Second}
	var res phaseResult
	res.To = 4
	evaluate(&res, s, map[string][]string{"m1": {"s1", "s1-deleted-since"}}, func(id string) time.Duration { return ages[id] }, 2*time.Minute)

	if res.Machines != 4 || res.Servers != 5 {
		t.Errorf("Machines %d, servers %d; want 4 and 5 (the other cluster's server is not counted)", res.Machines, res.Servers)
	}
	if res.Duplicates != 2 {
		t.Errorf("duplicates = %d, want 2 (m1 earlier in the phase, m2 now)", res.Duplicates)
	}
	if res.Orphans != 2 {
		t.Errorf("orphans = %d, want 2", res.Orphans)
	}
	if res.LeakedGroups != 1 {
		t.Errorf("leaked groups = %d, want 1 (the young one is not leaked yet)", res.LeakedGroups)
	}
	if res.Stuck != 2 {
		t.Errorf("stuck = %d, want 2 (Provisioning and Failed)", res.Stuck)
	}
	if !res.failed() {
		t.Error("not failed")
	}
	all := strings.Join(res.Violations, "\n")
	for _, want := range []string{"Machine m1 had servers", "Machine m2 had servers", "server s9", `server s10`, ClusterID + "-" + AntiAffinityKey + "-2", "Machine m3 in phase Provisioning", "Machine m4 in phase Failed"} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation names %q:\n%s", want, all)
		}
	}
}

func TestEvaluateAtZero(t *testing.T) {
	deleting := machine("m1", machinev1.PhaseDeleting)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	s := newState([]machinev1.Machine{deleting}, Inventory{Groups: []Group{group("1")}})
	if s.settled(0) {
		t.Error("settled at 0 with a Machine and a group left")
	}
	var res phaseResult
	evaluate(&res, s, nil, func(string) time.Duration { return time.Hour }, time.Minute)
	if res.Stuck != 1 || res.LeakedGroups != 1 || res.Orphans != 0 || res.Duplicates != 0 {
		t.Errorf("stuck %d, leaked %d, orphans %d, duplicates %d; want 1, 1, 0, 0", res.Stuck, res.LeakedGroups, res.Orphans, res.Duplicates)
	}
	if !newState(nil, Inventory{Groups: []Group{{ID: "x", Name: "someone-elses"}}}).settled(0) {
		t.Error("a group that is not the cluster's keeps the phase from settling")
	}
}

func TestSettledAtN(t *testing.T) {
	inv := Inventory{Servers: []Server{server("s1", "m1"), server("s2", "m2")}, Groups: []Group{group("1", "s1", "s2"), group("2")}}
	ok := newState([]machinev1.Machine{machine("m1", machinev1.PhaseRunning), machine("m2", machinev1.PhaseProvisioned)}, inv)
	if !ok.settled(2) {
		t.Error("not settled with every Machine ready and one server each (a young empty group is allowed at N)")
	}
	if ok.settled(3) {
		t.Error("settled with fewer Machines than wanted")
	}
	var res phaseResult
	res.To = 2
	evaluate(&res, ok, nil, func(string) time.Duration { return 0 }, time.Minute)
	res.Settled = true
	if res.failed() {
		t.Errorf("failed: %v", res.Violations)
	}
}
