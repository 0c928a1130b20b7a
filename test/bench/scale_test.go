// Package bench measures the provider at scale against the emulators: how
// long a MachineSet takes from 0 to N Machines and back, how close that is to
// what the cloud's own latency allows, how many cloud calls it costs, and how
// much memory the manager needs. Run it with `make bench`; it prints figures
// and asserts nothing about speed.
//
// The environment chooses what runs:
//
//	BENCH_SIZES        Machines per run, comma-separated (default 100)
//	CLOUD              clouds, comma-separated: cloudscale, exoscale (default cloudscale)
//	BENCH_RUNS         runs of each size and cloud; the table shows each (default 1)
//	BENCH_CYCLES       scale-ups and downs of each run, for the CPU per Machine (default 3)
//	BENCH_CLOUD_LIMIT  qps/burst the emulated API allows before it answers 429 (default: no limit)
//	BENCH_CLOUD_API_QPS the manager's --cloud-api-qps, its burst twice that (default: the manager's, 50)
//	BENCH_MANAGER      the manager binary (default bin/machine-api-provider)
//	BENCH_LOG_DIR      keep the manager's logs there (default: removed)
package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The settings the figures are measured at: the cloud's create latency,
// added by the emulator, and the manager's defaults.
const (
	createLatency = 300 * time.Millisecond
	// concurrency is how many servers the manager creates at a time by
	// default (--max-concurrent-creates).
	concurrency = 10
	// viewRefresh is the manager's --server-view-refresh default.
	viewRefresh = 10 * time.Second
)

// BenchmarkScale scales a MachineSet from 0 to each of BENCH_SIZES
// Machines and back, on each cloud of CLOUD, BENCH_RUNS times each, and
// prints a table of the figures.
func BenchmarkScale(b *testing.B) {
	sizes, err := ints(env("BENCH_SIZES", "100"))
	if err != nil {
		b.Fatal(err)
	}
	runs, err := strconv.Atoi(env("BENCH_RUNS", "1"))
	if err != nil || runs < 1 {
		b.Fatalf("BENCH_RUNS=%q: want a positive number", os.Getenv("BENCH_RUNS"))
	}
	cycles, err := strconv.Atoi(env("BENCH_CYCLES", "3"))
	if err != nil || cycles < 1 {
		b.Fatalf("BENCH_CYCLES=%q: want a positive number", os.Getenv("BENCH_CYCLES"))
	}
	if cloudLimit, err = parseCloudLimit(os.Getenv("BENCH_CLOUD_LIMIT")); err != nil {
		b.Fatal(err)
	}
	if managerRate, err = parseManagerRate(os.Getenv("BENCH_CLOUD_API_QPS")); err != nil {
		b.Fatal(err)
	}
	var cs []benchCloud
	for _, name := range strings.Split(env("CLOUD", fixture.Cloudscale), ",") {
		c, err := cloudNamed(strings.TrimSpace(name))
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
	}
	var rows [][]result
	m := newMachine()
	benchReference = startReference(b)
	for _, c := range cs {
		for _, n := range sizes {
			var rs []result
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for r := 0; r < runs; r++ {
						res := run(b, c, n, cycles)
						fmt.Print(res.detail)
						rs = append(rs, res)
					}
				}
				report(b, rs)
			})
			if len(rs) > 0 {
				rows = append(rows, rs)
			}
		}
	}
	fmt.Print(table(rows))
	if len(rows) > 0 {
		writeSection(b, "scale.md", scaleSection(rows, m))
	}
}

// cloudLimit, from BENCH_CLOUD_LIMIT ("qps/burst"), makes the emulated API
// answer 429 beyond that rate, as a real API's rate limit does: the runs
// then show what the provider's own limit and Retry-After make of it.
var cloudLimit *harness.RateLimit

