package bench

import (
	"math"
	"testing"
	"time"
)

// allocMetric is the bytes a Go process has allocated since it started,
// freed or not: the manager's runtime counts them, and client_golang's Go
// collector serves them under this name (controller-runtime v0.22.4
// registers it in its metrics registry: pkg/internal/controller/metrics,
// metrics.go, init).
//
// It is the manager's work in a unit the machine's load cannot move: the
// same reconciles decode, copy and encode the same objects, however busy
// the cores are, while their CPU-seconds grow with what else shares the
// cores' caches (docs/benchmarks.md). Most of a Go controller's CPU goes to
// that work and to collecting its garbage, which grows with it; so this is
// the figure to compare two runs of, what `go test -benchmem` reports per
// operation for the same reason. A manager without the metric (an older
// release under BENCH_MANAGER) shows 0.
const allocMetric = "go_memstats_alloc_bytes_total"

const mib = 1 << 20

// allocated is the bytes the manager allocated between two scrapes. The
// one scrape that ends a phase is counted in it too: the same in every
// run, and small against a phase's allocations (MiB per Machine).
func allocated(d delta) float64 { return d.counter(allocMetric, nil) }

// idleAlloc is what the manager allocates per second of steady state, in
// MiB: its lease, the janitor's sweeps, its runtime.
func (r result) idleAlloc() float64 {
	if r.steadyFor <= 0 {
		return 0
	}
	return r.allocSteady / mib / r.steadyFor.Seconds()
}

// cycleAlloc is the MiB the manager allocated per Machine in each cycle's
// phase, less what it would have allocated idle meanwhile.
func (r result) cycleAlloc(alloc []float64, took []time.Duration) []float64 {
	out := make([]float64, len(alloc))
	for i := range alloc {
		out[i] = r.per(alloc[i]/mib - r.idleAlloc()*took[i].Seconds())
	}
	return out
}

// allocPerCreated is the MiB the manager allocated per Machine from the
// scale-up until every Machine is Running and settled: the median of the
// cycles. Unlike the CPU, which the machine's other work only ever adds
// to (so the least is taken), allocations are the work itself; a cycle
// differs from another only in what the workqueues happened to merge.
func (r result) allocPerCreated() float64 { return median(r.cycleAlloc(r.allocUps, r.upFors)) }

// allocPerDeleted is the same for the scale-down.
func (r result) allocPerDeleted() float64 { return median(r.cycleAlloc(r.allocDowns, r.downFors)) }

// allocPerHour is the MiB the manager allocates in an hour of steady
// state: the steady window's rate, and a resync (the median's) every sync
// period.
func (r result) allocPerHour() float64 {
	if r.steadyFor <= 0 {
		return 0
	}
	return r.allocSteady/mib*float64(time.Hour)/float64(r.steadyFor) + median(r.allocResyncs)/mib*float64(time.Hour/syncPeriod)
}

func TestAllocationFigures(t *testing.T) {
	r := result{
		n:            10,
		steadyFor:    time.Minute,
		allocSteady:  60 * mib, // 1 MiB/s idle
		allocUps:     []float64{110 * mib, 130 * mib, 120 * mib},
		upFors:       []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second},
		allocDowns:   []float64{25 * mib},
		downFors:     []time.Duration{5 * time.Second},
		allocResyncs: []float64{9 * mib, 6 * mib, 7 * mib},
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"per Machine created (the median cycle, less 10 s idle)", r.allocPerCreated(), 11},
		{"per Machine deleted", r.allocPerDeleted(), 2},
		{"per hour steady (60 MiB a minute, six resyncs of the median 7 MiB)", r.allocPerHour(), 3642},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %g MiB, want %g", c.name, c.got, c.want)
		}
	}
	if got := (result{n: 10}).allocPerHour(); got != 0 {
		t.Errorf("a run without a steady window: %g MiB per hour, want 0", got)
	}
}
