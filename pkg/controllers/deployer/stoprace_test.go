package deployer_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestScaleRacesTheDeployer: `oc scale` at random moments of the deployer's
// reconciles, many times, against a real API server. A scale to 0 always
// stays 0, and a scale back to 1 always stays 1: the deployer's writes to
// its Deployment are conditional on the Deployment it read (its
// resourceVersion), so a reconcile that read it before the scale never
// writes after it.
//
// Each round starts a burst of reconciles (new images: one reconcile, and
// another for the Deployment it changes), scales at a random moment of it,
// and then changes the images once more: that marker reaches the
// Deployment only through a reconcile that began after the scale, and the
// deployer's reconciles run one at a time, so every reconcile that may
// have read the Deployment before the scale is over by then. Only then is
// the count looked at: bounded, no sleep before an assertion.
func TestScaleRacesTheDeployer(t *testing.T) {
	cfg, _ := testenv.Start(t)
	e := start(t, cfg)
	e.createImages(maoImg1, proxyImg1)
	e.waitDeployment(func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, -1) == 1 })

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	marker := 0
	settle := func(round int, what string, want int32, at time.Duration) {
		t.Helper()
		marker++
		img := fmt.Sprintf("%s-marker-%d", maoImg1, marker)
		e.updateImages(img, proxyImg1)
		d := e.waitDeployment(func(d *appsv1.Deployment) bool { return image(d, "machineset-controller") == img })
		if got := ptr.Deref(d.Spec.Replicas, -1); got != want {
			t.Fatalf("round %d: replicas %d after %s at +%s of the deployer's reconciles, want %d", round, got, what, at, want)
		}
	}
	const rounds = 30
	for round := range rounds {
		for _, want := range []int32{0, 1} {
			// a burst of reconciles, and the scale at a random moment
			// of it
			e.updateImages(fmt.Sprintf("%s-burst-%d-%d", maoImg2, round, want), proxyImg2)
			at := time.Duration(rng.Int64N(int64(40 * time.Millisecond)))
			time.Sleep(at)
			e.scale(want)
			settle(round, fmt.Sprintf("oc scale --replicas=%d", want), want, at)
		}
	}
	// The ConfigMap switch wins over a scale up, as before.
	e.scale(0)
	e.must(e.c.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.StopConfigMap, Namespace: e.ns}}))
	e.scale(1)
	settle(rounds, "the stop switch and a scale to 1", 0, 0)
}
