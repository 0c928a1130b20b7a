// Command cluster-autoscaler is the Kubernetes cluster-autoscaler
// (k8s.io/autoscaler/cluster-autoscaler, pinned in go.mod) with a thin main
// package of our own.
//
// Upstream's main package cannot be built from the module proxy: it imports
// the ProvisioningRequest v1 API of the nested apis module, and no served
// version of that module has it. Everything else is upstream's: this file
// only wires upstream packages together the way upstream's main.go of the
// pinned version does, call by call, and leaves out the ProvisioningRequest
// support (see README.md for exactly what is missing). The autoscaling loop,
// the scheduling simulation, the expanders, the estimator and the cloud
// providers are upstream's, unmodified but for patches/*.patch, which the
// Makefile applies to a copy of the pinned module before building (one, so
// that the Cluster API provider can scale a node group to zero).
//
// The Makefile builds it with -tags clusterapi, so the cloud provider builder
// compiles in the Cluster API provider only (which is then the default
// --cloud-provider).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	kube_flag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentopts "k8s.io/component-base/config/options"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config/flags"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/core/podlistprocessor"
	"k8s.io/autoscaler/cluster-autoscaler/core/scaleup/orchestrator"
	"k8s.io/autoscaler/cluster-autoscaler/debuggingsnapshot"
	"k8s.io/autoscaler/cluster-autoscaler/loop"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	ca_processors "k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/processors/nodegroupset"
	"k8s.io/autoscaler/cluster-autoscaler/processors/nodeinfosprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors/podinjection"
	podinjectionbackoff "k8s.io/autoscaler/cluster-autoscaler/processors/podinjection/backoff"
	"k8s.io/autoscaler/cluster-autoscaler/processors/pods"
	"k8s.io/autoscaler/cluster-autoscaler/processors/scaledowncandidates"
	"k8s.io/autoscaler/cluster-autoscaler/processors/scaledowncandidates/emptycandidates"
	"k8s.io/autoscaler/cluster-autoscaler/processors/scaledowncandidates/previouscandidates"
	"k8s.io/autoscaler/cluster-autoscaler/processors/status"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/clustersnapshot/predicate"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/clustersnapshot/store"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drainability/rules"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/options"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/scheduling"
	kube_util "k8s.io/autoscaler/cluster-autoscaler/utils/kubernetes"
	"k8s.io/autoscaler/cluster-autoscaler/version"
)

// Upstream's leader election defaults (main.go, leaderElectionConfiguration).
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// errProvisioningRequests: --enable-provisioning-requests is still registered
// by upstream's config/flags, but this build has no ProvisioningRequest
// support; fail instead of silently ignoring the flag.
var errProvisioningRequests = errors.New("--enable-provisioning-requests is not supported by this build " +
	"(the ProvisioningRequest v1 API of k8s.io/autoscaler/cluster-autoscaler/apis is not served; see hack/tools/cluster-autoscaler/README.md)")

func main() {
	// Flag and logging set-up as upstream: klog and upstream's config/flags
	// register on the standard flag set, kube_flag.InitFlags merges it into
	// pflag's and parses.
	klog.InitFlags(nil)
	featureGate := utilfeature.DefaultMutableFeatureGate
	loggingConfig := logsapi.NewLoggingConfiguration()
	if err := logsapi.AddFeatureGates(featureGate); err != nil {
		klog.Fatalf("Failed to add logging feature flags: %v", err)
	}
	leaderElection := componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:   true,
		LeaseDuration: metav1.Duration{Duration: defaultLeaseDuration},
		RenewDeadline: metav1.Duration{Duration: defaultRenewDeadline},
		RetryPeriod:   metav1.Duration{Duration: defaultRetryPeriod},
		ResourceLock:  resourcelock.LeasesResourceLock,
		ResourceName:  "cluster-autoscaler",
	}
	// Must be bound before kube_flag.InitFlags parses (as upstream).
	componentopts.BindLeaderElectionFlags(&leaderElection, pflag.CommandLine)
	logsapi.AddFlags(loggingConfig, pflag.CommandLine)
	featureGate.AddFlag(pflag.CommandLine)
	// Not upstream's: upstream has no --version flag. Printing the pinned
	// module version lets a caller check which build it runs.
	showVersion := pflag.CommandLine.Bool("version", false, "Print the cluster-autoscaler version and the pinned module version, then exit.")
	kube_flag.InitFlags()

	if *showVersion {
		printVersion()
		return
	}

	autoscalingOpts := flags.AutoscalingOptions()

	// As upstream: the DRA scheduler plugin is only in the default profile
	// when the feature gate is on, so --enable-dynamic-resource-allocation
	// turns the gate on too.
	if autoscalingOpts.DynamicResourceAllocationEnabled && !featureGate.Enabled(features.DynamicResourceAllocation) {
		if err := featureGate.SetFromMap(map[string]bool{string(features.DynamicResourceAllocation): true}); err != nil {
			klog.Fatalf("couldn't enable the DRA feature gate: %v", err)
		}
	}

	logs.InitLogs()
	if err := logsapi.ValidateAndApply(loggingConfig, featureGate); err != nil {
		klog.Fatalf("Failed to validate and apply logging configuration: %v", err)
	}

	// Fail before anything else starts rather than after winning an election.
	if autoscalingOpts.ProvisioningRequestEnabled {
		klog.Fatal(errProvisioningRequests)
	}

	healthCheck := metrics.NewHealthCheck(autoscalingOpts.MaxInactivityTime, autoscalingOpts.MaxFailingTime)
	klog.V(1).Infof("Cluster Autoscaler %s", version.ClusterAutoscalerVersion)
	snapshotter := debuggingsnapshot.NewDebuggingSnapshotter(autoscalingOpts.DebuggingSnapshotEnabled)

	go serveMetrics(autoscalingOpts.Address, autoscalingOpts.DebuggingSnapshotEnabled, autoscalingOpts.EnableProfiling, healthCheck, snapshotter)

	if !leaderElection.LeaderElect {
		run(healthCheck, snapshotter)
		return
	}
	runWithLeaderElection(leaderElection, healthCheck, snapshotter)
}

