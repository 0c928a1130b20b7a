package bench

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// docs/benchmarks.md is made by `make bench-docs` from what the benchmarks
// write into BENCH_DOCS_DIR: each its section (scale.md, fleet.md), with
// the machine it ran on, and notes.md if someone wrote one there.
// TestBenchmarksPage puts the page together when BENCH_DOCS_WRITE is set,
// and checks its shape always: a figure the benchmarks print is a column of
// the page's tables.

// benchDocsDir is where the benchmarks write their sections; "" for
// nowhere.
func benchDocsDir() string { return os.Getenv("BENCH_DOCS_DIR") }

// writeSection writes a benchmark's section of docs/benchmarks.md.
func writeSection(b testing.TB, name, text string) {
	dir := benchDocsDir()
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
}

// machine describes the machine the benchmark runs on and how busy it is:
// the figures of a busy machine are the point.
type machine struct {
	start time.Time
	load0 string
	busy0 cpuSample
}

func newMachine() *machine {
	return &machine{start: time.Now(), load0: loadAverage(), busy0: sampleCPU(0)}
}

// describe says what the machine is and how busy it was since newMachine.
func (m *machine) describe() string {
	s := sampleCPU(0)
	busy := 0.0
	if s.total > m.busy0.total {
		busy = (s.busy - m.busy0.busy) / (s.total - m.busy0.total) * 100
	}
	goVersion := runtime.Version()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d cores (%s), %s memory, Linux %s, %s; %s from %s to %s; load average %s at the start, %s at the end; the cores %.0f %% busy meanwhile (every process's, others' too)",
		runtime.NumCPU(), cpuModel(), memTotal(), strings.TrimSpace(string(kernel)), goVersion,
		time.Since(m.start).Round(time.Second), m.start.UTC().Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04 MST"),
		m.load0, loadAverage(), busy)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return fmt.Sprintf("%.0f GiB", kb/1024/1024)
		}
	}
	return "?"
}

