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
	"sync"
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

// run scales a MachineSet of c from 0 to n Machines, links their Nodes
// (Running), measures the steady state and a resync, and scales it back to
// 0, measuring each phase: its time, its cloud calls by route, the
// manager's CPU. Then it scales up and down cycles-1 times more, for the
// CPU (cpuCycles).
func run(b *testing.B, c benchCloud, n, cycles int) result {
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
	linker := startNodeLinker(b, e.Client, tl)

	ms := machineSet(c)
	if err := e.Client.Create(ctx, ms); err != nil {
		b.Fatal(err)
	}
	mgr.waitReady(b)
	res := result{cloud: c.name, n: n, zoneSweep: c.zoneSweep}
	var detail strings.Builder
	fmt.Fprintf(&detail, "\n%s, MachineSet 0 -> %d -> 0, %s create latency, limit %s", c.name, n, createLatency, limit(n))
	if cloudLimit != nil {
		fmt.Fprintf(&detail, ", the emulated API allowing %g calls/s (bursts of %d)", cloudLimit.QPS, cloudLimit.Burst)
	}
	detail.WriteString(":\n")
	poll := min(max(limit(n)/200, 10*time.Millisecond), 100*time.Millisecond)
	s := &scaling{b: b, e: e, h: h, c: c, mgr: mgr, tl: tl, linker: linker, ms: ms, n: n, cycles: cycles, poll: poll}

	for cycle := 1; cycle <= cycles; cycle++ {
		up := s.up()
		res.cpuUps = append(res.cpuUps, up.cpu)
		res.pieceUps = append(res.pieceUps, up.piece)
		res.upFors = append(res.upFors, up.took)
		res.allocUps = append(res.allocUps, up.alloc)
		if cycle == 1 {
			res.toServers, res.toProvisioned = up.toServers, up.toProvisioned
			res.toServersCalls, res.rate = up.toServersCalls, managerRate
			res.toServersCPU = up.toServersCPU
			res.rateWaits, res.rateWaited = up.metrics.histogram(rateWaitMetric, nil)
			res.provisioned, res.up = up.provisioned, up.calls
			s.describeUp(&detail, &res, up)
			res.refusedUp = refused(h)
			if cloudLimit != nil {
				fmt.Fprintf(&detail, "  answered 429 by the emulated API's rate limit: %d\n", res.refusedUp)
			}
			s.steady(&detail, &res)
		} else {
			detail.WriteString(differs(fmt.Sprintf("cycle %d: cloud calls per Machine created", cycle), up.calls, res.up, n))
		}
		down := s.down()
		res.cpuDowns = append(res.cpuDowns, down.cpu)
		res.pieceDowns = append(res.pieceDowns, down.piece)
		res.downFors = append(res.downFors, down.took)
		res.allocDowns = append(res.allocDowns, down.alloc)
		if cycle == 1 {
			res.toZero, res.down = down.toZero, down.calls
			s.describeDown(&detail, &res, down)
		} else {
			detail.WriteString(differs(fmt.Sprintf("cycle %d: cloud calls per Machine deleted", cycle), down.calls, res.down, n))
		}
	}
	res.peakMiB = mgr.peakRSSMiB(b)
	fmt.Fprintf(&detail, "  manager: peak memory (VmHWM) %.0f MiB; CPU-seconds per Machine created %.4f, deleted %.4f, the least of %d cycles (each: its CPU less %.4f/s idle for its time): created %s, deleted %s; per hour of steady state %.2f\n",
		res.peakMiB, res.cpuPerCreated(), res.cpuPerDeleted(), cycles, res.idleCPU(), fmtFloats(res.cycleCPU(res.cpuUps, res.upFors)), fmtFloats(res.cycleCPU(res.cpuDowns, res.downFors)), res.cpuPerHour())
	fmt.Fprintf(&detail, "  the same in pieces of the reference's work (CPU-seconds per piece: created %s, deleted %s, steady %.5f, resyncs %s): created %s, deleted %s; per hour of steady state %.0f\n",
		fmtFloats(res.pieceUps), fmtFloats(res.pieceDowns), res.pieceSteady, fmtFloats(res.pieceResyncs),
		fmtFloats(res.inPieces(res.cpuUps, res.pieceUps, res.upFors)), fmtFloats(res.inPieces(res.cpuDowns, res.pieceDowns, res.downFors)), res.piecesPerHour())
	fmt.Fprintf(&detail, "  allocated by the manager, MiB per Machine, the median of %d cycles (each: its allocations less %.4f MiB/s idle for its time): created %s, deleted %s; per hour of steady state %.0f MiB\n",
		cycles, res.idleAlloc(), fmtFloats(res.cycleAlloc(res.allocUps, res.upFors)), fmtFloats(res.cycleAlloc(res.allocDowns, res.downFors)), res.allocPerHour())
	res.detail = detail.String()
	return res
}

