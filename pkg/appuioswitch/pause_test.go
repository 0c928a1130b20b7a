package appuioswitch_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/appuioswitch"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

const (
	ns            = "openshift-machine-api"
	mhcPaused     = "cluster.x-k8s.io/paused"
	pausedBy      = "machine.appuio.io/paused-by"
	pausedCM      = "machine-api-provider-appuio-switch-paused"
	switchedSet   = "c1-worker-rma1"
	appuioSpecRaw = `{"zone":"rma1","flavor":"flex-16-4","image":"custom:rhcos-4.19","interfaces":[{"type":"Private","networkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a"}]}`
)

// operatorCRD is the MachineAutoscaler CRD of the cluster-autoscaler-operator
// the Makefile builds (its install manifests, as the CVO applies them).
func operatorCRD(t *testing.T) string {
	t.Helper()
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(bin, "cluster-autoscaler-operator-manifests", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), "kind: CustomResourceDefinition") && strings.Contains(string(b), "machineautoscalers.autoscaling.openshift.io") {
			return f
		}
	}
	t.Fatalf("no MachineAutoscaler CRD in %s/cluster-autoscaler-operator-manifests: run `make tools`", bin)
	return ""
}

type world struct {
	t    *testing.T
	ctx  context.Context
	kube client.Client
}

func startWorld(t *testing.T) *world {
	t.Helper()
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(operatorCRD(t), filepath.Join("..", "gitops", "testdata", "applications.argoproj.io.yaml")))
	scheme, err := appuioswitch.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: context.Background(), kube: kube}
	for _, name := range []string{ns, "syn"} {
		w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	// appuio's MachineSet (its spec format: no apiVersion, no kind).
	ms := &machinev1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: switchedSet, Namespace: ns, Labels: map[string]string{"argocd.argoproj.io/instance": "openshift4-nodes"}}}
	ms.Spec.Selector.MatchLabels = map[string]string{"set": "w"}
	ms.Spec.Template.Labels = map[string]string{"set": "w"}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(appuioSpecRaw)}
	w.create(ms)
	// Remediation, one MachineHealthCheck paused by someone already.
	for name, annotations := range map[string]map[string]string{"workers": nil, "paused-before": {mhcPaused: ""}} {
		mhc := &machinev1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}}
		mhc.Spec.Selector.MatchLabels = map[string]string{"set": "w"}
		w.create(mhc)
	}
	// Autoscaling: the switched MachineSet's, and another's.
	w.create(machineAutoscaler("workers", switchedSet, map[string]string{"team": "platform"}))
	w.create(machineAutoscaler("others", "aws-workers", nil))
	return w
}

func machineAutoscaler(name, target string, labels map[string]string) *unstructured.Unstructured {
	ma := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.openshift.io/v1beta1", "kind": "MachineAutoscaler",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"minReplicas": int64(1), "maxReplicas": int64(6),
			"scaleTargetRef": map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": target}},
	}}
	ma.SetLabels(labels)
	return ma
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.kube.Create(w.ctx, obj); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) switcher(out *bytes.Buffer) *appuioswitch.Switch {
	return appuioswitch.New(w.kube, cscloud.New(cscloud.Options{DefaultToken: "unused"}), appuioswitch.Options{Namespace: ns, Out: out})
}

func (w *world) mhc(name string) *machinev1.MachineHealthCheck {
	w.t.Helper()
	var m machinev1.MachineHealthCheck
	if err := w.kube.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
		w.t.Fatal(err)
	}
	return &m
}

func (w *world) machineAutoscaler(name string) (*unstructured.Unstructured, bool) {
	w.t.Helper()
	ma := &unstructured.Unstructured{}
	ma.SetAPIVersion("autoscaling.openshift.io/v1beta1")
	ma.SetKind("MachineAutoscaler")
	err := w.kube.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: name}, ma)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return ma, true
}

