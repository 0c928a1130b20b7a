// Package capacity publishes on every MachineSet of the cloud what a Node of
// it will offer (vCPUs, memory, GPUs, root disk, labels, taints), as the
// annotations the cluster autoscaler reads to scale a MachineSet up from
// zero Machines. The figures come from the cloud's flavor API, never from
// the flavor's name.
package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// ConditionType is the MachineSet status condition this controller owns:
// True once the capacity is published, False (with a reason) when it cannot
// be known.
const ConditionType machinev1.ConditionType = "CapacityPublished"

// Condition reasons; the event reasons are the same words.
const (
	// ReasonPublished: the annotations describe the flavor.
	ReasonPublished = "CapacityPublished"
	// ReasonUnknown: the flavor is unknown to the cloud or the provider
	// spec is invalid; the spec must change.
	ReasonUnknown = "CapacityUnknown"
	// ReasonTokenSecretMissing: the spec's credentials secret is not
	// there (yet).
	ReasonTokenSecretMissing = "TokenSecretMissing"
	// ReasonCredentialsInvalid: the credentials secret lacks a key or
	// holds an unusable value.
	ReasonCredentialsInvalid = "CredentialsInvalid"
	// ReasonCredentialsRefused: the cloud refused the credentials.
	ReasonCredentialsRefused = "CredentialsRefused"
	// ReasonPermissionDenied: the cloud refused the flavor lookup to the
	// credentials; the message names the permission to grant.
	ReasonPermissionDenied = "PermissionDenied"
	// ReasonOtherCluster: the MachineSet's cluster label names another
	// cluster than the provider's (or none); nothing is looked up for it.
	ReasonOtherCluster = "OtherCluster"
)

// Options tune the controller; zero values take the defaults.
type Options struct {
	// SpecKind is the kind of the cloud's provider spec
	// ("CloudscaleMachineProviderSpec"). MachineSets whose providerSpec has
	// another kind belong to another provider and are left alone; a spec
	// without a kind is taken to be the cloud's. "" takes every spec.
	SpecKind string
	// GPUResourceName is the extended resource the GPUs are advertised
	// under, published as gpu-type. Default "nvidia.com/gpu".
	GPUResourceName string
	// InvalidRequeue is how long to wait before looking again at a
	// MachineSet whose capacity cannot be known (unknown flavor, invalid
	// spec). Default 10 minutes.
	InvalidRequeue time.Duration
	// RetryRequeue is the wait after a transient cloud error without a
	// Retry-After hint. Default 30 seconds.
	RetryRequeue time.Duration
	// SecretRequeue is the wait after a missing token secret. Default 1
	// minute.
	SecretRequeue time.Duration
	// Refresh is how often a published MachineSet is checked against the
	// flavor API again, for flavors that change. Default 1 hour; negative
	// turns it off.
	Refresh time.Duration
	// SecretReader reads token secrets. Default: the manager's API reader
	// (uncached, so that no cluster-wide Secret informer is started) in
	// SetupWithManager, else the client.
	SecretReader client.Reader
	// Name of the controller, also the events' source. Default
	// "machineset-capacity".
	Name string
	// ClusterID is the cluster the provider acts for (the manager's
	// --cluster-id): a MachineSet whose cluster label names another is
	// left alone (ReasonOtherCluster), and never registers its cluster
	// with the janitor. "" takes every cluster (tests of this package).
	ClusterID string
	// LegacyClusterIDs are the cluster IDs the provider owns besides
	// ClusterID (the manager's --legacy-cluster-ids, pkg/clusterid): a
	// MachineSet labelled with one is the cluster's like one labelled
	// ClusterID.
	LegacyClusterIDs []string
}

func (o *Options) setDefaults() {
	if o.GPUResourceName == "" {
		o.GPUResourceName = "nvidia.com/gpu"
	}
	if o.InvalidRequeue == 0 {
		o.InvalidRequeue = 10 * time.Minute
	}
	if o.RetryRequeue == 0 {
		o.RetryRequeue = 30 * time.Second
	}
	if o.SecretRequeue == 0 {
		o.SecretRequeue = time.Minute
	}
	if o.Refresh == 0 {
		o.Refresh = time.Hour
	}
	if o.Name == "" {
		o.Name = "machineset-capacity"
	}
}

