//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/demo"
)

func demoCommand() *cobra.Command {
	var (
		o                 demo.Options
		instanceType, cpu string
		platform          string
		pods, maxNodes    int
		keep              bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show the autoscaling loop on this machine: from zero workers to enough and back",
		Long: `Start a local OpenShift-like control plane with a cloud's emulator (--cloud:
cloudscale.ch or Exoscale) on platform External, where the cloud's cloud-controller-manager
initializes every new Node (--platform None: without one), this provider, the machine-api-operator's MachineSet,
nodelink and MachineHealthCheck controllers and OpenShift's cluster-autoscaler-operator,
which runs the real cluster-autoscaler from a ClusterAutoscaler; then give the
worker MachineSet a MachineAutoscaler, deploy pods that fit nowhere and watch the
autoscaler scale the MachineSet up from zero, and back to zero Machines, Nodes and
servers when the pods are gone. Needs the tools of ` + "`make tools`" + ` in --bin-dir.
The terminal shows only the progress; everything else logs to demo.log in --dir,
and the pods' logs to pods/ there.`,
		Example: `  machine-api-provider demo --bin-dir bin
  machine-api-provider demo --bin-dir bin --cloud exoscale --keep=false`,
		Args: cobra.NoArgs,
		// Not the root's logger on the terminal: RunE sends the
		// process-wide loggers into the log file.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			out := cmd.OutOrStdout()
			if _, err := demo.Title(o.Cloud); err != nil {
				return err
			}
			o.Platform = configv1.PlatformType(platform)
			if err := demo.CheckPlatform(o.Platform); err != nil {
				return err
			}
			// What this machine must allow, said now rather than after a
			// minute of starting.
			if err := demo.Preflight(); err != nil {
				return err
			}
			if o.Dir == "" {
				dir, err := os.MkdirTemp("", "machine-api-provider-demo-")
				if err != nil {
					return err
				}
				o.Dir = dir
				// Nothing is left behind, but the logs of a failed run.
				defer func() {
					if err == nil {
						_ = os.RemoveAll(dir)
					} else {
						fmt.Fprintf(out, "the logs are in %s\n", dir)
					}
				}()
			}
			logFile, err := os.Create(filepath.Join(o.Dir, "demo.log"))
			if err != nil {
				return err
			}
			defer logFile.Close()
			o.Log = funcr.New(func(prefix, args string) { fmt.Fprintln(logFile, prefix, args) }, funcr.Options{Verbosity: 2, LogTimestamp: true})
			// Before anything of controller-runtime or client-go runs: the
			// process-wide loggers go to the log file, not the terminal.
			// (controller-runtime's, never set, dumps a stack on stderr
			// after 30 s, into the middle of the progress view.)
			ctrllog.SetLogger(o.Log)
			klog.SetLogger(o.Log)
			o.Autoscaler = true
			err = runDemo(cmd.Context(), out, o, instanceType, cpu, int32(pods), maxNodes, keep)
			if cmd.Context().Err() != nil {
				// Ctrl-C is how a demo ends.
				err = nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Cloud, "cloud", demo.Cloudscale, "the cloud to emulate: "+strings.Join(demo.Clouds, " or "))
	f.StringVar(&platform, "platform", string(demo.Platforms[0]), "the cluster's platform: External (the cloud's cloud-controller-manager initializes every Node) or None")
	f.StringVar(&o.BinDir, "bin-dir", "bin", "directory with the binaries `make tools` builds")
	f.StringVar(&o.Dir, "dir", "", "directory for the kubeconfig and logs (default: a new temporary one)")
	f.StringVar(&o.OpenShiftAPI, "openshift-api", "", "directory of the openshift/api module, whose Machine API and config CRDs the cluster gets (default: go.mod's, found with go list)")
	f.DurationVar(&o.BootTime, "boot-time", 5*time.Second, "how long an emulated server takes to boot")
	f.DurationVar(&o.RegisterDelay, "register-delay", 3*time.Second, "how long after booting its Node registers")
	f.DurationVar(&o.ScaleDownUnneeded, "scale-down-unneeded", 20*time.Second, "how long a node must be unneeded before the autoscaler removes it (the ClusterAutoscaler's scaleDown.unneededTime)")
	f.DurationVar(&o.ScaleDownDelayAfterAdd, "scale-down-delay-after-add", 20*time.Second, "how long after a scale-up the autoscaler considers scaling down (scaleDown.delayAfterAdd)")
	f.StringVar(&instanceType, "instance-type", "", "flavor (cloudscale.ch) or instance type (Exoscale) of the worker MachineSet (default flex-8-4 or standard.large: 4 vCPUs, 8 GiB)")
	f.StringVar(&instanceType, "flavor", "", "the same as --instance-type")
	f.StringVar(&cpu, "pod-cpu", "1500m", "CPU each demo pod requests")
	f.IntVar(&pods, "pods", 6, "pods of the demo workload")
	f.IntVar(&maxNodes, "max-nodes", 4, "the MachineAutoscaler's maximum")
	f.BoolVar(&keep, "keep", true, "leave the cluster up for exploring after the scenario, until Ctrl-C")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, o demo.Options, instanceType, cpu string, pods int32, maxNodes int, keep bool) error {
	step := func(format string, args ...any) { fmt.Fprintf(out, "\n==> "+format+"\n", args...) }
	title, err := demo.Title(o.Cloud)
	if err != nil {
		return err
	}
	ccm := ""
	if o.External() {
		ccm = " and its cloud-controller-manager"
	}
	step("starting etcd, kube-apiserver, controller-manager, scheduler, kwok, the %s emulator%s (platform %s), the provider, the machine-api controllers, the cluster-autoscaler-operator and, from ClusterAutoscaler %s, the cluster-autoscaler (logs in %s)",
		title, ccm, o.Platform, demo.ClusterAutoscalerName, o.Dir)
	e, err := demo.Start(o)
	defer func() {
		step("stopping everything")
		if e != nil {
			_ = e.Stop()
		}
	}()
	if err != nil {
		return err
	}
	ms := e.MachineSet(instanceType)
	step("MachineSet %s on %s: %s, 0 replicas; MachineAutoscaler %s: between 0 and %d", ms.Name, title, e.DescribeInstanceType(instanceType), ms.Name, maxNodes)
	if err := e.Client.Create(ctx, ms); err != nil {
		return err
	}
	if err := e.Client.Create(ctx, e.MachineAutoscaler(0, maxNodes)); err != nil {
		return err
	}
	step("Deployment %s: %d pods of %s CPU each; no worker exists to run them", demo.WorkloadName, pods, cpu)
	if err := e.Client.Create(ctx, demo.Workload(pods, cpu)); err != nil {
		return err
	}
	var m demo.Milestones
	show := progress(out)
	upCtx, cancelUp := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelUp()
	st, err := e.Watch(upCtx, &m, time.Second, show, func(s demo.State) bool { return s.PodsRunning == int(pods) })
	if err != nil {
		if ctx.Err() == nil && upCtx.Err() != nil {
			return fmt.Errorf("not all %d pods Running after 5m (last: %s)", pods, st)
		}
		return err
	}
	step("scale-up done: %s", m)

	step("Deployment %s scaled to 0: the autoscaler removes a node once it has been unneeded for %s and its last scale-up is %s past",
		demo.WorkloadName, e.Options.ScaleDownUnneeded, e.Options.ScaleDownDelayAfterAdd)
	if err := e.ScaleWorkload(ctx, 0); err != nil {
		return err
	}
	m.WorkloadGone = m.Elapsed()
	within := e.ScaleDownWithin(int(st.Replicas))
	downCtx, cancelDown := context.WithTimeout(ctx, within)
	defer cancelDown()
	if st, err = e.Watch(downCtx, &m, time.Second, show, demo.State.Zero); err != nil {
		if ctx.Err() == nil && downCtx.Err() != nil {
			return fmt.Errorf("not down to zero after %s (last: %s)", within, st)
		}
		return err
	}
	step("down to zero: no Machine, Node or server left, the MachineSet at 0 replicas\n    %s", m)

	if !keep {
		return nil
	}
	step("the cluster stays up; explore it with\n    export KUBECONFIG=%s\n    kubectl get machinesets,machines,machineautoscalers,clusterautoscalers,deployments,pods -n %s\nCtrl-C stops everything and removes it", e.Cluster.Kubeconfig, demo.Namespace)
	<-ctx.Done()
	return nil
}

// progress prints the state when it changes, with the time since start.
func progress(out io.Writer) func(time.Duration, demo.State) {
	last := ""
	return func(el time.Duration, s demo.State) {
		if line := s.String(); line != last {
			fmt.Fprintf(out, "[%6.1fs] %s\n", el.Seconds(), line)
			last = line
		}
	}
}
