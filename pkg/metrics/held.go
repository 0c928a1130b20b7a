package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// held is kept apart from metrics.go's list: the janitor's report of held
// Machines (pkg/controllers/janitor, held.go).
var held = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "machine_api_provider_held_servers",
	Help: "Servers that held Machines record (their cluster label names a cluster this one does not own), by cloud, as last seen: no provider acts on them.",
}, []string{"cloud"})

func init() { metrics.Registry.MustRegister(held) }

// SetHeld sets how many servers held Machines record.
func SetHeld(cloudName string, n int) { held.WithLabelValues(cloudName).Set(float64(n)) }
