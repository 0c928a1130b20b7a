package adopt

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/gitops"
)

// gitOps finds what Argo CD or Flux keeps in sync of what adopt touches or
// competes with: the namespace's MachineSets (one of Git's for the same
// nodes would make Machines of its own beside adopt's), the
// ControlPlaneMachineSet, and the user data Secrets the groups name.
func (a *Adopter) gitOps(ctx context.Context, p *Plan, cl *cluster) error {
	c := gitops.Collect(ctx, a.kube)
	for i := range cl.machineSets {
		c.Add("MachineSet", &cl.machineSets[i])
	}
	for i := range cl.cpms {
		c.Add("ControlPlaneMachineSet", &cl.cpms[i])
	}
	seen := map[string]bool{}
	for _, g := range p.Groups {
		name := g.UserData.Secret
		if !g.UserData.Exists || seen[name] {
			continue
		}
		seen[name] = true
		var s corev1.Secret
		err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: name}, &s)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the user data secret %s: %w", name, err)
		}
		c.Add("Secret", &s)
	}
	p.GitOps, p.GitOpsUnread = c.Findings, c.Unread()
	return nil
}

// printGitOps says what to pause, and how to hand adopt's MachineSets to
// Git afterwards.
func (p *Plan) printGitOps(w io.Writer) {
	if p.GitOpsUnread != "" {
		fmt.Fprintf(w, "gitops: %s\n", p.GitOpsUnread)
	}
	var written []string
	for _, g := range p.Groups {
		if g.MachineSet != nil && !g.Exists {
			written = append(written, g.Name)
		}
	}
	lines := gitops.Lines(p.GitOps)
	if len(lines) > 0 {
		fmt.Fprintf(w, "\nGitOps: these keep objects adopt works beside in sync. Pause each before --apply and resume it once adopt's\n")
		fmt.Fprintf(w, "MachineSets are in Git: a MachineSet of Git's for the same nodes makes Machines (and servers) of its own.\n")
		for _, l := range lines {
			fmt.Fprintf(w, "gitops: %s\n", l)
		}
	}
	if len(written) > 0 && len(lines) > 0 {
		fmt.Fprintf(w, "gitops: adopt's MachineSets (%s) are in no repository: to keep them in Git, commit them as --apply wrote them\n", strings.Join(written, ", "))
		fmt.Fprintf(w, "gitops:   oc -n openshift-machine-api get machineset %s -o yaml   # without status, uid, resourceVersion, creationTimestamp, generation\n", written[0])
		fmt.Fprintf(w, "gitops: and remove Git's MachineSets of the same nodes in the same commit; then resume.\n")
	}
}