// commit names the checkout the benchmark measured.
func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// The page's parts that no benchmark writes.
const pageHead = `# Benchmarks

The figures of ` + "`make bench`" + ` (a MachineSet 0 → N → 0 through the shipped manager binary) and
` + "`make bench-fleet`" + ` (N clusters in one cloud account), as ` + "`make bench-docs`" + ` last measured them on
the machine named below: each benchmark twice, one run after the other; each section says how
busy the machine was meanwhile (its load average and how busy its cores were). This page is
written by ` + "`make bench-docs`" + `; do not edit it by hand.

` + "```sh" + `
make bench-docs       # both benchmarks, twice each (about three hours on 2 cores), then this page
make bench BENCH_SIZES=100,1000 BENCH_RUNS=2
make bench-fleet BENCH_RUNS=2
` + "```" + `

## What the figures are

- **Cloud calls** are counted by the emulator, by route, so every call counts, whatever code
  path made it; they are grouped by what the route is for (list servers, create, read a server,
  delete, …). **Ownership reads** are the reads a manager made to prove a server carries the
  Machine's identity right before a write or a delete (its metric
  ` + "`machine_api_provider_cloud_ownership_reads_total`" + `). Counts depend on the code, not on
  the machine's load.
- **Calls to Provisioned** run from the scale-up until every Machine is Provisioned and the
  cloud has been quiet for 2 s; **then to Running** are the reconciles that linking each Machine's
  Node makes (what a burst of creates put off: a root volume's tags, a new instance's read).
- **Steady state**: every Machine Running. A window of two janitor intervals between the
  janitor's sweeps, then one resync (every Machine reconciled once, as the sync period does every
  10 minutes): calls and CPU per hour are the window's at its rate plus six resyncs. The first
  resync after a scale-up is not the steady state's: it also does what the burst put off and
  no reconcile came for since (a few root volumes' tags on cloudscale.ch, which take only calls
  the account has to spare); the page gives it apart.
- **CPU** is the manager process's own, user + system: its threads' time from
  ` + "`/proc/<pid>/task/*/schedstat`" + ` (nanoseconds; ` + "`/proc/<pid>/stat`" + ` counts the same in 10 ms
  ticks) and its waited-for children's. CPU-seconds count work, not waiting, so a busy machine
  stretches the wall-clock figures much more than these; but the same work still takes more CPU
  time when the others' work shares the cores' caches and has the scheduler switch more: on this
  machine, by up to 40 % between two hours and 5–20 % between two scale-ups minutes apart. So:
  each run scales up and down three times (` + "`BENCH_CYCLES`" + `) and resyncs three times, and takes
  the least CPU of the three (the others' work only ever adds CPU time), less what the manager uses
  idle for as long as the phase took; and a **reference** process beside the manager does the same
  small piece of Go work (decode, copy and encode 100 Machines) every 50 ms, a few percent of a
  core, so that each phase also says how much one piece cost then: the manager's CPU **in
  reference pieces** is the CPU figure the machine's load moves least. The hardware has no
  performance counters (` + "`perf stat -e instructions`" + ` reports them not supported on this virtual
  machine), so instructions are not reported.
- **Allocated** is the memory the manager's Go runtime allocated, freed or not (its metric
  ` + "`go_memstats_alloc_bytes_total`" + `): the work of its reconciles — decoding, copying and
  encoding objects — which its garbage collection grows with, in a unit the machine's load
  cannot move (what ` + "`go test -benchmem`" + ` reports per operation, for the same reason). Per
  Machine created and deleted: the median of the three cycles, less what the manager allocates
  idle for as long as the phase took; per hour of steady state as the CPU, with the median resync.
- **ratio to limit**: the time until every Machine has its server against what the cloud's
  create latency (300 ms, added by the emulator) allows at 10 creates at a time; on 2 cores it
  measures the machine as much as the provider.
- **rate-limit floor**: the least time the manager's own client-side rate limit (50 calls/s in
  bursts of 100 by default, ` + "`--cloud-api-qps`" + `) allows for the cloud calls it made until the
  last server existed: (calls − burst) / rate. Every create costs at least two calls (the look
  for the Machine's servers, which keeps it from making a second, and the create; a third only
  when the account has calls to spare), so 1000 Machines take no less than 38 s at the defaults,
  1.27 × the limit, however fast the machine. It is a floor, not what happened: the calls
  wait only when they come faster than that, and the targets say how long they waited in all
  (the manager's metric ` + "`machine_api_provider_cloud_rate_limit_wait_seconds`" + `).
- **CPU floor**: the least time this machine's cores could have done the work that the cluster's
  processes (the manager, the kube-apiserver, etcd, the emulator with the benchmark) did until the
  last server existed, had nothing else run: their CPU-seconds over the cores. Most of it is the
  kube-apiserver's, serving the machine controller's writes (a status patch per reconcile); a
  wall-clock target below it is out of this machine's reach, however the provider orders its work.
- **Repeatability**: the targets compare the runs' CPU figures, and give how far apart the
  reference's CPU time for its same piece of work was in the runs' phases: CPU time that the
  machine's load moves that much cannot repeat closer.
`

// assemblePage is docs/benchmarks.md from the sections in dir: the head,
// scale.md and fleet.md (both needed), then notes.md if there, which says
// how this page's run differed from a full make bench-docs.
func assemblePage(dir string) (string, error) {
	var text strings.Builder
	text.WriteString(pageHead)
	for _, name := range []string{"scale.md", "fleet.md", "notes.md"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if name == "notes.md" && os.IsNotExist(err) {
			break
		}
		if err != nil {
			return "", err
		}
		text.WriteString("\n")
		text.Write(b)
	}
	return text.String(), nil
}

// TestAssemblePage: the sections in their order, notes last and only when
// there, a missing section an error.
func TestAssemblePage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scale.md", "SCALE\n")
	if _, err := assemblePage(dir); err == nil {
		t.Error("a page without fleet.md was assembled")
	}
	write("fleet.md", "FLEET\n")
	page, err := assemblePage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := pageHead + "\nSCALE\n\nFLEET\n"; page != want {
		t.Errorf("without notes.md the page ends %q, want %q", page[len(pageHead):], want[len(pageHead):])
	}
	write("notes.md", "NOTES\n")
	if page, err = assemblePage(dir); err != nil {
		t.Fatal(err)
	}
	if want := pageHead + "\nSCALE\n\nFLEET\n\nNOTES\n"; page != want {
		t.Errorf("with notes.md the page ends %q, want %q", page[len(pageHead):], want[len(pageHead):])
	}
}

