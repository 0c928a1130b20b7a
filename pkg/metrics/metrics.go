// Package metrics holds the provider's Prometheus metrics, registered with
// controller-runtime's registry so the manager serves them on /metrics.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

var (
	cloudRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_cloud_requests_total",
		Help: "Cloud API calls by cloud, operation and result (ok, not_found, invalid, retryable, error).",
	}, []string{"cloud", "operation", "result"})
	cloudLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_cloud_request_duration_seconds",
		Help:    "Latency of cloud API calls by cloud and operation.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, []string{"cloud", "operation"})
	provisioning = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_machine_provisioning_duration_seconds",
		Help:    "Time from a Machine's creation until its server is running, by cloud.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"cloud"})
)

func init() {
	metrics.Registry.MustRegister(cloudRequests, cloudLatency, provisioning)
}

// ObserveCloudCall records one cloud API call that started at start and
// ended with err.
func ObserveCloudCall(cloudName, operation string, start time.Time, err error) {
	cloudLatency.WithLabelValues(cloudName, operation).Observe(time.Since(start).Seconds())
	cloudRequests.WithLabelValues(cloudName, operation, result(err)).Inc()
}

func result(err error) string {
	var invalid *cloud.InvalidConfigError
	var retryable *cloud.RetryableError
	switch {
	case err == nil:
		return "ok"
	case cloud.IsNotFound(err):
		return "not_found"
	case errors.As(err, &invalid):
		return "invalid"
	case errors.As(err, &retryable):
		return "retryable"
	default:
		return "error"
	}
}

// ObserveProvisioning records how long a Machine took to get a running server.
func ObserveProvisioning(cloudName string, d time.Duration) {
	provisioning.WithLabelValues(cloudName).Observe(d.Seconds())
}
