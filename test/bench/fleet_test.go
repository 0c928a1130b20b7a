package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The fleet benchmark: N clusters share one cloud account (a cloudscale.ch
// project, an Exoscale organization), each with its own manager, which is
// how fleets run. What the account sees is what the clouds' rate limits
// bound: the calls of every cluster's steady state (its janitor's sweeps,
// its resyncs) and of one cluster scaling up meanwhile.
//
// Each cluster is a namespace of one API server with its own cluster ID
// and its own manager process: the shipped binary at its defaults (the
// capacity publisher and leader election included), with its own
// credentials where the cloud has several per account (cloudscale.ch
// tokens), and its own endpoint, a counting proxy to the account's
// emulator that tells its calls apart. One MachineSet controller (the
// machine-api-operator's) serves all namespaces, as it would serve each
// cluster; the benchmark links Nodes as the nodelink controller would.
// The real machine controller runs in every manager: idle, a manager costs
// little (its CPU and memory are among the figures), and nothing cheaper
// would make the same calls.
//
// The clusters are added to one account step by step (1, then 5, then 20
// by default): each step measures an account of exactly that many
// clusters of FLEET_MACHINES Machines each.
//
//	FLEET_CLUSTERS   numbers of clusters, ascending (default 1,5,20)
//	FLEET_MACHINES   Machines per cluster (default 50)
//	FLEET_SCALE_UP   Machines one cluster adds in the scale-up (default FLEET_MACHINES)
//	CLOUD, BENCH_RUNS, BENCH_MANAGER, BENCH_LOG_DIR as for BenchmarkScale
func BenchmarkFleet(b *testing.B) {
	sizes, err := ints(env("FLEET_CLUSTERS", "1,5,20"))
	if err != nil || !slices.IsSorted(sizes) {
		b.Fatalf("FLEET_CLUSTERS=%q: want ascending positive numbers", os.Getenv("FLEET_CLUSTERS"))
	}
	machines, err := strconv.Atoi(env("FLEET_MACHINES", "50"))
	if err != nil || machines < 1 {
		b.Fatalf("FLEET_MACHINES=%q: want a positive number", os.Getenv("FLEET_MACHINES"))
	}
	by, err := strconv.Atoi(env("FLEET_SCALE_UP", strconv.Itoa(machines)))
	if err != nil || by < 1 {
		b.Fatalf("FLEET_SCALE_UP=%q: want a positive number", os.Getenv("FLEET_SCALE_UP"))
	}
	runs, err := strconv.Atoi(env("BENCH_RUNS", "1"))
	if err != nil || runs < 1 {
		b.Fatalf("BENCH_RUNS=%q: want a positive number", os.Getenv("BENCH_RUNS"))
	}
	var all []fleetResult
	m := newMachine()
	eachCloud(b, func(b *testing.B, c benchCloud) {
		for i := 0; i < b.N; i++ {
			for r := 0; r < runs; r++ {
				rs := fleet(b, c, sizes, machines, by)
				for _, res := range rs {
					fmt.Print(res.detail)
				}
				all = append(all, rs...)
			}
		}
	})
	fmt.Print(fleetTable(all))
	if len(all) > 0 {
		writeSection(b, "fleet.md", fleetSection(all, m))
	}
}

// fleetCluster is one cluster of the fleet.
type fleetCluster struct {
	namespace, id string
	proxy         *countingProxy
	mgr           *managerProcess
	ms            *machinev1.MachineSet
}

// fleetResult is what an account of clusters saw.
type fleetResult struct {
	cloud              string
	clusters, machines int
	zoneSweep          int // the cloud's (benchCloud)
	// steady are each cluster's calls in a window of steadyFor, with
	// their answers' bytes; resync each cluster's calls of one resync.
	steady      []calls
	steadyBytes []int64
	steadyFor   time.Duration
	resync      []calls
	// scaleUp are each cluster's calls in scaleUpFor from the start of
	// the first cluster's scale-up by scaleUpBy Machines, which took
	// scaleUpTook to Provisioned; scaleUpPeak is the account's most calls
	// in one second meanwhile.
	scaleUp     []calls
	scaleUpFor  time.Duration
	scaleUpBy   int
	scaleUpTook time.Duration
	scaleUpPeak int
	// Each manager's CPU-seconds in the steady window, and its peak
	// memory.
	cpuSteady, peakMiB []float64
	detail             string
}

// steadyPerMinute is a cluster's steady calls per minute: its window's at
// their rate, and a resync every sync period.
func (r fleetResult) steadyPerMinute(k int) float64 {
	return steadyPerHour(r.steady[k], r.steadyFor, r.resync[k], r.zoneSweep) / 60
}

func (r fleetResult) accountSteadyPerMinute() float64 {
	sum := 0.0
	for k := range r.steady {
		sum += r.steadyPerMinute(k)
	}
	return sum
}

// scaleUpPerMinute is the account's calls per minute from the start of
// the scale-up: the scaling cluster's and everyone's.
func (r fleetResult) scaleUpPerMinute() (scaling, account float64) {
	per := float64(time.Minute) / float64(r.scaleUpFor)
	for k, c := range r.scaleUp {
		if k == 0 {
			scaling = float64(c.total()) * per
		}
		account += float64(c.total()) * per
	}
	return scaling, account
}

// fleet adds clusters of machines Machines to one account until it has
// each of sizes, and measures each.
func fleet(b *testing.B, c benchCloud, sizes []int, machines, by int) []fleetResult {
	ctx := context.Background()
	e := fixture.Start(b, c.options())
	h := e.Harness()
	if err := h.AddRule(harness.Rule{Route: c.createRoute, Latency: harness.Duration(createLatency)}); err != nil {
		b.Fatal(err)
	}
	tl := newTimeline()
	startMachineSetControllerIn(b, e, tl)
	startNodeLinker(b, e.Client, tl)
	var clusters []*fleetCluster
	var out []fleetResult
	// A manager's first sweep takes any list of its first minute: the
	// steady state begins after it.
	var lastStart time.Time
	for _, n := range sizes {
		// More clusters, each scaled to its Machines, linked, settled.
		added := clusters[len(clusters):]
		for k := len(clusters); k < n; k++ {
			cl := &fleetCluster{namespace: fmt.Sprintf("fleet-%02d", k), id: fmt.Sprintf("fleet-%02d-x7k2p", k)}
			if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cl.namespace}}); err != nil {
				b.Fatal(err)
			}
			cl.proxy = newCountingProxy(b, e.APIURL)
			creds := c.managerEnv
			if c.name == fixture.Cloudscale {
				// A token of each cluster's, of the one project.
				creds = []string{"CLOUDSCALE_API_TOKEN=" + cl.namespace + "-token"}
			}
			cl.mgr = startManager(b, e, c, managerSpec{name: c.name + "-" + cl.namespace, namespace: cl.namespace, clusterID: cl.id, apiURL: cl.proxy.URL, env: creds})
			cl.mgr.proxy = cl.proxy
			lastStart = time.Now()
			cl.ms = machineSetIn(c, cl.namespace, cl.id)
			// The scale-down after the scale-up removes the Machines it
			// made, which have no Node.
			cl.ms.Spec.DeletePolicy = string(machinev1.NewestMachineSetDeletePolicy)
			if err := e.Client.Create(ctx, cl.ms); err != nil {
				b.Fatal(err)
			}
			clusters = append(clusters, cl)
			added = append(added, cl)
		}
		for _, cl := range added {
			cl.mgr.waitReady(b)
		}
		total := n * machines
		for _, cl := range added {
			scale(b, e, cl.ms, machines)
		}
		waitFor(b, 20*time.Minute, fmt.Sprintf("%d Machines Running", total), 100*time.Millisecond, func() bool {
			return tl.now(stepRunning) >= total
		})
		// Their last requeues, 30 s after their last reconciles, and the
		// new managers' first sweep.
		time.Sleep(echoes)
		time.Sleep(time.Until(lastStart.Add(janitorInterval + steadyOffset)))
		settle(h)
		out = append(out, measureFleet(b, e, c, clusters, tl, machines, by))
	}
	return out
}

