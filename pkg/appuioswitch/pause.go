package appuioswitch

// What the switch pauses. From the removal of appuio's component until
// --apply is done no machine controller runs, but appuio-machine-api-
// controllers (the machineset, nodelink and machine-healthcheck
// controllers) and the cluster autoscaler run on until --apply deletes the
// former: a MachineHealthCheck's remediation or a scale-down would mark a
// Machine for deletion, and the first machine controller to run again
// (this provider's) would drain and delete it at once. So --prepare (and
// --apply, when nothing is paused yet) pauses, before anything else:
//
//   - every MachineHealthCheck of the namespace, with the annotation the
//     cluster's release's machine-healthcheck controller skips one for
//     (deployer.Release.MHCPausedAnnotation: cluster.x-k8s.io/paused in
//     every known release), and PausedByAnnotation, so that only what the
//     switch paused is resumed;
//   - the MachineAutoscalers of the switched MachineSets: saved in
//     PausedConfigMap, then deleted, and awaited until gone: the
//     cluster-autoscaler-operator's finalizer takes their bounds off the
//     MachineSets, and the autoscaler no longer scales them (the
//     ClusterAutoscaler stays; node groups of other MachineSets go on).
//
// --apply, once switched, and --rollback resume both: the MachineAutoscalers
// created again as saved, the annotations taken off, PausedConfigMap
// deleted. A GitOps tool that would create a set-aside MachineAutoscaler
// again is a blocker until it is paused (gitops.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

const (
	// PausedConfigMap holds what the switch paused: the MachineAutoscalers
	// it set aside, and the annotation it paused MachineHealthChecks with.
	PausedConfigMap = "machine-api-provider-appuio-switch-paused"
	// PausedByAnnotation marks a MachineHealthCheck the switch paused.
	PausedByAnnotation = "machine.appuio.io/paused-by"
	pausedBy           = "switch-from-appuio"
	autoscalersKey     = "machineAutoscalers"
	healthCheckKey     = "healthCheckAnnotation"
)

// MachineAutoscalerGVK is the cluster-autoscaler-operator's
// MachineAutoscaler.
var MachineAutoscalerGVK = schema.GroupVersionKind{Group: "autoscaling.openshift.io", Version: "v1beta1", Kind: "MachineAutoscaler"}

// Pause is what the switch pauses, as it is now.
type Pause struct {
	// Autoscalers are the MachineAutoscalers of the switched MachineSets
	// that are there (to be set aside).
	Autoscalers []*unstructured.Unstructured
	// Saved are the MachineAutoscalers set aside, as saved.
	Saved []SavedObject
	// HealthChecks are the MachineHealthChecks of the namespace.
	HealthChecks []machinev1.MachineHealthCheck
	// Annotation pauses a MachineHealthCheck on the cluster's release, ""
	// where none is known; Release is that release.
	Annotation, Release string
}

// SavedObject is a set-aside object as the switch creates it again.
type SavedObject struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        map[string]any    `json:"spec"`
}

// pausedBySwitch says whether the switch paused a MachineHealthCheck.
func pausedBySwitch(m *machinev1.MachineHealthCheck) bool {
	return m.Annotations[PausedByAnnotation] == pausedBy
}

