package adopt_test

// What runs around appuio's provider on a fleet cluster and must not act
// while the switch has no machine controller running: a MachineHealthCheck
// on the workers, a MachineAutoscaler (the real cluster-autoscaler-
// operator's, demo.Options.Autoscaler) on the same MachineSet, and Argo
// CD, whose Application of the component keeps the component's Secrets
// (tracked by label and annotation, as Project Syn's Argo CD does with
// application.resourceTrackingMethod annotation+label).

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/appuio/machine-api-provider/pkg/appuioswitch"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/gitops"
)

const (
	// argoNamespace is Project Syn's Argo CD's namespace; its Applications
	// are named after the component instances.
	argoNamespace = "syn"
	// pausedMHC is the workers' MachineHealthCheck, autoscaledSet the
	// MachineSet the MachineAutoscaler scales, between autoscaledMin and
	// autoscaledMax: both made by fleetAutomation, and both act after the
	// switch (fleet_test.go).
	pausedMHC                    = "worker"
	autoscaledSet                = "worker"
	autoscaledMin, autoscaledMax = 2, 3
)

// argoTracking is the tracking annotation Argo CD writes on what the
// component's Application syncs (<app>:<group>/<kind>:<namespace>/<name>).
func argoTracking(kind, name string) map[string]string {
	return map[string]string{gitops.ArgoTrackingID: appuioswitch.ComponentInstance + ":/" + kind + ":" + demo.Namespace + "/" + name}
}

// withArgoCD installs Argo CD's Application kind, its settings and the
// component's Application, synced automatically with self-heal.
func withArgoCD(e *env) {
	e.t.Helper()
	if _, err := envtest.InstallCRDs(e.Cluster.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "pkg", "gitops", "testdata", "applications.argoproj.io.yaml")}, ErrorIfPathMissing: true}); err != nil {
		e.t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNamespace}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: argoNamespace},
			Data: map[string]string{"application.resourceTrackingMethod": "annotation+label"}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": appuioswitch.ComponentInstance, "namespace": argoNamespace},
			"spec": map[string]any{
				"project":     "syn",
				"destination": map[string]any{"server": "https://kubernetes.default.svc"},
				"source":      map[string]any{"repoURL": "ssh://git@git.example.com/syn/cluster-catalog.git", "path": "manifests/" + appuioswitch.ComponentInstance},
				"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
			},
		}},
	} {
		if err := e.Client.Create(e.ctx, obj); err != nil {
			e.t.Fatal(err)
		}
	}
}

// assertAutoscaled checks (awaited) that the MachineAutoscaler is there
// or not, and that its bounds are on the MachineSet, as the autoscaler
// reads them, or taken off.
func (e *env) assertAutoscaled(want bool) {
	e.t.Helper()
	e.eventually(2*time.Minute, fmt.Sprintf("MachineAutoscaler %s there and its bounds on the MachineSet: %v", autoscaledSet, want), func() (bool, string) {
		ma := &unstructured.Unstructured{}
		ma.SetGroupVersionKind(appuioswitch.MachineAutoscalerGVK)
		err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: autoscaledSet}, ma)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		var ms machinev1beta1.MachineSet
		if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: autoscaledSet}, &ms); err != nil {
			return false, err.Error()
		}
		minSize, hasMin := ms.Annotations[demo.MinSizeAnnotation]
		maxSize, hasMax := ms.Annotations[demo.MaxSizeAnnotation]
		there := err == nil && ma.GetDeletionTimestamp() == nil
		if want {
			return there && minSize == fmt.Sprint(autoscaledMin) && maxSize == fmt.Sprint(autoscaledMax), fmt.Sprintf("MachineAutoscaler there: %v, bounds %q..%q", there, minSize, maxSize)
		}
		return !there && !hasMin && !hasMax, fmt.Sprintf("MachineAutoscaler there: %v, bounds %q..%q", there, minSize, maxSize)
	})
}

// assertHealthCheckPaused checks that the workers' MachineHealthCheck
// carries the annotation its controller skips it for, and the switch's
// mark, or neither.
func (e *env) assertHealthCheckPaused(want bool) {
	e.t.Helper()
	var mhc machinev1beta1.MachineHealthCheck
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: pausedMHC}, &mhc); err != nil {
		e.t.Fatal(err)
	}
	_, paused := mhc.Annotations["cluster.x-k8s.io/paused"]
	by := mhc.Annotations[appuioswitch.PausedByAnnotation]
	if want && (!paused || by == "") || !want && (paused || by != "") {
		e.t.Errorf("MachineHealthCheck %s: annotations %v, want it paused by the switch: %v", pausedMHC, mhc.Annotations, want)
	}
}

// assertPauseDone checks that nothing is left paused: the MachineAutoscaler
// back with its bounds, the MachineHealthCheck running, the switch's record
// of what it paused gone.
func (e *env) assertPauseDone(when string) {
	e.t.Helper()
	e.assertAutoscaled(true)
	e.assertHealthCheckPaused(false)
	err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: appuioswitch.PausedConfigMap}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		e.t.Errorf("%s: ConfigMap %s: %v, want it gone", when, appuioswitch.PausedConfigMap, err)
	}
}

// assertPlanSaysGitOps checks that the plan names the component's
// Application as what keeps its Secrets, to be left running, and the
// pause: MachineHealthChecks and MachineAutoscalers.
func assertPlanSaysGitOps(e *env, plan string) {
	e.t.Helper()
	var argo, pause bool
	for _, l := range strings.Split(plan, "\n") {
		argo = argo || strings.HasPrefix(l, "gitops: ") && strings.Contains(l, appuioswitch.ComponentInstance) &&
			strings.Contains(l, "cloudscale-rw-token") && strings.Contains(l, "leave it running")
		pause = pause || strings.HasPrefix(l, "pause: ") && strings.Contains(l, pausedMHC+" (runs)") && strings.Contains(l, autoscaledSet+" (scales its MachineSet)")
	}
	if !argo || !pause {
		e.t.Errorf("the plan says what Argo CD keeps: %v, what the switch pauses: %v:\n%s", argo, pause, plan)
	}
}
