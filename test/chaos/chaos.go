package chaos

import (
	"context"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// chaos kills manager replicas at random moments (mostly the leader), makes
// bursts of creates slow while scaling up, restarts the API server once if
// asked to, and, scaling up, once deletes a few Machines while their creates
// are in flight. It goes on until ctx ends, and returns how many kills hit
// the leader.
func (r *run) chaos(ctx context.Context, target int, up, restartAPI bool, apiDone chan struct{}) (leaderKills int) {
	never := make(<-chan time.Time)
	nextKill := time.After(r.draw(r.cfg.KillEvery))
	nextSlow := never
	if up {
		nextSlow = time.After(r.draw(r.cfg.KillEvery))
	}
	earlyAt := never
	if up {
		earlyAt = time.After(time.Duration(3+r.rng.Intn(15)) * time.Second)
	}
	apiAt := never
	if restartAPI {
		// Early in the phase, while Machines are being worked on.
		apiAt = time.After(time.Duration(2+r.rng.Intn(10)) * time.Second)
	}
	for {
		select {
		case <-ctx.Done():
			return leaderKills
		case <-nextKill:
			if r.killOne(ctx) {
				leaderKills++
			}
			nextKill = time.After(r.draw(r.cfg.KillEvery))
		case <-nextSlow:
			times := 1 + r.rng.Intn(3)
			nextSlow = time.After(r.draw(r.cfg.KillEvery))
			if r.slowPending() {
				// Latencies of rules add up: one burst at a time.
				continue
			}
			rule := harness.Rule{Route: r.cloud.CreateRoute(), Latency: harness.Duration(r.cfg.SlowCreate), Committed: true, Times: times}
			if err := r.cloud.Harness().AddRule(rule); err != nil {
				r.events.add("adding a slow-create rule: %v", err)
			} else {
				r.events.add("the next %d creates take %s (carried out even if nobody waits)", times, r.cfg.SlowCreate)
			}
		case <-earlyAt:
			earlyAt = never
			r.deleteEarly(target)
		case <-apiAt:
			apiAt = never
			down := time.Duration(1000+r.rng.Intn(3000)) * time.Millisecond
			r.events.add("kube-apiserver: stopping for %s", down)
			if err := r.cp.RestartAPIServer(down); err != nil {
				r.events.add("kube-apiserver restart failed: %v", err)
			} else {
				r.events.add("kube-apiserver: serving again")
			}
			r.apiRestarts++
			close(apiDone)
		}
	}
}

// deleteEarly makes the next creates slow and deletes a few Machines while
// their creates are in flight, as a MachineHealthCheck does with Machines
// that take too long to become Nodes; the MachineSet replaces them.
func (r *run) deleteEarly(target int) {
	by := 1 + r.rng.Intn(max(1, target/4))
	if !r.slowPending() {
		if err := r.cloud.Harness().AddRule(harness.Rule{Route: r.cloud.CreateRoute(), Latency: harness.Duration(r.cfg.SlowCreate), Committed: true, Times: 3}); err == nil {
			r.events.add("the next 3 creates take %s (carried out even if nobody waits)", r.cfg.SlowCreate)
		}
	}
	// Machines whose create the cloud is working on, else Machines with a
	// create intent and no server recorded yet.
	var picked []string
	deadline := time.Now().Add(r.cfg.SlowCreate)
	for len(picked) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		ms, err := r.setMachines(MachineSetName)
		if err != nil {
			continue
		}
		inFlight := map[string]bool{}
		for _, name := range r.cloud.CreatesInFlight() {
			inFlight[name] = true
		}
		var intents []string
		for i := range ms {
			m := &ms[i]
			if m.DeletionTimestamp != nil {
				continue
			}
			if inFlight[m.Name] && len(picked) < by {
				picked = append(picked, m.Name)
			}
			if _, ok := m.Annotations[actuator.CreateIntentAnnotation]; ok && m.Spec.ProviderID == nil {
				intents = append(intents, m.Name)
			}
		}
		if len(picked) == 0 && time.Now().Add(200*time.Millisecond).After(deadline) {
			picked = intents[:min(by, len(intents))]
		}
	}
	r.events.add("deleting Machines %v (creates in flight: %v)", picked, r.cloud.CreatesInFlight())
	for _, name := range picked {
		m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}
		if err := r.cp.Client.Delete(context.Background(), m); err != nil {
			r.events.add("deleting Machine %s: %v", name, err)
			continue
		}
		r.deletedEarly++
	}
}

// leaseHolder describes the Lease: its holder and when it was renewed.
func (r *run) leaseHolder(ctx context.Context) string {
	var l coordinationv1.Lease
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.cp.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: r.lease}, &l); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	holder, renewed := "nobody", "never"
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		renewed = time.Since(l.Spec.RenewTime.Time).Round(time.Millisecond).String() + " ago"
	}
	return fmt.Sprintf("held by %s, renewed %s", holder, renewed)
}

// slowPending says whether a slow-create rule has creates left to slow.
func (r *run) slowPending() bool {
	for _, rule := range r.cloud.Harness().Rules() {
		if rule.Latency > 0 && rule.Fired < rule.Times {
			return true
		}
	}
	return false
}

// draw is an exponentially distributed wait with the given mean, between a
// second and four means: kills at random moments, not on a beat.
func (r *run) draw(mean time.Duration) time.Duration {
	d := time.Duration(r.rng.ExpFloat64() * float64(mean))
	return min(max(d, time.Second), 4*mean)
}

// killOne SIGKILLs the leader (LeaderShare of the time, when one is found)
// or another replica; it reports whether it hit the leader.
func (r *run) killOne(ctx context.Context) bool {
	wantLeader := r.rng.Float64() < r.cfg.LeaderShare
	pick := r.rng.Intn(len(r.replicas.list))
	var leader, others []*replica
	for _, rep := range r.replicas.list {
		if rep.leading(ctx, r.lease) {
			leader = append(leader, rep)
		} else {
			others = append(others, rep)
		}
	}
	switch {
	case wantLeader && len(leader) > 0:
		r.events.add("the leader is %s; the Lease says %s", leader[0].name, r.leaseHolder(ctx))
		leader[pick%len(leader)].kill()
		return true
	case !wantLeader && len(others) > 0:
		others[pick%len(others)].kill()
		return false
	default:
		// No leader right now (an election is under way), or nobody
		// else: whoever is there.
		rep := r.replicas.list[pick]
		isLeader := len(leader) > 0 && rep == leader[0]
		rep.kill()
		return isLeader
	}
}
