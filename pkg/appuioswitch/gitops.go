package appuioswitch

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/gitops"
)

// GitOps is what Argo CD or Flux keeps in sync among what the switch
// touches: the MachineSets, the Secrets the specs name, the
// MachineAutoscalers and MachineHealthChecks it pauses (pause.go).
type GitOps struct {
	Findings []gitops.Finding
	// Component are the findings on the component's own Secrets: its
	// Application goes with it (step 4), and must not be paused, or it
	// would never delete the component's Deployment.
	Component []gitops.Finding
	// Unread says what could not be read of Argo CD.
	Unread string
}

// surveyGitOps finds them. A MachineAutoscaler the switch would set aside
// that a tool with automated sync keeps is a blocker: the tool would
// create it again while no machine controller runs.
func (w *Switch) surveyGitOps(ctx context.Context, s *Survey) error {
	c := gitops.Collect(ctx, w.kube)
	g := &GitOps{}
	for i := range s.MachineSets {
		c.Add("MachineSet", &s.MachineSets[i])
	}
	for name, sec := range s.Secrets {
		if !sec.Exists {
			continue
		}
		var got corev1.Secret
		if err := w.kube.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: name}, &got); err != nil {
			return fmt.Errorf("reading secret %s: %w", name, err)
		}
		if !sec.Component {
			c.Add("Secret", &got)
		} else if f := c.Detect("Secret", &got); f != nil {
			g.Component = append(g.Component, *f)
		}
	}
	// surveyPause ran first.
	for i := range s.Pause.HealthChecks {
		c.Add("MachineHealthCheck", &s.Pause.HealthChecks[i])
	}
	for _, ma := range s.Pause.Autoscalers {
		f := c.Add("MachineAutoscaler", ma)
		if f == nil {
			continue
		}
		if o := f.Owner; o.Tool == gitops.Flux || o.Read && o.AutoSync && !o.Skipped {
			s.Blockers = append(s.Blockers, fmt.Sprintf("MachineAutoscaler %s is kept in sync by %s, which would create it again while the switch has it set aside: pause that first (gitops: below)", ma.GetName(), o))
		}
	}
	g.Findings, g.Unread = c.Findings, c.Unread()
	s.GitOps = g
	return nil
}

// printGitOps says what to pause and how, for each owner.
func (w *Switch) printGitOps(s *Survey) {
	g := s.GitOps
	if g == nil {
		return
	}
	if g.Unread != "" {
		w.printf("gitops: %s", g.Unread)
	}
	for _, a := range gitops.Advise(g.Component) {
		w.printf("gitops: %s keeps the component's %s: removing the component removes it; leave it running (--prepare saves copies of the Secrets)", a.Owner, strings.Join(a.Objects, ", "))
	}
	lines := gitops.Lines(g.Findings)
	if len(lines) == 0 {
		return
	}
	w.printf("gitops: pause each of these before --prepare and resume it once --apply is done: a sync meanwhile puts back what Git says (replicas, a set-aside MachineAutoscaler); removing appuio's component deletes its Secrets with it (--prepare saves copies, --apply brings them back outside Argo CD); Git keeps appuio's MachineSet specs, which this provider takes as they are")
	for _, l := range lines {
		w.printf("gitops: %s", l)
	}
}