// differs says what a later cycle's calls were when they are not the
// first's; "" when they are.
func differs(what string, got, first calls, n int) string {
	if got.withoutSweeps() == first.withoutSweeps() {
		return ""
	}
	return fmt.Sprintf("  %s %s (the first: %s)\n", what, got.perMachine(n), first.perMachine(n))
}

func fmtFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.4f", x)
	}
	return strings.Join(parts, " ")
}

// scaling is one benchmark run's cluster: its MachineSet and what
// watches it.
type scaling struct {
	b      *testing.B
	e      *fixture.Env
	h      *harness.Harness
	c      benchCloud
	mgr    *managerProcess
	tl     *timeline
	linker *nodeLinker
	ms     *machinev1.MachineSet
	n      int
	cycles int
	poll   time.Duration
}

// upPhase is what a scale-up cost.
type upPhase struct {
	measured
	start                    time.Time
	toServers, toProvisioned time.Duration
	toServersCalls           int64
	// toServersCPU is the CPU the cluster's processes used until the
	// last server existed.
	toServersCPU cpuSplit
	running      time.Time
	provisioned  calls
}

// up scales the MachineSet from 0 to n: every Machine gets its server and
// goes Provisioned, and Running once its Node is linked; the machine
// controller's last requeues of them, 30 s later, and what the burst of
// creates put off (a new server's root volume tags, the read of a new
// instance) count too.
func (s *scaling) up() upPhase {
	b, h, n := s.b, s.h, s.n
	linked0, _ := s.linker.linked()
	p := s.mgr.begin(b, s.e, h)
	var u upPhase
	u.start = time.Now()
	scale(b, s.e, s.ms, n)
	var serversAt time.Time
	waitFor(b, limit(n)+10*time.Minute, "a server for every Machine", s.poll, func() bool {
		// Counting requests is cheap; counting servers is not, and the
		// benchmark's CPU is the provider's loss.
		if h.Count(s.c.createRoute) >= int64(n) && s.c.servers(s.e) >= n {
			serversAt = time.Now()
			u.toServersCPU = cpuSplitOf(p.sample, sampleCPU(s.mgr.pid))
			cs, _, _ := s.mgr.proxy.counted()
			u.toServersCalls = cs.total()
			return true
		}
		return false
	})
	u.toServers = serversAt.Sub(u.start)
	s.waitStep(stepProvisioned, 10*time.Minute)
	u.provisioned, _, _ = s.mgr.proxy.counted()
	u.toProvisioned = time.Since(u.start)
	s.waitStep(stepRunning, 10*time.Minute)
	u.running = time.Now()
	time.Sleep(echoes)
	settle(h)
	u.measured = p.end(b)
	if linked, err := s.linker.linked(); err != nil || linked-linked0 < n {
		b.Fatalf("%d Nodes linked: %v", linked-linked0, err)
	}
	return u
}

func (s *scaling) describeUp(d *strings.Builder, res *result, u upPhase) {
	n, tl := s.n, s.tl
	_, lastSeen := tl.reached(stepSeen)
	fmt.Fprintf(d, "  all servers %.2fs (%.2f × limit), all Provisioned %.2fs, all Running %.2fs; the MachineSet controller made the last Machine at %.2fs\n",
		res.toServers.Seconds(), res.ratio(), res.toProvisioned.Seconds(), u.running.Sub(u.start).Seconds(), lastSeen.Sub(u.start).Seconds())
	fmt.Fprintf(d, "  the manager's rate limit (%g calls/s, bursts of %d): %d cloud calls until the last server, which it allows in no less than %.2fs (%.2f × limit); until all Running its calls waited %.1f call-seconds for it (%d waits)\n",
		res.rate.QPS, res.rate.Burst, res.toServersCalls, res.floor(), res.floor()/limit(n).Seconds(), res.rateWaited, res.rateWaits)
	fmt.Fprintf(d, "  CPU until the last server: %s; %d cores do that in no less than %.2fs (%.2f × limit)\n",
		res.toServersCPU, runtime.NumCPU(), res.cpuFloor(), res.cpuFloor()/limit(n).Seconds())
	fmt.Fprintf(d, "  CPU until all Running, their last requeues and the cloud settled (%.1fs): %s\n", u.took.Seconds(), u.use)
	fmt.Fprintf(d, "  API server requests meanwhile (everyone's) %s\n", u.api)
	fmt.Fprintf(d, "  server recorded on its Machine, after the scale-up: %s\n", quantiles(serverTimes(tl, u.start)))
	fmt.Fprintf(d, "  Machine steps:\n%s", tl.breakdown(stepSeen, stepRunning))
	fmt.Fprint(d, managerBreakdown(u.metrics))
	fmt.Fprintf(d, "  cloud calls per Machine until all Provisioned: %s\n    by route: %s\n", res.provisioned.perMachine(n), res.provisioned.routeList())
	fmt.Fprintf(d, "  cloud calls per Machine created (until all Running and settled): %s\n    by route: %s\n", res.up.perMachine(n), res.up.routeList())
}

