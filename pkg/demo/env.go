// Package demo stands up the whole autoscaling loop on one machine — a
// local control plane shaped like OpenShift's, a cloud's emulator
// (cloudscale.ch or Exoscale), this provider, the machine-api-operator's
// MachineSet, nodelink and MachineHealthCheck controllers, simulated
// booting, and autoscaling as OpenShift configures it: the real
// cluster-autoscaler-operator, which runs the real cluster-autoscaler
// (autoscaling.go) — and drives the scenario of `make demo` and `make e2e`
// on it. What differs between the clouds is in cloud.go; everything else is
// the same code for both.
package demo

import (
	"context"
	"errors"
	"maps"
	"net/http/httptest"
	"os"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller"
	"github.com/openshift/machine-api-operator/pkg/controller/machinehealthcheck"
	"github.com/openshift/machine-api-operator/pkg/controller/machineset"
	"github.com/openshift/machine-api-operator/pkg/controller/nodelink"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	bootimagesctl "github.com/appuio/machine-api-provider/pkg/controllers/bootimages"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

// Namespace of the Machine API, as on OpenShift.
const Namespace = "openshift-machine-api"

// ClusterID is the local cluster's infrastructure name.
const ClusterID = "demo-7xk2p"

// Options configure the environment.
type Options struct {
	// Cloud is the cloud to emulate, Cloudscale (the default) or Exoscale.
	Cloud string
	// ClusterID is the cluster's infrastructure name, in its
	// Infrastructure, and the provider's identity. Default ClusterID.
	ClusterID string
	// Platform is the Infrastructure's platform: External (the default),
	// where the cloud's cloud-controller-manager (pkg/localcluster/ccm)
	// initializes every Node, which registers as a kubelet with
	// --cloud-provider=external does; or None, where Nodes register with
	// their provider ID, addresses and labels and no CCM runs.
	Platform configv1.PlatformType
	// BinDir holds the tools `make tools` builds, the
	// cluster-autoscaler-operator, its manifests and the cluster-autoscaler
	// included.
	BinDir string
	// Dir receives the kubeconfig and the logs.
	Dir string
	// OpenShiftAPI is the directory of the openshift/api module, whose
	// CRDs the cluster gets; "" is go.mod's, found with go list.
	OpenShiftAPI string
	// BootTime is how long an emulated server is "changing"; RegisterDelay
	// how long after that its Node registers.
	BootTime, RegisterDelay time.Duration
	// Autoscaler starts the cluster-autoscaler-operator and applies the
	// ClusterAutoscaler, which makes it run the cluster-autoscaler.
	Autoscaler bool
	// ScaleDownUnneeded is how long a node must be unneeded, and
	// ScaleDownDelayAfterAdd how long after a scale-up the autoscaler
	// waits, before it removes a node: the ClusterAutoscaler's
	// scaleDown.unneededTime and delayAfterAdd. The defaults (10 minutes
	// each) suit a cluster, not a demo: these default to 20 seconds.
	ScaleDownUnneeded, ScaleDownDelayAfterAdd time.Duration
	// SyncPeriod is how often the provider reconciles every Machine
	// without a change (the manager's --sync-period); 0 is
	// controller-runtime's default.
	SyncPeriod time.Duration
	Log        logr.Logger
	// WithoutProvider starts everything but the provider's manager, which
	// StartProvider starts later (a cluster that runs another provider
	// first).
	WithoutProvider bool
	// BootImages configures the provider's boot image controller, which
	// runs when its Mirror is set (off by default, as in a cluster).
	BootImages bootimagesctl.Options
}

// Default autoscaler timing, and how often it looks: the
// cluster-autoscaler's default --scan-interval, which a ClusterAutoscaler
// cannot change.
const (
	defaultScaleDownDelay  = 20 * time.Second
	autoscalerScanInterval = 10 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Cloud == "" {
		o.Cloud = Cloudscale
	}
	if o.ClusterID == "" {
		o.ClusterID = ClusterID
	}
	if o.Platform == "" {
		o.Platform = configv1.ExternalPlatformType
	}
	if o.ScaleDownUnneeded == 0 {
		o.ScaleDownUnneeded = defaultScaleDownDelay
	}
	if o.ScaleDownDelayAfterAdd == 0 {
		o.ScaleDownDelayAfterAdd = defaultScaleDownDelay
	}
	return o
}

// Env is the running environment.
type Env struct {
	// Options as started, defaults filled in.
	Options Options
	Cluster *localcluster.Cluster
	Client  client.Client
	// Cloudscale is the cloudscale.ch emulator, Exoscale the Exoscale
	// emulator: the one of Options.Cloud; the other is nil.
	Cloudscale *emucs.Emulator
	Exoscale   *emuexo.Emulator
	// MachineSetName names the worker MachineSet of MachineSet.
	MachineSetName string
	// APIURL is the emulator's base URL ("http://127.0.0.1:port/"; the
	// Exoscale API's default endpoint is APIURL + "v2").
	APIURL  string
	kubelet *kubelet // of ControlPlaneNode, with Options.Autoscaler
	ccm     *localcluster.Process
	cloud   *emulated
	ctx     context.Context
	cancel  context.CancelFunc
	stops   []func()
	// machineAPI is the provider and the machine-api controllers while
	// they run (machineapi.go).
	machineAPI *machineAPIRun
}

// Start starts everything. Stop stops it, also after an error.
func Start(o Options) (*Env, error) {
	o = o.withDefaults()
	if _, err := Title(o.Cloud); err != nil {
		return nil, err
	}
	if err := CheckPlatform(o.Platform); err != nil {
		return nil, err
	}
	// The machine-api-operator's controllers log through klog.
	klog.SetLogger(o.Log.WithName("machine-api"))
	crds, err := openShiftCRDs(o.OpenShiftAPI)
	if err != nil {
		return nil, err
	}
	var operator *operatorManifests
	if o.Autoscaler {
		if operator, err = readOperatorManifests(o.BinDir); err != nil {
			return nil, err
		}
		crds = append(crds, operator.CRDs...)
	}
	// There is no Service network here (no kube-proxy): the API server
	// reaches a webhook's Service through its endpoints.
	apiArgs := map[string][]string{"enable-aggregator-routing": {"true"}}
	if o.Dir != "" {
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, err
		}
		audit, err := auditArgs(o.Dir)
		if err != nil {
			return nil, err
		}
		maps.Copy(apiArgs, audit)
	}
	e := &Env{Options: o}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.Cluster, err = localcluster.Start(localcluster.Options{BinDir: o.BinDir, CRDs: crds, Dir: o.Dir, APIServerArgs: apiArgs})
	if err != nil {
		return e, err
	}
	scheme, err := manager.Scheme()
	if err != nil {
		return e, err
	}
	if err := configv1.Install(scheme); err != nil {
		return e, err
	}
	if e.Client, err = client.New(e.Cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return e, err
	}
	if err := e.openShiftObjects(ctx); err != nil {
		return e, err
	}
	if err := e.bootImageObjects(ctx); err != nil {
		return e, err
	}

	e.cloud, e.Cloudscale, e.Exoscale, err = newEmulated(o.Cloud, o.BootTime)
	if err != nil {
		return e, err
	}
	e.MachineSetName = o.ClusterID + "-worker-" + e.cloud.zoneSuffix
	srv := httptest.NewServer(e.cloud.handler)
	e.stops = append(e.stops, srv.Close)
	e.APIURL = srv.URL + "/"
	if o.External() {
		if err := e.startCCM(e.APIURL); err != nil {
			return e, err
		}
	}

	e.ctx = ctx
	e.stops = append(e.stops, e.StopMachineAPI)
	if err := e.StartMachineAPI(); err != nil {
		return e, err
	}
	sim := bootsim.New(e.Client, e.cloud.view, bootsim.Options{RegisterDelay: o.RegisterDelay, External: o.External(), Log: o.Log.WithName("boot")})
	e.run(ctx, sim.Run)

	if o.Autoscaler {
		if err := e.startAutoscaling(ctx, operator); err != nil {
			return e, err
		}
	}
	return e, nil
}

