package testenv_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// defaultKubeVersion is what `make tools` builds; the Makefile passes its
// KUBE_VERSION pin to the tests.
const defaultKubeVersion = "v1.34.4"

func TestStart(t *testing.T) {
	want := os.Getenv("KUBE_VERSION")
	if want == "" {
		want = defaultKubeVersion
	}

	cfg, c := testenv.Start(t)

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatalf("discovery client: %v", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if info.GitVersion != want {
		t.Fatalf("kube-apiserver reports %q, want %q: envtest is not using the binaries from `make tools`", info.GitVersion, want)
	}

	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Data:       map[string]string{"hello": "world"},
	}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("get ConfigMap: %v", err)
	}
	if got.Data["hello"] != "world" {
		t.Fatalf("ConfigMap data = %v, want hello=world", got.Data)
	}
}
