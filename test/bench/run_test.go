package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machineset "github.com/openshift/machine-api-operator/pkg/controller/machineset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// run scales a MachineSet of c from 0 to n Machines, resyncs them all, and
// scales it back to 0, measuring each phase.
func run(b *testing.B, c benchCloud, n int) result {
	ctx := context.Background()
	e := fixture.Start(b, c.options())
	h := e.Harness()
	if err := h.AddRule(harness.Rule{Route: c.createRoute, Latency: harness.Duration(createLatency)}); err != nil {
		b.Fatal(err)
	}
	if cloudLimit != nil {
		if err := h.AddRule(harness.Rule{Route: "*", RateLimit: cloudLimit}); err != nil {
			b.Fatal(err)
		}
	}
	mgr := startManagerProcess(b, e, c)
	tl := newTimeline()
	startMachineSetController(b, e, tl)

	ms := machineSet(c)
	if err := e.Client.Create(ctx, ms); err != nil {
		b.Fatal(err)
	}
	mgr.waitReady(b)
	res := result{cloud: c.name, n: n}
	var detail strings.Builder
	fmt.Fprintf(&detail, "\n%s, MachineSet 0 -> %d -> 0, %s create latency, limit %s", c.name, n, createLatency, limit(n))
	if cloudLimit != nil {
		fmt.Fprintf(&detail, ", the emulated API allowing %g calls/s (bursts of %d)", cloudLimit.QPS, cloudLimit.Burst)
	}
	detail.WriteString(":\n")

	// Up: every Machine gets its server and goes Provisioned.
	before := mgr.scrape(b)
	h.ResetRequests()
	api0 := apiRequests(b, e)
	cpu0 := sampleCPU(mgr.pid)
	start := time.Now()
	scale(b, e, ms, n)
	poll := min(max(limit(n)/200, 10*time.Millisecond), 100*time.Millisecond)
	var serversAt time.Time
	waitFor(b, limit(n)+10*time.Minute, "a server for every Machine", poll, func() bool {
		// Counting requests is cheap; counting servers is not, and the
		// benchmark's CPU is the provider's loss.
		if h.Count(c.createRoute) >= int64(n) && c.servers(e) >= n {
			serversAt = time.Now()
			return true
		}
		return false
	})
	res.toServers = serversAt.Sub(start)
	waitFor(b, 10*time.Minute, "all Machines Provisioned", poll, func() bool {
		k, _ := tl.reached(stepProvisioned)
		return k >= n
	})
	_, last := tl.reached(stepProvisioned)
	res.toProvisioned = last.Sub(start)
	cpuUp := cpuUse(cpu0, sampleCPU(mgr.pid))
	apiUp := requestDelta(api0, apiRequests(b, e))
	// What the provisioning caused and is still under way (the first
	// update of each Machine) counts as provisioning.
	settle(h)
	up := delta{before, mgr.scrape(b)}
	res.provisionCalls = float64(h.Total()) / float64(n)
	_, lastSeen := tl.reached(stepSeen)
	fmt.Fprintf(&detail, "  all servers %.2fs (%.2f × limit), all Provisioned %.2fs; the MachineSet controller made the last Machine at %.2fs\n",
		res.toServers.Seconds(), res.ratio(), res.toProvisioned.Seconds(), lastSeen.Sub(start).Seconds())
	fmt.Fprintf(&detail, "  CPU until all Provisioned: %s\n", cpuUp)
	fmt.Fprintf(&detail, "  API server requests until all Provisioned (everyone's) %s\n", apiUp)
	fmt.Fprintf(&detail, "  server recorded on its Machine, after the scale-up: %s\n", quantiles(serverTimes(tl, start)))
	fmt.Fprintf(&detail, "  Machine steps:\n%s", tl.breakdown(stepSeen, stepProvisioned))
	fmt.Fprint(&detail, managerBreakdown(up))
	fmt.Fprintf(&detail, "  cloud calls to provision: %d (%.2f per Machine) %v\n", h.Total(), res.provisionCalls, h.Requests())
	res.refusedUp = refused(h)
	if cloudLimit != nil {
		fmt.Fprintf(&detail, "  answered 429 by the emulated API's rate limit: %d\n", res.refusedUp)
	}

	// What a burst of creates puts off (a new server's root volume tags,
	// the read of a new instance) the Machines' next reconciles do, once
	// the shared view has listed again: the first reconcile of every
	// Machine after the view's refresh interval. Then they are settled,
	// and a resync reconciles every one of them once, with nothing to do.
	time.Sleep(viewRefresh)
	calls, routes := resync(b, e, mgr, h, n, poll)
	fmt.Fprintf(&detail, "  first reconcile of every Machine after the burst (what it put off): %d cloud calls %v\n", calls, routes)
	time.Sleep(viewRefresh)
	calls, routes = resync(b, e, mgr, h, n, poll)
	res.resyncCalls = float64(calls) / float64(n)
	fmt.Fprintf(&detail, "  resync of %d settled Machines: %d cloud calls (%.3f per Machine) %v\n", n, calls, res.resyncCalls, routes)
	res.peakMiB = mgr.peakRSSMiB(b)

	// Down: every server deleted.
	before = mgr.scrape(b)
	h.ResetRequests()
	api0 = apiRequests(b, e)
	cpu0 = sampleCPU(mgr.pid)
	start = time.Now()
	scale(b, e, ms, 0)
	waitFor(b, limit(n)+10*time.Minute, "no server left", poll, func() bool { return c.servers(e) == 0 })
	res.toZero = time.Since(start)
	cpuDown := cpuUse(cpu0, sampleCPU(mgr.pid))
	apiDown := requestDelta(api0, apiRequests(b, e))
	waitFor(b, 10*time.Minute, "every Machine gone", poll, func() bool {
		k, _ := tl.reached(stepGone)
		return k >= n
	})
	_, goneAt := tl.reached(stepGone)
	settle(h)
	down := delta{before, mgr.scrape(b)}
	res.deleteCalls = float64(h.Total()) / float64(n)
	fmt.Fprintf(&detail, "  zero servers %.2fs (%.2f × limit), every Machine gone %.2fs\n", res.toZero.Seconds(), res.zeroRatio(), goneAt.Sub(start).Seconds())
	fmt.Fprintf(&detail, "  CPU until zero servers: %s\n", cpuDown)
	fmt.Fprintf(&detail, "  API server requests until zero servers (everyone's) %s\n", apiDown)
	fmt.Fprintf(&detail, "  Machine steps:\n%s", tl.breakdown(stepDeleting, stepGone))
	fmt.Fprint(&detail, managerBreakdown(down))
	fmt.Fprintf(&detail, "  cloud calls to delete: %d (%.2f per Machine) %v\n", h.Total(), res.deleteCalls, h.Requests())
	if cloudLimit != nil {
		fmt.Fprintf(&detail, "  answered 429 by the emulated API's rate limit: %d\n", refused(h)-res.refusedUp)
	}
	fmt.Fprintf(&detail, "  manager peak memory (VmHWM): %.0f MiB\n", res.peakMiB)
	res.detail = detail.String()
	return res
}

