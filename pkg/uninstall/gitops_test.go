package uninstall_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/adopt"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/pkg/uninstall"
)

// The plan says which of what it releases Argo CD or Flux keeps in sync —
// and so would create again after the release: MachineSets that make new
// servers once a provider runs — with the commands that pause each owner;
// an Application it reads says whether it syncs by itself. What no tool
// keeps is not named.
func TestPlanSaysWhatGitOpsKeeps(t *testing.T) {
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(filepath.Join("..", "gitops", "testdata", "applications.argoproj.io.yaml")))
	scheme, err := adopt.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []string{"openshift-machine-api", "syn"} {
		create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	create(t, c, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "openshift4-nodes", "namespace": "syn"},
		"spec":     map[string]any{"project": "default", "syncPolicy": map[string]any{"automated": map[string]any{"selfHeal": true}}}}})
	for name, labels := range map[string]map[string]string{
		"c1-worker-rma1": {"app.kubernetes.io/instance": "openshift4-nodes"},
		"c1-infra-rma1":  {"kustomize.toolkit.fluxcd.io/name": "nodes", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"},
		"c1-plain-rma1":  nil,
	} {
		ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-machine-api", Name: name, Labels: labels}}
		ms.Spec.Selector.MatchLabels = map[string]string{"set": name}
		ms.Spec.Template.Labels = map[string]string{"set": name}
		ms.Spec.Template.Spec.ProviderSpec = spec("CloudscaleMachineProviderSpec")
		create(t, c, ms)
	}
	u, err := uninstall.New(c, uninstall.Options{Cloud: "cloudscale", Stopper: &stopped{}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := u.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Print(&out, false)
	text := out.String()
	for _, want := range []string{
		"gitops: Argo CD Application syn/openshift4-nodes keeps MachineSet c1-worker-rma1 (label app.kubernetes.io/instance=openshift4-nodes (Argo CD's tracking label)): automated sync, self-heal",
		"gitops:   pause:  oc -n syn annotate applications.argoproj.io openshift4-nodes argocd.argoproj.io/skip-reconcile=true",
		"gitops:   resume: oc -n syn annotate applications.argoproj.io openshift4-nodes argocd.argoproj.io/skip-reconcile-",
		"gitops: Flux Kustomization flux-system/nodes keeps MachineSet c1-infra-rma1",
		`gitops:   pause:  oc -n flux-system patch kustomizations.kustomize.toolkit.fluxcd.io nodes --type=merge -p '{"spec":{"suspend":true}}'`,
		"take the objects out of Git",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "c1-plain-rma1 (") {
		t.Errorf("the plan names a MachineSet no tool keeps:\n%s", text)
	}
}