// surveyPause reads what the switch pauses; a MachineHealthCheck the
// cluster's release gives no way to pause is a blocker.
func (w *Switch) surveyPause(ctx context.Context, s *Survey) error {
	p := &Pause{}
	s.Pause = p
	var cv configv1.ClusterVersion
	var rel deployer.Release
	var fit deployer.Fit
	if err := w.kube.Get(ctx, client.ObjectKey{Name: deployer.ClusterVersionName}, &cv); err == nil {
		rel, fit = deployer.ReleaseOf(&cv)
	} else {
		rel, fit = deployer.ReleaseOf(nil)
	}
	p.Release = rel.String()
	if fit != deployer.FitOlder {
		p.Annotation = rel.MHCPausedAnnotation()
	}
	var mhcs machinev1.MachineHealthCheckList
	if err := w.kube.List(ctx, &mhcs, client.InNamespace(w.o.Namespace)); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing MachineHealthChecks: %w", err)
	}
	p.HealthChecks = mhcs.Items
	if len(p.HealthChecks) > 0 && p.Annotation == "" {
		s.Blockers = append(s.Blockers, fmt.Sprintf("the cluster's release is older than %s: no way to pause its MachineHealthChecks is known; delete them (oc -n %s get mhc -o yaml > mhc.yaml; oc -n %s delete mhc --all) and create them again after --apply",
			deployer.Releases[0], w.o.Namespace, w.o.Namespace))
	}
	sets := map[string]bool{}
	for _, ms := range s.MachineSets {
		sets[ms.Name] = true
	}
	var mas unstructured.UnstructuredList
	mas.SetGroupVersionKind(MachineAutoscalerGVK.GroupVersion().WithKind("MachineAutoscalerList"))
	if err := w.kube.List(ctx, &mas, client.InNamespace(w.o.Namespace)); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing MachineAutoscalers: %w", err)
	}
	for i := range mas.Items {
		ma := &mas.Items[i]
		kind, _, _ := unstructured.NestedString(ma.Object, "spec", "scaleTargetRef", "kind")
		name, _, _ := unstructured.NestedString(ma.Object, "spec", "scaleTargetRef", "name")
		if kind == "MachineSet" && sets[name] {
			p.Autoscalers = append(p.Autoscalers, ma)
		}
	}
	saved, _, err := w.readPaused(ctx)
	if err != nil {
		return err
	}
	p.Saved = saved
	return nil
}

// readPaused reads PausedConfigMap: the set-aside MachineAutoscalers and
// the annotation MachineHealthChecks were paused with ("" for none).
func (w *Switch) readPaused(ctx context.Context) ([]SavedObject, string, error) {
	var cm corev1.ConfigMap
	err := w.kube.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: PausedConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading ConfigMap %s: %w", PausedConfigMap, err)
	}
	var saved []SavedObject
	if v := cm.Data[autoscalersKey]; v != "" {
		if err := json.Unmarshal([]byte(v), &saved); err != nil {
			return nil, "", fmt.Errorf("ConfigMap %s: key %s: %w", PausedConfigMap, autoscalersKey, err)
		}
	}
	return saved, cm.Data[healthCheckKey], nil
}

func (w *Switch) printPause(s *Survey) {
	p := s.Pause
	if p == nil {
		return
	}
	var mhc []string
	for _, m := range p.HealthChecks {
		state := "runs"
		switch {
		case pausedBySwitch(&m):
			state = "paused by the switch"
		case p.Annotation != "" && hasKey(m.Annotations, p.Annotation):
			state = "paused (not by the switch: left so)"
		}
		mhc = append(mhc, m.Name+" ("+state+")")
	}
	var mas []string
	for _, ma := range p.Autoscalers {
		mas = append(mas, ma.GetName()+" (scales its MachineSet)")
	}
	for _, sv := range p.Saved {
		mas = append(mas, sv.Name+" (set aside by the switch)")
	}
	w.printf("pause: MachineHealthChecks: %s; MachineAutoscalers of the switched MachineSets: %s (--prepare pauses them, with %s on the MachineHealthChecks on release %s; --apply and --rollback resume them)",
		orNone(strings.Join(mhc, ", ")), orNone(strings.Join(mas, ", ")), orNone(p.Annotation), p.Release)
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// pause pauses the MachineHealthChecks and sets the MachineAutoscalers of
// the switched MachineSets aside, saved first (see the top of this file).
func (w *Switch) pause(ctx context.Context, s *Survey) error {
	p := s.Pause
	if p == nil {
		return nil
	}
	if len(p.HealthChecks) > 0 {
		if err := w.savePaused(ctx, nil, p.Annotation); err != nil {
			return err
		}
	}
	for i := range p.HealthChecks {
		m := &p.HealthChecks[i]
		if hasKey(m.Annotations, p.Annotation) {
			continue
		}
		base := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[p.Annotation] = "true"
		m.Annotations[PausedByAnnotation] = pausedBy
		if err := w.kube.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("pausing MachineHealthCheck %s: %w", m.Name, err)
		}
		w.printf("paused MachineHealthCheck %s (%s)", m.Name, p.Annotation)
	}
	if len(p.Autoscalers) == 0 {
		return nil
	}
	var add []SavedObject
	for _, ma := range p.Autoscalers {
		spec, _, _ := unstructured.NestedMap(ma.Object, "spec")
		add = append(add, SavedObject{Name: ma.GetName(), Labels: ma.GetLabels(), Annotations: ma.GetAnnotations(), Spec: spec})
	}
	if err := w.savePaused(ctx, add, ""); err != nil {
		return err
	}
	for _, ma := range p.Autoscalers {
		if err := w.kube.Delete(ctx, ma); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("setting MachineAutoscaler %s aside: %w", ma.GetName(), err)
		}
		name := ma.GetName()
		err := w.await(ctx, "MachineAutoscaler "+name+" to be gone (the cluster-autoscaler-operator's finalizer takes its bounds off the MachineSet)", func() (bool, error) {
			err := w.kube.Get(ctx, client.ObjectKeyFromObject(ma), ma.DeepCopy())
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return err
		}
		w.printf("set MachineAutoscaler %s aside (saved in ConfigMap %s): the autoscaler no longer scales its MachineSet", name, PausedConfigMap)
	}
	return nil
}

