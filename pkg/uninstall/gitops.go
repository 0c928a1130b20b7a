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
	d := gitops.Read(ctx, u.kube)
	p.GitOpsUnread = d.Unread
	add := func(kind string, obj client.Object) {
		if f := d.Detect(kind, obj); f != nil {
			p.GitOps = append(p.GitOps, *f)
		}
	}
	for i := range p.cpms {
		add("ControlPlaneMachineSet", &p.cpms[i])
	}
	for i := range p.machineSets {
		add("MachineSet", &p.machineSets[i])
	}
	for i := range p.machines {
		add("Machine", &p.machines[i])
	}
	for i := range p.autoscalers {
		add("MachineAutoscaler", &p.autoscalers[i])
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
		add(live.GetKind(), live)
	}
	return nil
}

// printGitOps says what to pause before --apply, and what to do in Git
// before resuming.
func (p *Plan) printGitOps(w io.Writer) {
	if p.GitOpsUnread != "" {
		fmt.Fprintf(w, "gitops: %s\n", p.GitOpsUnread)
	}
	advice := gitops.Advise(p.GitOps)
	if len(advice) == 0 {
		return
	}
	fmt.Fprintf(w, "\nGitOps: these keep objects of this plan in sync. Pause each before --apply; then take the objects out of Git\n")
	fmt.Fprintf(w, "(or out of the Application), and resume it only after: a sync creates them again, and a MachineSet back makes\n")
	fmt.Fprintf(w, "Machines and servers anew once a provider runs again (duplicates of the servers adopt would give back).\n")
	for _, a := range advice {
		for _, l := range a.Lines() {
			fmt.Fprintf(w, "gitops: %s\n", l)
		}
	}
}
