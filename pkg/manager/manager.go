// Package manager assembles the provider's controllers on a controller-runtime
// manager: the machine-api-operator's machine controller driving our
// actuator and the capacity publisher. The manager subcommand, the tests and
// the benchmark all start it through here, so they run the same wiring. The
// admission webhooks run apart from it (pkg/webhooks.Serve, the webhook
// subcommand).
package manager

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apifeatures "github.com/openshift/api/features"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	bootimagesctl "github.com/appuio/machine-api-provider/pkg/controllers/bootimages"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	"github.com/appuio/machine-api-provider/pkg/metrics"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// Options configure the manager.
type Options struct {
	// Cloud the Machines run on.
	Cloud cloud.Cloud
	// ClusterID is the cluster's identity, the Infrastructure's
	// infrastructureName (--cluster-id, which the deployer sets): the
	// actuator, the capacity publisher and the janitor act on this
	// cluster's Machines, MachineSets and servers only, whatever the
	// label of a Machine or MachineSet says. Required.
	ClusterID string
	// LegacyClusterIDs are the cluster IDs this cluster also owns
	// (--legacy-cluster-ids, which the deployer renders from the
	// Infrastructure's annotation, pkg/clusterid): the same rules hold for
	// them as for ClusterID.
	LegacyClusterIDs []string
	// Namespace to watch Machines, MachineSets and secrets in; "" for all.
	Namespace string
	// MaxConcurrentReconciles of the machine controller. Default 20.
	MaxConcurrentReconciles int
	// MaxConcurrentCreates is how many servers are created at a time,
	// across all Machines: reconciles beyond it that would create wait for
	// a slot, the others go on. Default 10.
	MaxConcurrentCreates int
	// SyncPeriod is how often every Machine is reconciled without a change.
	SyncPeriod time.Duration
	// CapacityPublisher runs the MachineSet capacity publisher too.
	CapacityPublisher bool

	MetricsBindAddress     string
	HealthProbeBindAddress string
	LeaderElection         bool
	LeaderElectionID       string
	// LeaderElectionNamespace defaults to Namespace.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader
	// election; zero takes controller-runtime's (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	Log logr.Logger

	// KubeAPIQPS and KubeAPIBurst limit the manager's requests to the
	// Kubernetes API; every Machine takes a few writes to provision.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// AllowManyPerProcess lets tests start several managers in one process
	// (controller names are otherwise unique per process).
	AllowManyPerProcess bool

	// CloudRateLimit limits the calls per second of each cloud account;
	// zero: the cloud's default.
	CloudRateLimit cloud.RateLimit
	// ServerViewRefresh is how old the shared list of a cluster's servers
	// may be before a lookup lists again. Default 10s.
	ServerViewRefresh time.Duration
	// ServerViewWriteGrace is how long the provider's own creates and
	// deletes stand in that view against lists that do not show them yet.
	// Default twice the refresh, at least 30s.
	ServerViewWriteGrace time.Duration
	// Actuator tunes the actuator (create grace period).
	Actuator actuator.Options
	// Janitor tunes the sweep for empty groups and orphan servers.
	Janitor janitor.Options
	// UserDataRenderer renders user data, evaluating templates in its
	// sandbox with its limits; nil means userdata.Default.
	UserDataRenderer *userdata.Renderer
	// BootImages runs the boot image controller when its Mirror is set
	// (off by default); Cloud, ClusterID, Namespace and Log are filled in.
	BootImages bootimagesctl.Options
}

// DefaultNamespace is where OpenShift keeps Machines; the orphan record
// lives there when the manager watches all namespaces.
const DefaultNamespace = "openshift-machine-api"

// Scheme holds the kinds the provider reads and writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := machinev1.Install(s); err != nil {
		return nil, err
	}
	// MachineConfiguration, for the boot image controller's skew record
	if err := operatorv1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}