func apiRequests(b *testing.B, e *fixture.Env) map[string]float64 {
	r, err := apiServerRequests(e.Config)
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	return r
}

// resync makes every Machine reconcile once and returns the cloud calls
// that cost.
func resync(b *testing.B, e *fixture.Env, mgr *managerProcess, h *harness.Harness, n int, poll time.Duration) (int64, map[string]int64) {
	before := mgr.scrape(b)
	h.ResetRequests()
	touchAll(b, e)
	waitFor(b, 5*time.Minute, "a reconcile of every touched Machine", poll, func() bool {
		return delta{before, mgr.scrape(b)}.counter("controller_runtime_reconcile_total", map[string]string{"controller": "machine-controller"}) >= float64(n)
	})
	settle(h)
	return h.Total(), h.Requests()
}

// refused counts the calls the emulated API's rate limit answered 429.
func refused(h *harness.Harness) int {
	n := 0
	for _, r := range h.Rules() {
		if r.RateLimit != nil {
			n += r.Fired
		}
	}
	return n
}

// serverTimes is when, after start, each Machine had its server recorded.
func serverTimes(tl *timeline, start time.Time) []time.Duration {
	return tl.since(start, stepProviderID)
}

// managerProcess is the provider's manager, run as its own process as in a
// cluster, so that its memory is its own and its defaults are the shipped
// binary's.
type managerProcess struct {
	pid     int
	metrics string
	log     string
}

// managerBinary is the binary `make bench` builds; BENCH_MANAGER names
// another.
func managerBinary(b *testing.B) string {
	if bin := os.Getenv("BENCH_MANAGER"); bin != "" {
		return bin
	}
	root, err := testenv.AssetsDir()
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(root, "machine-api-provider")
}

func startManagerProcess(b *testing.B, e *fixture.Env, c benchCloud) *managerProcess {
	bin := managerBinary(b)
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("%s missing: run `make build` (make bench does)", bin)
	}
	// BENCH_LOG_DIR keeps the manager's log for a look afterwards.
	dir := os.Getenv("BENCH_LOG_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	logPath := filepath.Join(dir, fmt.Sprintf("manager-%s-%d.log", c.name, time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	args := append([]string{"manager", "--kubeconfig", e.Kubeconfig(b),
		"--namespace", fixture.Namespace, "--cluster-id", fixture.ClusterID, "--leader-elect=false", "--metrics-bind-address", addr,
		"--health-probe-bind-address", "0", "--capacity-publisher=false"}, c.managerArgs(e)...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), c.managerEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	})
	return &managerProcess{pid: cmd.Process.Pid, metrics: "http://" + addr + "/metrics", log: logPath}
}

// waitReady waits until the machine controller's workers run: what comes
// after is the provider's time, not its start-up.
func (p *managerProcess) waitReady(b *testing.B) {
	waitFor(b, 2*time.Minute, "the manager's machine controller", 50*time.Millisecond, func() bool {
		log, err := os.ReadFile(p.log)
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "Starting workers") && strings.Contains(line, "machine-controller") {
				return true
			}
		}
		return false
	})
}

