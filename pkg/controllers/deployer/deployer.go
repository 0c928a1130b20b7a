// Package deployer runs the Machine API controllers on clusters whose
// platform the machine-api-operator does not know (None, External). There
// the operator deploys nothing; the deployer applies a Deployment equivalent
// to the operator's machine-api-controllers: the operator's machineset,
// nodelink and machine-healthcheck controllers from the release's
// machine-api-operator image, this provider's manager as the machine
// controller, and kube-rbac-proxy sidecars for the metrics.
//
// The images come from the operator's ConfigMap machine-api-operator-images
// (key images.json), which every release updates, so a cluster upgrade rolls
// the controllers. The Deployment, named after the cloud it runs the
// provider for (machine-api-controllers-<cloud>, DeploymentName), is
// applied server-side with the field manager machine-api-provider-deployer
// and forced ownership: a deleted Deployment is recreated, and a field the
// deployer sets that someone edits is set back. Fields the deployer does not
// set (an added annotation, say) are left alone, as server-side apply does.
// The Deployment carries no owner reference: the images ConfigMap belongs
// to the operator, and the controllers should keep running while the
// deployer itself is restarted or replaced.
//
// On OpenShift the machine-controller gets the cluster-wide proxy and the
// cluster's trusted CA bundle, and the Deployment rolls when either
// changes (proxy.go).
//
// When the operator runs its own machine-api-controllers Deployment (a
// supported platform), or appuio's cloudscale.ch provider runs (its
// Deployments appuio-machine-api-provider-cloudscale and
// appuio-machine-api-controllers), the deployer refuses: it does not apply
// its Deployment, deletes it if it had applied it before, and reports why.
// Two machine controllers would otherwise fight over the same Machines.
//
// # Status
//
// A Deployment has no room for conditions of its own, and the deployer has
// no custom resource, so it reports in a ConfigMap it owns next to the
// Deployment, machine-api-provider-deployer-status: key "conditions" holds
// a JSON list of metav1.Conditions (today one, type Deployed), readable
// with `oc get cm machine-api-provider-deployer-status -o yaml` and
// ReadConditions. Every change of the condition is also an event on that
// ConfigMap (Warning when not deployed, Normal when applied), so
// `oc describe cm machine-api-provider-deployer-status` tells the story
// even when the images ConfigMap or the Deployment does not exist. The
// status is written only when the condition changes.
package deployer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// What the deployer reads and writes besides its Deployment.
const (
	// DefaultNamespace is where OpenShift runs the Machine API.
	DefaultNamespace = "openshift-machine-api"
	// ImagesConfigMap is the machine-api-operator's list of the release's
	// images, under ImagesKey.
	ImagesConfigMap = "machine-api-operator-images"
	ImagesKey       = "images.json"
	// OperatorDeploymentName is the Deployment the machine-api-operator
	// runs on the platforms it supports.
	OperatorDeploymentName = "machine-api-controllers"
	// AppuioManagerDeployment runs appuio's cloudscale.ch provider (its
	// Commodore component, component/main.jsonnet at v0.3.1): the machine
	// controller (lease 3a21cedd.appuio.io) and the manager that applies
	// AppuioControllersDeployment (lease 458f6dca.appuio.io).
	AppuioManagerDeployment = "appuio-machine-api-provider-cloudscale"
	// AppuioControllersDeployment is the machine-api-operator's
	// controllers as appuio's provider runs them
	// (controllers/machine_api_controllers_deployment.jsonnet, v0.4.0).
	AppuioControllersDeployment = "appuio-machine-api-controllers"
	// StatusConfigMap holds the deployer's conditions under StatusKey.
	StatusConfigMap = "machine-api-provider-deployer-status"
	StatusKey       = "conditions"
)

// ConditionDeployed is True when the Deployment is applied with the current
// images, False with one of the reasons below when it is not.
const ConditionDeployed = "Deployed"

