package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/ownaudit"
)

// procLog is where the in-process parts (the MachineSet controller,
// client-go) log. controller-runtime's and klog's loggers are process-wide
// and set once: they write to the file of every cloud's run under way (the
// clouds run side by side), while each run's MachineSet controller writes
// to its own file only.
var procLog struct {
	sync.Mutex
	files map[io.Writer]bool
}

// logLine is the process-wide loggers' sink.
func logLine(prefix, args string) {
	procLog.Lock()
	defer procLog.Unlock()
	for w := range procLog.files {
		fmt.Fprintln(w, time.Now().Format("15:04:05.000"), prefix, args)
	}
}

// logTo is the sink of one run's own logger.
func logTo(w io.Writer) func(prefix, args string) {
	return func(prefix, args string) {
		procLog.Lock()
		defer procLog.Unlock()
		fmt.Fprintln(w, time.Now().Format("15:04:05.000"), prefix, args)
	}
}

func TestMain(m *testing.M) {
	log := funcr.New(logLine, funcr.Options{Verbosity: 1})
	ctrllog.SetLogger(log)
	klog.SetLogger(log)
	os.Exit(m.Run())
}

func TestChaos(t *testing.T) {
	if os.Getenv("CHAOS") == "" {
		t.Skip("chaos test: run `make chaos` (CHAOS=1)")
	}
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chaos: seed %d, %d cycle(s) of 0 -> %d -> 0, clouds %s (replay with CHAOS_SEED=%d)\n",
		cfg.Seed, cfg.Cycles, cfg.Machines, strings.Join(cfg.Clouds, ", "), cfg.Seed)
	// The clouds run side by side, each on its own control plane, emulator
	// and managers: a run mostly waits (on boots, leases, the emulator's
	// slow creates), and the seed fixes each cloud's dice and schedule
	// apart.
	for _, name := range cfg.Clouds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runCloud(t, cfg, clouds()[name]())
		})
	}
}

