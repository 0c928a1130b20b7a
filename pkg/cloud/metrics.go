package cloud

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	cloudRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_cloud_requests_total",
		Help: "Cloud API calls by cloud, operation and result (ok, not_found, invalid, auth, forbidden, retryable, error); forbidden: the credentials lack the permission for the operation.",
	}, []string{"cloud", "operation", "result"})
	cloudLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_cloud_request_duration_seconds",
		Help:    "Latency of cloud API calls by cloud and operation, rate-limit waits included.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, []string{"cloud", "operation"})
	cloudHeld = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_cloud_requests_held_total",
		Help: "Cloud API calls the account's gate held back without calling, by cloud and reason (rate_limited, auth, forbidden, canceled).",
	}, []string{"cloud", "reason"})
	gateClosures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_cloud_gate_closures_total",
		Help: "Times an account's gate closed (every call of the account held back), by cloud and reason (rate_limited: a 429; auth: refused credentials).",
	}, []string{"cloud", "reason"})
	ownershipReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_cloud_ownership_reads_total",
		Help: "Cloud API reads made to prove that a server carries the Machine's identity right before a write or a delete (counted in machine_api_provider_cloud_requests_total too), by cloud and operation.",
	}, []string{"cloud", "operation"})
	// rateLimitWait is what the client-side rate limit costs: whether a
	// slow scale-up waited on the provider's own limit (--cloud-api-qps)
	// rather than on the cloud, which the call latency cannot tell apart.
	rateLimitWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_cloud_rate_limit_wait_seconds",
		Help:    "Time calls waited for the account's client-side rate limit (--cloud-api-qps, --cloud-api-burst) before they were sent, by cloud; a create's look and create wait once, together.",
		Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30},
	}, []string{"cloud"})
	cloudForbidden = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_cloud_permission_denied_total",
		Help: "Cloud API calls the cloud refused for want of a permission (HTTP 403, the credentials accepted), by cloud, operation and the permission to grant.",
	}, []string{"cloud", "operation", "permission"})
)

func init() {
	metrics.Registry.MustRegister(cloudRequests, cloudLatency, cloudHeld, gateClosures, cloudForbidden, ownershipReads, rateLimitWait)
}

// observeClosure counts a gate that was open closing for cause.
func observeClosure(cloudName string, cause error) {
	reason := "rate_limited"
	var auth *AuthError
	if errors.As(cause, &auth) {
		reason = "auth"
	}
	gateClosures.WithLabelValues(cloudName, reason).Inc()
}

func observeCall(ctx context.Context, cloudName, op string, start time.Time, err error) {
	cloudLatency.WithLabelValues(cloudName, op).Observe(time.Since(start).Seconds())
	cloudRequests.WithLabelValues(cloudName, op, Result(err)).Inc()
	if provingOwnership(ctx) {
		ownershipReads.WithLabelValues(cloudName, op).Inc()
	}
	observeForbidden(cloudName, op, err)
}

func observeForbidden(cloudName, op string, err error) {
	var perm *PermissionError
	if errors.As(err, &perm) {
		cloudForbidden.WithLabelValues(cloudName, op, perm.Permission).Inc()
	}
}

func observeHeld(cloudName, _ string, err error) {
	var (
		auth *AuthError
		perm *PermissionError
		held *GateClosedError
	)
	reason := "canceled"
	switch {
	case errors.As(err, &perm):
		reason = "forbidden"
	case errors.As(err, &auth):
		reason = "auth"
	case errors.As(err, &held):
		reason = "rate_limited"
	}
	cloudHeld.WithLabelValues(cloudName, reason).Inc()
}

// Result names the class of a call's outcome, for metrics and the alerts
// on them (config/prometheus): ok, not_found, invalid (the cloud refused
// the request as made), unauthorized (it refused the credentials: a 401, or
// a 403 that says the key is no good), forbidden (it refused the operation
// to credentials it accepts: a PermissionError),
// rate_limited (429), retryable (5xx, timeouts, lost answers) or error.
func Result(err error) string {
	var (
		invalid   *InvalidConfigError
		retryable *RetryableError
		auth      *AuthError
		api       *APIError
		perm      *PermissionError
	)
	switch {
	case err == nil:
		return "ok"
	case IsNotFound(err):
		return "not_found"
	case errors.As(err, &invalid):
		return "invalid"
	case errors.As(err, &auth):
		return "unauthorized"
	case errors.As(err, &perm):
		return "forbidden"
	case errors.As(err, &retryable) && errors.As(err, &api) && api.Status == http.StatusTooManyRequests:
		return "rate_limited"
	case errors.As(err, &retryable):
		return "retryable"
	default:
		return "error"
	}
}