// Condition reasons; the events have the same reasons.
const (
	// ReasonApplied: the Deployment is applied with the images of
	// images.json.
	ReasonApplied = "Applied"
	// ReasonOperatorDeploymentPresent: the machine-api-operator runs its
	// own controllers here; the deployer stands back.
	ReasonOperatorDeploymentPresent = "OperatorDeploymentPresent"
	// ReasonAppuioProviderPresent: appuio's cloudscale.ch provider runs
	// here; the deployer stands back until the switch
	// (docs/switch-from-appuio.md) has removed it.
	ReasonAppuioProviderPresent = "AppuioProviderPresent"
	// ReasonImagesUnavailable: the images ConfigMap or its images.json is
	// missing. A Deployment applied before is left running.
	ReasonImagesUnavailable = "ImagesUnavailable"
	// ReasonImagesInvalid: images.json cannot be read or names no
	// machine-api-operator or kube-rbac-proxy image.
	ReasonImagesInvalid = "ImagesInvalid"
	// ReasonApplyFailed: the API server refused the Deployment or the
	// trusted CA ConfigMap; retried with backoff.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonDeploymentDeleted is the event when the deployer deletes the
	// Deployment it had applied, because the operator deployed its own.
	ReasonDeploymentDeleted = "DeploymentDeleted"
)

// Options configure the Reconciler; zero values take the defaults.
type Options struct {
	// Namespace of the images ConfigMap, the operator's Deployment and
	// ours. Default openshift-machine-api.
	Namespace string
	// ProviderImage is the image of this provider (required).
	ProviderImage string
	// TokenSecret holds the provider's default credentials, which the
	// manager reads at every use (--default-credentials-secret), under
	// the keys of the cloud's credentials secrets. Default
	// cloudscale-token.
	TokenSecret string
	// ServiceAccount of the controllers. Default machine-api-controllers,
	// which the machine-api-operator's manifests create and bind on every
	// platform.
	ServiceAccount string
	// Own are the deployer's own options handed to the provider when set
	// (Spec), by the name of their flag in OwnFlags: the API endpoints and
	// the boot image mirror. Never keys of ManagerConfigMap: the default
	// credentials go where the endpoints point, and every new node boots
	// what the mirror serves.
	Own map[string]string
	// Cloud and ProviderEnv configure the provider for another cloud than
	// cloudscale.ch (see Spec). Cloud names the Deployment
	// (DeploymentName).
	Cloud       string
	ProviderEnv []corev1.EnvVar
	// CheckManagerArgs parses a command line of the manager and runs the
	// manager's own checks on it (the manager command provides it): the
	// flags of ManagerConfigMap are applied only when it passes. Without
	// it, the ConfigMap's flags are refused.
	CheckManagerArgs func(args []string) error
	// WithoutMachineHealthCheck leaves the machine-healthcheck controller
	// out.
	WithoutMachineHealthCheck bool
	// ClusterID is the cluster's identity handed to the manager
	// (--cluster-id). Default: the Infrastructure's infrastructureName
	// (clusterid.go), which is what to use on OpenShift; this is for a
	// cluster without one.
	ClusterID string
	// LegacyClusterIDs, with ClusterID, are the legacy cluster IDs handed
	// to the manager (--legacy-cluster-ids). Default: the Infrastructure's
	// annotation (clusterid.go).
	LegacyClusterIDs []string
	// Name of the controller, also the source of its events. Default
	// machine-api-provider-deployer.
	Name string
}

func (o *Options) setDefaults() {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.TokenSecret == "" {
		o.TokenSecret = "cloudscale-token"
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = "machine-api-controllers"
	}
	if o.Name == "" {
		o.Name = ManagedByValue
	}
}

// Reconciler applies the controllers Deployment.
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	recorder record.EventRecorder
	opts     Options
	// egress reads the trusted CA ConfigMap and the Proxy (an
	// egressCache once set up with a manager).
	egress client.Reader
	// proxyServed: the API server serves config.openshift.io Proxies.
	proxyServed bool
	// versionServed: the API server serves config.openshift.io
	// ClusterVersions.
	versionServed bool
	// infraServed: the API server serves config.openshift.io
	// Infrastructures.
	infraServed bool
	// apiServerServed: the API server serves config.openshift.io
	// APIServers (the TLS profile, tlsprofile.go).
	apiServerServed bool
	// managerConfigReader reads ManagerConfigMap (a cache of its own once
	// set up with a manager).
	managerConfigReader client.Reader
	// stopReader reads StopConfigMap (stop.go; a cache of its own once
	// set up with a manager).
	stopReader client.Reader
}

