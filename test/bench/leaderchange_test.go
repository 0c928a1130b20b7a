package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// What a single leader change costs a scale-up (make chaos measures two,
// under faults): two manager processes with leader election at their
// default flags scale a MachineSet 0 -> leaderChangeMachines against a
// cloud whose creates take leaderChangeLatency, and the leader is killed
// once, when a fifth of the Machines are Provisioned.
const (
	leaderChangeMachines = 50
	leaderChangeLatency  = 2 * time.Second
)

// BenchmarkLeaderChange prints, for each cloud of CLOUD, how long after the
// kill the Machines it left without a server were Provisioned: those whose
// create was never sent (bound: the restart + the cloud's limit + a
// margin), and those whose create was under way (bound: the create grace).
func BenchmarkLeaderChange(b *testing.B) {
	var out strings.Builder
	eachCloud(b, func(b *testing.B, c benchCloud) {
		for i := 0; i < b.N; i++ {
			out.WriteString(leaderChange(b, c))
		}
	})
	fmt.Print(out.String())
}

func leaderChange(b *testing.B, c benchCloud) string {
	ctx := context.Background()
	e := fixture.Start(b, c.options())
	if err := e.Harness().AddRule(harness.Rule{Route: c.createRoute, Latency: harness.Duration(leaderChangeLatency), Committed: true}); err != nil {
		b.Fatal(err)
	}
	startMachineSetController(b, e, newTimeline())
	ms := machineSet(c)
	if err := e.Client.Create(ctx, ms); err != nil {
		b.Fatal(err)
	}
	lease := c.name + "-machine-api-provider"
	managers := []*electedManager{startElectedManager(b, e, c, "a"), startElectedManager(b, e, c, "b")}
	leader := func() *electedManager {
		for _, m := range managers {
			if m.leading(lease) {
				return m
			}
		}
		return nil
	}
	waitFor(b, 2*time.Minute, "a leader", 100*time.Millisecond, func() bool { return leader() != nil })

	lc := fixture.NewLeaderChange()
	limit := time.Duration((leaderChangeMachines+concurrency-1)/concurrency) * leaderChangeLatency
	start := time.Now()
	scale(b, e, ms, leaderChangeMachines)
	killed := false
	var names []string
	waitFor(b, 10*time.Minute, "every Machine Provisioned", 100*time.Millisecond, func() bool {
		var list machinev1.MachineList
		if err := e.Client.List(ctx, &list, client.InNamespace(fixture.Namespace), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": ms.Name}); err != nil {
			return false
		}
		now := time.Now()
		names = names[:0]
		provisioned := 0
		inFlight, done := map[string]bool{}, map[string]bool{}
		for i := range list.Items {
			m := &list.Items[i]
			names = append(names, m.Name)
			if p := fixture.Phase(m); m.DeletionTimestamp == nil && (p == machinev1.PhaseProvisioned || p == machinev1.PhaseRunning) {
				lc.Provisioned(m.Name, now)
				done[m.Name] = true
				provisioned++
			}
			if _, ok := m.Annotations[actuator.CreateIntentAnnotation]; ok && m.Spec.ProviderID == nil {
				inFlight[m.Name] = true
			}
		}
		if !killed && provisioned >= leaderChangeMachines/5 {
			l := leader()
			if l == nil {
				return false
			}
			l.kill()
			k := lc.Killed(time.Now(), inFlight, done)
			killed = true
			waitFor(b, 2*time.Minute, "a new leader", 100*time.Millisecond, func() bool { return leader() != nil })
			lc.Led(k, time.Now())
			return false
		}
		return killed && provisioned == leaderChangeMachines
	})
	took := time.Since(start)
	figs := lc.Figures(names, limit)
	var s strings.Builder
	fmt.Fprintf(&s, "\n%s, a leader change: two managers at their default flags, MachineSet 0 -> %d, %s create latency (limit %s), the leader killed at %d Provisioned; all Provisioned in %.1fs\n",
		c.name, leaderChangeMachines, leaderChangeLatency, limit, leaderChangeMachines/5, took.Seconds())
	s.WriteString(fixture.FormatFigures(figs, limit, actuator.DefaultCreateGrace))
	for _, v := range fixture.Violations(figs, actuator.DefaultCreateGrace) {
		fmt.Fprintf(&s, "  beyond the bound: %s\n", v)
	}
	return s.String()
}

// electedManager is a manager process with leader election.
type electedManager struct {
	cmd     *exec.Cmd
	metrics string
	exited  chan struct{}
}

func startElectedManager(b *testing.B, e *fixture.Env, c benchCloud, name string) *electedManager {
	bin := managerBinary(b)
	dir := os.Getenv("BENCH_LOG_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("manager-%s-leader-change-%s-%d.log", c.name, name, time.Now().UnixNano())))
	if err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	args := append([]string{"manager", "--kubeconfig", e.Kubeconfig(b), "--namespace", fixture.Namespace, "--cluster-id", fixture.ClusterID,
		"--leader-elect=true", "--metrics-bind-address", addr, "--health-probe-bind-address", "0"}, c.managerArgs(e.APIURL)...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), c.managerEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	m := &electedManager{cmd: cmd, metrics: "http://" + addr + "/metrics", exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(m.exited)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-m.exited
		}
		logFile.Close()
	})
	return m
}

// kill ends the process as a node failure would: SIGKILL, the lease held.
func (m *electedManager) kill() {
	_ = m.cmd.Process.Kill()
	<-m.exited
}

// leading says whether the process holds the lease.
func (m *electedManager) leading(lease string) bool {
	select {
	case <-m.exited:
		return false
	default:
	}
	return fixture.Leading(context.Background(), m.metrics, lease)
}
