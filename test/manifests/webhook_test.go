package manifests_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// TestWebhookManifestsMatchDocs: config/webhook's webhook configurations
// are docs/webhook.md's (which pkg/webhooks tests against the webhooks).
func TestWebhookManifestsMatchDocs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "webhook.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]any{}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		for doc := range strings.SplitSeq(block[1], "\n---\n") {
			var u map[string]any
			if err := yaml.Unmarshal([]byte(doc), &u); err != nil {
				t.Fatalf("docs/webhook.md: %v", err)
			}
			if k, _ := u["kind"].(string); strings.HasSuffix(k, "WebhookConfiguration") {
				docs[k] = u
			}
		}
	}
	if len(docs) != 2 {
		t.Fatalf("docs/webhook.md: %d webhook configurations, want 2", len(docs))
	}
	found := 0
	for _, u := range render(t, "overlays/cloudscale") {
		want, ok := docs[u.GetKind()]
		if !ok {
			continue
		}
		found++
		if !reflect.DeepEqual(u.Object["webhooks"], want["webhooks"]) {
			t.Errorf("config/webhook: %s's webhooks differ from docs/webhook.md's: copy them over", u.GetKind())
		}
		wantMeta := want["metadata"].(map[string]any)
		if u.GetName() != wantMeta["name"] {
			t.Errorf("%s named %q, docs/webhook.md %q", u.GetKind(), u.GetName(), wantMeta["name"])
		}
		for k, v := range wantMeta["annotations"].(map[string]any) {
			if u.GetAnnotations()[k] != v {
				t.Errorf("%s: annotation %s=%q, docs/webhook.md %q", u.GetKind(), k, u.GetAnnotations()[k], v)
			}
		}
	}
	if found != 2 {
		t.Errorf("config/overlays/cloudscale renders %d webhook configurations, want 2", found)
	}
}

// TestWebhookServiceMatchesDeployment: in each OpenShift overlay, the
// webhook Service selects the pods of the Deployment the overlay's deployer
// applies (named after its --cloud), targets the port the manager serves
// the webhooks on, and has the service CA issue the certificate into the
// secret those pods mount; the webhook configurations call that Service.
func TestWebhookServiceMatchesDeployment(t *testing.T) {
	for _, k := range kustomizations {
		if k == "default" {
			continue // no webhooks on a plain cluster
		}
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) { webhookServiceMatchesDeployment(t, k) })
	}
}

func webhookServiceMatchesDeployment(t *testing.T, dir string) {
	objs := render(t, dir)
	d := deployer.Deployment(deployer.Spec{
		Namespace:      Namespace,
		Images:         deployer.Images{MachineAPIOperator: "mao:test", KubeRBACProxy: "krp:test"},
		ProviderImage:  "machine-api-provider:latest",
		TokenSecret:    "cloudscale-token",
		ServiceAccount: controllersSA(t, objs),
		Cloud:          deployerFlags(t, objs)["cloud"],
	})
	var svc corev1.Service
	var clientServices []map[string]any
	for _, u := range objs {
		switch {
		case u.GetKind() == "Service" && u.GetName() == "machine-api-provider-webhook":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(u.GetKind(), "WebhookConfiguration"):
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				s, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
				clientServices = append(clientServices, s)
			}
		}
	}
	if svc.Name == "" {
		t.Fatalf("config/%s has no Service machine-api-provider-webhook", dir)
	}
	for _, s := range clientServices {
		if s["name"] != svc.Name || s["namespace"] != svc.Namespace || fmt.Sprint(s["port"]) != fmt.Sprint(svc.Spec.Ports[0].Port) {
			t.Errorf("a webhook calls %v, not the Service %s/%s:%d", s, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
		}
	}

	labels := d.Spec.Template.Labels
	if len(svc.Spec.Selector) == 0 {
		t.Error("the Service has no selector")
	}
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service selects %s=%s; the pods of the deployer's %s have %v", k, v, d.Name, labels)
		}
	}
	machine := container(t, d, deployer.MachineContainer)
	target := svc.Spec.Ports[0].TargetPort
	if !slices.ContainsFunc(machine.Ports, func(p corev1.ContainerPort) bool {
		return (target.IntVal != 0 && p.ContainerPort == target.IntVal) || (target.StrVal != "" && p.Name == target.StrVal)
	}) {
		t.Errorf("the Service targets port %s; the machine-controller container has %v", target.String(), machine.Ports)
	}
	secret := svc.Annotations["service.beta.openshift.io/serving-cert-secret-name"]
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == secret && slices.ContainsFunc(machine.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
	}) {
		t.Errorf("the service CA writes the certificate into secret %q, which the machine-controller container does not mount", secret)
	}
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the deployer's Deployment has no container %s", name)
	return corev1.Container{}
}