// steady measures the steady state: every Machine Running, nothing to do
// but the janitor's sweeps and the leader's lease; then a resync.
func (s *scaling) steady(d *strings.Builder, res *result) {
	b, e, h, c, mgr, n := s.b, s.e, s.h, s.c, s.mgr, s.n
	awaitSweep(b, h, c.sweepRoute)
	time.Sleep(steadyOffset)
	p := mgr.begin(b, e, h)
	time.Sleep(steadyWindow)
	steady := p.end(b)
	res.steady, res.cpuSteady, res.steadyFor, res.pieceSteady = steady.calls, steady.cpu, steady.took, steady.piece
	res.allocSteady = steady.alloc
	fmt.Fprintf(d, "  steady state, %s between the janitor's sweeps: %d cloud calls %s; CPU: %s\n",
		steady.took.Round(time.Second), res.steady.total(), res.steady.routeList(), steady.use)
	fmt.Fprintf(d, "    Kubernetes API requests of the manager: %s\n", kubeRequests(steady.metrics))

	// A resync (the sync period's): every settled Machine reconciled
	// once, with nothing to do; after a sweep, so that none falls into
	// it, and once the sweep's list is older than the view's refresh
	// interval, so that it lists as a resync at any other moment would.
	// The first after a scale-up also does what its burst put off until
	// the account had calls to spare and no later reconcile came (the
	// root volume tags of pkg/cloud/cloudscale/sync.go): it is told
	// apart, and the steady state's resyncs are those after it, as many
	// as the cycles, for the least CPU.
	resyncOnce := func() measured {
		awaitSweep(b, h, c.sweepRoute)
		time.Sleep(viewRefresh + time.Second)
		p := mgr.begin(b, e, h)
		resync(b, e, mgr, h, n, s.poll)
		return p.end(b)
	}
	first := resyncOnce()
	res.firstResync = first.calls
	fmt.Fprintf(d, "  first resync after the scale-up, with what its burst put off: %d cloud calls (%.3f per Machine) %s\n", first.calls.total(), res.per(float64(first.calls.withoutSweeps())), first.calls.routeList())
	for i := 0; i < s.cycles; i++ {
		rs := resyncOnce()
		res.cpuResyncs = append(res.cpuResyncs, rs.cpu)
		res.pieceResyncs = append(res.pieceResyncs, rs.piece)
		res.allocResyncs = append(res.allocResyncs, rs.alloc)
		if i == 0 {
			res.resync = rs.calls
		}
		fmt.Fprintf(d, "  resync of %d settled Machines: %d cloud calls (%.3f per Machine) %s; CPU: %s\n", n, rs.calls.total(), res.per(float64(rs.calls.withoutSweeps())), rs.calls.routeList(), rs.use)
	}
	fmt.Fprintf(d, "  steady state per Machine and hour (janitor %s, sync period %s): %.1f cloud calls, %.4f manager CPU-seconds\n",
		janitorInterval, syncPeriod, res.steadyCallsPerHour()/float64(n), res.cpuPerHour()/float64(n))
}

// downPhase is what a scale-down cost.
type downPhase struct {
	measured
	toZero time.Duration
	gone   time.Time
	start  time.Time
}

