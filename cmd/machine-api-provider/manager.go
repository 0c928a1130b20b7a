package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
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
		// defaultSecret names the secret of the default credentials,
		// "name" (in --namespace) or "namespace/name".
		defaultSecret string
		zapOpts       zap.Options
		userData      = userdata.Renderer{MemoryLimit: userdata.DefaultMemoryLimit}
	)
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the machine controller with the cloud's actuator, and the capacity publisher",
		Long: `Run the provider: the machine-api-operator's machine controller driving this
provider's actuator, which turns Machines into servers and back, and the capacity
publisher, which annotates MachineSets so the cluster autoscaler can scale them
from zero. The admission webhooks run apart, in the webhook subcommand
(docs/webhook.md).

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
  CLOUDSCALE_API_TOKEN=... machine-api-provider manager --namespace openshift-machine-api \
    --cluster-id "$(oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}')"

  # against the emulator (make emulator), from a laptop
  CLOUDSCALE_API_TOKEN=any machine-api-provider manager --kubeconfig ~/.kube/config \
    --cloudscale-api-url http://127.0.0.1:8282/ --leader-elect=false --cluster-id dev-1

  # on Exoscale
  EXOSCALE_API_KEY=EXO... EXOSCALE_API_SECRET=... machine-api-provider manager --cloud exoscale --cluster-id c1-x7k2p`,
		Args: cobra.NoArgs,
		// The checks that need nothing but the flags: the deployer runs
		// them too, on the flags a cluster's ConfigMap sets
		// (checkManagerArgs), so that it never rolls out a manager that
		// would not start.
		PreRunE: func(*cobra.Command, []string) error {
			return checkManagerFlags(cloudName, cloudTimeout, defaultSecret, &o, &userData)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := commandLog(cmd)
			o.Log = log
			o.UserDataRenderer = &userData
			c, err := newCloud(cloudName, cloudEndpoints{cloudscale: apiURL, exoscale: exoAPI}, cloudTimeout, secretRef(defaultSecret, o.Namespace))
			if err != nil {
				return err
			}
			o.Cloud = c
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			if o.CloudRateLimit.QPS > 0 && o.CloudRateLimit.Burst == 0 {
				o.CloudRateLimit.Burst = int(2 * o.CloudRateLimit.QPS)
			}
			mgr, err := manager.New(cfg, o)
			if err != nil {
				return err
			}
			log.Info("starting manager", "cloud", cloudName, "clusterID", o.ClusterID, "legacyClusterIDs", o.LegacyClusterIDs, "namespace", o.Namespace, "maxConcurrentReconciles", o.MaxConcurrentReconciles, "maxConcurrentCreates", o.MaxConcurrentCreates)
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
	f.StringVar(&defaultSecret, "default-credentials-secret", "", "secret holding the default credentials (cloudscale.ch: key token; Exoscale: api-key and api-secret), \"name\" in --namespace or \"namespace/name\", read at every use, so that replacing it takes effect without a restart (instead of the environment's)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", "openshift-machine-api", "namespace of the Machines, MachineSets and secrets to manage (\"\" for all)")
	f.StringVar(&o.ClusterID, "cluster-id", "", "the cluster's identity, its Infrastructure's status.infrastructureName (required; the deployer sets it): the provider acts only on Machines and MachineSets whose label machine.openshift.io/cluster-api-cluster names it, and only on servers tagged with it")
	f.StringSliceVar(&o.LegacyClusterIDs, "legacy-cluster-ids", nil, "cluster IDs this cluster also owns, besides --cluster-id (the Terraform modules' cluster_id, which fleet clusters' Machines and servers carry; the deployer renders it from the Infrastructure's annotation "+clusterid.LegacyAnnotation+"): Machines and MachineSets labelled with one are the cluster's, and their servers are those tagged with it")
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
	f.StringVar(&o.BootImages.Mirror, "boot-images-mirror", os.Getenv("BOOT_IMAGES_MIRROR"), "turns the boot image controller on (off by default): the base URL of the mirror holding the release's RHCOS images as the cloud imports them (default $BOOT_IMAGES_MIRROR; docs/boot-images.md); the controller imports them into the zones the MachineSets use. On a cluster the deployer's own --boot-images-mirror sets it, never its ConfigMap")
	f.BoolVar(&o.BootImages.FollowAll, "boot-images-follow-all", false, "with --boot-images-mirror: move every MachineSet without an owner reference to its release's boot image once imported, not only those labelled "+bootimages.FollowLabel+"=true (a MachineSet labelled false stays)")
	f.BoolVar(&o.BootImages.RecordSkew, "boot-images-record-skew", false, "with --boot-images-mirror: once every MachineSet boots an image the provider imported, record the oldest in MachineConfiguration cluster's spec.bootImageSkewEnforcement (Manual, rhcosVersion), so that the machine-config-operator's skew enforcement (OpenShift 4.22 on) knows the boot images")
	f.DurationVar(&o.BootImages.PruneAfter, "boot-images-prune-after", 24*time.Hour, "with --boot-images-mirror: delete an image the provider imported once no MachineSet or Machine has named it for this long (0: never)")
	f.DurationVar(&o.BootImages.Interval, "boot-images-interval", time.Minute, "with --boot-images-mirror: how often the release's boot images and the MachineSets are looked at")
	f.BoolVar(&o.CapacityPublisher, "capacity-publisher", true, "annotate MachineSets with the capacity of their flavor, for scaling from zero")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8081", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	f.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":9440", "address of /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "take part in leader election, so only one replica acts")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: --namespace)")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", "", "name of the leader election lease (default: <cloud>-machine-api-provider)")
	f.DurationVar(&userData.Timeout, "user-data-timeout", userdata.DefaultTimeout, "how long a user data template may take to evaluate before its Machine fails")
	f.Var(&byteSize{&userData.MemoryLimit}, "user-data-memory-limit", "how much memory a user data template may take, e.g. 256Mi (templates run in a sandbox process each)")
	f.IntVar(&userData.MaxConcurrent, "user-data-max-concurrent", userdata.DefaultMaxConcurrent, "user data templates evaluated at once (each in its own sandbox process)")
	// zap registers Go flags (--zap-log-level, …); hand them to cobra.
	bindLogFlags(cmd, &zapOpts)
	return cmd
}