// Reconciler publishes the capacity of MachineSets.
type Reconciler struct {
	client   client.Client
	secrets  client.Reader
	cloud    cloud.Cloud
	accounts *cloud.Accounts
	recorder record.EventRecorder
	opts     Options
}

// New returns a Reconciler acting with c on the MachineSets of the
// accounts' cloud, reporting with recorder.
func New(c client.Client, accounts *cloud.Accounts, recorder record.EventRecorder, opts Options) *Reconciler {
	opts.setDefaults()
	r := &Reconciler{client: c, secrets: opts.SecretReader, cloud: accounts.Cloud(), accounts: accounts, recorder: recorder, opts: opts}
	if r.secrets == nil {
		r.secrets = c
	}
	return r
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the controller with mgr. It watches
// MachineSets only, and reacts only to changes of their spec (generation)
// or annotations: its own status writes do not wake it up, and its
// annotation writes wake it up once, to find nothing to do.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.opts.SecretReader == nil {
		r.secrets = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.Name).
		For(&machinev1.MachineSet{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}),
		)).
		Complete(r)
}

// ids is the cluster's identity the options name.
func (r *Reconciler) ids() clusterid.IDs {
	return clusterid.IDs{Own: r.opts.ClusterID, Legacy: r.opts.LegacyClusterIDs}
}

// specPath is where a MachineSet holds the provider spec.
var specPath = field.NewPath("spec", "template", "spec", "providerSpec", "value")

