package localcluster

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// A Node marked for kwok becomes Ready, a Deployment's pod is scheduled on
// it and runs: the scheduler, the controller-manager and kwok all work.
func TestPodsRunOnKwokNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole control plane")
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(Options{BinDir: bin, Dir: t.TempDir()})
	t.Cleanup(func() {
		if c != nil {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(c.Config)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{KwokNodeAnnotation: "fake"}}}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	labels := map[string]string{"app": "x"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
		}},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 1 && pods.Items[0].Spec.NodeName == "node-1" && pods.Items[0].Status.Phase == corev1.PodRunning {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no pod Running on node-1: %v", pods)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