func runCloud(t *testing.T, cfg Config, c Cloud) {
	root, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "machine-api-provider")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make build` (make chaos does)", bin)
	}
	// Not t.TempDir: the logs of a failed run must outlive the test.
	dir, err := os.MkdirTemp("", fmt.Sprintf("chaos-%s-%d-", c.Name(), cfg.Seed))
	if err != nil {
		t.Fatal(err)
	}
	keep := cfg.KeepLogs
	t.Cleanup(func() {
		if t.Failed() || keep {
			fmt.Printf("chaos %s: the logs of every process are in %s\n", c.Name(), dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	procFile := createLog(t, dir, "test-process.log")
	procLog.Lock()
	if procLog.files == nil {
		procLog.files = map[io.Writer]bool{}
	}
	procLog.files[procFile] = true
	procLog.Unlock()
	t.Cleanup(func() {
		procLog.Lock()
		delete(procLog.files, procFile)
		procLog.Unlock()
	})
	eventsFile := createLog(t, dir, "events.log")
	events := &eventLog{start: time.Now(), w: io.MultiWriter(eventsFile)}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The emulator's dice and the schedule's come from the seed, apart
	// for each cloud.
	cloudSeed := cfg.Seed*31 + int64(len(c.Name()))
	if err := c.Start(ctx, dir, cloudSeed, faultRules(cfg.FaultRate)); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, dir)
	startMachineSetController(t, cp, funcr.New(logTo(procFile), funcr.Options{Verbosity: 1}).WithName("machineset"))
	// The ownership audit of every write of the run (test/ownaudit).
	audit := ownaudit.Begin(t, ownaudit.Source{Cloud: c.Harness().Audit(), Config: cp.Config})

	r := &run{
		cfg: cfg, cloud: c, cp: cp, events: events,
		lease: c.Name() + "-machine-api-provider",
		rng:   rand.New(rand.NewSource(cloudSeed + 1)),
		obs:   newObserver(c),
	}
	go r.obs.run(ctx, 250*time.Millisecond)
	if err := cp.Client.Create(ctx, r.machineSet(MachineSetName, []byte(c.ProviderSpec()))); err != nil {
		t.Fatal(err)
	}

	args := append(c.ManagerArgs(),
		"--kubeconfig", cp.Kubeconfig, "--namespace", Namespace, "--cluster-id", ClusterID,
		"--leader-elect=true",
		"--leader-elect-lease-duration", cfg.LeaseDuration.String(),
		"--leader-elect-renew-deadline", cfg.RenewDeadline.String(),
		"--leader-elect-retry-period", cfg.RetryPeriod.String(),
		"--cloud-api-timeout", cfg.CloudAPITimeout.String(),
		"--create-grace", cfg.CreateGrace.String(),
		"--janitor-interval", cfg.JanitorInterval.String(),
		"--server-view-refresh", cfg.ServerViewRefresh.String(),
		"--zap-log-level", "debug",
	)
	restartRNG := rand.New(rand.NewSource(cloudSeed + 2))
	var restartMu sync.Mutex
	restartDelay := func() time.Duration {
		restartMu.Lock()
		defer restartMu.Unlock()
		return time.Duration(200+restartRNG.Intn(1800)) * time.Millisecond
	}
	reps, err := startReplicas(bin, cfg.Replicas, dir, args, c.ManagerEnv(), events, restartDelay)
	if err != nil {
		t.Fatal(err)
	}
	r.replicas = reps
	stopped := false
	stopReplicas := func() {
		if !stopped {
			stopped = true
			reps.stop()
		}
	}
	t.Cleanup(stopReplicas)

	var results []phaseResult
	started := time.Now()
cycles:
	for cycle := 1; cycle <= cfg.Cycles; cycle++ {
		// The API server restarts once a cycle, in the phase the seed
		// picks.
		apiUp := r.rng.Intn(2) == 0
		for _, p := range []struct {
			from, to int
			api      bool
		}{{0, cfg.Machines, apiUp}, {cfg.Machines, 0, !apiUp}} {
			res := r.phase(cycle, p.from, p.to, p.api)
			results = append(results, res)
			if res.failed() {
				// What is left behind would fail every later phase too:
				// stop here, with the logs of what went wrong.
				break cycles
			}
		}
	}
	total := time.Since(started)
	stopReplicas()

	// Then what a leader change costs a scale-up at the default flags.
	var lc *leaderChangeResult
	passed := true
	for _, res := range results {
		passed = passed && !res.failed()
	}
	if passed && !cfg.SkipLeaderChange {
		res := r.leaderChange(ctx, bin, dir)
		lc = &res
	}
	panics := findPanics(dir)

	report := renderReport(c.Name(), cfg, results, total, panics)
	if lc != nil {
		report += renderLeaderChange(c.Name(), *lc)
	}
	fmt.Print(report)
	audit.Check(t, "chaos "+c.Name(), ownaudit.Options{ClusterID: ClusterID})
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(report), 0o644); err != nil {
		t.Error(err)
	}
	for _, res := range results {
		if res.failed() {
			t.Errorf("cycle %d, %d -> %d: %s", res.Cycle, res.From, res.To, strings.Join(res.Violations, "; "))
		}
	}
	if len(panics) > 0 {
		t.Errorf("a manager panicked: %s", strings.Join(panics, "; "))
	}
	if lc != nil && len(lc.violations) > 0 {
		t.Errorf("leader change: %s", strings.Join(lc.violations, "; "))
	}
}

// findPanics lists the manager logs' panics.
func findPanics(dir string) []string {
	var out []string
	logs, _ := filepath.Glob(filepath.Join(dir, "manager-*.log"))
	more, _ := filepath.Glob(filepath.Join(dir, "leader-change", "manager-*.log"))
	logs = append(logs, more...)
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
				out = append(out, filepath.Base(path)+": "+line)
			}
		}
	}
	return out
}

// renderReport is the table: one row per phase of each cycle.
func renderReport(cloudName string, cfg Config, results []phaseResult, total time.Duration, panics []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos %s: seed %d, %d manager replicas with leader election, %.0f %% cloud faults (5xx, 429 with Retry-After, resets, lost responses),\n",
		cloudName, cfg.Seed, cfg.Replicas, cfg.FaultRate*100)
	fmt.Fprintf(&b, "  slow creates %s (carried out even if nobody waits), --cloud-api-timeout %s, --create-grace %s, a SIGKILL every %s on average (%.0f %% aimed at the leader)\n\n",
		cfg.SlowCreate, cfg.CloudAPITimeout, cfg.CreateGrace, cfg.KillEvery, cfg.LeaderShare*100)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "cycle\tphase\tMachines\tservers\tduplicates\torphans\tleaked groups\tstuck\tkills (leader)\texits\tapiserver restarts\tdeleted early\tfaults\tslow creates\tcreates sent\tsettle\t")
	for _, r := range results {
		settle := "NOT SETTLED"
		if r.Settled {
			settle = fmt.Sprintf("%.1fs", r.Settle.Seconds())
		}
		fmt.Fprintf(w, "%d\t%d -> %d\t%d\t%d\t%d\t%d\t%d\t%d\t%d (%d)\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			r.Cycle, r.From, r.To, r.Machines, r.Servers, r.Duplicates, r.Orphans, r.LeakedGroups, r.Stuck,
			r.Kills, r.LeaderKills, r.Exits, r.APIRestarts, r.DeletedEarly, r.Faults, r.SlowCreates, r.Creates, settle)
	}
	_ = w.Flush()
	failed := len(panics) > 0
	for _, r := range results {
		failed = failed || r.failed()
	}
	verdict := "PASS"
	if failed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\nchaos %s: %s in %s (seed %d)\n", cloudName, verdict, total.Round(time.Second), cfg.Seed)
	for _, r := range results {
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "  cycle %d, %d -> %d: %s\n", r.Cycle, r.From, r.To, v)
		}
	}
	for _, p := range panics {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	return b.String()
}
