package deployer

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/gitops"
)

// stopNotes is what the Stopped condition of the stop switch adds: what
// goes on changing the cluster while the controllers are stopped (the
// cluster autoscaler, a GitOps tool syncing MachineSets), and a stop
// ConfigMap or controllers' Deployment a GitOps tool keeps in sync, which
// `oc delete` or `oc scale` alone does not change for long. The deployer
// reads no Application (it has no permission to): only the marks that
// name Argo CD or Flux without doubt count (gitops.Detector's zero value).
func stopNotes(cm *corev1.ConfigMap, controllers *appsv1.Deployment) string {
	var d gitops.Detector
	var found []gitops.Finding
	if f := d.Detect("ConfigMap", cm); f != nil {
		found = append(found, *f)
	}
	if controllers != nil {
		if f := d.Detect("Deployment", controllers); f != nil {
			found = append(found, *f)
		}
	}
	notes := []string{"the cluster autoscaler and GitOps tools (Argo CD, Flux) still change MachineSets' replicas meanwhile: pause them (docs/runbooks/stop-and-start.md)"}
	for _, a := range gitops.Advise(found) {
		how := strings.Join(a.Pause, "; ")
		if how == "" {
			how = a.State
		}
		notes = append(notes, fmt.Sprintf("%s keeps %s in sync: stop and start through it, or pause it (%s)",
			a.Owner, strings.Join(a.Objects, ", "), how))
	}
	return "; " + strings.Join(notes, "; ")
}
