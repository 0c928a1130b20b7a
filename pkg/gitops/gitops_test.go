package gitops_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/gitops"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

func obj(labels, annotations map[string]string, owners ...metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "openshift-machine-api", Labels: labels, Annotations: annotations, OwnerReferences: owners}}
}

// Without reading the cluster, the marks that name a tool without doubt
// count; app.kubernetes.io/instance, which Helm, Kustomize and Commodore
// write too, does not.
func TestDetectUnambiguousMarks(t *testing.T) {
	var d gitops.Detector
	for name, tc := range map[string]struct {
		o                   *corev1.Secret
		tool, kind, ns, app string
	}{
		"tracking-id":                {obj(nil, map[string]string{gitops.ArgoTrackingID: "nodes:machine.openshift.io/MachineSet:openshift-machine-api/x"}), gitops.ArgoCD, "Application", "", "nodes"},
		"tracking-id, app namespace": {obj(nil, map[string]string{gitops.ArgoTrackingID: "syn_nodes:/Secret:openshift-machine-api/x"}), gitops.ArgoCD, "Application", "syn", "nodes"},
		"argocd instance label":      {obj(map[string]string{gitops.ArgoInstance: "nodes"}, nil), gitops.ArgoCD, "Application", "", "nodes"},
		"owner reference":            {obj(nil, nil, metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Name: "nodes", UID: "u"}), gitops.ArgoCD, "Application", "openshift-machine-api", "nodes"},
		"flux kustomization":         {obj(map[string]string{"kustomize.toolkit.fluxcd.io/name": "nodes", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}, nil), gitops.Flux, "Kustomization", "flux-system", "nodes"},
		"flux helm release":          {obj(map[string]string{"helm.toolkit.fluxcd.io/name": "mapi", "helm.toolkit.fluxcd.io/namespace": "flux-system"}, nil), gitops.Flux, "HelmRelease", "flux-system", "mapi"},
		"sync-options only":          {obj(nil, map[string]string{gitops.ArgoSyncOptions: "Prune=false"}), gitops.ArgoCD, "Application", "", ""},
	} {
		f := d.Detect("Secret", tc.o)
		if f == nil {
			t.Errorf("%s: not found", name)
			continue
		}
		if f.Owner.Tool != tc.tool || f.Owner.Kind != tc.kind || f.Owner.Namespace != tc.ns || f.Owner.Name != tc.app || f.Evidence == "" {
			t.Errorf("%s: %+v", name, f)
		}
	}
	for name, o := range map[string]*corev1.Secret{
		"nothing":                       obj(nil, nil),
		"app.kubernetes.io/instance":    obj(map[string]string{gitops.DefaultInstanceLabel: "machine-api-provider-cloudscale"}, nil),
		"another owner":                 obj(nil, nil, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "u"}),
		"an Application of another API": obj(nil, nil, metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Application", Name: "d", UID: "u"}),
	} {
		if f := d.Detect("Secret", o); f != nil {
			t.Errorf("%s: found %+v", name, f)
		}
	}
}

// Advise prints, per owner, the commands that pause and resume it: Argo CD
// with skip-reconcile (the namespace looked up where nothing says it), and
// its automated sync removed and put back as read before 2.7; Flux with
// spec.suspend.
func TestAdvise(t *testing.T) {
	findings := []gitops.Finding{
		{Object: "MachineSet a", Evidence: "label x", Owner: gitops.Owner{Tool: gitops.ArgoCD, Kind: "Application", Namespace: "syn", Name: "nodes", Read: true, AutoSync: true, SelfHeal: true, Automated: `{"prune":true,"selfHeal":true}`}},
		{Object: "MachineSet b", Evidence: "label x", Owner: gitops.Owner{Tool: gitops.ArgoCD, Kind: "Application", Namespace: "syn", Name: "nodes", Read: true, AutoSync: true, SelfHeal: true, Automated: `{"prune":true,"selfHeal":true}`}},
		{Object: "Secret s", Evidence: "label y", Owner: gitops.Owner{Tool: gitops.ArgoCD, Kind: "Application", Name: "other"}},
		{Object: "MachineSet c", Evidence: "labels", Owner: gitops.Owner{Tool: gitops.Flux, Kind: "Kustomization", Namespace: "flux-system", Name: "nodes"}},
		{Object: "MachineSet d", Evidence: "label z", Owner: gitops.Owner{Tool: gitops.ArgoCD, Kind: "Application", Namespace: "syn", Name: "manual", Read: true}},
	}
	advice := gitops.Advise(findings)
	if len(advice) != 4 {
		t.Fatalf("%d owners, want 4: %+v", len(advice), advice)
	}
	text := func(a gitops.Advice) string { return strings.Join(a.Lines(), "\n") }
	for i, want := range [][]string{
		{"MachineSet a (label x), MachineSet b (label x)", "self-heal",
			"pause:  oc -n syn annotate applications.argoproj.io nodes argocd.argoproj.io/skip-reconcile=true",
			"resume: oc -n syn annotate applications.argoproj.io nodes argocd.argoproj.io/skip-reconcile-",
			`oc -n syn patch applications.argoproj.io nodes --type=json -p '[{"op":"remove","path":"/spec/syncPolicy/automated"}]'`,
			`oc -n syn patch applications.argoproj.io nodes --type=merge -p '{"spec":{"syncPolicy":{"automated":{"prune":true,"selfHeal":true}}}}'`},
		{"was not read", `NS=$(oc get applications.argoproj.io -A --field-selector metadata.name=other -o jsonpath='{.items[0].metadata.namespace}')`,
			`oc -n "$NS" annotate applications.argoproj.io other argocd.argoproj.io/skip-reconcile=true`},
		{`pause:  oc -n flux-system patch kustomizations.kustomize.toolkit.fluxcd.io nodes --type=merge -p '{"spec":{"suspend":true}}'`,
			`resume: oc -n flux-system patch kustomizations.kustomize.toolkit.fluxcd.io nodes --type=merge -p '{"spec":{"suspend":false}}'`},
		{"no automated sync"},
	} {
		for _, w := range want {
			if !strings.Contains(text(advice[i]), w) {
				t.Errorf("advice %d lacks %q:\n%s", i, w, text(advice[i]))
			}
		}
	}
	if advice[3].Acts() || !advice[0].Acts() {
		t.Errorf("Acts: manual %v, automated %v", advice[3].Acts(), advice[0].Acts())
	}
}