// savePaused adds set-aside objects (replacing those of the same name) and
// the annotation MachineHealthChecks are paused with to PausedConfigMap.
func (w *Switch) savePaused(ctx context.Context, add []SavedObject, annotation string) error {
	saved, _, err := w.readPaused(ctx)
	if err != nil {
		return err
	}
	byName := map[string]SavedObject{}
	for _, sv := range append(saved, add...) {
		byName[sv.Name] = sv
	}
	var all []SavedObject
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		all = append(all, byName[name])
	}
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PausedConfigMap, Namespace: w.o.Namespace}}
	return w.createOrUpdate(ctx, cm, func() {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if len(all) > 0 {
			cm.Data[autoscalersKey] = string(b)
		}
		if annotation != "" {
			cm.Data[healthCheckKey] = annotation
		}
	})
}

// resume undoes pause: the set-aside MachineAutoscalers created again, the
// MachineHealthChecks the switch paused resumed, PausedConfigMap deleted.
// What is resumed already is left; an error leaves PausedConfigMap, so that
// the next run resumes the rest.
func (w *Switch) resume(ctx context.Context) error {
	saved, annotation, err := w.readPaused(ctx)
	if err != nil {
		return err
	}
	for _, sv := range saved {
		ma := &unstructured.Unstructured{}
		ma.SetGroupVersionKind(MachineAutoscalerGVK)
		ma.SetNamespace(w.o.Namespace)
		ma.SetName(sv.Name)
		ma.SetLabels(sv.Labels)
		ma.SetAnnotations(sv.Annotations)
		if err := unstructured.SetNestedMap(ma.Object, sv.Spec, "spec"); err != nil {
			return err
		}
		err := w.kube.Create(ctx, ma)
		switch {
		case apierrors.IsAlreadyExists(err):
			continue
		case err != nil:
			return fmt.Errorf("creating MachineAutoscaler %s again: %w", sv.Name, err)
		}
		w.printf("created MachineAutoscaler %s again: the autoscaler scales its MachineSet", sv.Name)
	}
	var mhcs machinev1.MachineHealthCheckList
	if err := w.kube.List(ctx, &mhcs, client.InNamespace(w.o.Namespace)); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing MachineHealthChecks: %w", err)
	}
	for i := range mhcs.Items {
		m := &mhcs.Items[i]
		if !pausedBySwitch(m) {
			continue
		}
		base := m.DeepCopy()
		delete(m.Annotations, PausedByAnnotation)
		if annotation != "" {
			delete(m.Annotations, annotation)
		}
		if err := w.kube.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("resuming MachineHealthCheck %s: %w", m.Name, err)
		}
		w.printf("resumed MachineHealthCheck %s", m.Name)
	}
	err = w.kube.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PausedConfigMap, Namespace: w.o.Namespace}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ConfigMap %s: %w", PausedConfigMap, err)
	}
	return nil
}