// New returns a Reconciler that reads the watched objects with c (a cached
// client in a manager), reads its status ConfigMap with reader (uncached:
// the cache holds only the images ConfigMap), writes with c and reports
// with recorder.
func New(c client.Client, reader client.Reader, recorder record.EventRecorder, opts Options) (*Reconciler, error) {
	opts.setDefaults()
	if opts.ProviderImage == "" {
		return nil, fmt.Errorf("deployer: no provider image")
	}
	if err := checkCloud(opts.Cloud); err != nil {
		return nil, fmt.Errorf("deployer: %w", err)
	}
	if err := checkOwn(opts.Own, opts.ProviderEnv); err != nil {
		return nil, fmt.Errorf("deployer: %w", err)
	}
	if reader == nil {
		reader = c
	}
	return &Reconciler{client: c, reader: reader, recorder: recorder, opts: opts, egress: c, managerConfigReader: c, stopReader: c}, nil
}

// +kubebuilder:rbac:groups="",namespace=openshift-machine-api,resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,namespace=openshift-machine-api,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=openshift-machine-api,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=openshift-machine-api,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=config.openshift.io,resources=proxies,verbs=list;watch
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions,verbs=list;watch
// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=list;watch
// +kubebuilder:rbac:groups=config.openshift.io,resources=apiservers,verbs=list;watch

// SetupWithManager registers the controller with mgr. All its work is one
// request: the images ConfigMap, our Deployment and the operator's
// Deployment, the trusted CA ConfigMap, the cluster-wide Proxy, the
// ClusterVersion and the APIServer map to it, and it is queued once at start
// so that a missing ConfigMap is reported too. Deployment updates count only
// when spec, labels or annotations change, not for status. Whether the
// config.openshift.io APIs are served is looked up here, once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	served, err := configServed(mgr, "Proxy")
	if err != nil {
		return err
	}
	versionServed, err := configServed(mgr, "ClusterVersion")
	if err != nil {
		return err
	}
	infraServed, err := configServed(mgr, "Infrastructure")
	if err != nil {
		return err
	}
	apiServerServed, err := configServed(mgr, "APIServer")
	if err != nil {
		return err
	}
	egress, err := newEgressCache(mgr, r.opts.Namespace, served, versionServed, infraServed, apiServerServed)
	if err != nil {
		return err
	}
	managerConfig, err := newConfigMapCache(mgr, r.opts.Namespace, ManagerConfigMap)
	if err != nil {
		return err
	}
	r.egress, r.proxyServed, r.versionServed, r.infraServed, r.apiServerServed, r.managerConfigReader = egress, served, versionServed, infraServed, apiServerServed, managerConfig
	if !served {
		mgr.GetLogger().Info("The API server serves no config.openshift.io Proxy: no cluster-wide proxy for the provider")
	}
	if !versionServed {
		mgr.GetLogger().Info("The API server serves no config.openshift.io ClusterVersion: the controllers get the flags of the newest known release",
			"release", Newest().String())
	}
	key := r.key()
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})
	named := func(names ...string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool {
			if o.GetNamespace() != r.opts.Namespace {
				return false
			}
			for _, n := range names {
				if o.GetName() == n {
					return true
				}
			}
			return false
		})
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.Name).
		For(&corev1.ConfigMap{}, builder.WithPredicates(named(ImagesConfigMap))).
		Watches(&appsv1.Deployment{}, toKey, builder.WithPredicates(
			named(r.deploymentName(), OperatorDeploymentName, AppuioManagerDeployment, AppuioControllersDeployment),
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}),
		)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(reconcile.Request{NamespacedName: key})
			return nil
		})).
		WatchesRawSource(source.Kind[client.Object](egress, &corev1.ConfigMap{}, toKey)).
		WatchesRawSource(source.Kind[client.Object](managerConfig, &corev1.ConfigMap{}, toKey))
	if served {
		b = b.WatchesRawSource(source.Kind[client.Object](egress, &configv1.Proxy{}, toKey))
	}
	if versionServed {
		b = b.WatchesRawSource(source.Kind[client.Object](egress, &configv1.ClusterVersion{}, toKey))
	}
	if infraServed {
		b = b.WatchesRawSource(source.Kind[client.Object](egress, &configv1.Infrastructure{}, toKey))
	}
	if apiServerServed {
		// a changed TLS profile re-renders the TLS flags of 4.22 and later
		b = b.WatchesRawSource(source.Kind[client.Object](egress, apiServerObject(), toKey))
	}
	if b, err = r.watchStop(mgr, b, toKey); err != nil {
		return err
	}
	return b.Complete(r)
}

