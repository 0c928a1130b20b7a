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
	rbacv1 "k8s.io/api/rbac/v1"
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
// webhook Service selects the pods of the webhook Deployment the overlay
// declares (and no other pods: not the deployer's, not those the deployer
// applies), targets the port they serve the webhooks on, and has the service
// CA issue the certificate into the secret those pods mount at their
// --cert-dir; the webhook configurations call that Service; the webhooks
// validate the cloud the deployer deploys for; the webhook pods run without
// a token and without RBAC.
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
	if len(clientServices) == 0 {
		t.Errorf("config/%s has no webhook that calls a Service", dir)
	}
	for _, s := range clientServices {
		if s["name"] != svc.Name || s["namespace"] != svc.Namespace || fmt.Sprint(s["port"]) != fmt.Sprint(svc.Spec.Ports[0].Port) {
			t.Errorf("a webhook calls %v, not the Service %s/%s:%d", s, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Fatal("the Service has no selector")
	}
	selects := func(labels map[string]string) bool {
		for k, v := range svc.Spec.Selector {
			if labels[k] != v {
				return false
			}
		}
		return true
	}

	u := deploymentIn(objs, WebhookDeployment)
	if u == nil {
		t.Fatalf("config/%s has no Deployment %s", dir, WebhookDeployment)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	if !selects(d.Spec.Template.Labels) {
		t.Errorf("the Service selects %v; the pods of %s have %v", svc.Spec.Selector, d.Name, d.Spec.Template.Labels)
	}
	// Neither the deployer's pods nor the controllers' it applies.
	controllers := deployer.Deployment(deployer.Spec{
		Namespace:      Namespace,
		Images:         deployer.Images{MachineAPIOperator: "mao:test", KubeRBACProxy: "krp:test"},
		ProviderImage:  "machine-api-provider:latest",
		TokenSecret:    "cloudscale-token",
		ServiceAccount: controllersSA(t, objs),
		Cloud:          deployerFlags(t, objs)["cloud"],
	})
	for _, other := range []map[string]string{controllers.Spec.Template.Labels, podLabels(t, objs, DeployerDeployment)} {
		if selects(other) {
			t.Errorf("the Service also selects pods labelled %v", other)
		}
	}

	hook := container(t, &d, "webhook")
	flags := flagsOf(t, objs, WebhookDeployment)
	target := svc.Spec.Ports[0].TargetPort
	if !slices.ContainsFunc(hook.Ports, func(p corev1.ContainerPort) bool {
		matches := (target.IntVal != 0 && p.ContainerPort == target.IntVal) || (target.StrVal != "" && p.Name == target.StrVal)
		return matches && fmt.Sprint(p.ContainerPort) == flags["port"]
	}) {
		t.Errorf("the Service targets port %s; the webhook container has %v and serves on --port=%s", target.String(), hook.Ports, flags["port"])
	}
	secret := svc.Annotations["service.beta.openshift.io/serving-cert-secret-name"]
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == secret && slices.ContainsFunc(hook.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == v.Name && m.MountPath == flags["cert-dir"]
		})
	}) {
		t.Errorf("the service CA writes the certificate into secret %q, which the webhook container does not mount at --cert-dir=%s", secret, flags["cert-dir"])
	}
	if cloud, want := flags["cloud"], cloudOf(t, objs); cloud != want {
		t.Errorf("the webhooks validate --cloud=%s, the deployer deploys for %s", cloud, want)
	}

	// The one thing the webhooks read: the Infrastructure named cluster,
	// for the cluster's identity (pkg/webhooks, identity.go); no write, no
	// other object.
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" || sa == "default" {
		t.Errorf("the webhook pods run as service account %q, want their own", sa)
	}
	if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a != nil && !*a {
		t.Error("the webhook pods mount no service account token: they cannot read the cluster's identity")
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"config.openshift.io"}, Resources: []string{"infrastructures"}, ResourceNames: []string{"cluster"}, Verbs: []string{"get"}}}
	if rules := rbacOf(t, objs).rulesOf(sa); len(rules) != 1 || !reflect.DeepEqual(rules[""], want) {
		t.Errorf("service account %s has RBAC %v, want only %v", sa, rules, want)
	}
	if _, ok := flags["cluster-id"]; ok {
		t.Errorf("the webhooks are given --cluster-id %q: they read it from the cluster", flags["cluster-id"])
	}
}

// podLabels returns the pod template labels of Deployment name in objs.
func podLabels(t *testing.T, objs []*unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	u := deploymentIn(objs, name)
	if u == nil {
		t.Fatalf("no Deployment %s", name)
	}
	labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	return labels
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}