// TestBenchmarksPage writes docs/benchmarks.md from the benchmarks'
// sections when BENCH_DOCS_WRITE is set, and checks the page's shape: its
// tables have every figure the benchmarks print as a column, and it says
// on what machine and with which commands they were measured.
func TestBenchmarksPage(t *testing.T) {
	page := filepath.Join("..", "..", "docs", "benchmarks.md")
	if os.Getenv("BENCH_DOCS_WRITE") != "" {
		dir := benchDocsDir()
		if dir == "" {
			t.Fatal("BENCH_DOCS_WRITE needs BENCH_DOCS_DIR, where the benchmarks wrote their sections")
		}
		text, err := assemblePage(dir)
		if err != nil {
			t.Fatalf("%v: run the benchmark first (make bench-docs does)", err)
		}
		if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	// What the figures mean is the benchmark's to say, not a copy's from
	// when the page was last written.
	if !strings.HasPrefix(text, pageHead) {
		t.Errorf("docs/benchmarks.md does not begin with what the figures are as the benchmark says it now: write it again from its sections (BENCH_DOCS_WRITE=1, as make bench-docs does)")
	}
	for _, want := range []string{"## Scale", "## Fleet", "Documented rate limits", "Machine:", "make bench-docs", "Targets"} {
		if !strings.Contains(text, want) {
			t.Errorf("docs/benchmarks.md has no %q", want)
		}
	}
	header := func(section string) string {
		i := strings.Index(text, section)
		if i < 0 {
			return ""
		}
		for _, line := range strings.Split(text[i:], "\n") {
			if strings.HasPrefix(line, "| cloud |") {
				return line
			}
		}
		return ""
	}
	scale, fleet := header("## Scale"), header("## Fleet")
	for _, f := range figures {
		if !strings.Contains(scale, "| "+f.name) {
			t.Errorf("docs/benchmarks.md: the scale table has no column %q", f.name)
		}
	}
	for _, f := range fleetFigures {
		if !strings.Contains(fleet, "| "+f.name) {
			t.Errorf("docs/benchmarks.md: the fleet table has no column %q", f.name)
		}
	}
}

// command is the make command that ran a benchmark with the environment
// it was given.
func command(target string, vars ...string) string {
	parts := []string{"make", target}
	for _, v := range vars {
		if val := os.Getenv(v); val != "" {
			parts = append(parts, v+"="+val)
		}
	}
	return strings.Join(parts, " ")
}

// scaleSection is the page's section of BenchmarkScale.
func scaleSection(rows [][]result, m *machine) string {
	var b strings.Builder
	b.WriteString("## Scale: `make bench`\n\n")
	fmt.Fprintf(&b, "Machine: %s. Commit %s.\n\n", m.describe(), commit())
	fmt.Fprintf(&b, "Command: `%s`\n", command("bench", "BENCH_SIZES", "BENCH_RUNS", "CLOUD", "BENCH_CLOUD_LIMIT", "BENCH_CLOUD_API_QPS", "BENCH_CYCLES"))
	b.WriteString(table(rows))
	b.WriteString("Cloud calls per Machine by purpose, each run:\n\n")
	for _, rs := range rows {
		for i, r := range rs {
			fmt.Fprintf(&b, "- %s, %d Machines, run %d: to Provisioned %s; created (to Running and settled) %s; deleted %s; a resync %s (the first after the scale-up %s); steady window of %s: %s\n",
				r.cloud, r.n, i+1, r.provisioned.perMachine(r.n), r.up.perMachine(r.n), r.down.perMachine(r.n), r.resync.perMachine(r.n),
				r.firstResync.perMachine(r.n), r.steadyFor.Round(time.Second), r.steady.routeList())
		}
	}
	b.WriteString("\n" + scaleTargets(rows))
	return b.String()
}

// The targets of issue 38 for make bench.
const (
	targetOwnership = 0.1  // ownership reads per Machine beyond what wave 3 needed (none)
	targetResync    = 0.05 // calls per Machine per resync
	targetRatio     = 1.3  // 1000 Machines: time to all servers against the limit
)

// scaleTargets says, for every run, whether it met the targets.
func scaleTargets(rows [][]result) string {
	var b strings.Builder
	b.WriteString("### Targets of `make bench`\n\n")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	for _, rs := range rows {
		for i, r := range rs {
			own := r.ownUp() + r.ownDown()
			fmt.Fprintf(&b, "- %s, %d Machines, run %d: ownership reads %.3f per Machine (created and deleted; wave 3 made none, target ≤ %.1f beyond it): %s; a resync %.4f calls per Machine (target ≤ %.2f): %s",
				r.cloud, r.n, i+1, own, targetOwnership, verdict(own <= targetOwnership), r.resyncCalls(), targetResync, verdict(r.resyncCalls() <= targetResync))
			if r.n >= 1000 {
				fmt.Fprintf(&b, "; %.2f × the limit (target ≤ %.1f): %s", r.ratio(), targetRatio, verdict(r.ratio() <= targetRatio))
				if r.cpuFloor()/limit(r.n).Seconds() > targetRatio {
					b.WriteString(", beyond this machine's reach")
				}
				// What the machine's cores and the manager's own rate
				// limit allow: a floor above the target is no fault of
				// how the provider orders its work.
				fmt.Fprintf(&b, " (the cluster's processes used %.0f CPU-seconds until the last server, the kube-apiserver %.0f of them, which %d cores give in no less than %.1f s, %.2f × the limit; the manager's rate limit of %g calls/s allowed its %d calls no less than %.1f s, %.2f × the limit, and held them %.1f call-seconds in all)",
					r.toServersCPU.total(), r.toServersCPU.apiserver, runtime.NumCPU(), r.cpuFloor(), r.cpuFloor()/limit(r.n).Seconds(),
					r.rate.QPS, r.toServersCalls, r.floor(), r.floor()/limit(r.n).Seconds(), r.rateWaited)
			}
			b.WriteString("\n")
		}
	}
	for _, rs := range rows {
		if len(rs) > 1 {
			b.WriteString(cpuRepeats(rs))
		}
	}
	return b.String()
}

// targetRepeat is how far apart, in %, two runs' figures may be.
const targetRepeat = 5.0

// cpuRepeats says whether the manager's CPU figures of the runs rs (one
// cloud and size) repeat within targetRepeat, and how much the machine's
// load moved the CPU time of the reference's piece of work, which is the
// same in every phase: CPU time that moves that much between phases
// cannot repeat within the target however the manager works.
func cpuRepeats(rs []result) string {
	verdict := func(d float64) string {
		if d < targetRepeat {
			return fmt.Sprintf("Δ %.1f %%", d)
		}
		return fmt.Sprintf("**Δ %.1f %%**", d)
	}
	var pieces []float64
	for _, r := range rs {
		pieces = append(pieces, r.pieceUps...)
		pieces = append(pieces, r.pieceDowns...)
		pieces = append(pieces, r.pieceResyncs...)
		pieces = append(pieces, r.pieceSteady)
	}
	pieces = slices.DeleteFunc(pieces, func(p float64) bool { return p <= 0 })
	var b strings.Builder
	fmt.Fprintf(&b, "- %s, %d Machines, CPU between the runs (target < %.0f %%): CPU-seconds per Machine created %s, deleted %s, per hour of steady state %s; in reference pieces %s, %s, %s",
		rs[0].cloud, rs[0].n, targetRepeat,
		verdict(worstDelta(rs, result.cpuPerCreated)), verdict(worstDelta(rs, result.cpuPerDeleted)), verdict(worstDelta(rs, result.cpuPerHour)),
		verdict(worstDelta(rs, result.piecesPerCreated)), verdict(worstDelta(rs, result.piecesPerDeleted)), verdict(worstDelta(rs, result.piecesPerHour)))
	if len(pieces) > 0 {
		lo, hi := slices.Min(pieces), slices.Max(pieces)
		fmt.Fprintf(&b, "; the reference's same piece of work took %.5f to %.5f CPU-seconds in these runs' phases, %.0f %% apart", lo, hi, (hi/lo-1)*100)
	}
	b.WriteString("\n")
	return b.String()
}

// fleetSection is the page's section of BenchmarkFleet.
func fleetSection(all []fleetResult, m *machine) string {
	var b strings.Builder
	b.WriteString("## Fleet: `make bench-fleet`\n\n")
	fmt.Fprintf(&b, "Machine: %s. Commit %s.\n\n", m.describe(), commit())
	fmt.Fprintf(&b, "Command: `%s`\n", command("bench-fleet", "FLEET_CLUSTERS", "FLEET_MACHINES", "FLEET_SCALE_UP", "BENCH_RUNS", "CLOUD"))
	b.WriteString(fleetTable(all))
	b.WriteString("Each run, per cluster (steady calls per minute: the window's and a resync every sync period):\n\n")
	for _, r := range all {
		fmt.Fprintf(&b, "- %s, %d cluster(s): steady %s calls/min per cluster, answers %s bytes per window; a resync %s calls per cluster; the scaling cluster's calls in the scale-up's minute %s (Provisioned in %.1fs)\n",
			r.cloud, r.clusters, spreadF(r.perCluster(), 1, "%.2f"), spreadInts(r.steadyBytes),
			spread(r.resync, func(c calls) float64 { return float64(c.total()) }, "%.0f"), r.scaleUp[0].routeList(), r.scaleUpTook.Seconds())
	}
	b.WriteString("\n" + fleetFilters + "\n" + fleetTargets(all))
	return b.String()
}

// fleetFilters says why a cluster's calls do not grow with the account.
const fleetFilters = `Every list of a manager's servers is filtered by its cluster's identity on the cloud's side:
on cloudscale.ch ` + "`GET /v1/servers?tag:machine-api-provider-cloudscale_appuio_io_cluster_id=<id>`" + `
(cloudscale-go-sdk's ` + "`WithTagFilter`" + `, which the SDK's own integration test
` + "`TestIntegrationTags_Server`" + ` checks against the real API, ` + "`tag:key=value`" + ` and ` + "`tag:key`" + `),
its server groups likewise; on Exoscale ` + "`GET /v2/instance?labels=machine-api-provider.appuio.io/cluster-id=<id>`" + `
in each zone (the ` + "`labels`" + ` query parameter of list-instances in Exoscale's OpenAPI document;
egoscale v3.1.43 ` + "`ListInstancesWithLabels`" + `). Both emulators apply exactly these filters and no
other. So a cluster's calls per minute do not depend on how many clusters share the account, and
their answers grow with the cluster's own servers: the account's load is O(clusters) in calls and
O(servers) in bytes, which the tables show (per cluster, the same at 1, 5 and 20). The one list
without a filter is Exoscale's anti-affinity groups (list-anti-affinity-groups takes no
parameter), which every sweep reads whole: its answer grows with all the account's groups (none
in this benchmark), its calls do not.
`

// fleetTargets says how the largest account's load compares with what
// the clouds document, and how it grows with the clusters.
func fleetTargets(all []fleetResult) string {
	var b strings.Builder
	b.WriteString("### Targets of `make bench-fleet`\n\n")
	for _, r := range all {
		_, account := r.scaleUpPerMinute()
		fmt.Fprintf(&b, "- %s, %d cluster(s): steady %.1f calls/min for the account (%.2f per cluster, %.4f per Machine), %.0f calls/min in the minute of a scale-up, at most %d calls in one second; no documented limit to hold them against (below); the provider's own client-side limit is 50 calls/s per manager.\n",
			r.cloud, r.clusters, r.accountSteadyPerMinute(), r.accountSteadyPerMinute()/float64(r.clusters), r.accountSteadyPerMinute()/float64(r.clusters*r.machines), account, r.scaleUpPeak)
	}
	return b.String()
}

// TestScaleSectionTellsTheFirstResyncApart: the page gives the first
// resync after a scale-up (with the root volume tags its burst put off)
// beside the steady state's, and the steady figures and the target are
// the steady resync's.
func TestScaleSectionTellsTheFirstResyncApart(t *testing.T) {
	r := result{
		cloud:       "cloudscale",
		n:           1000,
		resync:      calls{routes: map[string]int64{"GET /v1/servers": 2}},
		firstResync: calls{routes: map[string]int64{"GET /v1/servers": 2, "PATCH /v1/volumes/{id}": 6}},
		steady:      calls{routes: map[string]int64{"GET /v1/servers": 2}},
		steadyFor:   2 * time.Minute,
		// One cycle, as every run has at least.
		cpuUps: []float64{20}, cpuDowns: []float64{10}, upFors: []time.Duration{time.Minute}, downFors: []time.Duration{time.Minute},
		pieceUps: []float64{0.002}, pieceDowns: []float64{0.002},
		cpuResyncs: []float64{2}, pieceResyncs: []float64{0.002},
		allocUps: []float64{1 << 30}, allocDowns: []float64{1 << 30}, allocResyncs: []float64{1 << 20},
	}
	page := scaleSection([][]result{{r}}, newMachine())
	for _, want := range []string{
		"a resync 0.002 = list servers 0.002 (the first after the scale-up 0.008 = list servers 0.002, root volume 0.006)",
		"a resync 0.0020 calls per Machine (target ≤ 0.05)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the scale section has no %q:\n%s", want, page)
		}
	}
	// 2 calls a window of 2 minutes, and six resyncs of 2 calls an hour.
	if got, want := r.steadyCallsPerHour(), 2.0*30+2*6; got != want {
		t.Errorf("steady calls per hour %v, want %v (the steady resync's, not the first's)", got, want)
	}
}

