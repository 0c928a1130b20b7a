package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

func webhookCommand() *cobra.Command {
	var (
		o          webhooks.ServeOptions
		cloudName  string
		kubeconfig string
		zapOpts    zap.Options
	)
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the admission webhooks that default and validate Machines and MachineSets",
		Long: `Serve the admission webhooks for Machines and MachineSets whose provider
spec is the cloud's: a defaulting one and a validating one, each for Machines
and for MachineSets (docs/webhook.md). They run the very defaulting and
validation the actuator runs, and make no cloud API call.

The webhook server needs no cloud credentials: it answers the API server's
admission requests from what they hold, and the cluster's identity, which it
reads from the Infrastructure named cluster (its service account may get
that one object) unless --cluster-id gives it: its infrastructureName and the
legacy cluster IDs its annotation machine.appuio.io/legacy-cluster-ids
declares (read again every minute, and when a label names an ID not declared).
A Machine or MachineSet whose label machine.openshift.io/cluster-api-cluster
names another cluster is refused. /readyz answers once the server listens and knows the identity.`,
		Example: `  # in the cluster (config/webhook), with the service CA's certificate
  machine-api-provider webhook --cloud exoscale`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := commandLog(cmd)
			o.Log = log
			var c cloud.Cloud
			switch cloudName {
			case "cloudscale":
				c = cscloud.New(cscloud.Options{})
			case "exoscale":
				c = exocloud.New(exocloud.Options{})
			default:
				return fmt.Errorf("--cloud %q: the clouds are: cloudscale, exoscale", cloudName)
			}
			o.Cloud = c
			if o.ClusterID == "" {
				// The pod's service account, which may get the
				// Infrastructure named cluster (config/webhook).
				cfg, err := restConfig(kubeconfig)
				if err != nil {
					return fmt.Errorf("reading the cluster's identity needs the API server (or give --cluster-id): %w", err)
				}
				o.Config = cfg
			}
			return webhooks.Serve(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cloudName, "cloud", "cloudscale", "the cloud whose provider specs to default and validate: cloudscale or exoscale")
	f.StringVar(&o.ClusterID, "cluster-id", "", "the cluster's identity, which the label machine.openshift.io/cluster-api-cluster of Machines and MachineSets must name (default: the Infrastructure's status.infrastructureName, read once with the pod's service account)")
	f.StringSliceVar(&o.LegacyClusterIDs, "legacy-cluster-ids", nil, "with --cluster-id: the legacy cluster IDs the cluster also owns (default: the Infrastructure's annotation machine.appuio.io/legacy-cluster-ids)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file, to read the Infrastructure (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.IntVar(&o.Port, "port", 9443, "HTTPS port of the webhooks")
	f.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with the serving certificate, tls.crt and tls.key (reloaded when they change)")
	f.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":9440", "address of /healthz and /readyz (\"0\" disables them)")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	bindLogFlags(cmd, &zapOpts)
	return cmd
}