// Read learns Argo CD from the cluster: app.kubernetes.io/instance counts
// where it names an Application (not elsewhere), the Application's sync
// policy says what it does, skip-reconcile that it is paused, and an
// Application kept by another names its parent. argocd-cm's tracking label
// counts without an Application, unless it tracks by annotation only.
func TestRead(t *testing.T) {
	cfg, _ := testenv.Start(t, testenv.WithCRDs(filepath.Join("testdata", "applications.argoproj.io.yaml")))
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// No Argo CD Application yet, no argocd-cm: the label is nobody's.
	if f := gitops.Read(ctx, c).Detect("Secret", obj(map[string]string{gitops.DefaultInstanceLabel: "nodes"}, nil)); f != nil {
		t.Errorf("app.kubernetes.io/instance without Argo CD: %+v", f)
	}
	for _, ns := range []string{"syn", "gitops"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	app := func(ns, name string, automated map[string]any, labels, annotations map[string]string) {
		a := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"project": "default"}}}
		a.SetLabels(labels)
		a.SetAnnotations(annotations)
		if automated != nil {
			a.Object["spec"].(map[string]any)["syncPolicy"] = map[string]any{"automated": automated}
		}
		if err := c.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	app("syn", "root", map[string]any{"prune": true, "selfHeal": true}, nil, nil)
	app("syn", "nodes", map[string]any{"prune": true, "selfHeal": true}, map[string]string{gitops.ArgoInstance: "root"}, nil)
	app("syn", "paused", map[string]any{"selfHeal": true}, nil, map[string]string{gitops.ArgoSkipReconcile: "true"})
	app("gitops", "manual", nil, nil, nil)
	app("gitops", "off", map[string]any{"enabled": false, "selfHeal": true}, nil, nil)
	d := gitops.Read(ctx, c)
	if d.Unread != "" {
		t.Fatalf("unread: %s", d.Unread)
	}
	f := d.Detect("MachineSet", obj(map[string]string{gitops.DefaultInstanceLabel: "nodes"}, nil))
	if f == nil {
		t.Fatal("app.kubernetes.io/instance naming an Application: not found")
	}
	o := f.Owner
	if !o.Read || o.Namespace != "syn" || !o.AutoSync || !o.SelfHeal || o.Skipped || o.Automated != `{"prune":true,"selfHeal":true}` || o.Parent == nil || o.Parent.Name != "root" {
		t.Errorf("owner %+v (parent %+v)", o, o.Parent)
	}
	for name, want := range map[string]func(gitops.Owner) bool{
		"paused": func(o gitops.Owner) bool { return o.Skipped && o.AutoSync },
		"manual": func(o gitops.Owner) bool { return o.Read && !o.AutoSync && o.Namespace == "gitops" },
		"off":    func(o gitops.Owner) bool { return o.Read && !o.AutoSync },
	} {
		f := d.Detect("Secret", obj(map[string]string{gitops.ArgoInstance: name}, nil))
		if f == nil || !want(f.Owner) {
			t.Errorf("%s: %+v", name, f)
		}
	}
	if f := d.Detect("Secret", obj(map[string]string{gitops.DefaultInstanceLabel: "no-such-app"}, nil)); f != nil {
		t.Errorf("app.kubernetes.io/instance naming no Application: %+v", f)
	}

	// argocd-cm says Argo CD tracks by a label of its own: that label
	// counts for an Application not (yet) read; tracking by annotation,
	// it does not.
	for ns, data := range map[string]map[string]string{
		"syn":    {"application.instanceLabelKey": "example.com/app"},
		"gitops": {"application.instanceLabelKey": "example.com/other", "application.resourceTrackingMethod": "annotation"},
	} {
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	d = gitops.Read(ctx, c)
	if f := d.Detect("Secret", obj(map[string]string{"example.com/app": "elsewhere"}, nil)); f == nil || f.Owner.Name != "elsewhere" || f.Owner.Read {
		t.Errorf("argocd-cm's tracking label: %+v", f)
	}
	if f := d.Detect("Secret", obj(map[string]string{"example.com/other": "elsewhere"}, nil)); f != nil {
		t.Errorf("the label of an argocd-cm that tracks by annotation: %+v", f)
	}
}
