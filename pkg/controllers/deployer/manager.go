package deployer

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions configure the deployer's manager.
type ManagerOptions struct {
	Options

	MetricsBindAddress     string
	HealthProbeBindAddress string
	LeaderElection         bool
	// LeaderElectionID defaults to machine-api-provider-deployer; the
	// lease lives in Namespace.
	LeaderElectionID string

	Log logr.Logger

	// AllowManyPerProcess lets tests start several managers in one process.
	AllowManyPerProcess bool
}

// NewManager builds a manager running the deployer in o.Namespace. Its
// cache holds the Deployments of that namespace and, of its ConfigMaps,
// only the images ConfigMap; a second cache holds the trusted CA ConfigMap
// and the cluster-wide Proxy (proxy.go). The deployer subcommand and the
// tests both start it through here.
func NewManager(cfg *rest.Config, o ManagerOptions) (ctrl.Manager, error) {
	o.setDefaults()
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = ManagedByValue
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", ImagesConfigMap)},
			},
		},
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.Namespace,
		Logger:                  o.Log,
		Controller:              config.Controller{SkipNameValidation: &o.AllowManyPerProcess},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	r, err := New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorderFor(o.Name), o.Options)
	if err != nil {
		return nil, err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}