// StartProvider starts the provider's manager (Start does, unless
// Options.WithoutProvider), with leader election as the deployer runs it
// or without, until stop or Stop.
func (e *Env) StartProvider(leaderElection bool) (stop func(), err error) {
	mgr, err := e.newProvider(leaderElection)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	wait := goRun(ctx, mgr.Start)
	stop = func() {
		cancel()
		wait()
	}
	e.stops = append(e.stops, stop)
	return stop, nil
}

// newProvider builds the provider's manager for the cluster's identity: the
// Options' cluster ID, and the legacy IDs the Infrastructure's annotation
// declares as the manager is started (the deployer renders them as
// --legacy-cluster-ids, and the Deployment rolls when they change).
func (e *Env) newProvider(leaderElection bool) (ctrl.Manager, error) {
	ids, err := e.DeclaredIDs()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Cluster.Config)
	cfg.UserAgent = ProviderUserAgent
	return manager.New(cfg, manager.Options{
		Cloud:                  e.cloud.provider(e.APIURL),
		ClusterID:              e.Options.ClusterID,
		LegacyClusterIDs:       ids.Legacy,
		Namespace:              Namespace,
		CapacityPublisher:      true,
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		LeaderElection:         leaderElection,
		Log:                    e.Options.Log.WithName("provider"),
		AllowManyPerProcess:    true,
		SyncPeriod:             e.Options.SyncPeriod,
		BootImages:             e.Options.BootImages,
	})
}