func (p *managerProcess) scrape(b *testing.B) families {
	var fams families
	var err error
	for range 50 {
		if fams, err = scrape(p.metrics); err == nil {
			return fams
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("reading the manager's metrics: %v", err)
	return nil
}

// peakRSSMiB is the manager's peak resident memory, VmHWM in /proc.
func (p *managerProcess) peakRSSMiB(b *testing.B) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM in /proc status")
	return 0
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startMachineSetController runs the machine-api-operator's MachineSet
// controller, which makes and removes the Machines, and the timeline's
// watch on Machines. Neither is the provider: the client has no
// client-side rate limit, so that they never hold the provider back.
func startMachineSetController(b *testing.B, e *fixture.Env, tl *timeline) {
	scheme, err := manager.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = -1, 0
	// One MachineSet controller per run, several runs per process.
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{fixture.Namespace: {}}},
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		b.Fatal(err)
	}
	gate, err := manager.FeatureGate()
	if err != nil {
		b.Fatal(err)
	}
	if err := machineset.Add(mgr, ctrl.Options{}, gate); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := mgr.GetCache().GetInformer(ctx, &machinev1.Machine{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := inf.AddEventHandler(tl.handler()); err != nil {
		b.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	b.Cleanup(cancel)
}

func machineSet(c benchCloud) *machinev1.MachineSet {
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": fixture.ClusterID, "machine.openshift.io/cluster-api-machineset": "bench-workers"}
	zero := int32(0)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-workers", Namespace: fixture.Namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": fixture.ClusterID}},
		Spec: machinev1.MachineSetSpec{
			Replicas: &zero,
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &kruntime.RawExtension{Raw: []byte(c.spec)}
	return ms
}

func scale(b *testing.B, e *fixture.Env, ms *machinev1.MachineSet, n int) {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
	if err := e.Client.Patch(context.Background(), ms, patch); err != nil {
		b.Fatal(err)
	}
}

// touchAll makes every Machine reconcile once, as a resync does.
func touchAll(b testing.TB, e *fixture.Env) {
	var list machinev1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(fixture.Namespace)); err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"bench/resync":"`+strconv.FormatInt(time.Now().UnixNano(), 10)+`"}}}`))
		if err := e.Client.Patch(context.Background(), &list.Items[i], patch); err != nil {
			b.Fatal(err)
		}
	}
}

// settle waits until the cloud has had no request for two seconds.
func settle(h *harness.Harness) {
	last, quietSince := h.Total(), time.Now()
	for time.Since(quietSince) < 2*time.Second {
		time.Sleep(100 * time.Millisecond)
		if n := h.Total(); n != last {
			last, quietSince = n, time.Now()
		}
	}
}

func waitFor(b *testing.B, timeout time.Duration, what string, poll time.Duration, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(poll)
	}
}

// cpuSample is the CPU time used up to one moment by the machine, the
// manager, the control plane (kube-apiserver, etcd) and this process (the
// emulator, the MachineSet controller, the timeline), to tell a run that
// was short of CPU (the machine is shared) from one that was not, and where
// the CPU went.
type cpuSample struct {
	at                               time.Time
	busy, total                      float64 // the machine's, in clock ticks
	manager, apiserver, etcd, itself float64 // in clock ticks
}

const ticksPerSecond = 100 // USER_HZ on Linux

func sampleCPU(manager int) cpuSample {
	s := cpuSample{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseFloat(f, 64)
			s.total += v
			if i != 3 && i != 4 { // idle, iowait
				s.busy += v
			}
		}
	}
	self := os.Getpid()
	s.itself, _ = procCPU(self)
	s.manager, _ = procCPU(manager)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == manager {
			continue
		}
		if ticks, parent := procCPU(pid); parent == self {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if strings.TrimSpace(string(comm)) == "etcd" {
				s.etcd += ticks
			} else {
				s.apiserver += ticks
			}
		}
	}
	return s
}

// procCPU returns a process's CPU time in clock ticks, and its parent.
func procCPU(pid int) (ticks float64, parent int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, 0
	}
	parent, _ = strconv.Atoi(f[1])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return u + k, parent
}

// cpuUse describes the CPU between two samples: how busy the machine was
// (all its cores, every process, other people's too) and who used it.
func cpuUse(a, b cpuSample) string {
	busy := 0.0
	if b.total > a.total {
		busy = (b.busy - a.busy) / (b.total - a.total) * 100
	}
	sec := func(x, y float64) float64 { return (y - x) / ticksPerSecond }
	return fmt.Sprintf("machine %.0f%% busy (%d cores) in %.1fs; CPU-seconds: manager %.2f, kube-apiserver %.2f, etcd %.2f, emulator+MachineSet controller+benchmark %.2f",
		busy, runtime.NumCPU(), b.at.Sub(a.at).Seconds(), sec(a.manager, b.manager), sec(a.apiserver, b.apiserver), sec(a.etcd, b.etcd), sec(a.itself, b.itself))
}