// down scales the MachineSet to 0: every server deleted, every Machine
// gone.
func (s *scaling) down() downPhase {
	b, e, h, c := s.b, s.e, s.h, s.c
	p := s.mgr.begin(b, e, h)
	var dp downPhase
	dp.start = time.Now()
	scale(b, e, s.ms, 0)
	waitFor(b, limit(s.n)+10*time.Minute, "no server left", s.poll, func() bool { return c.servers(e) == 0 })
	dp.toZero = time.Since(dp.start)
	waitFor(b, 10*time.Minute, "every Machine gone", s.poll, func() bool { return s.tl.now(stepSeen) == 0 })
	dp.gone = time.Now()
	settle(h)
	dp.measured = p.end(b)
	return dp
}

func (s *scaling) describeDown(d *strings.Builder, res *result, dp downPhase) {
	n := s.n
	fmt.Fprintf(d, "  zero servers %.2fs (%.2f × limit), every Machine gone %.2fs\n", res.toZero.Seconds(), res.zeroRatio(), dp.gone.Sub(dp.start).Seconds())
	fmt.Fprintf(d, "  CPU until every Machine gone and settled: %s\n", dp.use)
	fmt.Fprintf(d, "  API server requests meanwhile (everyone's) %s\n", dp.api)
	fmt.Fprintf(d, "  Machine steps:\n%s", s.tl.breakdown(stepDeleting, stepGone))
	fmt.Fprint(d, managerBreakdown(dp.metrics))
	fmt.Fprintf(d, "  cloud calls per Machine deleted: %s\n    by route: %s\n", res.down.perMachine(n), res.down.routeList())
	if cloudLimit != nil {
		fmt.Fprintf(d, "  answered 429 by the emulated API's rate limit: %d\n", refused(s.h)-res.refusedUp)
	}
}

// phase is one measured phase under way: what it started from.
type phase struct {
	mgr     *managerProcess
	e       *fixture.Env
	h       *harness.Harness
	start   time.Time
	cpu     float64
	ref     referenceSample
	sample  cpuSample
	api     map[string]float64
	metrics families
}

// measured is what one phase cost.
type measured struct {
	calls calls
	cpu   float64 // the manager's CPU-seconds, user + system
	// piece is the reference's CPU-seconds per piece meanwhile (0: none).
	piece float64
	// alloc is the bytes the manager allocated (allocated_test.go).
	alloc   float64
	took    time.Duration
	use     string // where the machine's CPU went
	api     string // the API server's requests, everyone's
	metrics delta  // the manager's metrics
}

// begin starts measuring a phase: the cloud's counters start from zero.
func (p *managerProcess) begin(b *testing.B, e *fixture.Env, h *harness.Harness) *phase {
	ph := &phase{mgr: p, e: e, h: h, metrics: p.scrape(b), api: apiRequests(b, e)}
	h.ResetRequests()
	p.proxy.reset()
	ph.sample = sampleCPU(p.pid)
	ph.ref = benchReference.sample()
	ph.cpu = p.cpuSeconds()
	ph.start = time.Now()
	return ph
}

// end ends the phase and returns what it cost.
func (ph *phase) end(b *testing.B) measured {
	cpu := ph.mgr.cpuSeconds() - ph.cpu
	piece := perPiece(ph.ref, benchReference.sample())
	took := time.Since(ph.start)
	use := cpuUse(ph.sample, sampleCPU(ph.mgr.pid))
	d := delta{ph.metrics, ph.mgr.scrape(b)}
	cs, _, _ := ph.mgr.proxy.counted()
	cs.ownership = ownershipReads(d)
	return measured{
		calls: cs,
		cpu:   cpu, piece: piece, took: took, use: use, metrics: d,
		alloc: allocated(d),
		api:   requestDelta(ph.api, apiRequests(b, ph.e)),
	}
}

func apiRequests(b *testing.B, e *fixture.Env) map[string]float64 {
	r, err := apiServerRequests(e.Config)
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	return r
}