// checkManagerFlags refuses flag values the manager cannot run with, before
// anything starts.
func checkManagerFlags(cloudName string, cloudTimeout time.Duration, defaultSecret string, o *manager.Options, userData *userdata.Renderer) error {
	switch cloudName {
	case "cloudscale", "exoscale":
	default:
		return &flagRule{rule: "--cloud: the clouds are: cloudscale, exoscale", values: fmt.Sprintf("--cloud %q", cloudName)}
	}
	if err := checkClusterID(o.ClusterID); err != nil {
		return err
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"cloud-api-timeout", cloudTimeout}, {"create-grace", o.Actuator.CreateGrace}, {"sync-period", o.SyncPeriod},
		{"server-view-refresh", o.ServerViewRefresh}, {"janitor-interval", o.Janitor.Interval}, {"user-data-timeout", userData.Timeout},
		{"leader-elect-lease-duration", o.LeaseDuration}, {"leader-elect-renew-deadline", o.RenewDeadline}, {"leader-elect-retry-period", o.RetryPeriod},
	} {
		if d.v <= 0 {
			return &flagRule{rule: fmt.Sprintf("--%s must be positive", d.flag), values: fmt.Sprintf("--%s=%s", d.flag, d.v)}
		}
	}
	for _, n := range []struct {
		flag string
		v    float64
		min  float64
	}{
		{"max-concurrent-reconciles", float64(o.MaxConcurrentReconciles), 1}, {"max-concurrent-creates", float64(o.MaxConcurrentCreates), 1},
		{"user-data-max-concurrent", float64(userData.MaxConcurrent), 1},
		{"kube-api-qps", float64(o.KubeAPIQPS), 0}, {"kube-api-burst", float64(o.KubeAPIBurst), 0},
		{"cloud-api-qps", o.CloudRateLimit.QPS, 0}, {"cloud-api-burst", float64(o.CloudRateLimit.Burst), 0},
	} {
		if n.v < n.min {
			return &flagRule{rule: fmt.Sprintf("--%s must be at least %v", n.flag, n.min), values: fmt.Sprintf("--%s=%v", n.flag, n.v)}
		}
	}
	if o.Actuator.CreateGrace <= cloudTimeout {
		return &flagRule{rule: "--create-grace must be longer than --cloud-api-timeout: a create given up on can still make its server until the grace period ends",
			values: fmt.Sprintf("--create-grace=%s, --cloud-api-timeout=%s", o.Actuator.CreateGrace, cloudTimeout)}
	}
	if d := o.Janitor.DeleteOrphansAfter; d < 0 || (d > 0 && d < janitor.MinDeleteOrphansAfter) {
		return &flagRule{rule: fmt.Sprintf("--delete-orphans-after must be 0 (only report orphans) or at least %s", janitor.MinDeleteOrphansAfter),
			values: fmt.Sprintf("--delete-orphans-after=%s", d)}
	}
	if o.RenewDeadline >= o.LeaseDuration {
		return &flagRule{rule: "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration",
			values: fmt.Sprintf("--leader-elect-renew-deadline=%s, --leader-elect-lease-duration=%s", o.RenewDeadline, o.LeaseDuration)}
	}
	if err := checkBootImagesMirror(o.BootImages.Mirror); err != nil {
		return err
	}
	if o.BootImages.PruneAfter < 0 || o.BootImages.Interval <= 0 {
		return fmt.Errorf("--boot-images-prune-after must not be negative and --boot-images-interval must be positive")
	}
	if defaultSecret != "" {
		parts := strings.Split(defaultSecret, "/")
		for _, p := range parts {
			if len(parts) > 2 || len(validation.IsDNS1123Subdomain(p)) > 0 {
				return &flagRule{rule: "--default-credentials-secret: want a secret's name, or namespace/name", values: fmt.Sprintf("%q", defaultSecret)}
			}
		}
	}
	return nil
}