// Reconcile publishes the capacity of one MachineSet.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)

	// The MachineSet uses its account's client while it exists.
	owner := "machineset/" + req.String()
	ms := &machinev1.MachineSet{}
	if err := r.client.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.accounts.Release(owner)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ms.DeletionTimestamp.IsZero() || !r.ours(ms) {
		r.accounts.Release(owner)
		return ctrl.Result{}, nil
	}
	if ids, id := r.ids(), clusterOf(ms); r.opts.ClusterID != "" && !ids.Owns(id) {
		// A MachineSet copied from another cluster (even at 0 replicas)
		// must not enrol that cluster's servers in this provider's
		// janitor, nor cost cloud calls: it uses no account.
		r.accounts.Release(owner)
		msg := fmt.Sprintf("the MachineSet's label %s %s (it is left alone, and the webhook refuses such MachineSets)", clusterIDLabel, ids.NotOurs(id, "MachineSet"))
		changed, err := r.setCondition(ctx, ms, corev1.ConditionFalse, ReasonOtherCluster, msg)
		if err != nil {
			return r.writeFailed(ctx, err)
		}
		if changed {
			r.recorder.Event(ms, corev1.EventTypeWarning, ReasonOtherCluster, msg)
		}
		return ctrl.Result{RequeueAfter: r.opts.InvalidRequeue}, nil
	}

	spec, errs := r.cloud.ParseSpec(ms.Spec.Template.Spec.ProviderSpec, specPath)
	if len(errs) > 0 {
		return r.unknown(ctx, ms, "invalid provider spec: "+errs.ToAggregate().Error())
	}

	creds, err := cloud.ReadCredentials(ctx, r.secrets, r.cloud, ms.Namespace, spec.CredentialsSecretName(), specPath.Child(spec.CredentialsSecretField()).String())
	var credsErr *cloud.CredentialsError
	if errors.As(err, &credsErr) {
		reason := ReasonCredentialsInvalid
		if credsErr.Missing {
			reason = ReasonTokenSecretMissing
		}
		changed, err := r.setCondition(ctx, ms, corev1.ConditionFalse, reason, credsErr.Error())
		if err != nil {
			return r.writeFailed(ctx, err)
		}
		if changed {
			r.recorder.Event(ms, corev1.EventTypeWarning, reason, credsErr.Error())
		}
		return ctrl.Result{RequeueAfter: r.opts.SecretRequeue}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	acc, err := r.accounts.Get(owner, creds)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("%s client: %w", r.cloud.Name(), err)
	}
	if id := clusterOf(ms); id != "" {
		// The janitor sweeps the clusters its accounts have views of. A
		// MachineSet registers its cluster, so that one at zero replicas
		// keeps it swept (empty groups, orphans), even in a manager that
		// never reconciled one of its Machines (a new leader). Its label
		// is the provider's cluster (checked above).
		acc.View(id)
	}
	cl := acc.Client
	flavor, err := cl.Flavor(ctx, spec.Zone(), spec.InstanceType())
	var invalid *cloud.InvalidConfigError
	var retryable *cloud.RetryableError
	var perm *cloud.PermissionError
	var auth *cloud.AuthError
	switch {
	case errors.As(err, &perm), errors.As(err, &auth):
		// A person must act; the condition and one event say what, and
		// the account's gate says when to look again. What was published
		// stays: the flavor did not change.
		reason, after := ReasonPermissionDenied, time.Duration(0)
		if perm != nil {
			after = perm.RetryAfter
		} else {
			reason, after = ReasonCredentialsRefused, auth.RetryAfter
		}
		msg := cloud.Truncate(fmt.Sprintf("cannot look up flavor %q in zone %s: %v", spec.InstanceType(), spec.Zone(), err))
		changed, werr := r.setCondition(ctx, ms, corev1.ConditionFalse, reason, msg)
		if werr != nil {
			return r.writeFailed(ctx, werr)
		}
		if changed {
			r.recorder.Event(ms, corev1.EventTypeWarning, reason, msg)
		}
		return ctrl.Result{RequeueAfter: max(after, r.opts.RetryRequeue)}, nil
	case errors.As(err, &invalid):
		return r.unknown(ctx, ms, fmt.Sprintf("cannot publish the capacity of flavor %q in zone %s: %s", spec.InstanceType(), spec.Zone(), invalid.Message))
	case errors.As(err, &retryable):
		after := retryable.RetryAfter
		if after <= 0 {
			after = r.opts.RetryRequeue
		}
		logger.Info("Flavor lookup failed, retrying", "flavor", spec.InstanceType(), "zone", spec.Zone(), "error", err.Error(), "after", after)
		return ctrl.Result{RequeueAfter: after}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("looking up flavor %q in zone %q: %w", spec.InstanceType(), spec.Zone(), err)
	}

	n := nodeOf(ms, spec, flavor)
	changed, err := r.publish(ctx, ms, n)
	if err != nil {
		return r.writeFailed(ctx, err)
	}
	msg := describe(spec, n)
	if changed {
		r.recorder.Event(ms, corev1.EventTypeNormal, ReasonPublished, msg)
		logger.Info("Published capacity", "capacity", msg)
	}
	if _, err := r.setCondition(ctx, ms, corev1.ConditionTrue, ReasonPublished, msg); err != nil {
		return r.writeFailed(ctx, err)
	}
	if r.opts.Refresh < 0 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.opts.Refresh}, nil
}

// ours says whether the MachineSet's provider spec is of the cloud's kind.
// MachineSets without a provider spec are nobody's.
func (r *Reconciler) ours(ms *machinev1.MachineSet) bool {
	v := ms.Spec.Template.Spec.ProviderSpec.Value
	if v == nil || len(v.Raw) == 0 {
		return false
	}
	if r.opts.SpecKind == "" {
		return true
	}
	var meta metav1.TypeMeta
	if err := json.Unmarshal(v.Raw, &meta); err != nil {
		// Not even JSON: ParseSpec reports it.
		return true
	}
	return meta.Kind == "" || meta.Kind == r.opts.SpecKind
}