// assertRunning: the MachineHealthCheck the switch paused runs again, the
// one paused before is still paused, and the switched MachineSet's
// MachineAutoscaler is there as it was; the other's was never touched.
func (w *world) assertResumed(when string) {
	w.t.Helper()
	if m := w.mhc("workers"); m.Annotations[mhcPaused] != "" || m.Annotations[pausedBy] != "" {
		w.t.Errorf("%s: MachineHealthCheck workers still paused: %v", when, m.Annotations)
	}
	if m := w.mhc("paused-before"); m.Annotations[pausedBy] != "" || !hasKey(m.Annotations, mhcPaused) {
		w.t.Errorf("%s: MachineHealthCheck paused-before: %v, want paused as it was", when, m.Annotations)
	}
	ma, ok := w.machineAutoscaler("workers")
	if !ok {
		w.t.Fatalf("%s: MachineAutoscaler workers not there again", when)
	}
	max, _, _ := unstructured.NestedInt64(ma.Object, "spec", "maxReplicas")
	target, _, _ := unstructured.NestedString(ma.Object, "spec", "scaleTargetRef", "name")
	if max != 6 || target != switchedSet || ma.GetLabels()["team"] != "platform" {
		w.t.Errorf("%s: MachineAutoscaler workers is %v, want it as it was", when, ma.Object)
	}
	if _, ok := w.machineAutoscaler("others"); !ok {
		w.t.Errorf("%s: the other MachineSet's MachineAutoscaler is gone", when)
	}
	if err := w.kube.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: pausedCM}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		w.t.Errorf("%s: ConfigMap %s still there (%v)", when, pausedCM, err)
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// --prepare pauses what would mark Machines for deletion while no machine
// controller runs: the MachineHealthChecks (cluster.x-k8s.io/paused, which
// every known release's machine-healthcheck controller honours) and the
// switched MachineSets' MachineAutoscalers (saved, then deleted); the plan
// says so, and what Argo CD keeps of it with the commands to pause it.
// --apply resumes them once switched, and --rollback after a --prepare
// that went no further; what someone else paused stays paused, and other
// MachineSets' autoscaling is never touched.
func TestSwitchPausesAndResumesRemediationAndAutoscaling(t *testing.T) {
	for _, end := range []string{"apply", "rollback"} {
		t.Run(end, func(t *testing.T) {
			w := startWorld(t)
			var out bytes.Buffer
			sw := w.switcher(&out)
			if err := sw.Prepare(w.ctx); err != nil {
				t.Fatalf("prepare: %v\n%s", err, out.String())
			}
			text := out.String()
			for _, want := range []string{
				"pause: MachineHealthChecks: paused-before (paused (not by the switch: left so)), workers (runs)",
				"MachineAutoscalers of the switched MachineSets: workers (scales its MachineSet)",
				"gitops: Argo CD Application openshift4-nodes keeps MachineSet " + switchedSet + " (label argocd.argoproj.io/instance=openshift4-nodes)",
				"oc -n \"$NS\" annotate applications.argoproj.io openshift4-nodes argocd.argoproj.io/skip-reconcile=true",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("the plan lacks %q:\n%s", want, text)
				}
			}
			if m := w.mhc("workers"); !hasKey(m.Annotations, mhcPaused) || m.Annotations[pausedBy] != "switch-from-appuio" {
				t.Errorf("MachineHealthCheck workers not paused by the switch: %v", m.Annotations)
			}
			if m := w.mhc("paused-before"); m.Annotations[pausedBy] != "" {
				t.Errorf("MachineHealthCheck paused-before marked as the switch's: %v", m.Annotations)
			}
			if _, ok := w.machineAutoscaler("workers"); ok {
				t.Error("the switched MachineSet's MachineAutoscaler is still there")
			}
			var cm corev1.ConfigMap
			if err := w.kube.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: pausedCM}, &cm); err != nil || !strings.Contains(cm.Data["machineAutoscalers"], `"name":"workers"`) {
				t.Errorf("ConfigMap %s: %v, %v: want the MachineAutoscaler saved", pausedCM, cm.Data, err)
			}
			if _, ok := w.machineAutoscaler("others"); !ok {
				t.Error("another MachineSet's MachineAutoscaler was set aside")
			}

			out.Reset()
			var err error
			if end == "apply" {
				err = sw.Apply(w.ctx)
			} else {
				err = sw.Rollback(w.ctx)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", end, err, out.String())
			}
			w.assertResumed("after --" + end)
		})
	}
}

// A MachineAutoscaler that an Argo CD Application with automated sync
// keeps would be created again while set aside: --prepare refuses,
// changing nothing, until the Application is paused (the plan's command:
// argocd.argoproj.io/skip-reconcile), and then goes on.
func TestSwitchRefusesWhileGitOpsWouldUndoThePause(t *testing.T) {
	w := startWorld(t)
	ma, _ := w.machineAutoscaler("workers")
	ma.SetLabels(map[string]string{"app.kubernetes.io/instance": "autoscaling"})
	if err := w.kube.Update(w.ctx, ma); err != nil {
		t.Fatal(err)
	}
	app := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "autoscaling", "namespace": "syn"},
		"spec":     map[string]any{"project": "default", "syncPolicy": map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}}}}
	w.create(app)

	var out bytes.Buffer
	err := w.switcher(&out).Prepare(w.ctx)
	if err == nil || !strings.Contains(out.String(), "BLOCKER: MachineAutoscaler workers is kept in sync by Argo CD Application syn/autoscaling") {
		t.Fatalf("prepare: %v, want refused naming the Application:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "pause:  oc -n syn annotate applications.argoproj.io autoscaling argocd.argoproj.io/skip-reconcile=true") {
		t.Errorf("the plan does not say how to pause it:\n%s", out.String())
	}
	if _, ok := w.machineAutoscaler("workers"); !ok {
		t.Error("refused, the switch set the MachineAutoscaler aside all the same")
	}
	if m := w.mhc("workers"); hasKey(m.Annotations, mhcPaused) {
		t.Errorf("refused, the switch paused a MachineHealthCheck all the same: %v", m.Annotations)
	}

	app.SetAnnotations(map[string]string{"argocd.argoproj.io/skip-reconcile": "true"})
	if err := w.kube.Update(w.ctx, app); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := w.switcher(&out).Prepare(w.ctx); err != nil {
		t.Fatalf("prepare with the Application paused: %v\n%s", err, out.String())
	}
	if _, ok := w.machineAutoscaler("workers"); ok {
		t.Error("the MachineAutoscaler was not set aside")
	}
}
