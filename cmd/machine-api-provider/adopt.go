package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/adopt"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
)

func adoptCommand() *cobra.Command {
	var (
		o          adopt.Options
		cloudName  string
		kubeconfig string
		apiURL     string
		exoAPI     string
		caFile     string
		apply      bool
		timeout    time.Duration
		undo       bool
		zapOpts    zap.Options
	)
	cmd := &cobra.Command{
		Use:   "adopt",
		Short: "Bring a cluster's Terraform-made nodes under the provider, without recreating them",
		Long: `Find the cluster's servers that Terraform made (appuio's terraform-openshift4-cloudscale
and terraform-openshift4-exoscale modules), match each to its Node, group them by role and zone,
and print the plan: per node group the MachineSet it would write, per server the Machine. Nothing
changes without --apply.

The Machines carry the cluster's identity, its Infrastructure's infrastructureName, which the
provider is pinned to, or a legacy cluster ID the Infrastructure's annotation
machine.appuio.io/legacy-cluster-ids declares. Servers tagged with another cluster ID (the
Terraform modules tag adoptable servers with their cluster_id) are left alone unless that ID is
declared (they are adopted as they are tagged, their Machines carrying it) or
--take-over-cluster-id names it (they are retagged with the infrastructureName).

With --apply each server gets the provider's identity (tags on cloudscale.ch, labels on Exoscale),
nothing else, and then a Machine that records it (spec.providerID); once the Machines run, linked
to their Nodes and in sync with their spec, the group's MachineSet takes them over. Masters get
Machines with a pre-drain hook (deleting one never deletes its server until the hook is removed)
and an Inactive ControlPlaneMachineSet. A server that differs from its group in a field a Machine
could not have as it is, is named with that field and left alone. Exoscale instance pool members
cannot leave their pool alive: they are replaced one at a time (a new Machine, its Node Ready,
the member drained and evicted). Running it again changes nothing.

The provider must run in the cluster (the deployer's machine-api-controllers): --apply waits for
its machine controller to take the Machines over. Credentials: as the manager's, from
CLOUDSCALE_API_TOKEN or EXOSCALE_API_KEY and EXOSCALE_API_SECRET, or the secret
--credentials-secret names (which the Machines then name too). docs/adopt.md has the whole
procedure and the Terraform handover; --undo releases what adopt wrote again, keeping every
server and Node.`,
		Example: `  # the plan
  CLOUDSCALE_API_TOKEN=... machine-api-provider adopt
  # carry it out, the module's cluster_id declared as the cluster's legacy ID
  oc annotate --overwrite infrastructure.config.openshift.io cluster machine.appuio.io/legacy-cluster-ids=c-green-1234
  CLOUDSCALE_API_TOKEN=... machine-api-provider adopt --apply
  # or take the servers it tagged over, retagged with the infrastructureName
  CLOUDSCALE_API_TOKEN=... machine-api-provider adopt --take-over-cluster-id c-green-1234 --apply
  # Exoscale: the plan, then --apply, with a key of adopt's own role (docs/exoscale.md#iam-role-for-adopt),
  # never the manager's, which may not replace instance pools
  EXOSCALE_API_KEY=... EXOSCALE_API_SECRET=... machine-api-provider adopt --cloud exoscale
  EXOSCALE_API_KEY=... EXOSCALE_API_SECRET=... machine-api-provider adopt --cloud exoscale --apply
  # undo it: what adopt wrote goes, every server and Node stays
  machine-api-provider adopt --undo --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if undo {
				// The installed deployer's cloud, unless --cloud names one.
				given := ""
				if cmd.Flags().Changed("cloud") {
					given = cloudName
				}
				return adoptUndo(cmd, given, o.Namespace, kubeconfig, o.Wait, apply)
			}
			log := commandLog(cmd)
			o.Log, o.Out = log, cmd.OutOrStdout()
			if timeout <= 0 {
				return fmt.Errorf("--cloud-api-timeout (%s) must be positive", timeout)
			}
			// Every call of adopt is bounded as the manager's are.
			c, err := newCloud(cloudName, cloudEndpoints{cloudscale: apiURL, exoscale: exoAPI}, timeout, types.NamespacedName{})
			if err != nil {
				return err
			}
			if caFile != "" {
				b, err := os.ReadFile(caFile)
				if err != nil {
					return fmt.Errorf("--ignition-ca: %w", err)
				}
				o.IgnitionCA = b
			}
			kube, err := adoptClient(kubeconfig)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			warnBootImageSkew(ctx, o.Out, kube)
			a, err := adopt.New(ctx, kube, c, o)
			if err != nil {
				return err
			}
			return planThenApply(o.Out, apply, func() (*adopt.Plan, error) { return a.Plan(ctx) },
				func(p *adopt.Plan) (*adopt.Report, error) { return a.Apply(ctx, p) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cloudName, "cloud", "cloudscale", "the cloud: cloudscale or exoscale")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", "openshift-machine-api", "namespace of the Machine API")
	f.StringVar(&o.ClusterID, "cluster-id", "", "the cluster's identity, which the Machines carry (label machine.openshift.io/cluster-api-cluster) and the provider tags servers with: the Infrastructure's infrastructureName, which it must be where there is one (give it only for a cluster without)")
	f.StringVar(&o.TakeOverClusterID, "take-over-cluster-id", "", "a cluster ID servers are tagged with that is not the cluster's identity (the Terraform modules' cluster_id), for this run: such servers are adopted and retagged with the infrastructureName (default: they are left alone; a legacy cluster ID the Infrastructure declares needs no take-over)")
	f.StringSliceVar(&o.Zones, "zone", nil, "zones to look in (default: all of the account's)")
	f.StringSliceVar(&o.LeaveRoles, "leave-role", nil, "roles whose nodes stay Terraform's and are left alone, e.g. infra when the load balancers' router backends are the infra nodes (repeatable)")
	f.StringVar(&o.CredentialsSecret, "credentials-secret", "", "secret in --namespace with the cloud credentials, which the Machines name (default: the environment's, and the manager's default for the Machines)")
	f.StringVar(&o.UserDataSecret, "user-data-secret", "", "user data secret every MachineSet names (default: one per node group, <MachineSet>-user-data, made from what its nodes booted with)")
	f.StringVar(&caFile, "ignition-ca", "", "file with the machine config server's CA, for cloudscale.ch user data (default: read from the cluster)")
	f.BoolVar(&apply, "apply", false, "carry the plan out (default: only print it)")
	f.DurationVar(&timeout, "cloud-api-timeout", 30*time.Second, "how long one cloud API call may take before adopt gives up on its answer, as the manager's flag")
	f.BoolVar(&undo, "undo", false, "undo adopt: release the Machines it adopted and the MachineSets and ControlPlaneMachineSet it wrote, keeping every server and Node, and nothing written to the cloud (as uninstall does, machine-api-provider uninstall --help); the provider stays")
	f.DurationVar(&o.Wait, "wait", 15*time.Minute, "how long to wait for each step the cluster carries out (Machines Running, a replacement Ready, a drain)")
	f.StringVar(&apiURL, "cloudscale-api-url", os.Getenv("CLOUDSCALE_API_URL"), "cloudscale.ch API base URL (default $CLOUDSCALE_API_URL, else the real API)")
	f.StringVar(&exoAPI, "exoscale-api-endpoint", os.Getenv(exocloud.EnvAPIEndpoint), "Exoscale API endpoint (default $EXOSCALE_API_ENDPOINT, else "+exocloud.DefaultEndpoint+")")
	bindLogFlags(cmd, &zapOpts)
	return cmd
}