// serveMetrics serves /metrics, /health-check and optionally /snapshotz and
// the pprof routes on --address, as upstream does.
func serveMetrics(addr string, snapshots, profiling bool, healthCheck *metrics.HealthCheck, snapshotter debuggingsnapshot.DebuggingSnapshotter) {
	m := mux.NewPathRecorderMux("cluster-autoscaler")
	m.Handle("/metrics", legacyregistry.Handler())
	if snapshots {
		m.HandleFunc("/snapshotz", snapshotter.ResponseHandler)
	}
	m.HandleFunc("/health-check", healthCheck.ServeHTTP)
	if profiling {
		routes.Profiling{}.Install(m)
	}
	err := http.ListenAndServe(addr, m)
	klog.Fatalf("Failed to start metrics: %v", err)
}

// runWithLeaderElection is upstream's leader-elected start: check the client
// works, take the lease in --namespace and run until the lease is lost
// (which exits the process).
func runWithLeaderElection(le componentbaseconfig.LeaderElectionConfiguration, healthCheck *metrics.HealthCheck, snapshotter debuggingsnapshot.DebuggingSnapshotter) {
	opts := flags.AutoscalingOptions()
	id, err := os.Hostname()
	if err != nil {
		klog.Fatalf("Unable to get hostname: %v", err)
	}
	kubeClient := kube_util.CreateKubeClient(opts.KubeClientOpts)
	if _, err := kubeClient.CoreV1().Nodes().List(context.TODO(), metav1.ListOptions{}); err != nil {
		klog.Fatalf("Failed to get nodes from apiserver: %v", err)
	}
	lock, err := resourcelock.New(le.ResourceLock, opts.ConfigNamespace, le.ResourceName,
		kubeClient.CoreV1(), kubeClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{
			Identity:      id,
			EventRecorder: kube_util.CreateEventRecorder(kubeClient, opts.RecordDuplicatedEvents),
		})
	if err != nil {
		klog.Fatalf("Unable to create leader election lock: %v", err)
	}
	leaderelection.RunOrDie(context.TODO(), leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { run(healthCheck, snapshotter) },
			OnStoppedLeading: func() { klog.Fatalf("lost master") },
		},
	})
}

// run builds the autoscaler and runs its loop forever, as upstream's run().
func run(healthCheck *metrics.HealthCheck, snapshotter debuggingsnapshot.DebuggingSnapshotter) {
	opts := flags.AutoscalingOptions()
	metrics.RegisterAll(opts.EmitPerNodeGroupMetrics)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	autoscaler, trigger, err := buildAutoscaler(ctx, snapshotter)
	if err != nil {
		klog.Fatalf("Failed to create autoscaler: %v", err)
	}
	cleanUpOnSignal(autoscaler)
	healthCheck.StartMonitoring()
	if err := autoscaler.Start(); err != nil {
		klog.Fatalf("Failed to autoscaler background components: %v", err)
	}

	if !opts.FrequentLoopsEnabled {
		for {
			time.Sleep(opts.ScanInterval)
			loop.RunAutoscalerOnce(autoscaler, healthCheck, time.Now())
		}
	}
	// --frequent-loops-enabled: the trigger starts the next iteration early
	// after a productive one or a new unschedulable pod. Upstream passes the
	// older of the last two start times so that alternating activities still
	// count as productive; kept as is.
	lastRun, previousRun := time.Now(), time.Now()
	for {
		trigger.Wait(previousRun)
		previousRun, lastRun = lastRun, time.Now()
		loop.RunAutoscalerOnce(autoscaler, healthCheck, lastRun)
	}
}