// TestScaleTargetsSayWhatBoundsTheRuns: the targets of 1000 Machines give
// the CPU floor beside the rate-limit floor and how long the rate limit
// held calls, and compare the runs' CPU figures with the reference's own
// spread, marking a figure that moved 5 % or more.
func TestScaleTargetsSayWhatBoundsTheRuns(t *testing.T) {
	run := func(cpuUp, piece float64) result {
		return result{
			cloud: "exoscale", n: 1000, toServers: 60 * time.Second,
			rate: defaultManagerRate, toServersCalls: 2100, rateWaited: 1.5,
			toServersCPU: cpuSplit{manager: 20, apiserver: 70, etcd: 8, itself: 30},
			steadyFor:    2 * time.Minute, cpuSteady: 0.24, cpuResyncs: []float64{3}, pieceSteady: 0.002, pieceResyncs: []float64{0.002},
			cpuUps: []float64{cpuUp}, cpuDowns: []float64{10}, upFors: []time.Duration{time.Minute}, downFors: []time.Duration{time.Minute},
			pieceUps: []float64{piece}, pieceDowns: []float64{0.002},
			allocUps: []float64{1 << 30}, allocDowns: []float64{1 << 30}, allocResyncs: []float64{1 << 20},
		}
	}
	// The second run's scale-up took 10 % more CPU, at a reference piece
	// that cost 10 % more: the CPU-seconds missed, the pieces met.
	text := scaleTargets([][]result{{run(20, 0.002), run(22.12, 0.0022)}})
	cores := runtime.NumCPU()
	for _, want := range []string{
		fmt.Sprintf("the cluster's processes used 128 CPU-seconds until the last server, the kube-apiserver 70 of them, which %d cores give in no less than %.1f s", cores, 128/float64(cores)),
		"the manager's rate limit of 50 calls/s allowed its 2100 calls no less than 40.0 s, 1.33 × the limit, and held them 1.5 call-seconds in all",
		"exoscale, 1000 Machines, CPU between the runs (target < 5 %): CPU-seconds per Machine created **Δ 10.",
		"deleted Δ 0.0 %",
		"in reference pieces Δ 0.",
		"the reference's same piece of work took 0.00200 to 0.00220 CPU-seconds in these runs' phases, 10 % apart",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the targets have no %q:\n%s", want, text)
		}
	}
	// 128 CPU-seconds on 2 cores or more: the CPU floor is what the test
	// machine's cores make of it.
	if reach := 128/float64(cores)/30 > targetRatio; strings.Contains(text, "beyond this machine's reach") != reach {
		t.Errorf("CPU floor %.2f × the limit: the targets say it is beyond reach: %v, want %v:\n%s", 128/float64(cores)/30, !reach, reach, text)
	}
	if strings.Contains(text, "in reference pieces **") {
		t.Errorf("the CPU in reference pieces moved less than 5 %%, yet is marked:\n%s", text)
	}
}

