package deployer_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// While the stop switch is on, the condition Stopped says what goes on
// changing MachineSets (the cluster autoscaler, GitOps) and where to pause
// it, and names the Argo CD Application that keeps the stop ConfigMap in
// sync (deleting it alone would not start the controllers for long).
func TestStopSwitchSaysWhatStillActs(t *testing.T) {
	cfg, _ := testenv.Start(t)
	e := start(t, cfg)
	e.createImages(maoImg1, proxyImg1)
	e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })
	e.must(e.c.Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.StopConfigMap, Namespace: e.ns,
			Annotations: map[string]string{"argocd.argoproj.io/tracking-id": "cluster-ops:/ConfigMap:" + e.ns + "/" + deployer.StopConfigMap}},
		Data: map[string]string{deployer.StopReasonKey: "INC-7"},
	}))
	e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 })
	c := e.waitConditionOf(deployer.ConditionStopped, metav1.ConditionTrue, deployer.ReasonStopSwitch, "the cluster autoscaler and GitOps tools (Argo CD, Flux) still change MachineSets' replicas meanwhile: pause them (docs/runbooks/stop-and-start.md)")
	for _, want := range []string{"INC-7", "Argo CD Application cluster-ops keeps ConfigMap " + deployer.StopConfigMap, "argocd.argoproj.io/skip-reconcile=true"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q lacks %q", c.Message, want)
		}
	}
}
