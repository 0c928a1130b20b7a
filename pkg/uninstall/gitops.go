package uninstall

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/gitops"
)

// gitOps finds what Argo CD or Flux keeps in sync of what the plan deletes
// or releases: the MachineSets, ControlPlaneMachineSets, Machines,
// MachineAutoscalers and the provider's own objects (an install kept in
// Git). A tool that syncs them after the release creates them again:
// MachineSets that make new Machines and servers once a provider runs
// again, duplicates of the servers adopt would give back their Machines.
func (u *Uninstaller) gitOps(ctx context.Context, p *Plan) error {
	c := gitops.Collect(ctx, u.kube)
	for i := range p.cpms {
		c.Add("ControlPlaneMachineSet", &p.cpms[i])
	}
	for i := range p.machineSets {
		c.Add("MachineSet", &p.machineSets[i])
	}
	for i := range p.machines {
		c.Add("Machine", &p.machines[i])
	}
	for i := range p.autoscalers {
		c.Add("MachineAutoscaler", &p.autoscalers[i])
	}
	for _, obj := range u.o.Remove {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
		err := u.kube.Get(ctx, client.ObjectKeyFromObject(obj), live)
		switch {
		case apierrors.IsNotFound(err) || noKind(err):
			continue
		case err != nil:
			return fmt.Errorf("reading %s: %w", describe(obj), err)
		}
		c.Add(live.GetKind(), live)
	}
	p.GitOps, p.GitOpsUnread = c.Findings, c.Unread()
	return nil
}

// printGitOps says what to pause before --apply, and what to do in Git
// before resuming.
func (p *Plan) printGitOps(w io.Writer) {
	if p.GitOpsUnread != "" {
		fmt.Fprintf(w, "gitops: %s\n", p.GitOpsUnread)
	}
	lines := gitops.Lines(p.GitOps)
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nGitOps: these keep objects of this plan in sync. Pause each before --apply; then take the objects out of Git\n")
	fmt.Fprintf(w, "(or out of the Application), and resume it only after: a sync creates them again, and a MachineSet back makes\n")
	fmt.Fprintf(w, "Machines and servers anew once a provider runs again (duplicates of the servers adopt would give back).\n")
	for _, l := range lines {
		fmt.Fprintf(w, "gitops: %s\n", l)
	}
}
