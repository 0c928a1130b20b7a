package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The leader-change run: what an upgrade or any leader change during a
// scale-up costs, at the manager's default flags. Two replicas with leader
// election and nothing but their defaults scale a MachineSet from 0 to
// leaderChangeMachines on a cloud without faults whose creates take
// leaderChangeLatency, and the leader is killed twice while they are at
// it: once leaderChangeKillAt[0] Machines are Provisioned, and again at
// leaderChangeKillAt[1] (after the first new leader led). Every Machine
// whose create was never sent when the leader died must be Provisioned
// within the restart (until a new leader leads) + the cloud's limit for
// the scale-up + fixture.Margin; those whose create was in flight within
// the create grace.
const (
	leaderChangeMachines = 50
	leaderChangeLatency  = 2 * time.Second
	leaderChangeSet      = "leader-change"
	// defaultMaxConcurrentCreates is the manager's default.
	defaultMaxConcurrentCreates = 10
)

var leaderChangeKillAt = [2]int{10, 30}

// leaderChangeLimit is what the cloud alone needs for the scale-up: its
// create latency for each round of the manager's concurrent creates.
func leaderChangeLimit() time.Duration {
	rounds := (leaderChangeMachines + defaultMaxConcurrentCreates - 1) / defaultMaxConcurrentCreates
	return time.Duration(rounds) * leaderChangeLatency
}

// leaderChangeResult is what the run found.
type leaderChangeResult struct {
	figures    []fixture.KillFigures
	took       time.Duration
	violations []string
}

// leaderChange runs it on the run's cloud and control plane (the chaos
// replicas stopped, the chaos MachineSet at zero).
func (r *run) leaderChange(ctx context.Context, bin, dir string) leaderChangeResult {
	var res leaderChangeResult
	fail := func(format string, args ...any) leaderChangeResult {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
		return res
	}
	h := r.cloud.Harness()
	if err := h.SetRules([]harness.Rule{{Route: r.cloud.CreateRoute(), Latency: harness.Duration(leaderChangeLatency), Committed: true}}); err != nil {
		return fail("setting the create latency: %v", err)
	}
	ms, err := r.leaderChangeSet()
	if err != nil {
		return fail("%v", err)
	}
	if err := retry(time.Minute, func() error { return r.cp.Client.Create(ctx, ms) }); err != nil {
		return fail("creating the MachineSet: %v", err)
	}
	logDir := filepath.Join(dir, "leader-change")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fail("%v", err)
	}
	// The manager's defaults: only where to find the cluster and the cloud,
	// and which cluster it is.
	args := append(r.cloud.ManagerArgs(), "--kubeconfig", r.cp.Kubeconfig, "--namespace", Namespace, "--cluster-id", ClusterID, "--leader-elect=true")
	reps, err := startReplicas(bin, 2, logDir, args, r.cloud.ManagerEnv(), r.events, func() time.Duration { return time.Second })
	if err != nil {
		return fail("starting the replicas: %v", err)
	}
	defer reps.stop()
	r.events.add("=== leader change: two replicas at default flags, 0 -> %d, creates taking %s", leaderChangeMachines, leaderChangeLatency)
	if _, ok := r.awaitLeader(ctx, reps, 2*time.Minute); !ok {
		return fail("no replica became the leader")
	}
	r.obs.newPhase()
	lc := fixture.NewLeaderChange()
	start := time.Now()
	if err := r.scaleSet(leaderChangeSet, leaderChangeMachines); err != nil {
		return fail("scaling: %v", err)
	}
	var names []string
	kills := 0
	deadline := start.Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		ms, err := r.setMachines(leaderChangeSet)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		now := time.Now()
		names = names[:0]
		provisioned := 0
		for i := range ms {
			m := &ms[i]
			names = append(names, m.Name)
			if ready(m) {
				lc.Provisioned(m.Name, now)
				provisioned++
			}
		}
		if len(ms) == leaderChangeMachines && provisioned == leaderChangeMachines && kills == len(leaderChangeKillAt) {
			res.took = now.Sub(start)
			break
		}
		if kills < len(leaderChangeKillAt) && provisioned >= leaderChangeKillAt[kills] {
			leader, ok := r.awaitLeader(ctx, reps, time.Minute)
			if !ok {
				return fail("no leader to kill")
			}
			inFlight, done := map[string]bool{}, map[string]bool{}
			for _, name := range r.cloud.CreatesInFlight() {
				inFlight[name] = true
			}
			for i := range ms {
				m := &ms[i]
				if _, ok := m.Annotations[actuator.CreateIntentAnnotation]; ok && m.Spec.ProviderID == nil {
					inFlight[m.Name] = true
				}
				if ready(m) {
					done[m.Name] = true
				}
			}
			leader.kill()
			k := lc.Killed(time.Now(), inFlight, done)
			kills++
			r.events.add("leader change: killed the leader %s with %d Machines Provisioned, %d creates maybe in flight", leader.name, provisioned, len(inFlight))
			// The restart: until a replica leads again.
			if _, ok := r.awaitLeader(ctx, reps, 2*time.Minute); !ok {
				return fail("no new leader after kill %d", kills)
			}
			lc.Led(k, time.Now())
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.figures = lc.Figures(names, leaderChangeLimit())
	res.violations = append(res.violations, fixture.Violations(res.figures, actuator.DefaultCreateGrace)...)
	if kills < len(leaderChangeKillAt) {
		res.violations = append(res.violations, fmt.Sprintf("only %d kills: the scale-up got no further than that", kills))
	}
	for m, servers := range r.obs.duplicatesEver() {
		res.violations = append(res.violations, fmt.Sprintf("Machine %s had several servers: %s", m, strings.Join(servers, ", ")))
	}
	r.events.add("=== leader change done in %s, violations: %v", res.took.Round(time.Millisecond), res.violations)
	return res
}

// awaitLeader waits until one of reps leads.
func (r *run) awaitLeader(ctx context.Context, reps *replicas, bound time.Duration) (*replica, bool) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		for _, rep := range reps.list {
			if rep.leading(ctx, r.lease) {
				return rep, true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, false
}

// leaderChangeSet is the run's MachineSet, at zero, with the cloud's
// provider spec without its anti-affinity key: the Machines of one key are
// created one after the other (each waits for the key's lock), and this run
// is about the manager's concurrent creates.
func (r *run) leaderChangeSet() (*machinev1.MachineSet, error) {
	var spec map[string]any
	if err := json.Unmarshal([]byte(r.cloud.ProviderSpec()), &spec); err != nil {
		return nil, err
	}
	delete(spec, "antiAffinityKey")
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return r.machineSet(leaderChangeSet, raw), nil
}

// renderLeaderChange is the run's lines of the report.
func renderLeaderChange(cloudName string, res leaderChangeResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos %s, leader change: two replicas at default flags, 0 -> %d, creates taking %s (limit %s), the leader killed at %d and %d Provisioned; all Provisioned in %.1fs\n",
		cloudName, leaderChangeMachines, leaderChangeLatency, leaderChangeLimit(), leaderChangeKillAt[0], leaderChangeKillAt[1], res.took.Seconds())
	b.WriteString(fixture.FormatFigures(res.figures, leaderChangeLimit(), actuator.DefaultCreateGrace))
	verdict := "PASS"
	if len(res.violations) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "chaos %s, leader change: %s\n", cloudName, verdict)
	for _, v := range res.violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}
