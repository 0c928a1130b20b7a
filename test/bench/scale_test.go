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
//	BENCH_RUNS         runs of each size and cloud; the table shows median and range (default 1)
//	BENCH_CLOUD_LIMIT  qps/burst the emulated API allows before it answers 429 (default: no limit)
//	BENCH_MANAGER      the manager binary (default bin/machine-api-provider)
//	BENCH_LOG_DIR      keep the manager's logs there (default: removed)
package bench

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	if cloudLimit, err = parseCloudLimit(os.Getenv("BENCH_CLOUD_LIMIT")); err != nil {
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
	for _, c := range cs {
		for _, n := range sizes {
			var rs []result
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for r := 0; r < runs; r++ {
						res := run(b, c, n)
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
	// toServers and toProvisioned run from the scale-up to the moment the
	// last server exists and the last Machine is Provisioned.
	toServers, toProvisioned time.Duration
	// toZero runs from the scale-down to the moment the last server is gone.
	toZero time.Duration
	// Cloud calls per Machine: to provision, per resync of settled
	// Machines, to delete.
	provisionCalls, resyncCalls, deleteCalls float64
	peakMiB                                  float64
	// refusedUp counts the 429s of the emulated API's rate limit while
	// provisioning (BENCH_CLOUD_LIMIT).
	refusedUp int
	detail    string
}

func (r result) ratio() float64     { return r.toServers.Seconds() / limit(r.n).Seconds() }
func (r result) zeroRatio() float64 { return r.toZero.Seconds() / limit(r.n).Seconds() }

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
	b.ReportMetric(med(func(r result) float64 { return r.provisionCalls }), "calls/machine-provision")
	b.ReportMetric(med(func(r result) float64 { return r.resyncCalls }), "calls/machine-resync")
	b.ReportMetric(med(func(r result) float64 { return r.deleteCalls }), "calls/machine-delete")
	b.ReportMetric(med(func(r result) float64 { return r.peakMiB }), "MiB-manager-peak")
	b.ReportMetric(med(func(r result) float64 { return r.toZero.Seconds() }), "s-to-zero-servers")
}

// table prints one line per cloud and size; with several runs, the median
// and the range of each figure.
func table(rows [][]result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nScale benchmark: %s create latency, %d creates at a time (the manager's defaults); limit = latency × ⌈N/%d⌉\n", createLatency, concurrency, concurrency)
	if cloudLimit != nil {
		fmt.Fprintf(&b, "The emulated API allows %g calls/s in bursts of %d and answers 429 beyond; 429s counts those while provisioning.\n", cloudLimit.QPS, cloudLimit.Burst)
	}
	b.WriteString("\n")
	extra, sep := "", ""
	if cloudLimit != nil {
		extra, sep = " 429s |", "---:|"
	}
	fmt.Fprintf(&b, "| cloud | Machines | all servers | all Provisioned | limit | ratio | calls/Machine provision | calls/Machine resync | calls/Machine delete | to zero servers | manager peak RSS |%s\n", extra)
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n", sep)
	for _, rs := range rows {
		r0 := rs[0]
		col := func(f func(result) float64, format string) string {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			s := fmt.Sprintf(format, v[len(v)/2])
			if len(v) > 1 && v[0] != v[len(v)-1] {
				s += fmt.Sprintf(" ("+format+"–"+format+")", v[0], v[len(v)-1])
			}
			return s
		}
		if cloudLimit != nil {
			extra = " " + col(func(r result) float64 { return float64(r.refusedUp) }, "%.0f") + " |"
		}
		fmt.Fprintf(&b, "| %s | %d | %s s | %s s | %.1f s | %s | %s | %s | %s | %s s | %s MiB |%s\n",
			r0.cloud, r0.n,
			col(func(r result) float64 { return r.toServers.Seconds() }, "%.1f"),
			col(func(r result) float64 { return r.toProvisioned.Seconds() }, "%.1f"),
			limit(r0.n).Seconds(),
			col(result.ratio, "%.2f"),
			col(func(r result) float64 { return r.provisionCalls }, "%.2f"),
			col(func(r result) float64 { return r.resyncCalls }, "%.3f"),
			col(func(r result) float64 { return r.deleteCalls }, "%.2f"),
			col(func(r result) float64 { return r.toZero.Seconds() }, "%.1f"),
			col(func(r result) float64 { return r.peakMiB }, "%.0f"),
			extra,
		)
	}
	if len(rows) > 0 && len(rows[0]) > 1 {
		fmt.Fprintf(&b, "\n%d runs each: median (range).\n", len(rows[0]))
	}
	b.WriteString("\n")
	return b.String()
}