// The steady state's resync in reference pieces is the least of the
// resyncs each in its own pieces, not the pieces of the resync that took
// the least CPU-seconds (whose pieces may have been the cheapest).
func TestPiecesPerResyncIsTheLeastOfTheResyncs(t *testing.T) {
	r := result{cpuResyncs: []float64{3, 2.5}, pieceResyncs: []float64{0.003, 0.002}}
	if got := r.cpuPerResync(); got != 2.5 {
		t.Errorf("CPU per resync %v, want 2.5, the least", got)
	}
	if got := r.piecesPerResync(); math.Abs(got-1000) > 1e-9 {
		t.Errorf("pieces per resync %v, want 1000 (3 / 0.003), not 1250 (2.5 / 0.002)", got)
	}
}

// The detail lines name each process's CPU-seconds, and the total is
// theirs together.
func TestCPUSplitNamesEachProcess(t *testing.T) {
	c := cpuSplit{manager: 1, apiserver: 2, etcd: 3, itself: 4.25}
	want := "10.2 CPU-seconds: manager 1.0, kube-apiserver 2.0, etcd 3.0, emulator+MachineSet controller+benchmark (its reference too) 4.2"
	if got := c.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := c.parts("%.2f"); !strings.HasPrefix(got, "manager 1.00, kube-apiserver 2.00, etcd 3.00, ") {
		t.Errorf("parts with two decimals: %q", got)
	}
}
