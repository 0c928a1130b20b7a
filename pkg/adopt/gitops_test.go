package adopt

import (
	"bytes"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The plan says what Argo CD or Flux keeps beside what adopt writes — a
// MachineSet of Git's for the same nodes, the user data Secret — with the
// commands to pause each, and how to put adopt's MachineSets into Git.
func TestPlanSaysWhatGitOpsKeeps(t *testing.T) {
	e := startPlanEnv(t, "worker-1a2b")
	e.node("worker-1a2b")
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "worker-rma1", Namespace: testNamespace,
		Labels: map[string]string{"argocd.argoproj.io/instance": "openshift4-nodes"}}}
	ms.Spec.Selector.MatchLabels = map[string]string{"set": "git"}
	ms.Spec.Template.Labels = map[string]string{"set": "git"}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(`{"zone":"rma1","flavor":"plus-16-4","image":"custom:rhcos-4.19"}`)}
	e.must(e.kube.Create(e.ctx, ms))
	var s corev1.Secret
	e.must(e.kube.Get(e.ctx, client.ObjectKey{Namespace: testNamespace, Name: "worker-user-data"}, &s))
	s.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "cluster-config", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
	e.must(e.kube.Update(e.ctx, &s))

	a, err := e.adopter(Options{TakeOverClusterID: idModuleID})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Print(&out, false)
	text := out.String()
	for _, want := range []string{
		"gitops: Argo CD Application openshift4-nodes keeps MachineSet worker-rma1 (label argocd.argoproj.io/instance=openshift4-nodes)",
		`NS=$(oc get applications.argoproj.io -A --field-selector metadata.name=openshift4-nodes -o jsonpath='{.items[0].metadata.namespace}')`,
		"gitops: Flux Kustomization flux-system/cluster-config keeps Secret worker-user-data",
		"gitops: adopt's MachineSets (" + idInfraName + "-worker-rma1) are in no repository",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
}