// checkBootImagesMirror refuses a --boot-images-mirror the clouds cannot
// download from ("" is none: the controller is off). The deployer runs it
// on its own option of the name.
func checkBootImagesMirror(m string) error {
	if m == "" {
		return nil
	}
	if u, err := url.Parse(m); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &flagRule{rule: "--boot-images-mirror: want an http or https URL without credentials (the cloud downloads from it)"}
	}
	return nil
}

// flagRule is a start-up check of the manager's flags that failed. Its
// Error names the values too, for a person at the command line; rule alone
// names the flags and the rule they break, for the deployer
// (checkManagerArgs), which must not quote a ConfigMap's values.
type flagRule struct{ rule, values string }

func (e *flagRule) Error() string {
	if e.values == "" {
		return e.rule
	}
	return e.rule + " (given " + e.values + ")"
}

// checkClusterID refuses a --cluster-id the provider cannot act for: none,
// or one that cannot be a label's value (the Machines' cluster label, and
// the tag or label on the servers).
func checkClusterID(id string) error {
	if id == "" {
		return &flagRule{rule: "--cluster-id is required: the cluster's infrastructure name, `oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`"}
	}
	if msgs := validation.IsValidLabelValue(id); len(msgs) > 0 {
		return &flagRule{rule: "--cluster-id: " + strings.Join(msgs, "; "), values: fmt.Sprintf("%q", id)}
	}
	return nil
}

// secretRef resolves --default-credentials-secret: a bare name is in the
// manager's namespace (openshift-machine-api when it watches all).
func secretRef(s, namespace string) types.NamespacedName {
	if s == "" {
		return types.NamespacedName{}
	}
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	if namespace == "" {
		namespace = manager.DefaultNamespace
	}
	return types.NamespacedName{Namespace: namespace, Name: s}
}

// checkManagerArgs parses args (each --flag=value) as the manager's flags
// and runs the manager's own checks on them: what the deployer rolls out
// for the manager must start. Unknown flags and unparsable values are
// errors too. Its errors name the flag and the rule it breaks, never a
// value: the deployer quotes them into its condition and events, and the
// values come from a ConfigMap, where a secret may have been pasted in the
// wrong place and any text may be hostile.
func checkManagerArgs(args []string) error {
	cmd := managerCommand()
	fs := cmd.Flags()
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		f := fs.Lookup(name)
		switch {
		case !ok || !strings.HasPrefix(a, "--"):
			return errors.New("an argument is not --flag=value")
		case f == nil:
			return fmt.Errorf("--%s is no flag of the manager", name)
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("--%s takes %s, and the value given is none", name, flagTakes(f))
		}
	}
	var rule *flagRule
	switch err := cmd.PreRunE(cmd, nil); {
	case err == nil:
		return nil
	case errors.As(err, &rule):
		return errors.New(rule.rule)
	default:
		// none of the checks quotes a value without a flagRule: no
		// such message reaches the deployer
		return errors.New("the manager's start-up checks refuse these flags")
	}
}

// flagTakes says what a flag takes, for a message without the value.
func flagTakes(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "duration":
		return "a duration such as 90s or 5m"
	case "bool":
		return "true or false"
	case "int", "int32", "int64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "size":
		return "a size such as 256Mi"
	default:
		return "a value of type " + t + " (`machine-api-provider manager --help`)"
	}
}

// cloudEndpoints are the clouds' API endpoints the flags name ("": the
// environment's, else the real API's).
type cloudEndpoints struct{ cloudscale, exoscale string }

// newCloud builds the cloud of the manager and of adopt: each of its calls
// gives up after timeout (--cloud-api-timeout), on every cloud.
func newCloud(name string, ep cloudEndpoints, timeout time.Duration, defaultSecret types.NamespacedName) (cloud.Cloud, error) {
	hc := &http.Client{Timeout: timeout}
	var c interface {
		cloud.Cloud
		Check() error
	}
	switch name {
	case "cloudscale":
		c = cscloud.New(cscloud.Options{BaseURL: ep.cloudscale, HTTPClient: hc, DefaultSecret: defaultSecret})
	case "exoscale":
		c = exocloud.New(exocloud.Options{APIEndpoint: ep.exoscale, HTTPClient: hc, DefaultSecret: defaultSecret})
	default:
		return nil, fmt.Errorf("--cloud %q: the clouds are: cloudscale, exoscale", name)
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}
