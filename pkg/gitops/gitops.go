// Package gitops tells which of the objects a journey touches (switch,
// adopt, uninstall, the stop switch) a GitOps tool keeps in sync — Argo CD
// or Flux — and says what to pause before the journey, and how to resume
// after it: a tool that syncs an object the journey changes or deletes
// puts it back (a MachineAutoscaler the switch set aside, a MachineSet
// uninstall released), or deletes what the journey relies on (the Secrets
// of a component that is removed).
//
// What marks an object as kept in sync, as the tools write it:
//
//   - Argo CD (argo-cd docs, user-guide/resource_tracking.md and
//     annotations-and-labels.md): the annotation
//     argocd.argoproj.io/tracking-id ("<app>:<group>/<kind>:<ns>/<name>",
//     the default tracking since 3.0); the label of its
//     application.instanceLabelKey (argocd-cm), app.kubernetes.io/instance
//     by default and argocd.argoproj.io/instance as commonly set — the
//     former only where it is Argo CD's (an Application of that name
//     exists, or argocd-cm says it tracks by that label), as Helm, Kustomize
//     and Commodore write it too; the annotation
//     argocd.argoproj.io/sync-options; an owner reference to an
//     Application.
//   - Flux (fluxcd docs, kustomize-controller and helm-controller): the
//     labels kustomize.toolkit.fluxcd.io/name and /namespace (a
//     Kustomization), helm.toolkit.fluxcd.io/name and /namespace (a
//     HelmRelease).
//
// Nothing here writes: it reads labels, annotations and owner references,
// Argo CD's Applications and argocd-cm where the caller may read them, and
// says what to run.
package gitops

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tools.
const (
	ArgoCD = "Argo CD"
	Flux   = "Flux"
)

// Labels and annotations of the tools.
const (
	ArgoTrackingID    = "argocd.argoproj.io/tracking-id"
	ArgoInstance      = "argocd.argoproj.io/instance"
	ArgoSyncOptions   = "argocd.argoproj.io/sync-options"
	ArgoSkipReconcile = "argocd.argoproj.io/skip-reconcile"
	// DefaultInstanceLabel is Argo CD's default
	// application.instanceLabelKey, and everyone else's label too.
	DefaultInstanceLabel = "app.kubernetes.io/instance"
	fluxKustomize        = "kustomize.toolkit.fluxcd.io/"
	fluxHelm             = "helm.toolkit.fluxcd.io/"
)

// Owner is what keeps an object in sync: an Argo CD Application, a Flux
// Kustomization or HelmRelease.
type Owner struct {
	Tool string
	// Kind is "Application", "Kustomization" or "HelmRelease".
	Kind string
	// Namespace is "" where nothing says it (an Argo CD tracking label or
	// annotation names the Application only); Name is "" where only
	// argocd.argoproj.io/sync-options says Argo CD syncs the object.
	Namespace, Name string
	// Read: the Application was read, and AutoSync (its
	// spec.syncPolicy.automated is set), SelfHeal (it undoes changes made
	// in the cluster), Skipped (annotated skip-reconcile: paused) and
	// Automated (spec.syncPolicy.automated as JSON, to restore it) say
	// what it does.
	Read, AutoSync, SelfHeal, Skipped bool
	Automated                         string
	// Parent keeps the Application itself in sync (an app of apps): it
	// would put back a sync policy changed by hand.
	Parent *Owner
}

// String names the owner: `Argo CD Application syn/machine-api-provider`.
func (o Owner) String() string {
	name := o.Name
	if o.Namespace != "" {
		name = o.Namespace + "/" + name
	}
	if name == "" {
		return o.Tool + " (an " + o.Kind + " that nothing names)"
	}
	return o.Tool + " " + o.Kind + " " + name
}

// key groups findings by owner.
func (o Owner) key() string { return o.Tool + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name }

// Finding is an object a GitOps tool keeps in sync.
type Finding struct {
	// Object names it as the plan does: "MachineSet c1-worker-rma1".
	Object string
	Owner  Owner
	// Evidence is the label, annotation or owner reference that says so.
	Evidence string
	// SyncOptions is its argocd.argoproj.io/sync-options.
	SyncOptions string
}

