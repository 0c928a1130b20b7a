package gitops

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplicationList is Argo CD's list kind of Applications.
var ApplicationList = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationList"}

// argocdConfigMap is Argo CD's settings ConfigMap, and its keys that say
// how it tracks what it syncs (argo-cd docs, operator-manual/argocd-cm.yaml).
const (
	argocdConfigMap       = "argocd-cm"
	instanceLabelKey      = "application.instanceLabelKey"
	resourceTrackingKey   = "application.resourceTrackingMethod"
	trackingByAnnotation  = "annotation"
	maxApplicationParents = 3
)

// Read returns a Detector that knows the cluster's Argo CD: its tracking
// label (every argocd-cm of the cluster) and its Applications (every
// namespace). A cluster without Argo CD gives a Detector that finds Flux's
// and Argo CD's unambiguous marks only; what could not be read is in
// Unread, never an error: the journeys go on, and say so.
func Read(ctx context.Context, r client.Reader) *Detector {
	d := &Detector{instanceLabels: map[string]bool{}, apps: map[string][]Owner{}}
	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.MatchingFields{"metadata.name": argocdConfigMap}); err == nil {
		for _, cm := range cms.Items {
			key := cm.Data[instanceLabelKey]
			if key == "" {
				key = DefaultInstanceLabel
			}
			// "annotation" tracks by argocd.argoproj.io/tracking-id alone;
			// "label", "annotation+label" and the default before 3.0 set
			// the label as Argo CD's.
			if cm.Data[resourceTrackingKey] != trackingByAnnotation {
				d.instanceLabels[key] = true
			}
		}
	}
	var apps unstructured.UnstructuredList
	apps.SetGroupVersionKind(ApplicationList)
	err := r.List(ctx, &apps)
	switch {
	case meta.IsNoMatchError(err):
		return d
	case err != nil:
		d.Unread = "Argo CD's Applications could not be read (" + err.Error() + "): what they do is not known"
		return d
	}
	for _, a := range apps.Items {
		d.apps[a.GetName()] = append(d.apps[a.GetName()], application(&a))
	}
	// An Application kept in sync by another (an app of apps).
	for _, a := range apps.Items {
		if f := d.Detect("Application", &a); f != nil && f.Owner.Name != a.GetName() {
			parent := f.Owner
			for i, o := range d.apps[a.GetName()] {
				if o.Namespace == a.GetNamespace() {
					d.apps[a.GetName()][i].Parent = &parent
				}
			}
		}
	}
	return d
}

// application is what an Application says of its syncing.
func application(a *unstructured.Unstructured) Owner {
	o := Owner{Tool: ArgoCD, Kind: "Application", Namespace: a.GetNamespace(), Name: a.GetName(), Read: true,
		Skipped: a.GetAnnotations()[ArgoSkipReconcile] == "true"}
	automated, found, _ := unstructured.NestedMap(a.Object, "spec", "syncPolicy", "automated")
	if !found || automated == nil {
		return o
	}
	// Argo CD 3 may keep the policy and turn it off (enabled: false).
	if enabled, ok := automated["enabled"].(bool); ok && !enabled {
		return o
	}
	o.AutoSync = true
	o.SelfHeal, _ = automated["selfHeal"].(bool)
	if b, err := json.Marshal(automated); err == nil {
		o.Automated = string(b)
	}
	return o
}

// Collector gathers the findings of the objects a journey touches.
type Collector struct {
	d *Detector
	// Findings are those of the objects added that a tool keeps in sync.
	Findings []Finding
}

// Collect returns a Collector that knows the cluster's Argo CD (Read).
func Collect(ctx context.Context, r client.Reader) *Collector {
	return &Collector{d: Read(ctx, r)}
}

// Add detects obj's owner (kind names it) and keeps the finding; nil when
// no tool keeps it.
func (c *Collector) Add(kind string, obj metav1.Object) *Finding {
	f := c.d.Detect(kind, obj)
	if f != nil {
		c.Findings = append(c.Findings, *f)
	}
	return f
}

// Detect is Add without keeping the finding.
func (c *Collector) Detect(kind string, obj metav1.Object) *Finding { return c.d.Detect(kind, obj) }

// Unread says what of Argo CD could not be read ("" when all was).
func (c *Collector) Unread() string { return c.d.Unread }