// deploymentName is our Deployment's name, after the cloud.
func (r *Reconciler) deploymentName() string { return DeploymentName(r.opts.Cloud) }

func (r *Reconciler) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.opts.Namespace, Name: ImagesConfigMap}
}

// Reconcile brings the Deployment in line with the images, or stands back.
// Nothing is requeued on a timer: every input is watched.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	ns := r.opts.Namespace

	// Two machine controllers would act on the same Machines: the
	// operator's on a platform it supports, and appuio's provider, which
	// goes first (docs/switch-from-appuio.md) and comes back only after
	// ours (the way back).
	for _, other := range []struct{ name, reason, why string }{
		{OperatorDeploymentName, ReasonOperatorDeploymentPresent, "the machine-api-operator runs its own Deployment %s/%s (a platform it supports)"},
		{AppuioManagerDeployment, ReasonAppuioProviderPresent, "appuio's cloudscale.ch provider runs (Deployment %s/%s): docs/switch-from-appuio.md switches over"},
		{AppuioControllersDeployment, ReasonAppuioProviderPresent, "appuio's cloudscale.ch provider runs (Deployment %s/%s): docs/switch-from-appuio.md switches over"},
	} {
		err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: other.name}, &appsv1.Deployment{})
		switch {
		case err == nil:
			return ctrl.Result{}, r.standBack(ctx, other.reason, fmt.Sprintf(other.why, ns, other.name))
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, err
		}
	}

	cm := &corev1.ConfigMap{}
	if err := r.client.Get(ctx, r.key(), cm); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.reportOnly(ctx, false, ReasonImagesUnavailable,
			fmt.Sprintf("ConfigMap %s/%s not found: without the release's images there is nothing to deploy", ns, ImagesConfigMap))
	} else if err != nil {
		return ctrl.Result{}, err
	}
	data, ok := cm.Data[ImagesKey]
	if !ok {
		return ctrl.Result{}, r.reportOnly(ctx, false, ReasonImagesUnavailable,
			fmt.Sprintf("ConfigMap %s/%s has no key %s", ns, ImagesConfigMap, ImagesKey))
	}
	images, err := ParseImages(data)
	if err != nil {
		return ctrl.Result{}, r.reportOnly(ctx, false, ReasonImagesInvalid,
			fmt.Sprintf("ConfigMap %s/%s: %v", ns, ImagesConfigMap, err))
	}

	ids, reason, why, err := r.clusterID(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ids.Own == "" {
		return ctrl.Result{}, r.reportOnly(ctx, false, reason, why)
	}

	caHash, err := r.trustedCA(ctx)
	if err != nil {
		if rerr := r.reportOnly(ctx, false, ReasonApplyFailed, err.Error()); rerr != nil {
			log.FromContext(ctx).Error(rerr, "Writing the status failed")
		}
		return ctrl.Result{}, err
	}
	proxy, err := r.clusterProxy(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	release, fit, version, err := r.clusterRelease(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	known, knownReason, knownMessage := releaseCondition(release, fit, version)
	releaseCond := metav1.Condition{Type: ConditionReleaseKnown, Status: metav1.ConditionFalse, Reason: knownReason, Message: knownMessage}
	if known {
		releaseCond.Status = metav1.ConditionTrue
	}
	tlsProfile, err := r.clusterTLS(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var tlsArgs []string
	if release.TLSFlags {
		if tlsArgs, err = tlsProfile.Args(); err != nil {
			// The Deployment applied before stays until the profile can
			// be rendered (the APIServer is watched). Only a release
			// whose controllers take the TLS flags needs it.
			return ctrl.Result{}, r.reportOnly(ctx, false, ReasonTLSProfileInvalid, fmt.Sprintf(
				"OpenShift %s: the TLS flags of its controllers cannot be rendered: %v; fix it with oc edit apiserver %s",
				release, err, APIServerName))
		}
	}

	spec := Spec{
		Namespace:                 ns,
		Images:                    images,
		ImagesHash:                HashImages(data),
		ProviderImage:             r.opts.ProviderImage,
		TokenSecret:               r.opts.TokenSecret,
		ServiceAccount:            r.opts.ServiceAccount,
		Own:                       r.opts.Own,
		WithoutMachineHealthCheck: r.opts.WithoutMachineHealthCheck,
		Cloud:                     r.opts.Cloud,
		ProviderEnv:               r.opts.ProviderEnv,
		Proxy:                     proxy,
		TrustedCAHash:             caHash,
		Release:                   release,
		ClusterID:                 ids.Own,
		LegacyClusterIDs:          ids.Legacy,
		TLSArgs:                   tlsArgs,
	}
	// The Deployment as it is now, read from the API server itself: the
	// write below is conditional on it (stop.go), and what it says (a
	// scale to 0, the flags it runs with) decides what is written.
	current, err := r.currentDeployment(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	managerConfig, valid, configReason, configMessage, err := r.managerConfig(ctx, machineContainer(spec).Args, current)
	if err != nil {
		return ctrl.Result{}, err
	}
	spec.ManagerConfig = managerConfig
	configCond := metav1.Condition{Type: ConditionManagerConfigValid, Status: metav1.ConditionFalse, Reason: configReason, Message: configMessage}
	if valid {
		configCond.Status = metav1.ConditionTrue
	}
	stopped, stopCond, err := r.stopState(ctx, current)
	if err != nil {
		return ctrl.Result{}, err
	}
	spec.Stopped, spec.StopSwitch = stopped, stopCond.Reason == ReasonStopSwitch
	d := Deployment(spec)
	if err := r.apply(ctx, d, current); err != nil {
		if apierrors.IsConflict(err) {
			// Changed since it was read (an `oc scale`): read again
			// and decide again, rather than write over it.
			log.FromContext(ctx).V(1).Info("The Deployment changed since it was read; reconciling again", "deployment", d.Name)
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		if rerr := r.reportOnly(ctx, false, ReasonApplyFailed, fmt.Sprintf("applying Deployment %s/%s: %v", ns, d.Name, err)); rerr != nil {
			log.FromContext(ctx).Error(rerr, "Writing the status failed")
		}
		return ctrl.Result{}, err
	}
	tlsNote := ""
	if release.TLSFlags {
		tlsNote = fmt.Sprintf("; %s: %s", tlsProfile.describe(), strings.Join(tlsArgs, " "))
	}
	_, err = r.report(ctx, true, ReasonApplied, fmt.Sprintf(
		"Deployment %s/%s applied for OpenShift %s (%s): machine-api-operator %s, kube-rbac-proxy %s, provider %s; %s; %s%s",
		ns, d.Name, release, release.Describe(), images.MachineAPIOperator, images.KubeRBACProxy, r.opts.ProviderImage,
		proxy.describe(), describeTrustedCA(caHash), tlsNote), releaseCond, configCond, stopCond)
	return ctrl.Result{}, err
}

// standBack removes our Deployment, if we applied one, while other
// controllers of the Machines run (why says which), and reports reason.
func (r *Reconciler) standBack(ctx context.Context, reason, why string) error {
	ns, name := r.opts.Namespace, r.deploymentName()
	msg := fmt.Sprintf("%s: not deploying %s", why, name)
	deleted := false
	ours := &appsv1.Deployment{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ours)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case ours.Labels[ManagedByLabel] != ManagedByValue:
		msg += fmt.Sprintf("; a Deployment %s not labelled %s=%s is left alone", name, ManagedByLabel, ManagedByValue)
	case ours.DeletionTimestamp.IsZero():
		// the Deployment read, none other (a new one made since)
		if err := r.client.Delete(ctx, ours, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &ours.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Deployment %s/%s: %w", ns, name, err)
		}
		deleted = true
	}
	status, err := r.report(ctx, false, reason, msg)
	if err != nil {
		return err
	}
	if deleted {
		m := fmt.Sprintf("deleted Deployment %s/%s: %s", ns, name, why)
		log.FromContext(ctx).Info(m)
		r.recorder.Event(status, corev1.EventTypeNormal, ReasonDeploymentDeleted, m)
	}
	return nil
}

// conflictRetry is how soon a reconcile whose write found the Deployment
// changed since it was read runs again.
const conflictRetry = 100 * time.Millisecond

// apply applies d server-side, taking over any field another manager
// changed, on condition that the Deployment is still current (its
// resourceVersion; nil: there was none): a Deployment changed since it was
// read is a Conflict, and nothing is written. Forced ownership alone would
// write over an `oc scale --replicas=0` that came between the read and the
// write, and start the controllers someone had just stopped.
func (r *Reconciler) apply(ctx context.Context, d *appsv1.Deployment, current *appsv1.Deployment) error {
	d = d.DeepCopy()
	if current != nil {
		d.ResourceVersion = current.ResourceVersion
	}
	ac, err := deploymentApplyConfiguration(d)
	if err != nil {
		return err
	}
	return r.client.Apply(ctx, ac, client.FieldOwner(ManagedByValue), client.ForceOwnership)
}

// deploymentApplyConfiguration turns d into an apply configuration. Fields
// d leaves empty stay out of it (the configuration's fields are all
// optional), so the deployer does not claim them; the status never goes in.
func deploymentApplyConfiguration(d *appsv1.Deployment) (*appsv1ac.DeploymentApplyConfiguration, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	ac := &appsv1ac.DeploymentApplyConfiguration{}
	if err := json.Unmarshal(raw, ac); err != nil {
		return nil, err
	}
	ac.Status = nil
	return ac, nil
}

// report records the Deployed condition, and the further conditions
// given, in the status ConfigMap and, for each that changed, as an event
// there (Warning when False). It returns the status ConfigMap for more
// events.
func (r *Reconciler) report(ctx context.Context, deployed bool, reason, message string, more ...metav1.Condition) (*corev1.ConfigMap, error) {
	status := metav1.ConditionFalse
	if deployed {
		status = metav1.ConditionTrue
	}
	cm, conds, err := readStatus(ctx, r.reader, r.opts.Namespace)
	if err != nil {
		return nil, err
	}
	var changed []metav1.Condition
	for _, c := range append([]metav1.Condition{{Type: ConditionDeployed, Status: status, Reason: reason, Message: message}}, more...) {
		c.LastTransitionTime = metav1.NewTime(time.Now())
		if meta.SetStatusCondition(&conds, c) {
			changed = append(changed, c)
		}
	}
	r.exportConditions(conds)
	if len(changed) == 0 {
		return cm, nil
	}
	raw, err := json.MarshalIndent(conds, "", "  ")
	if err != nil {
		return nil, err
	}
	ac := corev1ac.ConfigMap(StatusConfigMap, r.opts.Namespace).
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithData(map[string]string{StatusKey: string(raw)})
	if err := r.client.Apply(ctx, ac, client.FieldOwner(ManagedByValue), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("writing ConfigMap %s/%s: %w", r.opts.Namespace, StatusConfigMap, err)
	}
	if cm.UID == "" {
		// Just created. The event's reference needs the UID, or
		// `oc describe` does not show the event.
		if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			log.FromContext(ctx).Error(err, "Reading the status ConfigMap back failed")
		}
	}
	for _, c := range changed {
		eventType := corev1.EventTypeWarning
		if c.Status == metav1.ConditionTrue {
			eventType = corev1.EventTypeNormal
		}
		r.recorder.Event(cm, eventType, c.Reason, c.Message)
		switch {
		case c.Type != ConditionDeployed:
			log.FromContext(ctx).Info("Condition changed", "type", c.Type, "status", c.Status, "reason", c.Reason, "message", c.Message)
		case deployed:
			log.FromContext(ctx).Info(message)
		default:
			log.FromContext(ctx).Info("Not deployed", "reason", reason, "message", message)
		}
	}
	return cm, nil
}

func (r *Reconciler) reportOnly(ctx context.Context, deployed bool, reason, message string) error {
	_, err := r.report(ctx, deployed, reason, message)
	return err
}

// ReadConditions returns the deployer's conditions in namespace ns; none
// when it has not written any.
func ReadConditions(ctx context.Context, c client.Reader, ns string) ([]metav1.Condition, error) {
	_, conds, err := readStatus(ctx, c, ns)
	return conds, err
}

// readStatus returns the status ConfigMap (only its name and namespace
// when it does not exist) and its conditions.
func readStatus(ctx context.Context, c client.Reader, ns string) (*corev1.ConfigMap, []metav1.Condition, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: StatusConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StatusConfigMap, Namespace: ns}}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var conds []metav1.Condition
	if raw := cm.Data[StatusKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &conds); err != nil {
			// a hand-edited status is rewritten, not fatal
			conds = nil
		}
	}
	return cm, conds, nil
}