// unknown handles a MachineSet whose capacity cannot be known until its
// spec changes: it withdraws what was published (it would describe another
// flavor), warns once per problem (the condition keeps saying it), and
// looks again only after a long while, as the spec change itself wakes the
// controller up.
func (r *Reconciler) unknown(ctx context.Context, ms *machinev1.MachineSet, msg string) (ctrl.Result, error) {
	if _, err := r.publish(ctx, ms, nil); err != nil {
		return r.writeFailed(ctx, err)
	}
	changed, err := r.setCondition(ctx, ms, corev1.ConditionFalse, ReasonUnknown, msg)
	if err != nil {
		return r.writeFailed(ctx, err)
	}
	if changed {
		log.FromContext(ctx).Info("Capacity unknown", "reason", msg)
		r.recorder.Event(ms, corev1.EventTypeWarning, ReasonUnknown, msg)
	}
	return ctrl.Result{RequeueAfter: r.opts.InvalidRequeue}, nil
}

// writeFailed turns a failed write into a result: a conflict (someone
// changed the MachineSet since the cache saw it) is retried shortly without
// an error; anything else is returned.
func (r *Reconciler) writeFailed(ctx context.Context, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("MachineSet changed meanwhile, retrying", "error", err.Error())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// token returns the API token of a spec's token secret, "" for the default
// token. missing explains a secret or key that is not there.
// publish brings the MachineSet's annotations in line with n (nil: publish
// nothing) with a JSON merge patch of the annotations that differ, guarded
// by the resourceVersion so that a concurrent edit of the shared labels or
// taints annotation is never overwritten. It writes nothing when nothing
// differs, and reports whether it wrote.
func (r *Reconciler) publish(ctx context.Context, ms *machinev1.MachineSet, n *node) (bool, error) {
	current := ms.GetAnnotations()
	patch := annotationPatch(current, desiredAnnotations(current, n, r.opts.GPUResourceName))
	if len(patch) == 0 {
		return false, nil
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": ms.ResourceVersion,
			"annotations":     patch,
		},
	})
	if err != nil {
		return false, err
	}
	if err := r.client.Patch(ctx, ms, client.RawPatch(types.MergePatchType, body)); err != nil {
		return false, fmt.Errorf("patching annotations: %w", err)
	}
	return true, nil
}

// setCondition sets the CapacityPublished condition, writing only when its
// status, reason or message change, and reports whether it wrote.
func (r *Reconciler) setCondition(ctx context.Context, ms *machinev1.MachineSet, status corev1.ConditionStatus, reason, msg string) (bool, error) {
	want := machinev1.Condition{
		Type:               ConditionType,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		LastTransitionTime: metav1.Now(),
	}
	if status == corev1.ConditionFalse {
		want.Severity = machinev1.ConditionSeverityWarning
	}
	i := -1
	for j, c := range ms.Status.Conditions {
		if c.Type == ConditionType {
			i = j
			break
		}
	}
	base := ms.DeepCopy()
	if i < 0 {
		ms.Status.Conditions = append(ms.Status.Conditions, want)
	} else {
		have := ms.Status.Conditions[i]
		if have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message && have.Severity == want.Severity {
			return false, nil
		}
		if have.Status == want.Status {
			want.LastTransitionTime = have.LastTransitionTime
		}
		ms.Status.Conditions[i] = want
	}
	if err := r.client.Status().Patch(ctx, ms, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("setting condition %s: %w", ConditionType, err)
	}
	return true, nil
}

// describe sums a published capacity up for events and the condition.
func describe(spec cloud.Spec, n *node) string {
	f := n.flavor
	s := fmt.Sprintf("%s: %d vCPU, %d MiB memory, %d GiB root disk", spec.InstanceType(), f.VCPUs, f.MemoryMiB, n.diskGiB)
	if f.GPUs > 0 {
		s += fmt.Sprintf(", %d GPU", f.GPUs)
		if f.GPUType != "" {
			s += " (" + f.GPUType + ")"
		}
	}
	return s
}

// clusterIDLabel names the cluster of a MachineSet and its Machines.
const clusterIDLabel = "machine.openshift.io/cluster-api-cluster"

// clusterOf is the MachineSet's cluster, from its own labels or else from
// those its Machines get.
func clusterOf(ms *machinev1.MachineSet) string {
	if id := ms.Labels[clusterIDLabel]; id != "" {
		return id
	}
	return ms.Spec.Template.Labels[clusterIDLabel]
}
