package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

func deployerCommand() *cobra.Command {
	var (
		o              deployer.ManagerOptions
		kubeconfig     string
		zapOpts        zap.Options
		credentialsEnv []string
		providerEnv    []string
		// own are the deployer's options it hands the manager as they
		// are (deployer.OwnFlags), by flag name
		own = map[string]*string{}
	)
	cmd := &cobra.Command{
		Use:   "deployer",
		Short: "Deploy the Machine API controllers where the machine-api-operator deploys none",
		Long: `Deploy the Machine API controllers on a cluster whose platform the
machine-api-operator does not know (None, External), where it deploys none.

The deployer reads the release's images from the operator's ConfigMap
machine-api-operator-images and applies the Deployment
machine-api-controllers-<cloud> (after --cloud: machine-api-controllers-cloudscale
by default): the operator's machineset, nodelink and machine-healthcheck
controllers, this provider's manager as the machine controller, and
kube-rbac-proxy sidecars for their metrics. It rolls the
controllers when the images change (a cluster upgrade) and puts the
Deployment back when it is deleted or edited.

On OpenShift the machine controller gets the cluster-wide proxy (the status
of proxies.config.openshift.io/cluster as HTTP_PROXY, HTTPS_PROXY, NO_PROXY)
and the cluster's trusted CA bundle, which the network operator injects into
the ConfigMap machine-api-provider-trusted-ca the deployer creates; a change
of either rolls the controllers.

The manager's flags are set in the ConfigMap machine-api-provider-config of
the namespace (each key a flag of "machine-api-provider manager" without the
dashes); the deployer checks them as the manager would and rolls the
controllers, or refuses them with a Warning event and keeps the running
configuration. Where the manager sends its credentials and what the
cluster's nodes boot are no keys of it: the cloud's API endpoint is
--cloudscale-api-url or --exoscale-api-endpoint of the deployer, and the
boot image mirror its --boot-images-mirror (or their environment variables). The manager reads its default credentials from the secret
--credentials-secret at every use: replacing the secret needs no restart.

Where the operator runs its own machine-api-controllers (a platform it
supports), the deployer stands back and says so in the ConfigMap
machine-api-provider-deployer-status and in an event.`,
		Example: `  # in the cluster, from the provider's image
  machine-api-provider deployer --provider-image "$PROVIDER_IMAGE"

  # from a laptop
  machine-api-provider deployer --kubeconfig ~/.kube/config --leader-elect=false \
    --provider-image ghcr.io/appuio/machine-api-provider:v0.1.0

  # on Exoscale: applies machine-api-controllers-exoscale
  machine-api-provider deployer --provider-image "$PROVIDER_IMAGE" --cloud exoscale \
    --service-account machine-api-controllers-exoscale --credentials-secret exoscale-credentials`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := commandLog(cmd)
			o.Log = log
			if o.ProviderImage == "" {
				return errors.New("--provider-image (or $PROVIDER_IMAGE) is required: the image the machine-controller runs")
			}
			o.CheckManagerArgs = checkManagerArgs
			o.Own = map[string]string{}
			for name, v := range own {
				if *v != "" {
					o.Own[name] = *v
				}
			}
			// The manager's own check of the mirror, here: a mirror it
			// would not start with is the deployer's error, not a
			// refusal of every ConfigMap.
			if err := checkBootImagesMirror(o.Own["boot-images-mirror"]); err != nil {
				return err
			}
			for _, kv := range providerEnv {
				name, value, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					return fmt.Errorf("--provider-env %q: want NAME=value", kv)
				}
				o.ProviderEnv = append(o.ProviderEnv, corev1.EnvVar{Name: name, Value: value})
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			mgr, err := deployer.NewManager(cfg, o)
			if err != nil {
				return err
			}
			log.Info("starting deployer", "namespace", o.Namespace, "deployment", deployer.DeploymentName(o.Cloud),
				"serviceAccount", o.ServiceAccount, "providerImage", o.ProviderImage)
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", deployer.DefaultNamespace, "namespace of the machine-api-operator's images ConfigMap and of the Deployment")
	f.StringVar(&o.ProviderImage, "provider-image", os.Getenv("PROVIDER_IMAGE"), "image of this provider, run as the machine-controller (default $PROVIDER_IMAGE)")
	f.StringVar(&o.ClusterID, "cluster-id", "", "the cluster's identity handed to the manager (default: the Infrastructure's status.infrastructureName, as on every OpenShift cluster)")
	f.StringSliceVar(&o.LegacyClusterIDs, "legacy-cluster-ids", nil, "with --cluster-id: the legacy cluster IDs handed to the manager (default: the Infrastructure's annotation machine.appuio.io/legacy-cluster-ids)")
	f.StringVar(&o.TokenSecret, "token-secret", "cloudscale-token", "the same as --credentials-secret")
	f.StringVar(&o.TokenSecret, "credentials-secret", "cloudscale-token", "secret holding the provider's default credentials (cloudscale.ch: key token; Exoscale: api-key and api-secret), read by the manager at every use (optional: Machines may name their own)")
	f.StringVar(&o.Cloud, "cloud", "", "the cloud the provider's manager runs for, as its --cloud; it names the Deployment machine-api-controllers-<cloud> (default: the manager's, cloudscale)")
	// Before the manager read its default credentials from the secret,
	// the deployer mapped the secret's keys to environment variables.
	f.StringSliceVar(&credentialsEnv, "credentials-env", nil, "ignored: the manager reads the keys of --credentials-secret itself")
	_ = f.MarkDeprecated("credentials-env", "the manager reads the secret's keys itself (cloudscale.ch: token; Exoscale: api-key, api-secret)")
	f.StringSliceVar(&providerEnv, "provider-env", nil, "NAME=value: further environment of the provider (the API endpoints have flags of their own)")
	f.StringVar(&o.ServiceAccount, "service-account", "machine-api-controllers", "service account of the controllers (config/ installs machine-api-controllers-<cloud> and sets it)")
	// The API endpoints and the boot image mirror are the deployer's own
	// options (its flags or its environment, as the installation sets
	// them: a kustomize patch, an OLM Subscription's config.env), never
	// keys of the namespace's ConfigMap: the default credentials and every
	// create's user data go where the endpoints point, and every new node
	// boots what the mirror serves (deployer.OwnFlags, one table).
	for _, of := range deployer.OwnFlags {
		own[of.Name] = f.String(of.Name, os.Getenv(of.Env), of.Usage)
	}
	f.BoolVar(&o.WithoutMachineHealthCheck, "without-machine-healthcheck", false, "leave out the machine-healthcheck controller")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	f.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":9441", "address of /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "take part in leader election, so only one replica acts")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", "", "name of the leader election lease in --namespace (default: machine-api-provider-deployer)")
	bindLogFlags(cmd, &zapOpts)
	return cmd
}