func parseCloudLimit(s string) (*harness.RateLimit, error) {
	if s == "" {
		return nil, nil
	}
	q, b, _ := strings.Cut(s, "/")
	qps, err := strconv.ParseFloat(q, 64)
	if err != nil || qps <= 0 {
		return nil, fmt.Errorf("BENCH_CLOUD_LIMIT=%q: want qps/burst, e.g. 20/40", s)
	}
	burst := max(1, int(math.Ceil(qps)))
	if b != "" {
		if burst, err = strconv.Atoi(b); err != nil || burst < 1 {
			return nil, fmt.Errorf("BENCH_CLOUD_LIMIT=%q: want qps/burst, e.g. 20/40", s)
		}
	}
	return &harness.RateLimit{QPS: qps, Burst: burst}, nil
}

// managerRate is the manager's own client-side rate limit in the runs: its
// default (pkg/cloud/cloudscale and pkg/cloud/exoscale, DefaultRateLimit:
// 50 calls/s in bursts of 100 for both clouds; TestManagerRateIsTheDefault),
// or BENCH_CLOUD_API_QPS passed as --cloud-api-qps, whose burst the manager
// makes twice the rate. A scale-up of many Machines can wait on it rather
// than on the cloud: the table's "rate-limit floor".
var managerRate = defaultManagerRate

var defaultManagerRate = cloud.RateLimit{QPS: 50, Burst: 100}

func parseManagerRate(s string) (cloud.RateLimit, error) {
	if s == "" {
		return defaultManagerRate, nil
	}
	qps, err := strconv.ParseFloat(s, 64)
	if err != nil || qps <= 0 {
		return cloud.RateLimit{}, fmt.Errorf("BENCH_CLOUD_API_QPS=%q: want a positive number of calls per second", s)
	}
	return cloud.RateLimit{QPS: qps, Burst: int(2 * qps)}, nil
}

// managerRateArgs are the manager's flags for managerRate: none at its
// default.
func managerRateArgs() []string {
	if managerRate == defaultManagerRate {
		return nil
	}
	return []string{"--cloud-api-qps", strconv.FormatFloat(managerRate.QPS, 'f', -1, 64)}
}

// rateFloor is the least time the manager's rate limit allows for calls
// made from a full bucket: the burst at once, the rest at the rate.
func rateFloor(calls int64, rl cloud.RateLimit) time.Duration {
	over := float64(calls - int64(rl.Burst))
	if over <= 0 || rl.QPS <= 0 {
		return 0
	}
	return time.Duration(over / rl.QPS * float64(time.Second))
}

