package main

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/appuioswitch"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
)

func switchFromAppuioCommand() *cobra.Command {
	var (
		o                        appuioswitch.Options
		kubeconfig, apiURL       string
		prepare, apply, rollback bool
		zapOpts                  zap.Options
	)
	cmd := &cobra.Command{
		Use:   "switch-from-appuio",
		Short: "Move a cloudscale.ch cluster from appuio's provider to this one, and back, touching no server",
		Long: `Switch a cluster that runs appuio/machine-api-provider-cloudscale (deployed by its Commodore
component) to this provider, without creating, deleting, stopping or rebooting a server: the
Machines keep their servers and Nodes; what changes is which controllers act on them.
Without a flag it prints what it finds and which step is next; nothing changes.

  --prepare   before removing appuio's component: saves copies of the Secrets the Machines
              name (removing the component deletes them), pauses the MachineHealthChecks
              (cluster.x-k8s.io/paused) and sets the MachineSets' MachineAutoscalers aside
  --apply     once the component is gone: checks that appuio's machine controller lets its lease
              go, brings the Secrets back, hands appuio's server groups of the cluster over,
              deletes appuio-machine-api-controllers and waits for its pods to go, and releases
              the old controllers' leases, and resumes what --prepare paused; then this
              provider's deployer deploys its controllers
  --rollback  once this provider is removed: releases its leases, checks that appuio's
              provider finds every server, group and Secret as it left them, and resumes
              what --prepare paused

Before any change, every spec must be one this provider takes, every Machine's server must be
found once by the tags both providers use, and the Machines' cluster ID must be the
infrastructureName or a legacy cluster ID the Infrastructure declares (on clusters appuio's
Terraform modules built it is the Project Syn ID: the blocker names the oc annotate command that
declares it; nothing is relabelled or retagged). The plan names what Argo CD or Flux keeps in sync
of what the switch touches, with the commands to pause it. Each step is recorded; running one again does only what
is left. Credentials: the token secret the Machines name, else CLOUDSCALE_API_TOKEN.
docs/switch-from-appuio.md has the whole procedure.`,
		Example: `  machine-api-provider switch-from-appuio
  machine-api-provider switch-from-appuio --prepare
  machine-api-provider switch-from-appuio --apply
  machine-api-provider switch-from-appuio --rollback`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{prepare, apply, rollback} {
				if b {
					n++
				}
			}
			if n > 1 {
				return errors.New("give one of --prepare, --apply and --rollback")
			}
			o.Log, o.Out = commandLog(cmd), cmd.OutOrStdout()
			c := cscloud.New(cscloud.Options{BaseURL: apiURL})
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			scheme, err := appuioswitch.Scheme()
			if err != nil {
				return err
			}
			kube, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			w := appuioswitch.New(kube, c, o)
			ctx := cmd.Context()
			warnBootImageSkew(ctx, o.Out, kube)
			switch {
			case prepare:
				return w.Prepare(ctx)
			case apply:
				return w.Apply(ctx)
			case rollback:
				return w.Rollback(ctx)
			}
			_, err = w.Plan(ctx)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", "openshift-machine-api", "namespace of the Machine API")
	f.BoolVar(&prepare, "prepare", false, "save copies of the Secrets the Machines name, before removing appuio's component")
	f.BoolVar(&apply, "apply", false, "switch over, once appuio's component is gone")
	f.BoolVar(&rollback, "rollback", false, "leave the cluster to appuio's provider again, once this provider is removed")
	f.DurationVar(&o.Wait, "wait", 5*time.Minute, "how long to wait for a lease to be let go, or a Deployment's pods to go")
	f.StringVar(&apiURL, "cloudscale-api-url", os.Getenv(cscloud.EnvAPIURL), "cloudscale.ch API base URL (default $CLOUDSCALE_API_URL, else the real API)")
	bindLogFlags(cmd, &zapOpts)
	return cmd
}
