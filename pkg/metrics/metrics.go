// Package metrics holds the provider's Prometheus metrics about Machines and
// servers, registered with controller-runtime's registry so the manager
// serves them on /metrics. The metrics of cloud API calls themselves are in
// pkg/cloud, next to the call they observe.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	provisioning = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_machine_provisioning_duration_seconds",
		Help:    "Time from a Machine's creation until its server is running, by cloud.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"cloud"})
	duplicates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_duplicate_servers_total",
		Help: "Servers found beside the one a Machine keeps, by cloud and what became of them (deleted, kept_node_running, delete_failed).",
	}, []string{"cloud", "action"})
	orphans = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "machine_api_provider_orphan_servers",
		Help: "Servers carrying a cluster's identity that belong to no Machine, by cloud, as last seen.",
	}, []string{"cloud"})
	orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_orphan_servers_deleted_total",
		Help: "Orphan servers deleted after --delete-orphans-after, by cloud.",
	}, []string{"cloud"})
	groupsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_empty_groups_deleted_total",
		Help: "Empty anti-affinity groups of the provider deleted, by cloud.",
	}, []string{"cloud"})
	renderFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_user_data_render_failures_total",
		Help: "User data renders whose sandbox ended without an answer and that are retried, by cloud and reason (timeout, memory, signal, exit, start).",
	}, []string{"cloud", "reason"})
	createsPending = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_create_waits_total",
		Help: "Reconciles that did not create a server because an earlier create of the Machine may still land, by cloud.",
	}, []string{"cloud"})
)

func init() {
	metrics.Registry.MustRegister(provisioning, duplicates, orphans, orphansDeleted, groupsDeleted, createsPending, renderFailures)
}

// ObserveProvisioning records how long a Machine took to get a running server.
func ObserveProvisioning(cloudName string, d time.Duration) {
	provisioning.WithLabelValues(cloudName).Observe(d.Seconds())
}

// Duplicate counts a server found beside the one a Machine keeps.
func Duplicate(cloudName, action string) { duplicates.WithLabelValues(cloudName, action).Inc() }

// SetOrphans sets how many orphan servers the last scan found.
func SetOrphans(cloudName string, n int) { orphans.WithLabelValues(cloudName).Set(float64(n)) }

// OrphanDeleted counts an orphan server deleted.
func OrphanDeleted(cloudName string) { orphansDeleted.WithLabelValues(cloudName).Inc() }

// GroupsDeleted counts empty anti-affinity groups deleted.
func GroupsDeleted(cloudName string, n int) { groupsDeleted.WithLabelValues(cloudName).Add(float64(n)) }

// CreateWait counts a reconcile that waited for an earlier create.
func CreateWait(cloudName string) { createsPending.WithLabelValues(cloudName).Inc() }

// UserDataRenderFailed counts a render whose sandbox failed, to be retried.
func UserDataRenderFailed(cloudName, reason string) {
	renderFailures.WithLabelValues(cloudName, reason).Inc()
}

// UserDataRenderFailures is the counter UserDataRenderFailed counts, for
// tests.
func UserDataRenderFailures(cloudName, reason string) prometheus.Counter {
	return renderFailures.WithLabelValues(cloudName, reason)
}