func env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("BENCH_SIZES=%q: want positive numbers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// limit is what the cloud alone allows for n creates: its latency for each
// round of concurrent creates.
func limit(n int) time.Duration {
	return createLatency * time.Duration((n+concurrency-1)/concurrency)
}

// result is one run's figures.
type result struct {
	cloud string
	n     int
	// zoneSweep is the cloud's (benchCloud).
	zoneSweep int
	// toServers and toProvisioned run from the scale-up to the moment the
	// last server exists and the last Machine is Provisioned.
	toServers, toProvisioned time.Duration
	// toServersCalls are the cloud calls until the last server existed,
	// all of which passed the manager's rate limit (rate its QPS and
	// burst): the least time they could take (rateFloor).
	toServersCalls int64
	rate           cloud.RateLimit
	// rateWaited is how long the manager's calls waited for its rate
	// limit until every Machine was Running (call-seconds), in rateWaits
	// waits.
	rateWaited float64
	rateWaits  uint64
	// toServersCPU is the CPU the cluster's processes (the manager, the
	// kube-apiserver, etcd, the emulator with the benchmark) used until
	// the last server existed: cpuFloor.
	toServersCPU cpuSplit
	// toZero runs from the scale-down to the moment the last server is gone.
	toZero time.Duration
	// The cloud calls of each phase: until every Machine was
	// Provisioned; until every Machine was Running and settled (created,
	// in upFor); in a steady window of steadyFor; of one resync of the
	// steady state; to delete every Machine (in downFor). firstResync is
	// the resync right after the scale-up, with what its burst put off.
	provisioned, up, steady, resync, down calls
	firstResync                           calls
	steadyFor                             time.Duration
	// The manager's CPU-seconds in the steady window and the resync, and
	// in each cycle's scale-up and scale-down, which took upFors and
	// downFors.
	cpuSteady        float64
	cpuResyncs       []float64
	cpuUps, cpuDowns []float64
	upFors, downFors []time.Duration
	// The reference's CPU-seconds per piece in the same phases
	// (reference_test.go).
	pieceSteady          float64
	pieceResyncs         []float64
	pieceUps, pieceDowns []float64
	// The bytes the manager allocated in the same phases, each resync's
	// (allocated_test.go).
	allocSteady                        float64
	allocUps, allocDowns, allocResyncs []float64
	peakMiB                            float64
	// refusedUp counts the 429s of the emulated API's rate limit while
	// provisioning (BENCH_CLOUD_LIMIT).
	refusedUp int
	detail    string
}

func (r result) ratio() float64     { return r.toServers.Seconds() / limit(r.n).Seconds() }
func (r result) zeroRatio() float64 { return r.toZero.Seconds() / limit(r.n).Seconds() }

// floor is rateFloor of the calls until the last server, in seconds.
func (r result) floor() float64 { return rateFloor(r.toServersCalls, r.rate).Seconds() }

// cpuFloor is the least time the machine's cores could have done the
// work of the cluster's processes until the last server in, had nothing
// else run: their CPU-seconds over the cores. A wall-clock target below it
// is out of reach on this machine, however the work is ordered.
func (r result) cpuFloor() float64 { return r.toServersCPU.total() / float64(runtime.NumCPU()) }

func (r result) per(v float64) float64 { return v / float64(r.n) }

func (r result) provisionCalls() float64 { return r.per(float64(r.provisioned.withoutSweeps())) }
func (r result) createCalls() float64    { return r.per(float64(r.up.withoutSweeps())) }
func (r result) deleteCalls() float64    { return r.per(float64(r.down.withoutSweeps())) }
func (r result) resyncCalls() float64    { return r.per(float64(r.resync.withoutSweeps())) }
func (r result) ownUp() float64          { return r.per(r.up.ownership) }
func (r result) ownDown() float64        { return r.per(r.down.ownership) }

// steadyCallsPerHour is what a settled cluster of the run's Machines costs
// the account in an hour: the steady window's calls (the janitor's sweeps)
// at its rate, a resync every sync period, and the lists of a sweep of
// every zone every fullSweepEvery.
func (r result) steadyCallsPerHour() float64 {
	return steadyPerHour(r.steady, r.steadyFor, r.resync, r.zoneSweep)
}

func steadyPerHour(window calls, took time.Duration, resync calls, zoneSweep int) float64 {
	return float64(window.withoutSweeps())*float64(time.Hour)/float64(took) +
		float64(resync.withoutSweeps())*float64(time.Hour/syncPeriod) +
		float64(zoneSweep)*float64(time.Hour/fullSweepEvery)
}

// idleCPU is the manager's CPU per second of steady state: its lease, the
// janitor's sweeps, its runtime.
func (r result) idleCPU() float64 { return r.cpuSteady / r.steadyFor.Seconds() }

// cycleCPU is the manager's CPU-seconds per Machine of each cycle's
// phase, less what it would have used idle meanwhile (a busy machine
// stretches a phase; the work of the Machines is what is measured).
func (r result) cycleCPU(cpu []float64, took []time.Duration) []float64 {
	out := make([]float64, len(cpu))
	for i := range cpu {
		out[i] = r.per(cpu[i] - r.idleCPU()*took[i].Seconds())
	}
	return out
}

// cpuPerCreated is the manager's CPU per Machine from the scale-up until
// every Machine is Running and settled: the least of the cycles. The
// work is the same in each (the calls show it); what differs is how much
// the machine's other work slowed each down, which only ever adds CPU
// time (a busy core's caches are others' too, its scheduler switches
// more), so the least is the closest to the work's own cost.
func (r result) cpuPerCreated() float64 { return slices.Min(r.cycleCPU(r.cpuUps, r.upFors)) }

// cpuPerDeleted is the same for the scale-down.
func (r result) cpuPerDeleted() float64 { return slices.Min(r.cycleCPU(r.cpuDowns, r.downFors)) }

// inPieces is the manager's CPU per Machine of each cycle's phase in
// pieces of the reference's work, less what it would have used idle
// meanwhile.
func (r result) inPieces(cpu, piece []float64, took []time.Duration) []float64 {
	out := make([]float64, len(cpu))
	idle := r.cpuSteady / r.pieceSteady / r.steadyFor.Seconds()
	for i := range cpu {
		out[i] = r.per(cpu[i]/piece[i] - idle*took[i].Seconds())
	}
	return out
}

// piecesPerCreated and piecesPerDeleted are cpuPerCreated and
// cpuPerDeleted in pieces of the reference's work: the least of the
// cycles.
func (r result) piecesPerCreated() float64 {
	return slices.Min(r.inPieces(r.cpuUps, r.pieceUps, r.upFors))
}
func (r result) piecesPerDeleted() float64 {
	return slices.Min(r.inPieces(r.cpuDowns, r.pieceDowns, r.downFors))
}

// piecesPerHour is cpuPerHour in pieces of the reference's work.
func (r result) piecesPerHour() float64 {
	return r.cpuSteady/r.pieceSteady*float64(time.Hour)/float64(r.steadyFor) + r.piecesPerResync()*float64(time.Hour/syncPeriod)
}

// cpuPerHour is the manager's CPU in an hour of steady state: the steady
// window's rate, and a resync every sync period.
func (r result) cpuPerHour() float64 {
	return r.cpuSteady*float64(time.Hour)/float64(r.steadyFor) + r.cpuPerResync()*float64(time.Hour/syncPeriod)
}

// cpuPerResync is the manager's CPU-seconds for a resync of every
// Machine: the least of the resyncs, as the cycles' (cpuPerCreated).
func (r result) cpuPerResync() float64 { return slices.Min(r.cpuResyncs) }

// piecesPerResync is the same in pieces of the reference's work: the
// least of the resyncs, each in the pieces of its own time, as the
// cycles' (piecesPerCreated).
func (r result) piecesPerResync() float64 {
	out := make([]float64, len(r.cpuResyncs))
	for i, cpu := range r.cpuResyncs {
		out[i] = cpu / r.pieceResyncs[i]
	}
	return slices.Min(out)
}

// column is one column of a table of runs of type T: how to name it,
// print it and read it from a run.
type column[T any] struct {
	name, unit, format string
	of                 func(T) float64
}

// figure is a column of the scale table.
type figure = column[result]

var figures = []figure{
	{"all servers", "s", "%.1f", func(r result) float64 { return r.toServers.Seconds() }},
	{"ratio to limit", "", "%.2f", result.ratio},
	{"rate-limit floor", "s", "%.1f", result.floor},
	{"CPU floor", "s", "%.1f", result.cpuFloor},
	{"calls/Machine to Provisioned", "", "%.3f", result.provisionCalls},
	{"calls/Machine created", "", "%.3f", result.createCalls},
	{"ownership reads/Machine created", "", "%.3f", result.ownUp},
	{"calls/Machine deleted", "", "%.3f", result.deleteCalls},
	{"ownership reads/Machine deleted", "", "%.3f", result.ownDown},
	{"calls/Machine/resync", "", "%.4f", result.resyncCalls},
	{"steady calls/h", "", "%.0f", result.steadyCallsPerHour},
	{"CPU s/Machine created", "", "%.4f", result.cpuPerCreated},
	{"CPU s/Machine deleted", "", "%.4f", result.cpuPerDeleted},
	{"CPU s/h steady", "", "%.1f", result.cpuPerHour},
	{"CPU created", "ref. pieces/Machine", "%.2f", result.piecesPerCreated},
	{"CPU deleted", "ref. pieces/Machine", "%.2f", result.piecesPerDeleted},
	{"CPU steady", "ref. pieces/h", "%.0f", result.piecesPerHour},
	{"allocated created", "MiB/Machine", "%.3f", result.allocPerCreated},
	{"allocated deleted", "MiB/Machine", "%.3f", result.allocPerDeleted},
	{"allocated steady", "MiB/h", "%.0f", result.allocPerHour},
	{"peak RSS", "MiB", "%.0f", func(r result) float64 { return r.peakMiB }},
	{"to zero servers", "s", "%.1f", func(r result) float64 { return r.toZero.Seconds() }},
}

func report(b *testing.B, rs []result) {
	if len(rs) == 0 {
		return
	}
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(func(r result) float64 { return r.toServers.Seconds() }), "s-to-all-servers")
	b.ReportMetric(med(func(r result) float64 { return r.toProvisioned.Seconds() }), "s-to-all-provisioned")
	b.ReportMetric(med(result.ratio), "x-limit")
	b.ReportMetric(med(result.provisionCalls), "calls/machine-provision")
	b.ReportMetric(med(result.resyncCalls), "calls/machine-resync")
	b.ReportMetric(med(result.deleteCalls), "calls/machine-delete")
	b.ReportMetric(med(result.ownUp), "ownership-reads/machine-created")
	b.ReportMetric(med(result.ownDown), "ownership-reads/machine-deleted")
	b.ReportMetric(med(result.cpuPerCreated), "cpu-s/machine-created")
	b.ReportMetric(med(result.cpuPerHour), "cpu-s/hour-steady")
	b.ReportMetric(med(result.allocPerCreated), "MiB-allocated/machine-created")
	b.ReportMetric(med(result.allocPerHour), "MiB-allocated/hour-steady")
	b.ReportMetric(med(func(r result) float64 { return r.peakMiB }), "MiB-manager-peak")
	b.ReportMetric(med(func(r result) float64 { return r.toZero.Seconds() }), "s-to-zero-servers")
}