// measureFleet measures an account of clusters, all settled: a steady
// window, a resync, the first cluster's scale-up by by Machines, which it
// then scales back.
func measureFleet(b *testing.B, e *fixture.Env, c benchCloud, clusters []*fleetCluster, tl *timeline, machines, by int) fleetResult {
	n := len(clusters)
	res := fleetResult{cloud: c.name, clusters: n, machines: machines, scaleUpBy: by, zoneSweep: c.zoneSweep}
	var d strings.Builder
	fmt.Fprintf(&d, "\n%s fleet: %d cluster(s) of %d Machines in one account, a manager each:\n", c.name, n, machines)

	// Steady state: the janitors' sweeps and resyncs (measured on their
	// own below). The sweeps of N managers fall anywhere: a window of
	// steadyWindow holds steadyWindow/janitorInterval of each.
	for _, cl := range clusters {
		cl.proxy.reset()
	}
	cpu0 := make([]float64, n)
	for k, cl := range clusters {
		cpu0[k] = cl.mgr.cpuSeconds()
	}
	start := time.Now()
	time.Sleep(steadyWindow)
	res.steadyFor = time.Since(start)
	for k, cl := range clusters {
		calls, bytes, _ := cl.proxy.counted()
		res.steady = append(res.steady, calls)
		res.steadyBytes = append(res.steadyBytes, bytes)
		res.cpuSteady = append(res.cpuSteady, cl.mgr.cpuSeconds()-cpu0[k])
	}
	fmt.Fprintf(&d, "  steady window of %s: per cluster %s calls, answers of %s bytes\n",
		res.steadyFor.Round(time.Second), spread(res.steady, func(c calls) float64 { return float64(c.total()) }, "%.0f"),
		spreadInts(res.steadyBytes))
	for k, cl := range clusters {
		fmt.Fprintf(&d, "    %s: %s, %d bytes\n", cl.namespace, res.steady[k].routeList(), res.steadyBytes[k])
	}

	// A resync of every cluster at once; each would come every sync
	// period, on its own.
	for _, cl := range clusters {
		cl.proxy.reset()
	}
	for _, cl := range clusters {
		before := cl.mgr.scrape(b)
		touchAllIn(b, e, cl.namespace)
		waitFor(b, 5*time.Minute, "a reconcile of every touched Machine", 100*time.Millisecond, func() bool {
			return delta{before, cl.mgr.scrape(b)}.counter("controller_runtime_reconcile_total", map[string]string{"controller": "machine-controller"}) >= float64(machines)
		})
	}
	settle(e.Harness())
	for _, cl := range clusters {
		calls, _, _ := cl.proxy.counted()
		res.resync = append(res.resync, calls)
	}
	fmt.Fprintf(&d, "  resync of every Machine: per cluster %s calls; first cluster's %s\n",
		spread(res.resync, func(c calls) float64 { return float64(c.total()) }, "%.0f"), res.resync[0].routeList())

	// The first cluster scales up; the account's calls in the minute from
	// its start, by cluster.
	for _, cl := range clusters {
		cl.proxy.reset()
	}
	first := clusters[0]
	want := n*machines + by
	start = time.Now()
	scale(b, e, first.ms, machines+by)
	waitFor(b, 10*time.Minute, "the scaled-up Machines Provisioned", 50*time.Millisecond, func() bool {
		return tl.now(stepProvisioned) >= want
	})
	res.scaleUpTook = time.Since(start)
	res.scaleUpFor = max(time.Minute, res.scaleUpTook)
	time.Sleep(time.Until(start.Add(res.scaleUpFor)))
	var times []time.Time
	for _, cl := range clusters {
		calls, _, at := cl.proxy.counted()
		res.scaleUp = append(res.scaleUp, calls)
		times = append(times, at...)
	}
	res.scaleUpPeak = peakPerSecond(times)
	scaling, account := res.scaleUpPerMinute()
	fmt.Fprintf(&d, "  scale-up of one cluster %d -> %d Machines: Provisioned in %.1fs; in the %s from its start the account saw %.0f calls/min (that cluster %.0f: %s), at most %d in one second\n",
		machines, machines+by, res.scaleUpTook.Seconds(), res.scaleUpFor.Round(time.Second), account, scaling, res.scaleUp[0].routeList(), res.scaleUpPeak)

	for _, cl := range clusters {
		res.peakMiB = append(res.peakMiB, cl.mgr.peakRSSMiB(b))
	}
	fmt.Fprintf(&d, "  managers: CPU-seconds per hour of steady state %s, peak memory %s MiB\n",
		spreadF(res.cpuSteady, float64(time.Hour)/float64(res.steadyFor), "%.1f"), spreadF(res.peakMiB, 1, "%.0f"))
	fmt.Fprintf(&d, "  steady state: %.1f calls/min per cluster (median), %.1f for the account\n", median(res.perCluster()), res.accountSteadyPerMinute())

	// Back to machines, for the next, larger account.
	scale(b, e, first.ms, machines)
	waitFor(b, 10*time.Minute, "the scale-up's Machines gone", 100*time.Millisecond, func() bool {
		return tl.now(stepSeen) == n*machines && c.servers(e) == n*machines
	})
	settle(e.Harness())
	res.detail = d.String()
	return res
}

