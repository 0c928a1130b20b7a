package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

func managerCommand() *cobra.Command {
	var (
		o          manager.Options
		cloudName  string
		kubeconfig string
		apiURL     string
		zapOpts    zap.Options
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
never logged.`,
		Example: `  # against a cluster, in the namespace the Machines live in
  CLOUDSCALE_API_TOKEN=... machine-api-provider manager --namespace openshift-machine-api

  # against the emulator (make emulator), from a laptop, without the webhooks
  CLOUDSCALE_API_TOKEN=any machine-api-provider manager --kubeconfig ~/.kube/config \
    --cloudscale-api-url http://127.0.0.1:8282/ --leader-elect=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			o.Log = log
			switch cloudName {
			case "cloudscale":
				o.Cloud = cscloud.New(cscloud.Options{BaseURL: apiURL})
			default:
				return fmt.Errorf("--cloud %q: the clouds are: cloudscale", cloudName)
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			mgr, err := manager.New(cfg, o)
			if err != nil {
				return err
			}
			log.Info("starting manager", "cloud", cloudName, "namespace", o.Namespace, "maxConcurrentReconciles", o.MaxConcurrentReconciles)
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cloudName, "cloud", "cloudscale", "the cloud the Machines run on")
	f.StringVar(&apiURL, "cloudscale-api-url", os.Getenv("CLOUDSCALE_API_URL"), "cloudscale.ch API base URL (default $CLOUDSCALE_API_URL, else the real API)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", "openshift-machine-api", "namespace of the Machines, MachineSets and secrets to manage (\"\" for all)")
	f.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 10, "Machines reconciled at once")
	f.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 50, "requests per second to the Kubernetes API")
	f.IntVar(&o.KubeAPIBurst, "kube-api-burst", 100, "burst of requests to the Kubernetes API")
	f.DurationVar(&o.SyncPeriod, "sync-period", 10*time.Minute, "how often every Machine is reconciled without a change")
	f.BoolVar(&o.CapacityPublisher, "capacity-publisher", true, "annotate MachineSets with the capacity of their flavor, for scaling from zero")
	f.IntVar(&o.Webhook.Port, "webhook-port", 0, "HTTPS port of the admission webhooks for Machines and MachineSets, e.g. 9443 (0: no webhooks; see docs/webhook.md)")
	f.StringVar(&o.Webhook.CertDir, "webhook-cert-dir", "/etc/machine-api-provider/tls", "directory with the webhooks' serving certificate, tls.crt and tls.key (the OpenShift service CA's secret, mounted)")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8081", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	f.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":9440", "address of /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "take part in leader election, so only one replica acts")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: --namespace)")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", "", "name of the leader election lease (default: <cloud>-machine-api-provider)")
	// zap registers Go flags (--zap-log-level, …); hand them to cobra.
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	zapOpts.BindFlags(logFlags)
	f.AddGoFlagSet(logFlags)
	return cmd
}