// cleanUpOnSignal: on SIGINT/SIGTERM/SIGQUIT let the autoscaler clean up
// (e.g. its status ConfigMap) and exit, as upstream's registerSignalHandlers.
func cleanUpOnSignal(autoscaler core.Autoscaler) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	klog.V(1).Info("Registered cleanup signal handler")
	go func() {
		<-sigs
		klog.V(1).Info("Received signal, attempting cleanup")
		autoscaler.ExitCleanUp()
		klog.V(1).Info("Cleaned up, exiting...")
		klog.Flush()
		os.Exit(0)
	}()
}

// buildAutoscaler is upstream's buildAutoscaler without the
// ProvisioningRequest branch. The cloud provider (cloudprovider/builder),
// the expander strategy and the estimator are left unset in the options, so
// core.NewAutoscaler builds them from the flags exactly as upstream does.
func buildAutoscaler(ctx context.Context, snapshotter debuggingsnapshot.DebuggingSnapshotter) (core.Autoscaler, *loop.LoopTrigger, error) {
	autoscalingOptions := flags.AutoscalingOptions()
	kubeClient := kube_util.CreateKubeClient(autoscalingOptions.KubeClientOpts)

	// As upstream: drop managedFields from informer objects to save memory.
	trimManagedFields := func(obj interface{}) (interface{}, error) {
		if accessor, err := meta.Accessor(obj); err == nil {
			accessor.SetManagedFields(nil)
		}
		return obj, nil
	}
	informerFactory := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTransform(trimManagedFields))

	fwHandle, err := framework.NewHandle(informerFactory, autoscalingOptions.SchedulerConfig, autoscalingOptions.DynamicResourceAllocationEnabled)
	if err != nil {
		return nil, nil, err
	}
	deleteOptions := options.NewNodeDeleteOptions(autoscalingOptions)
	drainabilityRules := rules.Default(deleteOptions)
	snapshotStore := store.NewDeltaSnapshotStore(autoscalingOptions.ClusterSnapshotParallelism)

	opts := core.AutoscalerOptions{
		AutoscalingOptions:   autoscalingOptions,
		FrameworkHandle:      fwHandle,
		ClusterSnapshot:      predicate.NewPredicateSnapshot(snapshotStore, fwHandle, autoscalingOptions.DynamicResourceAllocationEnabled),
		KubeClient:           kubeClient,
		InformerFactory:      informerFactory,
		DebuggingSnapshotter: snapshotter,
		DeleteOptions:        deleteOptions,
		DrainabilityRules:    drainabilityRules,
		// Upstream wraps this in the ProvisioningRequest orchestrator only
		// with --enable-provisioning-requests; here it is always the default.
		ScaleUpOrchestrator: orchestrator.New(),
	}

	opts.Processors = ca_processors.DefaultProcessors(autoscalingOptions)
	opts.Processors.TemplateNodeInfoProvider = nodeinfosprovider.NewDefaultTemplateNodeInfoProvider(&autoscalingOptions.NodeInfoCacheExpireTime, autoscalingOptions.ForceDaemonSets)

	// Left out here (upstream, with --enable-provisioning-requests): the
	// ProvisioningRequest pods filter, pods injector and processor in the pod
	// list processor, the ProvisioningRequest scale-up orchestrator, the
	// loop-start observer and the scale-up enforcer. main() refuses the flag.
	podListProcessor := podlistprocessor.NewDefaultPodListProcessor(scheduling.ScheduleAnywhere)

	if autoscalingOptions.ProactiveScaleupEnabled {
		backoffRegistry := podinjectionbackoff.NewFakePodControllerRegistry()
		podListProcessor = pods.NewCombinedPodListProcessor([]pods.PodListProcessor{
			podinjection.NewPodInjectionPodListProcessor(backoffRegistry),
			podListProcessor,
			podinjection.NewEnforceInjectedPodsLimitProcessor(autoscalingOptions.PodInjectionLimit),
		})
		// Must come first, as upstream: it hides the fake pods from the
		// scale-up status so that no events are emitted for them.
		opts.Processors.ScaleUpStatusProcessor = status.NewCombinedScaleUpStatusProcessor([]status.ScaleUpStatusProcessor{
			podinjection.NewFakePodsScaleUpStatusProcessor(backoffRegistry),
			opts.Processors.ScaleUpStatusProcessor,
		})
	}
	opts.Processors.PodListProcessor = podListProcessor

	// Scale-down candidate ordering: empty nodes first, then the previous
	// loop's candidates; optionally the per-node-group scale-down delay.
	previousCandidates := previouscandidates.NewPreviousCandidates()
	opts.Processors.ScaleDownCandidatesNotifier.Register(previousCandidates)
	candidates := scaledowncandidates.NewCombinedScaleDownCandidatesProcessor()
	candidates.Register(scaledowncandidates.NewScaleDownCandidatesSortingProcessor([]scaledowncandidates.CandidatesComparer{
		emptycandidates.NewEmptySortingProcessor(emptycandidates.NewNodeInfoGetter(opts.ClusterSnapshot), deleteOptions, drainabilityRules),
		previousCandidates,
	}))
	if autoscalingOptions.ScaleDownDelayTypeLocal {
		delay := scaledowncandidates.NewScaleDownCandidatesDelayProcessor()
		candidates.Register(delay)
		opts.Processors.ScaleStateNotifier.Register(delay)
	}
	opts.Processors.ScaleDownNodeProcessor = candidates

	// Node group balancing. Upstream's AWS/Azure/GCE special cases are kept
	// for fidelity although only the clusterapi provider is compiled in.
	var comparator nodegroupset.NodeInfoComparator
	if len(autoscalingOptions.BalancingLabels) > 0 {
		comparator = nodegroupset.CreateLabelNodeInfoComparator(autoscalingOptions.BalancingLabels)
	} else {
		build := nodegroupset.CreateGenericNodeInfoComparator
		switch autoscalingOptions.CloudProviderName {
		case cloudprovider.AzureProviderName:
			build = nodegroupset.CreateAzureNodeInfoComparator
		case cloudprovider.AwsProviderName:
			build = nodegroupset.CreateAwsNodeInfoComparator
			opts.Processors.TemplateNodeInfoProvider = nodeinfosprovider.NewAsgTagResourceNodeInfoProvider(&autoscalingOptions.NodeInfoCacheExpireTime, autoscalingOptions.ForceDaemonSets)
		case cloudprovider.GceProviderName:
			build = nodegroupset.CreateGceNodeInfoComparator
			opts.Processors.TemplateNodeInfoProvider = nodeinfosprovider.NewAnnotationNodeInfoProvider(&autoscalingOptions.NodeInfoCacheExpireTime, autoscalingOptions.ForceDaemonSets)
		}
		comparator = build(autoscalingOptions.BalancingExtraIgnoredLabels, autoscalingOptions.NodeGroupSetRatios)
	}
	opts.Processors.NodeGroupSetProcessor = &nodegroupset.BalancingNodeGroupSetProcessor{Comparator: comparator}

	// Published once, as upstream.
	metrics.UpdateCPULimitsCores(autoscalingOptions.MinCoresTotal, autoscalingOptions.MaxCoresTotal)
	metrics.UpdateMemoryLimitsBytes(autoscalingOptions.MinMemoryTotal, autoscalingOptions.MaxMemoryTotal)
	metrics.InitMetrics()

	autoscaler, err := core.NewAutoscaler(opts, informerFactory)
	if err != nil {
		return nil, nil, err
	}

	// Start the informers only now: NewAutoscaler may register more.
	stop := make(chan struct{})
	informerFactory.Start(stop)
	klog.Info("Initializing resource informers, blocking until caches are synced")
	for _, synced := range informerFactory.WaitForCacheSync(stop) {
		if !synced {
			return nil, nil, fmt.Errorf("unable to start and sync resource informers")
		}
	}

	podObserver := loop.StartPodObserver(ctx, kube_util.CreateKubeClient(autoscalingOptions.KubeClientOpts))
	// Upstream passes its ProvisioningRequest pods injector as the second
	// argument (nil unless enabled); the trigger accepts nil.
	trigger := loop.NewLoopTrigger(autoscaler, nil, podObserver, autoscalingOptions.ScanInterval)
	return autoscaler, trigger, nil
}

// printVersion prints upstream's version constant and the module version
// this binary was built from (the pin in go.mod), and whether it was built
// from the Makefile's patched copy of that version.
func printVersion() {
	const mod = "k8s.io/autoscaler/cluster-autoscaler"
	modVersion, patched := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == mod {
				modVersion = dep.Version
				if dep.Replace != nil { // only the Makefile replaces it
					patched = " with the patches of hack/tools/cluster-autoscaler/patches"
				}
			}
		}
	}
	fmt.Printf("cluster-autoscaler %s (%s %s%s, without ProvisioningRequest support)\n", version.ClusterAutoscalerVersion, mod, modVersion, patched)
}
