package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/controllers/janitor"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/userdata"
)

func managerCommand() *cobra.Command {
	var (
		o          manager.Options
		cloudName  string
		kubeconfig string
		apiURL     string
		// cloudTimeout bounds each cloud API call, for every cloud.
		cloudTimeout time.Duration
		exoAPI       string
		zapOpts      zap.Options
		userData     = userdata.Renderer{MemoryLimit: userdata.DefaultMemoryLimit}
	)
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the machine controller with the cloud's actuator, and the capacity publisher",
		Long: `Run the provider: the machine-api-operator's machine controller driving this
provider's actuator, which turns Machines into servers and back, and the capacity
publisher, which annotates MachineSets so the cluster autoscaler can scale them
from zero. It serves the admission webhooks that default and validate the
provider spec of Machines and MachineSets (docs/webhook.md).

The cloud's default API token comes from the environment (CLOUDSCALE_API_TOKEN);
a Machine's spec may name a secret with another one (tokenSecret). The token is
never logged. On Exoscale (--cloud exoscale) the default API key and secret come
from EXOSCALE_API_KEY and EXOSCALE_API_SECRET, and a spec's credentialsSecret
holds them under api-key and api-secret (docs/exoscale.md).

No verbosity logs a Secret: --zap-log-level is capped at 5 (messages of higher
levels are dropped), as from 6 up the Kubernetes client would log requests and
their bodies.

User data templates (Jsonnet) are evaluated in a sandbox: a child process of
this binary with the limits of the --user-data-* flags, no imports and no
output to the log.`,
		Example: `  # against a cluster, in the namespace the Machines live in
  CLOUDSCALE_API_TOKEN=... machine-api-provider manager --namespace openshift-machine-api

  # against the emulator (make emulator), from a laptop, without the webhooks
  CLOUDSCALE_API_TOKEN=any machine-api-provider manager --kubeconfig ~/.kube/config \
    --cloudscale-api-url http://127.0.0.1:8282/ --leader-elect=false

  # on Exoscale
  EXOSCALE_API_KEY=EXO... EXOSCALE_API_SECRET=... machine-api-provider manager --cloud exoscale`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(&zapOpts)
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			o.Log = log
			o.UserDataRenderer = &userData
			switch cloudName {
			case "cloudscale":
				cs := cscloud.New(cscloud.Options{BaseURL: apiURL, HTTPClient: &http.Client{Timeout: cloudTimeout}})
				if err := cs.Check(); err != nil {
					return err
				}
				o.Cloud = cs
			case "exoscale":
				exo := exocloud.New(exocloud.Options{APIEndpoint: exoAPI})
				if err := exo.Check(); err != nil {
					return err
				}
				o.Cloud = exo
			default:
				return fmt.Errorf("--cloud %q: the clouds are: cloudscale, exoscale", cloudName)
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			if o.Actuator.CreateGrace <= cloudTimeout {
				return fmt.Errorf("--create-grace (%s) must be longer than --cloud-api-timeout (%s): a create given up on can still make its server until the grace period ends", o.Actuator.CreateGrace, cloudTimeout)
			}
			if o.CloudRateLimit.QPS > 0 && o.CloudRateLimit.Burst == 0 {
				o.CloudRateLimit.Burst = int(2 * o.CloudRateLimit.QPS)
			}
			mgr, err := manager.New(cfg, o)
			if err != nil {
				return err
			}
			log.Info("starting manager", "cloud", cloudName, "namespace", o.Namespace, "maxConcurrentReconciles", o.MaxConcurrentReconciles, "maxConcurrentCreates", o.MaxConcurrentCreates)
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cloudName, "cloud", "cloudscale", "the cloud the Machines run on: cloudscale or exoscale")
	f.DurationVar(&cloudTimeout, "cloud-api-timeout", 30*time.Second, "how long one cloud API call may take before the provider gives up on its answer (a create given up on may still make a server: see --create-grace)")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal")
	f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew its lease before it gives up leading")
	f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	f.StringVar(&apiURL, "cloudscale-api-url", os.Getenv("CLOUDSCALE_API_URL"), "cloudscale.ch API base URL (default $CLOUDSCALE_API_URL, else the real API)")
	f.StringVar(&exoAPI, "exoscale-api-endpoint", os.Getenv(exocloud.EnvAPIEndpoint), "Exoscale API endpoint whose zone list names every zone's endpoint (default $EXOSCALE_API_ENDPOINT, else "+exocloud.DefaultEndpoint+")")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", "openshift-machine-api", "namespace of the Machines, MachineSets and secrets to manage (\"\" for all)")
	f.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 20, "Machines reconciled at once")
	f.IntVar(&o.MaxConcurrentCreates, "max-concurrent-creates", 10, "servers created at once, across all Machines: Machines that would create more wait, the other reconciles go on")
	f.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 0, "client-side limit of requests per second to the Kubernetes API (0: none; the API server's priority and fairness protects it)")
	f.IntVar(&o.KubeAPIBurst, "kube-api-burst", 0, "burst of requests to the Kubernetes API, with --kube-api-qps")
	f.Float64Var(&o.CloudRateLimit.QPS, "cloud-api-qps", 0, "client-side limit of cloud API calls per second, per account (0: the cloud's default, 50 for both clouds)")
	f.IntVar(&o.CloudRateLimit.Burst, "cloud-api-burst", 0, "burst of cloud API calls per account, with --cloud-api-qps (default: twice the rate)")
	f.DurationVar(&o.ServerViewRefresh, "server-view-refresh", 10*time.Second, "how old the shared list of a cluster's servers may be before it is listed again (one list serves every Machine of an account and cluster)")
	f.DurationVar(&o.Actuator.CreateGrace, "create-grace", actuator.DefaultCreateGrace, "how long a create whose answer was never seen may still make a server: no second create is sent for the Machine within it (docs/operations.md says why the default suffices on both clouds)")
	f.DurationVar(&o.Janitor.Interval, "janitor-interval", time.Minute, "how often empty anti-affinity groups are cleaned up and orphan servers looked for")
	f.DurationVar(&o.Janitor.Linger, "janitor-linger", janitor.DefaultLinger, "how long an account's clusters are still swept (empty groups, orphans) after its last Machine and MachineSet are gone, with the credentials they used (negative: not at all)")
	f.DurationVar(&o.Janitor.DeleteOrphansAfter, "delete-orphans-after", 0, "delete servers carrying the cluster's identity but belonging to no Machine this long after they are first seen (0: only report them; at least 10m)")
	f.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "how often every Machine is reconciled without a change")
	f.BoolVar(&o.CapacityPublisher, "capacity-publisher", true, "annotate MachineSets with the capacity of their flavor, for scaling from zero")
	f.IntVar(&o.Webhook.Port, "webhook-port", 0, "HTTPS port of the admission webhooks for Machines and MachineSets, e.g. 9443 (0: no webhooks; see docs/webhook.md)")
	f.StringVar(&o.Webhook.CertDir, "webhook-cert-dir", "/etc/machine-api-provider/tls", "directory with the webhooks' serving certificate, tls.crt and tls.key (the OpenShift service CA's secret, mounted)")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8081", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	f.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":9440", "address of /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "take part in leader election, so only one replica acts")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: --namespace)")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", "", "name of the leader election lease (default: <cloud>-machine-api-provider)")
	f.DurationVar(&userData.Timeout, "user-data-timeout", userdata.DefaultTimeout, "how long a user data template may take to evaluate before its Machine fails")
	f.Var(&byteSize{&userData.MemoryLimit}, "user-data-memory-limit", "how much memory a user data template may take, e.g. 256Mi (templates run in a sandbox process each)")
	f.IntVar(&userData.MaxConcurrent, "user-data-max-concurrent", userdata.DefaultMaxConcurrent, "user data templates evaluated at once (each in its own sandbox process)")
	// zap registers Go flags (--zap-log-level, …); hand them to cobra.
	bindLogFlags(f, &zapOpts)
	return cmd
}
