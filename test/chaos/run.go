package chaos

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// MachineSetName is the run's MachineSet.
const MachineSetName = "chaos-workers"

// run is one cloud's chaos run.
type run struct {
	cfg      Config
	cloud    Cloud
	cp       *controlPlane
	replicas *replicas
	obs      *observer
	events   *eventLog
	lease    string
	// rng draws the schedule (kills, victims, slow creates, the API
	// server's restart), in one goroutine at a time.
	rng *rand.Rand
	// apiRestarts counts the API server's restarts, deletedEarly the
	// Machines deleted while their creates were in flight.
	apiRestarts, deletedEarly int
}

// phaseResult is one row of the table.
type phaseResult struct {
	Cycle               int
	From, To            int
	Machines, Servers   int
	Duplicates, Orphans int
	LeakedGroups, Stuck int
	Kills, LeaderKills  int
	Exits, APIRestarts  int
	DeletedEarly        int
	Faults, SlowCreates int
	Creates             int64
	Settle              time.Duration
	Settled             bool
	Violations          []string
}

func (p phaseResult) failed() bool {
	return p.Duplicates > 0 || p.Orphans > 0 || p.LeakedGroups > 0 || p.Stuck > 0 || !p.Settled
}

// faultRules are the steady faults: the share f of all requests, in five
// equal parts, each rule deciding only requests the earlier ones left
// alone: 1-(1-p)^5 = f.
func faultRules(f float64) []harness.Rule {
	p := 1 - math.Pow(1-f, 1.0/5)
	return []harness.Rule{
		{Route: "*", ErrorRate: p, ErrorStatus: 503},
		{Route: "*", ErrorRate: p, ErrorStatus: 500},
		{Route: "*", ErrorRate: p, ErrorStatus: 429, RetryAfterSeconds: 1},
		{Route: "*", LostResponseRate: p},                          // connection reset after the request was carried out
		{Route: "*", LostResponseRate: p, LostResponseStatus: 502}, // carried out, answered by a failing proxy
	}
}

// firedCounts sums how often the fault rules and the slow-create rules have
// fired so far.
func (r *run) firedCounts() (faults, slow int) {
	for _, rule := range r.cloud.Harness().Rules() {
		if rule.Latency > 0 {
			slow += rule.Fired
		} else {
			faults += rule.Fired
		}
	}
	return faults, slow
}

// machineSet is a MachineSet of the cluster at zero replicas whose
// Machines have providerSpec.
func (r *run) machineSet(name string, providerSpec []byte) *machinev1.MachineSet {
	labels := map[string]string{
		"machine.openshift.io/cluster-api-cluster":    ClusterID,
		"machine.openshift.io/cluster-api-machineset": name,
	}
	zero := int32(0)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": ClusterID}},
		Spec: machinev1.MachineSetSpec{
			Replicas: &zero,
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: providerSpec}
	return ms
}

// retry calls fn until it succeeds or bound passes: the API server may be
// restarting.
func retry(bound time.Duration, fn func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (r *run) scaleSet(name string, n int) error {
	return retry(time.Minute, func() error {
		ms := &machinev1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}
		patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
		return r.cp.Client.Patch(context.Background(), ms, patch)
	})
}

func (r *run) setMachines(set string) ([]machinev1.Machine, error) {
	var list machinev1.MachineList
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.cp.Client.List(ctx, &list, client.InNamespace(Namespace),
		client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": set})
	return list.Items, err
}

func ready(m *machinev1.Machine) bool {
	p := m.Status.Phase
	return m.DeletionTimestamp == nil && p != nil && (*p == machinev1.PhaseProvisioned || *p == machinev1.PhaseRunning)
}

// phase scales the MachineSet from one size to another under chaos and
// checks the result.
func (r *run) phase(cycle, from, to int, restartAPI bool) phaseResult {
	res := phaseResult{Cycle: cycle, From: from, To: to}
	r.obs.newPhase()
	faults0, slow0 := r.firedCounts()
	creates0 := r.cloud.Harness().Count(r.cloud.CreateRoute())
	kills0, exits0 := r.replicas.counts()
	leaderKills := 0
	api0, early0 := r.apiRestarts, r.deletedEarly
	r.events.add("=== cycle %d: %d -> %d", cycle, from, to)
	start := time.Now()
	if err := r.scaleSet(MachineSetName, to); err != nil {
		res.Violations = append(res.Violations, fmt.Sprintf("scaling the MachineSet to %d: %v", to, err))
		return res
	}

	// Chaos until the phase has settled (and the API server has been
	// restarted, if that is this phase's), or the window has passed.
	ctx, stopChaos := context.WithCancel(context.Background())
	apiDone := make(chan struct{})
	if !restartAPI {
		close(apiDone)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		leaderKills = r.chaos(ctx, to, to > from, restartAPI, apiDone)
	}()
	chaosOver := false
	endChaos := func() {
		if !chaosOver {
			stopChaos()
			wg.Wait()
			chaosOver = true
			r.events.add("chaos over after %s", time.Since(start).Round(time.Millisecond))
		}
	}
	defer endChaos()

	var holdSince time.Time
	deadline := start.Add(r.cfg.ChaosWindow + r.cfg.SettleBound)
	for {
		now := time.Now()
		if now.Sub(start) > r.cfg.ChaosWindow {
			endChaos()
		}
		s, err := r.look()
		ok := err == nil && s.settled(to)
		if ok && holdSince.IsZero() {
			holdSince = now
		}
		if !ok {
			holdSince = time.Time{}
		}
		if ok {
			select {
			case <-apiDone:
				endChaos()
			default:
			}
		}
		if ok && chaosOver && now.Sub(holdSince) >= r.cfg.Stable {
			res.Settled, res.Settle = true, holdSince.Sub(start)
			break
		}
		if now.After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	endChaos()

	faults1, slow1 := r.firedCounts()
	kills1, exits1 := r.replicas.counts()
	res.Faults, res.SlowCreates = faults1-faults0, slow1-slow0
	res.Creates = r.cloud.Harness().Count(r.cloud.CreateRoute()) - creates0
	res.Kills, res.LeaderKills, res.Exits = kills1-kills0, leaderKills, exits1-exits0
	res.APIRestarts, res.DeletedEarly = r.apiRestarts-api0, r.deletedEarly-early0
	r.check(&res)
	r.events.add("=== cycle %d: %d -> %d done: settled=%v in %s, violations: %v", cycle, from, to, res.Settled, res.Settle.Round(time.Millisecond), res.Violations)
	return res
}

// check compares the cluster with the cloud and fills the counts.
func (r *run) check(res *phaseResult) {
	var s *state
	err := retry(time.Minute, func() (err error) {
		s, err = r.look()
		return err
	})
	if err != nil {
		res.Violations = append(res.Violations, fmt.Sprintf("cannot compare the cluster with the cloud: %v", err))
		res.Stuck = res.To
		return
	}
	if !res.Settled {
		res.Violations = append(res.Violations, fmt.Sprintf("not settled within %s (chaos window %s + settle bound %s)", r.cfg.ChaosWindow+r.cfg.SettleBound, r.cfg.ChaosWindow, r.cfg.SettleBound))
	}
	now := time.Now()
	evaluate(res, s, r.obs.duplicatesEver(), func(id string) time.Duration { return r.obs.groupAge(id, now) }, r.cfg.leakAge())
}

func (r *run) look() (*state, error) {
	ms, err := r.setMachines(MachineSetName)
	if err != nil {
		return nil, err
	}
	inv, err := r.obs.now()
	if err != nil {
		return nil, err
	}
	return newState(ms, inv), nil
}
