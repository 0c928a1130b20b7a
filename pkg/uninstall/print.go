package uninstall

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// Print writes the plan.
func (p *Plan) Print(w io.Writer, apply bool) {
	what := "uninstall: the provider and every Machine, MachineSet and ControlPlaneMachineSet of it"
	if p.AdoptedOnly {
		what = "adopt --undo: what adopt wrote"
	}
	mode := "dry run: nothing is changed (--apply carries it out)"
	if apply {
		mode = "applying"
	}
	fmt.Fprintf(w, "Release plan on %s, %s (%s)\n", p.Cloud, what, mode)
	fmt.Fprintf(w, "Every server and every Node stays as it is; nothing is written to the cloud.\n\n")
	fmt.Fprintf(w, "1. Stop, until nothing of theirs runs: %s\n", orNone(p.Stops))
	fmt.Fprintf(w, "2. Delete the MachineAutoscalers: %s\n", orNone(p.Autoscalers))
	fmt.Fprintf(w, "3. Record their servers as left alone in ConfigMap %s (the janitor never counts them as orphans), then release the Machines (finalizers and owners taken off, then deleted at that version): %d\n",
		orphans.AdoptionsConfigMapName(p.Cloud), len(p.Machines))
	fmt.Fprintf(w, "4. Delete the MachineSets: %s; the ControlPlaneMachineSets: %s\n", orNone(p.MachineSets), orNone(p.CPMS))
	if p.AdoptedOnly {
		fmt.Fprintf(w, "5. Start the controllers again\n")
	} else {
		fmt.Fprintf(w, "5. Delete the provider's objects: %d (credentials, user data and settings stay)\n", len(p.Remove))
	}
	if len(p.Machines) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MACHINE\tSERVER (STAYS)\tNODE (STAYS)\tNOTE")
		for _, m := range p.Machines {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, dash(m.Server), dash(m.Node), m.Note)
		}
		_ = tw.Flush()
	}
	for _, k := range p.Kept {
		fmt.Fprintf(w, "kept: %s\n", k)
	}
	p.printGitOps(w)
}

// Print writes what Apply did.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nDone: %d Machines released, %d MachineSets, %d ControlPlaneMachineSets, %d MachineAutoscalers and %d objects of the provider deleted\n",
		r.Machines, r.MachineSets, r.CPMS, r.Autoscalers, r.Removed)
	for _, err := range r.Errors {
		fmt.Fprintf(w, "error: %v\n", err)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