func (r fleetResult) perCluster() []float64 {
	out := make([]float64, len(r.steady))
	for k := range r.steady {
		out[k] = r.steadyPerMinute(k)
	}
	return out
}

// touchAllIn makes every Machine of the namespace reconcile once, nearly
// at once, as the sync period's resync does: the patches go out 8 at a
// time.
func touchAllIn(b testing.TB, e *fixture.Env, namespace string) {
	var list machinev1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		b.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	work := make(chan *machinev1.Machine)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"bench/resync":"`+strconv.FormatInt(time.Now().UnixNano(), 10)+`"}}}`))
				if err := e.Client.Patch(context.Background(), m, patch); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range list.Items {
		work <- &list.Items[i]
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// spread describes a figure of each cluster: "4" when all agree, else
// "min–max (median m)".
func spread(cs []calls, f func(calls) float64, format string) string {
	v := make([]float64, len(cs))
	for i, c := range cs {
		v[i] = f(c)
	}
	return spreadF(v, 1, format)
}

func spreadInts(v []int64) string {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return spreadF(f, 1, "%.0f")
}

func spreadF(v []float64, scale float64, format string) string {
	if len(v) == 0 {
		return "-"
	}
	s := slices.Clone(v)
	for i := range s {
		s[i] *= scale
	}
	slices.Sort(s)
	if s[0] == s[len(s)-1] {
		return fmt.Sprintf(format, s[0])
	}
	return fmt.Sprintf(format+"–"+format+" (median "+format+")", s[0], s[len(s)-1], s[len(s)/2])
}

// rateLimits is what each cloud documents of its API's rate limits, and
// where that was looked for.
var rateLimits = map[string]string{
	fixture.Cloudscale: "cloudscale.ch publishes no rate limit: its API documentation (https://www.cloudscale.ch/en/api/v1) names none, " +
		"and its Go SDK (cloudscale-go-sdk) has no handling of 429. The provider limits itself to 50 calls/s per token and manager (--cloud-api-qps) " +
		"and backs off on a 429 for its Retry-After.",
	fixture.Exoscale: "Exoscale publishes no rate limit for its compute API v2: its OpenAPI document (egoscale v3.1.43, v3/generator/source.yaml) " +
		"describes a 429 answer (rate-limited, with retry_after) for one operation only (get-live-balance) and no figure for any. " +
		"The provider limits itself to 50 calls/s per key and manager (--cloud-api-qps) and backs off on a 429 for its Retry-After.",
}

// fleetFigure is one column of the fleet table.
type fleetFigure = column[fleetResult]

// fleetFigures are the columns of the fleet table.
var fleetFigures = []fleetFigure{
	{"steady calls/min per cluster", "", "%.2f", func(r fleetResult) float64 { return median(r.perCluster()) }},
	{"steady calls/min, account", "", "%.1f", fleetResult.accountSteadyPerMinute},
	{"scale-up: calls/min, account", "", "%.0f", func(r fleetResult) float64 { _, a := r.scaleUpPerMinute(); return a }},
	{"of which the scaling cluster", "", "%.0f", func(r fleetResult) float64 { s, _ := r.scaleUpPerMinute(); return s }},
	{"peak calls/s", "", "%.0f", func(r fleetResult) float64 { return float64(r.scaleUpPeak) }},
	{"steady answer bytes/min per cluster", "", "%.0f", func(r fleetResult) float64 {
		v := make([]float64, len(r.steadyBytes))
		for i, x := range r.steadyBytes {
			v[i] = float64(x) * float64(time.Minute) / float64(r.steadyFor)
		}
		return median(v)
	}},
	{"manager CPU s/h steady", "", "%.1f", func(r fleetResult) float64 {
		return median(r.cpuSteady) * float64(time.Hour) / float64(r.steadyFor)
	}},
	{"manager peak RSS", "MiB", "%.0f", func(r fleetResult) float64 { return median(r.peakMiB) }},
}

// fleetTable prints a line per cloud and number of clusters, with every
// run's figures.
func fleetTable(all []fleetResult) string {
	type key struct {
		cloud    string
		clusters int
	}
	var keys []key
	byKey := map[key][]fleetResult{}
	for _, r := range all {
		k := key{r.cloud, r.clusters}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var b strings.Builder
	if len(all) > 0 {
		r := all[0]
		fmt.Fprintf(&b, "\nFleet benchmark: N clusters of %d Machines in one account, a manager each at its defaults; steady state = the janitor's sweeps (every %s) and a resync every %s; the scale-up adds %d Machines to one cluster (%s create latency)\n",
			r.machines, janitorInterval, syncPeriod, r.scaleUpBy, createLatency)
	}
	b.WriteString("\n" + header("| cloud | clusters |", fleetFigures))
	for _, k := range keys {
		rs := byKey[k]
		fmt.Fprintf(&b, "| %s | %d |", k.cloud, k.clusters)
		for _, f := range fleetFigures {
			b.WriteString(" " + runs(rs, f) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nDocumented rate limits:\n")
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.cloud] {
			seen[k.cloud] = true
			fmt.Fprintf(&b, "- %s\n", rateLimits[k.cloud])
		}
	}
	b.WriteString("\n")
	return b.String()
}