// resync makes every Machine reconcile once, as the sync period does, and
// waits until the cloud calls that caused are over.
func resync(b *testing.B, e *fixture.Env, mgr *managerProcess, h *harness.Harness, n int, poll time.Duration) {
	before := mgr.scrape(b)
	touchAll(b, e)
	waitFor(b, 5*time.Minute, "a reconcile of every touched Machine", poll, func() bool {
		return delta{before, mgr.scrape(b)}.counter("controller_runtime_reconcile_total", map[string]string{"controller": "machine-controller"}) >= float64(n)
	})
	settle(h)
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
	// exited is closed when the process has ended.
	exited chan struct{}
	// proxy counts its cloud calls.
	proxy *countingProxy
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

// startManagerProcess starts the manager of the benchmark's cluster.
// Its calls go through a counting proxy (which tells the zones apart).
func startManagerProcess(b *testing.B, e *fixture.Env, c benchCloud) *managerProcess {
	proxy := newCountingProxy(b, e.APIURL)
	// The capacity publisher has no part in a scale-up.
	p := startManager(b, e, c, managerSpec{
		name: c.name, namespace: fixture.Namespace, clusterID: fixture.ClusterID,
		apiURL: proxy.URL, env: c.managerEnv, args: append([]string{"--capacity-publisher=false"}, managerRateArgs()...),
	})
	p.proxy = proxy
	return p
}

// managerSpec says which cluster a manager process acts for, through which
// endpoint and with which credentials.
type managerSpec struct {
	name                 string // in its log file's name
	namespace, clusterID string
	apiURL               string
	env                  []string
	args                 []string
}

// startManager starts a manager process at the shipped defaults (leader
// election too: a manager renews its lease all day), but the sync
// period's, whose resync the benchmarks measure on their own
// (benchSyncPeriod).
func startManager(b *testing.B, e *fixture.Env, c benchCloud, s managerSpec) *managerProcess {
	bin := managerBinary(b)
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("%s missing: run `make build` (make bench does)", bin)
	}
	// BENCH_LOG_DIR keeps the manager's log for a look afterwards.
	dir := os.Getenv("BENCH_LOG_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	logPath := filepath.Join(dir, fmt.Sprintf("manager-%s-%d.log", s.name, time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	args := append([]string{"manager", "--kubeconfig", e.Kubeconfig(b),
		"--namespace", s.namespace, "--cluster-id", s.clusterID, "--metrics-bind-address", addr,
		"--health-probe-bind-address", "0", "--sync-period", benchSyncPeriod.String()}, c.managerArgs(s.apiURL)...)
	args = knownFlags(b, bin, append(args, s.args...))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
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
	return &managerProcess{pid: cmd.Process.Pid, metrics: "http://" + addr + "/metrics", log: logPath, exited: exited}
}

// waitReady waits until the machine controller's workers run: what comes
// after is the provider's time, not its start-up. A manager that ended or
// never got there fails the benchmark with the end of its log (which is
// removed with the benchmark's files unless BENCH_LOG_DIR keeps it).
func (p *managerProcess) waitReady(b *testing.B) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// Whether it ended is asked before its log is read: all it wrote
		// is then in what is read.
		var ended bool
		select {
		case <-p.exited:
			ended = true
		default:
		}
		log, err := os.ReadFile(p.log)
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "Starting workers") && strings.Contains(line, "machine-controller") {
				return
			}
		}
		switch {
		case ended:
			b.Fatalf("the manager (pid %d) ended before its machine controller ran; the end of its log:\n%s", p.pid, lastLines(string(log), 20))
		case time.Now().After(deadline):
			b.Fatalf("timed out after 2m0s waiting for the manager's machine controller (pid %d); the end of its log:\n%s", p.pid, lastLines(string(log), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// cpuSeconds is the CPU time the manager process has used, user and
// system, its threads' and its waited-for children's (the user data
// sandbox): /proc/<pid>/stat counts it in clock ticks (10 ms), too coarse
// for a minute of a settled manager, so its threads' own counts in
// nanoseconds (/proc/<pid>/task/*/schedstat, the same time unrounded) are
// summed too, and the larger taken (a thread that ended is in the first
// only).
func (p *managerProcess) cpuSeconds() float64 { return processCPU(p.pid) }

// processCPU is a process's CPU-seconds (managerProcess.cpuSeconds).
func processCPU(pid int) float64 {
	ticks, _ := procCPU(pid)
	stat := ticks / ticksPerSecond
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return stat
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			ns += v
		}
	}
	children := childrenTicks(pid) / ticksPerSecond
	return max(stat, ns/1e9+children)
}

// childrenTicks is the CPU time of a process's waited-for children, in
// clock ticks.
func childrenTicks(pid int) float64 {
	f := procStat(pid)
	if f == nil {
		return 0
	}
	return ticksOf(f, 13, 14)
}

// procStat is the fields of /proc/<pid>/stat after the command (which is
// in parentheses and may hold spaces); nil when there is no such process.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 15 {
		return nil
	}
	return f
}