// Detector finds the GitOps owners of objects. The zero value reads no
// Application: it counts app.kubernetes.io/instance as no evidence.
type Detector struct {
	// instanceLabels are the labels that are Argo CD's tracking label
	// (argocd-cm's application.instanceLabelKey, where it says Argo CD
	// tracks by label).
	instanceLabels map[string]bool
	// apps are Argo CD's Applications, by name.
	apps map[string][]Owner
	// Unread says why Applications could not be read ("" when they were
	// or Argo CD is not installed).
	Unread string
}

// Detect returns the finding of an object, nil when no GitOps tool keeps
// it in sync. kind names the object in the finding.
func (d *Detector) Detect(kind string, obj metav1.Object) *Finding {
	f := &Finding{Object: kind + " " + obj.GetName(), SyncOptions: obj.GetAnnotations()[ArgoSyncOptions]}
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	switch {
	case annotations[ArgoTrackingID] != "":
		app, _, _ := strings.Cut(annotations[ArgoTrackingID], ":")
		// Applications in any namespace are "<namespace>_<name>".
		ns, name, found := strings.Cut(app, "_")
		if !found {
			ns, name = "", app
		}
		f.Owner, f.Evidence = d.argoApp(ns, name), fmt.Sprintf("annotation %s=%s", ArgoTrackingID, annotations[ArgoTrackingID])
	case labels[ArgoInstance] != "":
		f.Owner, f.Evidence = d.argoApp("", labels[ArgoInstance]), fmt.Sprintf("label %s=%s", ArgoInstance, labels[ArgoInstance])
	case d.argoLabel(labels) != "":
		key := d.argoLabel(labels)
		f.Owner, f.Evidence = d.argoApp("", labels[key]), fmt.Sprintf("label %s=%s (Argo CD's tracking label)", key, labels[key])
	case ownerApp(obj) != "":
		f.Owner, f.Evidence = d.argoApp(obj.GetNamespace(), ownerApp(obj)), "owner reference to Application "+ownerApp(obj)
	case fluxOwner(labels, fluxKustomize) != nil:
		f.Owner, f.Evidence = *fluxOwner(labels, fluxKustomize), "labels "+fluxKustomize+"*"
	case fluxOwner(labels, fluxHelm) != nil:
		f.Owner, f.Evidence = *fluxOwner(labels, fluxHelm), "labels "+fluxHelm+"*"
	case f.SyncOptions != "":
		f.Owner, f.Evidence = Owner{Tool: ArgoCD, Kind: "Application"}, fmt.Sprintf("annotation %s=%s", ArgoSyncOptions, f.SyncOptions)
	default:
		return nil
	}
	return f
}

// argoLabel is the label of obj that is Argo CD's tracking label and names
// an Application; "" when none.
func (d *Detector) argoLabel(labels map[string]string) string {
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		v := labels[key]
		if key == ArgoInstance || v == "" {
			continue
		}
		if d.instanceLabels[key] || key == DefaultInstanceLabel && len(d.apps[v]) > 0 {
			return key
		}
	}
	return ""
}

// argoApp is the Application named (in ns, if known), as read.
func (d *Detector) argoApp(ns, name string) Owner {
	for _, a := range d.apps[name] {
		if ns == "" || a.Namespace == ns {
			return a
		}
	}
	return Owner{Tool: ArgoCD, Kind: "Application", Namespace: ns, Name: name}
}

// ownerApp is the Argo CD Application an owner reference names.
func ownerApp(obj metav1.Object) string {
	for _, r := range obj.GetOwnerReferences() {
		if r.Kind == "Application" && strings.HasPrefix(r.APIVersion, "argoproj.io/") {
			return r.Name
		}
	}
	return ""
}

// fluxOwner is the Kustomization or HelmRelease Flux's labels name (its
// name "" where only another label of Flux's is there).
func fluxOwner(labels map[string]string, prefix string) *Owner {
	name := labels[prefix+"name"]
	if name == "" && !slices.ContainsFunc(slices.Collect(maps.Keys(labels)), func(k string) bool { return strings.HasPrefix(k, prefix) }) {
		return nil
	}
	kind := "Kustomization"
	if prefix == fluxHelm {
		kind = "HelmRelease"
	}
	return &Owner{Tool: Flux, Kind: kind, Namespace: labels[prefix+"namespace"], Name: name}
}