// New builds a manager with the provider's controllers; Start runs it.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.Cloud == nil {
		return nil, fmt.Errorf("no cloud")
	}
	if o.ClusterID == "" {
		return nil, fmt.Errorf("no cluster ID: the provider acts for one cluster, the Infrastructure's infrastructureName")
	}
	legacy, err := clusterid.ParseLegacy(strings.Join(o.LegacyClusterIDs, ","), o.ClusterID)
	if err != nil {
		return nil, fmt.Errorf("--legacy-cluster-ids: %w", err)
	}
	ids := clusterid.IDs{Own: o.ClusterID, Legacy: legacy}
	// The grace is measured against the timeout the cloud's calls actually
	// use, whoever built the cloud: a create given up on may still make its
	// server until that timeout ends, and a grace no longer than it could
	// send a second create.
	grace := o.Actuator.CreateGrace
	if grace <= 0 {
		grace = actuator.DefaultCreateGrace
	}
	if timeout := o.Cloud.CallTimeout(); grace <= timeout {
		return nil, fmt.Errorf("the create grace (%s, --create-grace) must be longer than the %s API call timeout (%s, --cloud-api-timeout): a create given up on can still make its server until the timeout ends",
			grace, o.Cloud.Name(), timeout)
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 20
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.Namespace
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = o.Cloud.Name() + "-machine-api-provider"
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	// No client-side limit unless asked for: a controller of thousands of
	// Machines makes bursts of writes, and the API server's priority and
	// fairness protects it better than a fixed per-client rate would.
	cfg.QPS, cfg.Burst = -1, 0
	if o.KubeAPIQPS > 0 {
		cfg.QPS = o.KubeAPIQPS
		cfg.Burst = max(o.KubeAPIBurst, int(o.KubeAPIQPS))
	}
	cacheOpts := cache.Options{}
	if o.SyncPeriod > 0 {
		cacheOpts.SyncPeriod = &o.SyncPeriod
	}
	if o.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        o.LeaderElectionID,
		LeaseDuration:           durationOrNil(o.LeaseDuration),
		RenewDeadline:           durationOrNil(o.RenewDeadline),
		RetryPeriod:             durationOrNil(o.RetryPeriod),
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		Logger:                  o.Log,
		Controller:              config.Controller{SkipNameValidation: &o.AllowManyPerProcess},
		// Secrets are read one by one, only those Machines and MachineSets
		// name: no informer holds every Secret of the namespace in memory,
		// and RBAC needs only get (and list, for the secrets a spec's
		// userDataSecretSelector picks).
		// The orphan record (a ConfigMap) is read when it changes hands,
		// not watched.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}

	linger := o.Janitor.Linger
	switch {
	case linger == 0:
		linger = janitor.DefaultLinger
	case linger < 0:
		linger = 0
	}
	accounts := cloud.NewAccounts(o.Cloud, cloud.AccountOptions{
		RateLimit: o.CloudRateLimit, Linger: linger,
		View: cloud.ViewOptions{Refresh: o.ServerViewRefresh, WriteGrace: o.ServerViewWriteGrace},
	})
	registryNS := o.Namespace
	if registryNS == "" {
		registryNS = DefaultNamespace
	}
	registry := &orphans.Registry{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor(o.Cloud.Name() + "-janitor"),
		Namespace: registryNS, Cloud: o.Cloud.Name(),
	}
	actOpts := o.Actuator
	if o.MaxConcurrentCreates > 0 {
		actOpts.MaxConcurrentCreates = o.MaxConcurrentCreates
	}
	actOpts.ClusterID = o.ClusterID
	actOpts.LegacyClusterIDs = ids.Legacy
	actOpts.SecretReader = mgr.GetAPIReader()
	actOpts.Orphans = registry
	if o.UserDataRenderer != nil {
		actOpts.UserData = o.UserDataRenderer
	}
	act := actuator.New(mgr.GetClient(), accounts, mgr.GetEventRecorderFor(o.Cloud.Name()+"-actuator"), o.Log.WithName("actuator"), actOpts)
	janOpts := o.Janitor
	janOpts.Log = o.Log.WithName("janitor")
	janOpts.ClusterID = o.ClusterID
	janOpts.LegacyClusterIDs = ids.Legacy
	if janOpts.Adoptions == nil {
		janOpts.Adoptions = &orphans.Adoptions{Client: mgr.GetClient(), Namespace: registryNS, Cloud: o.Cloud.Name()}
	}
	jan, err := janitor.New(mgr.GetClient(), accounts, registry, janOpts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(jan); err != nil {
		return nil, err
	}
	// the Machines by phase for the alerts and the dashboard
	if err := mgr.Add(&metrics.MachineWatch{
		Cache: mgr.GetCache(), Reader: mgr.GetClient(), Namespace: o.Namespace,
		Cloud: o.Cloud.Name(), SpecKind: o.Cloud.SpecKind(),
	}); err != nil {
		return nil, err
	}
	gate, err := FeatureGate()
	if err != nil {
		return nil, err
	}
	if err := machinecontroller.AddWithActuatorOpts(mgr, act, controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}, gate); err != nil {
		return nil, fmt.Errorf("adding the machine controller: %w", err)
	}
	if o.BootImages.Mirror != "" {
		bo := o.BootImages
		bo.Cloud, bo.ClusterID, bo.Namespace, bo.Log = o.Cloud, o.ClusterID, registryNS, o.Log.WithName("boot-images")
		ctl, err := bootimagesctl.New(mgr.GetClient(), mgr.GetAPIReader(), accounts, mgr.GetEventRecorderFor(o.Cloud.Name()+"-boot-images"), bo)
		if err != nil {
			return nil, fmt.Errorf("the boot image controller: %w", err)
		}
		if err := mgr.Add(ctl); err != nil {
			return nil, err
		}
	}
	if o.CapacityPublisher {
		if err := addCapacityPublisher(mgr, accounts, ids); err != nil {
			return nil, fmt.Errorf("adding the capacity publisher: %w", err)
		}
	}
	return mgr, nil
}

func durationOrNil(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// FeatureGate is the gate the machine-api-operator's controllers consult;
// the provider does not take part in the Cluster API migration, so that
// stays off.
func FeatureGate() (featuregate.MutableFeatureGate, error) {
	gate := featuregate.NewFeatureGate()
	err := gate.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		featuregate.Feature(apifeatures.FeatureGateMachineAPIMigration): {Default: false, PreRelease: featuregate.Alpha},
	})
	return gate, err
}