// ticksOf sums the fields at the indexes.
func ticksOf(f []string, idx ...int) float64 {
	var sum float64
	for _, i := range idx {
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum
}

// knownFlags leaves out the flags the manager binary does not know, so
// that the benchmark measures older releases too (BENCH_MANAGER): one
// before --cluster-id, say, whose figures are what the ownership work is
// measured against.
func knownFlags(b testing.TB, bin string, args []string) []string {
	help, err := managerHelp(bin)
	if err != nil {
		b.Fatalf("%s manager --help: %v\n%s", bin, err, help)
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || strings.Contains(help, "--"+name+" ") {
			out = append(out, a)
			continue
		}
		fmt.Printf("  (the manager %s has no --%s: left out)\n", bin, name)
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++
		}
	}
	return out
}

var helps sync.Map // binary -> its manager --help

func managerHelp(bin string) (string, error) {
	if h, ok := helps.Load(bin); ok {
		return h.(string), nil
	}
	out, err := exec.Command(bin, "manager", "--help").CombinedOutput()
	if err != nil {
		return string(out), err
	}
	helps.Store(bin, string(out))
	return string(out), nil
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
	startMachineSetControllerIn(b, e, tl, fixture.Namespace)
}

// startMachineSetControllerIn runs the MachineSet controller and the
// timeline on the namespaces (none: all).
func startMachineSetControllerIn(b *testing.B, e *fixture.Env, tl *timeline, namespaces ...string) {
	scheme, err := manager.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cacheOpts := cache.Options{}
	if len(namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	// One MachineSet controller per run, several runs per process.
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
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
	return machineSetIn(c, fixture.Namespace, fixture.ClusterID)
}

// machineSetIn is a MachineSet of cluster in namespace, at 0 replicas.
func machineSetIn(c benchCloud, namespace, cluster string) *machinev1.MachineSet {
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": cluster, "machine.openshift.io/cluster-api-machineset": "bench-workers"}
	zero := int32(0)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-workers", Namespace: namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": cluster}},
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
func touchAll(b testing.TB, e *fixture.Env) { touchAllIn(b, e, fixture.Namespace) }

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
			switch strings.TrimSpace(string(comm)) {
			case "etcd":
				s.etcd += ticks
			case "kube-apiserver":
				s.apiserver += ticks
			default:
				// The reference process (reference_test.go), the
				// benchmark's own.
				s.itself += ticks
			}
		}
	}
	return s
}

// cpuSplit is the CPU-seconds each of the cluster's processes used
// between two samples.
type cpuSplit struct {
	manager, apiserver, etcd, itself float64
}

func cpuSplitOf(a, b cpuSample) cpuSplit {
	sec := func(x, y float64) float64 { return (y - x) / ticksPerSecond }
	return cpuSplit{manager: sec(a.manager, b.manager), apiserver: sec(a.apiserver, b.apiserver), etcd: sec(a.etcd, b.etcd), itself: sec(a.itself, b.itself)}
}

// total is every process's CPU-seconds.
func (c cpuSplit) total() float64 { return c.manager + c.apiserver + c.etcd + c.itself }

func (c cpuSplit) String() string {
	return fmt.Sprintf("%.1f CPU-seconds: %s", c.total(), c.parts("%.1f"))
}

// parts names each process's CPU-seconds, in the format of one.
func (c cpuSplit) parts(format string) string {
	f := func(v float64) string { return fmt.Sprintf(format, v) }
	return fmt.Sprintf("manager %s, kube-apiserver %s, etcd %s, emulator+MachineSet controller+benchmark (its reference too) %s",
		f(c.manager), f(c.apiserver), f(c.etcd), f(c.itself))
}

// procCPU returns a process's CPU time in clock ticks (user and system,
// of every thread and of the children it waited for), and its parent.
func procCPU(pid int) (ticks float64, parent int) {
	f := procStat(pid)
	if f == nil {
		return 0, 0
	}
	parent, _ = strconv.Atoi(f[1])
	// utime, stime, cutime, cstime
	return ticksOf(f, 11, 12, 13, 14), parent
}

// cpuUse describes the CPU between two samples: how busy the machine was
// (all its cores, every process, other people's too) and who used it.
func cpuUse(a, b cpuSample) string {
	busy := 0.0
	if b.total > a.total {
		busy = (b.busy - a.busy) / (b.total - a.total) * 100
	}
	return fmt.Sprintf("machine %.0f%% busy (%d cores) in %.1fs; CPU-seconds: %s",
		busy, runtime.NumCPU(), b.at.Sub(a.at).Seconds(), cpuSplitOf(a, b).parts("%.2f"))
}
