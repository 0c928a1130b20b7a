package deployer

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// conditions exports the deployer's conditions, which live in a ConfigMap
// that no alert can read: 1 while True, 0 while False, with the reason.
// The label controller is the deployer's name, as in controller-runtime's
// own metrics (machine-api-provider-deployer); an alert on the controllers
// not being deployed reads condition="Deployed".
var conditions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "machine_api_provider_deployer_condition",
	Help: "The deployer's conditions (Deployed, ReleaseKnown, ManagerConfigValid, Stopped): 1 when True, 0 when False, by controller, condition and reason.",
}, []string{"controller", "condition", "reason"})

func init() {
	metrics.Registry.MustRegister(conditions)
}

// exportConditions sets the gauge to conds, one series per condition: the
// series of a reason no longer current goes.
func (r *Reconciler) exportConditions(conds []metav1.Condition) {
	for _, c := range conds {
		conditions.DeletePartialMatch(prometheus.Labels{"controller": r.opts.Name, "condition": c.Type})
		v := 0.0
		if c.Status == metav1.ConditionTrue {
			v = 1
		}
		conditions.WithLabelValues(r.opts.Name, c.Type, c.Reason).Set(v)
	}
}