// table prints one line per cloud and size, with each run's figure (a /
// b for two runs) and, with several runs, how far apart they are.
func table(rows [][]result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nScale benchmark: %s create latency, %d creates at a time (the manager's defaults); limit = latency × ⌈N/%d⌉\n", createLatency, concurrency, concurrency)
	fmt.Fprintf(&b, "The manager's own rate limit: %g calls/s in bursts of %d%s; rate-limit floor = the least time it allows for the calls made until the last server: (calls − burst) / rate.\n",
		managerRate.QPS, managerRate.Burst, map[bool]string{true: " (its default)", false: " (--cloud-api-qps, BENCH_CLOUD_API_QPS)"}[managerRate == defaultManagerRate])
	if cloudLimit != nil {
		fmt.Fprintf(&b, "The emulated API allows %g calls/s in bursts of %d and answers 429 beyond.\n", cloudLimit.QPS, cloudLimit.Burst)
	}
	b.WriteString("\n" + header("| cloud | Machines |", figures))
	for _, rs := range rows {
		fmt.Fprintf(&b, "| %s | %d |", rs[0].cloud, rs[0].n)
		for _, f := range figures {
			b.WriteString(" " + runs(rs, f) + " |")
		}
		b.WriteString("\n")
	}
	if len(rows) > 0 && len(rows[0]) > 1 {
		fmt.Fprintf(&b, "\n%d runs each, in order; the largest difference from the first run in %%.\n", len(rows[0]))
	}
	b.WriteString("\n")
	return b.String()
}

// header is a Markdown table's header: the first columns, then cols.
func header[T any](first string, cols []column[T]) string {
	h, sep := first, strings.Repeat("|---", strings.Count(first, "|")-2)+"|---:|"
	for _, f := range cols {
		name := f.name
		if f.unit != "" {
			name += " (" + f.unit + ")"
		}
		h += " " + name + " |"
		sep += "---:|"
	}
	return h + "\n" + sep + "\n"
}

// runs prints a figure of every run, "a / b (Δ 1.2%)": how far the
// others are from the first.
func runs[T any](rs []T, f column[T]) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf(f.format, f.of(r))
	}
	s := strings.Join(parts, " / ")
	if len(rs) > 1 {
		s += fmt.Sprintf(" (Δ %.1f%%)", worstDelta(rs, f.of))
	}
	return s
}

// worstDelta is how far, in %, the furthest run's figure is from the
// first's.
func worstDelta[T any](rs []T, of func(T) float64) float64 {
	first := of(rs[0])
	worst := 0.0
	for _, r := range rs[1:] {
		v := of(r)
		if first != 0 {
			worst = max(worst, math.Abs(v-first)/math.Abs(first)*100)
		} else if v != 0 {
			worst = math.Inf(1)
		}
	}
	return worst
}
