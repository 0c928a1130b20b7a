package deployer_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestStopSwitch: the two ways to stop the controllers stay stopped
// whatever the deployer reconciles meanwhile (a release's new images, a
// deleted Deployment), the condition Stopped says which, and each way
// starts them again as it was stopped.
func TestStopSwitch(t *testing.T) {
	cfg, _ := testenv.Start(t)

	t.Run("ConfigMap", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })

		e.must(e.c.Create(e.ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: deployer.StopConfigMap, Namespace: e.ns},
			Data:       map[string]string{deployer.StopReasonKey: "INC-1234: servers deleted"},
		}))
		e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 })
		e.waitConditionOf(deployer.ConditionStopped, metav1.ConditionTrue, deployer.ReasonStopSwitch, "INC-1234: servers deleted")
		// Stopped, the deployer goes on: a new release's images are
		// applied, still at 0 replicas.
		e.updateImages(maoImg2, proxyImg2)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return image(d, "machineset-controller") == maoImg2 })
		e.consistentlyReplicas(0, 2*time.Second)
		// A deleted Deployment comes back stopped.
		e.must(e.c.Delete(e.ctx, e.getDeployment()))
		e.waitDeployment(func(d *appsv1.Deployment) bool { return d.DeletionTimestamp == nil && *d.Spec.Replicas == 0 })
		// A scale up by hand is set back while the switch is on.
		e.scale(1)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 })

		// Started again.
		e.must(e.c.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.StopConfigMap, Namespace: e.ns}}))
		e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })
		e.waitConditionOf(deployer.ConditionStopped, metav1.ConditionFalse, deployer.ReasonRunning, "")
	})

	t.Run("ScaledToZero", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })

		// oc scale --replicas=0: it stays so, also when the deployer
		// applies a new release.
		e.scale(0)
		e.waitConditionOf(deployer.ConditionStopped, metav1.ConditionTrue, deployer.ReasonScaledToZero, e.name)
		e.updateImages(maoImg2, proxyImg2)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return image(d, "machineset-controller") == maoImg2 })
		e.consistentlyReplicas(0, 2*time.Second)

		// oc scale --replicas=1 starts them again; any other count is
		// set back to 1.
		e.scale(1)
		e.waitConditionOf(deployer.ConditionStopped, metav1.ConditionFalse, deployer.ReasonRunning, "")
		e.scale(3)
		e.waitDeployment(func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 1 })
	})
}

// scale sets the Deployment's replicas through its scale subresource, as
// `oc scale` does.
func (e *env) scale(n int32) {
	e.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.ns}}
	s := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	e.must(e.c.SubResource("scale").Update(e.ctx, d, client.WithSubResourceBody(s)))
}

func (e *env) updateImages(mao, proxy string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	e.must(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: deployer.ImagesConfigMap}, cm))
	cm.Data[deployer.ImagesKey] = imagesJSON(mao, proxy)
	e.must(e.c.Update(e.ctx, cm))
}

// consistentlyReplicas fails when the replicas are not n at any time
// within d.
func (e *env) consistentlyReplicas(n int32, d time.Duration) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got := e.getDeployment().Spec.Replicas; !ptr.Equal(got, ptr.To(n)) {
			e.t.Fatalf("replicas %v, want %d", ptr.Deref(got, -1), n)
		}
	}
}