// Title names the environment's cloud ("cloudscale.ch", "Exoscale").
func (e *Env) Title() string { return e.cloud.title }

// Servers are the emulator's servers as the boot simulation sees them,
// oldest first.
func (e *Env) Servers() []bootsim.Server { return e.cloud.view.Servers() }

// Harness is the emulator's: request counters and fault injection.
func (e *Env) Harness() *harness.Harness { return e.cloud.harness }

// ServerCalls counts the server creates and deletes the emulator answered.
func (e *Env) ServerCalls() (created, deleted int64) {
	return e.cloud.harness.Count(e.cloud.createRoute), e.cloud.harness.Count(e.cloud.deleteRoute)
}

// DefaultInstanceType is the cloud's 4-vCPU, 8-GiB worker type (flex-8-4,
// standard.large), the MachineSet's when none is given.
func (e *Env) DefaultInstanceType() string { return e.cloud.instanceType }

// DescribeInstanceType names an instance type as the cloud does ("flavor
// flex-8-4", "instance type standard.large"); "" is the default one.
func (e *Env) DescribeInstanceType(t string) string {
	if t == "" {
		t = e.cloud.instanceType
	}
	return e.cloud.typeNoun + " " + t
}

// ScaleDownWithin bounds how long the autoscaler may take to remove n nodes
// once their pods are gone, given the delays it was started with: the wait
// after the last scale-up and the unneeded time, then per node a scan or two
// and the Machine's deletion (drain, server, Node), plus a minute of slack
// for a loaded machine. Waiting for zero stops there: a bound, not a target.
func (e *Env) ScaleDownWithin(n int) time.Duration {
	perNode := 2*autoscalerScanInterval + 10*time.Second
	return e.Options.ScaleDownDelayAfterAdd + e.Options.ScaleDownUnneeded + time.Duration(n)*perNode + time.Minute
}

// startMachineAPIControllers runs the machine-api-operator's MachineSet,
// nodelink and MachineHealthCheck controllers, as the operator's
// machine-api-controllers Deployment would.
func (e *Env) startMachineAPIControllers(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	scheme, err := manager.Scheme()
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{Namespace: {}}},
		Logger:     log.WithName("machine-api"),
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return err
	}
	gate, err := manager.FeatureGate()
	if err != nil {
		return err
	}
	if err := machinecontroller.AddToManagerWithFeatureGates(mgr, ctrl.Options{}, gate, machineset.Add); err != nil {
		return err
	}
	if err := machinecontroller.AddToManager(mgr, ctrl.Options{}, nodelink.Add, machinehealthcheck.Add); err != nil {
		return err
	}
	e.machineAPI.waits = append(e.machineAPI.waits, goRun(ctx, mgr.Start))
	return nil
}

func (e *Env) run(ctx context.Context, f func(context.Context) error) {
	e.stops = append(e.stops, goRun(ctx, f))
}

// goRun runs f in a goroutine; the func it returns waits until f returned.
func goRun(ctx context.Context, f func(context.Context) error) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f(ctx)
	}()
	return func() { <-done }
}

// Stop stops everything it started, the autoscaler first.
func (e *Env) Stop() error {
	if e.cancel != nil {
		e.cancel()
	}
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	if e.Cluster != nil {
		return e.Cluster.Stop()
	}
	return errors.New("nothing was started")
}
