package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/appuio/machine-api-provider/pkg/uninstall"
)

func uninstallCommand() *cobra.Command {
	var (
		o          uninstall.Options
		kubeconfig string
		apply      bool
		zapOpts    zap.Options
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Take the provider off the cluster, keeping every server and every Node",
		Long: `Take the provider off the cluster without losing a node: every Machine, MachineSet and
ControlPlaneMachineSet of the cloud's provider goes, while every server and every Node stays as it
is, and nothing is written to the cloud.

First the controllers stop: the deployer and the machine-api controllers' Deployment are scaled to
zero until none of their pods is left and the machine controller's lease has lapsed, so that no
machine controller drains or deletes a Node or deletes a server, no MachineSet controller makes or
deletes a Machine, and no MachineHealthCheck remediates. The MachineAutoscalers of the MachineSets
are deleted. Each Machine then loses its finalizers and owner references and is deleted at that
very version (a precondition): it goes at once, with no deletion anyone could act on. Then the
MachineSets and ControlPlaneMachineSets go, and the provider's own objects (the install's, and the
controllers' Deployment): the credentials, user data secrets and settings stay.

The servers keep the provider's tags or labels: installing the provider again and running adopt
finds every one of them, Machines named as before, without a create. Nothing changes without
--apply. docs/install.md#removing-it has the whole procedure; adopt --undo releases only what adopt
wrote and keeps the provider.`,
		Example: `  # the plan (the cloud is the installed deployer's)
  machine-api-provider uninstall
  # carry it out
  machine-api-provider uninstall --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRelease(cmd, o, kubeconfig, apply)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Cloud, "cloud", "", "the cloud: cloudscale or exoscale (default: the one the installed deployer serves; refused when it serves the other)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", "openshift-machine-api", "namespace of the Machine API")
	f.BoolVar(&apply, "apply", false, "carry the plan out (default: only print it)")
	f.DurationVar(&o.Wait, "wait", 5*time.Minute, "how long to wait for the controllers to stop")
	bindLogFlags(cmd, &zapOpts)
	return cmd
}

// runRelease plans, prints and with apply carries out a release
// (uninstall, or adopt --undo).
func runRelease(cmd *cobra.Command, o uninstall.Options, kubeconfig string, apply bool) error {
	o.Log, o.Out = commandLog(cmd), cmd.OutOrStdout()
	kube, err := adoptClient(kubeconfig)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	// The installed deployer's cloud, never a default: released with the
	// other cloud's name, no Machine would go while the objects both
	// overlays share would.
	if o.Cloud, err = uninstall.ResolveCloud(ctx, kube, o.Namespace, o.Cloud); err != nil {
		return err
	}
	if !o.AdoptedOnly {
		if o.Remove, err = uninstall.ProviderObjects(o.Namespace, o.Cloud); err != nil {
			return err
		}
	}
	u, err := uninstall.New(kube, o)
	if err != nil {
		return err
	}
	return planThenApply(o.Out, apply, func() (*uninstall.Plan, error) { return u.Plan(ctx) },
		func(p *uninstall.Plan) (*uninstall.Report, error) { return u.Apply(ctx, p) })
}

// planThenApply prints a plan and, with apply, carries it out and prints
// what was done: adopt's and uninstall's way.
func planThenApply[P interface{ Print(io.Writer, bool) }, R interface{ Print(io.Writer) }](out io.Writer, apply bool, plan func() (P, error), run func(P) (R, error)) error {
	p, err := plan()
	if err != nil {
		return err
	}
	p.Print(out, apply)
	if !apply {
		return nil
	}
	fmt.Fprintln(out)
	report, err := run(p)
	report.Print(out)
	return err
}

// adoptUndo is adopt --undo: the Machines adopt adopted, the MachineSets and
// the ControlPlaneMachineSet it wrote are released, the provider stays.
func adoptUndo(cmd *cobra.Command, cloudName, namespace, kubeconfig string, wait time.Duration, apply bool) error {
	return runRelease(cmd, uninstall.Options{Namespace: namespace, Cloud: cloudName, AdoptedOnly: true, Wait: wait}, kubeconfig, apply)
}
