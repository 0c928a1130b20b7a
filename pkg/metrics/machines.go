package metrics

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The Machines of the provider as the alerts and the console dashboard
// (config/prometheus) see them: how many are in each phase, how long the
// oldest has been in it, and how long deletions took. The machine
// controller's own mapi_machine_phase_transition_seconds{phase="Running"}
// tells how long provisioning usually takes; deletions have no such
// measure, so the provider keeps one.
var (
	machinesDesc = prometheus.NewDesc("machine_api_provider_machines",
		"Machines of the provider's cloud by phase (Provisioning, Provisioned, Running, Deleting, Failed), as the leader's cache has them.",
		[]string{"cloud", "phase"}, nil)
	oldestDesc = prometheus.NewDesc("machine_api_provider_machine_phase_oldest_seconds",
		"How long the oldest Machine of each phase has been on its way: since its creation while Provisioning or Provisioned, since its deletion while Deleting.",
		[]string{"cloud", "phase"}, nil)
	deletion = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_machine_deletion_duration_seconds",
		Help:    "Time from a Machine's deletion until it is gone (drain and server deletion), by cloud.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 12),
	}, []string{"cloud"})

	machines = &machineCollector{sources: map[*MachineWatch]struct{}{}}
)

func init() {
	metrics.Registry.MustRegister(machines, deletion)
}

// MachineWatch exports the Machines of one cloud while its manager leads:
// add it to the manager (it needs leader election, so a standby replica
// exports nothing and observes no deletion twice).
type MachineWatch struct {
	// Cache holds the manager's Machines; Reader lists them from it.
	Cache  cache.Cache
	Reader client.Reader
	// Namespace of the Machines, "" for all.
	Namespace string
	// Cloud names the cloud in the labels; SpecKind is its provider
	// spec's kind: the Machines of other providers are not counted.
	Cloud, SpecKind string
}

// NeedLeaderElection: only the leader exports.
func (w *MachineWatch) NeedLeaderElection() bool { return true }

// Start exports the Machines and observes deletions until ctx ends.
func (w *MachineWatch) Start(ctx context.Context) error {
	inf, err := w.Cache.GetInformer(ctx, &machinev1.Machine{})
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		m, ok := obj.(*machinev1.Machine)
		if ok && m.DeletionTimestamp != nil && w.ours(m) {
			deletion.WithLabelValues(w.Cloud).Observe(time.Since(m.DeletionTimestamp.Time).Seconds())
		}
	}})
	if err != nil {
		return err
	}
	machines.add(w)
	<-ctx.Done()
	machines.remove(w)
	return inf.RemoveEventHandler(reg)
}

// ours reports whether m runs on the watch's cloud.
func (w *MachineWatch) ours(m *machinev1.Machine) bool {
	if m.Spec.ProviderSpec.Value == nil {
		return false
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &kind) == nil && kind.Kind == w.SpecKind
}

// machineCollector collects at scrape time from the watches of the
// managers leading in this process (one in a deployment; tests run more).
type machineCollector struct {
	mu      sync.Mutex
	sources map[*MachineWatch]struct{}
}

func (c *machineCollector) add(w *MachineWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources[w] = struct{}{}
}

func (c *machineCollector) remove(w *MachineWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sources, w)
}

func (c *machineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- machinesDesc
	ch <- oldestDesc
}

type phaseKey struct{ cloud, phase string }

// Collect lists the Machines from each leading manager's cache. Two
// managers of one cloud in a process (tests) would give the same series
// twice, which a scrape refuses: their figures are merged, the larger
// kept.
func (c *machineCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := make([]*MachineWatch, 0, len(c.sources))
	for w := range c.sources {
		sources = append(sources, w)
	}
	c.mu.Unlock()
	count, oldest := map[phaseKey]float64{}, map[phaseKey]float64{}
	now := time.Now()
	for _, w := range sources {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var list machinev1.MachineList
		err := w.Reader.List(ctx, &list, client.InNamespace(w.Namespace))
		cancel()
		if err != nil {
			continue
		}
		perSource := map[phaseKey]float64{}
		for i := range list.Items {
			m := &list.Items[i]
			phase, since := phaseOf(m)
			if phase == "" || !w.ours(m) {
				continue
			}
			k := phaseKey{w.Cloud, phase}
			perSource[k]++
			if !since.IsZero() {
				oldest[k] = max(oldest[k], now.Sub(since).Seconds())
			}
		}
		for k, n := range perSource {
			count[k] = max(count[k], n)
		}
	}
	for k, n := range count {
		ch <- prometheus.MustNewConstMetric(machinesDesc, prometheus.GaugeValue, n, k.cloud, k.phase)
	}
	for k, s := range oldest {
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, s, k.cloud, k.phase)
	}
}

// phaseOf is the Machine's phase (Deleting once it is deleted, whatever the
// machine controller wrote last) and since when it is on its way, zero for
// phases that are no way (Running, Failed). A Machine without a phase has
// not been seen by the machine controller yet, and is not counted, as the
// machine-api-operator does not count it.
func phaseOf(m *machinev1.Machine) (string, time.Time) {
	if m.DeletionTimestamp != nil {
		return machinev1.PhaseDeleting, m.DeletionTimestamp.Time
	}
	phase := ""
	if m.Status.Phase != nil {
		phase = *m.Status.Phase
	}
	switch phase {
	case machinev1.PhaseProvisioning, machinev1.PhaseProvisioned:
		return phase, m.CreationTimestamp.Time
	default:
		return phase, time.Time{}
	}
}
