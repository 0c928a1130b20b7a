package bootimages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Tool is `machine-api-provider images`: the controller's work, one pass at
// a time, for teams that import by hand or from CI. Every command plans
// first and changes nothing without apply.
type Tool struct {
	Options
	// Client reads the cluster (and, applying, moves MachineSets).
	Client client.Client
	// Namespace of the MachineSets, Machines and credentials secrets.
	Namespace string
	// Clients returns the image client of a credentials secret ("": the
	// default credentials).
	Clients func(ctx context.Context, secret string) (cloud.ImageClient, error)
	// MD5 reads the MD5 of a mirror file (FetchMD5 when nil).
	MD5 func(ctx context.Context, url string) (string, error)
	// MinAge: prune only images older than this.
	MinAge time.Duration
	Now    func() time.Time
	Out    io.Writer
}

// ToolPlan is what the tool found and would do.
type ToolPlan struct {
	Release  *Release
	Sets     []*MachineSet
	Accounts []*AccountPlan
	Refs     []Reference
	// Oldest is the oldest boot image's RHCOS ("" unknown: Why says so);
	// HeldBack says why the cluster would be held back ("" not).
	Oldest, Why, HeldBack string
}

// AccountPlan is one account's images and imports.
type AccountPlan struct {
	Secret string
	Client cloud.ImageClient
	Images []cloud.BootImage
	Needs  []*Need
	// Missing are the zones each need lacks (by Need.Key).
	Missing map[string][]string
	Prune   []cloud.BootImage
	Err     error
}

// Plan reads the cluster and the clouds.
func (t *Tool) Plan(ctx context.Context) (*ToolPlan, error) {
	if t.Now == nil {
		t.Now = time.Now
	}
	rel, err := LoadRelease(ctx, t.Client)
	if err != nil {
		return nil, err
	}
	var sets machinev1.MachineSetList
	if err := t.Client.List(ctx, &sets, client.InNamespace(t.Namespace)); err != nil {
		return nil, err
	}
	var machines machinev1.MachineList
	if err := t.Client.List(ctx, &machines, client.InNamespace(t.Namespace)); err != nil {
		return nil, err
	}
	states, err := Survey(rel, sets.Items, t.Options)
	if err != nil {
		return nil, err
	}
	p := &ToolPlan{Release: rel, Sets: states, Refs: References(t.Options, sets.Items, machines.Items)}
	var ours []*MachineSet
	for _, m := range states {
		if m.Ours {
			ours = append(ours, m)
		}
	}
	needs := Needs(ours)
	var all []cloud.BootImage
	for _, secret := range slices.Sorted(maps.Keys(needs)) {
		a := &AccountPlan{Secret: secret, Needs: needs[secret], Missing: map[string][]string{}}
		p.Accounts = append(p.Accounts, a)
		if a.Client, a.Err = t.Clients(ctx, secret); a.Err != nil {
			continue
		}
		if a.Images, a.Err = a.Client.ListBootImages(ctx, t.ClusterID); a.Err != nil {
			continue
		}
		all = append(all, a.Images...)
		for _, n := range a.Needs {
			for _, z := range n.Zones {
				if !slices.ContainsFunc(a.Images, func(im cloud.BootImage) bool {
					return im.RHCOS == n.Image.RHCOS && im.Stream == n.Image.Stream && im.Arch == n.Image.Arch && slices.Contains(im.Zones, z)
				}) {
					a.Missing[n.Key()] = append(a.Missing[n.Key()], z)
				}
			}
		}
		if !Unreadable(p.Refs) {
			for _, im := range Unreferenced(a.Images, p.Refs, ours) {
				if t.Now().Sub(im.CreatedAt) >= t.MinAge {
					a.Prune = append(a.Prune, im)
				}
			}
		}
	}
	p.Oldest, p.Why = OldestBootImage(states, all)
	if p.HeldBack, err = HeldBack(ctx, t.Client, p.Oldest); err != nil {
		return nil, err
	}
	return p, nil
}

func account(secret string) string {
	if secret == "" {
		return "the default credentials"
	}
	return "the credentials of secret " + secret
}

// Print writes the plan.
func (p *ToolPlan) Print(w io.Writer, o Options) {
	fmt.Fprintf(w, "Release %s: OS streams %s\n", orUnknown(p.Release.Version), strings.Join(p.Release.Streams(), ", "))
	ic, _ := o.imageCloud()
	for _, a := range p.Accounts {
		fmt.Fprintf(w, "\nImages (%s):\n", account(a.Secret))
		if a.Err != nil {
			fmt.Fprintf(w, "  cannot tell: %v\n", a.Err)
			continue
		}
		for _, n := range a.Needs {
			name := n.Image.Name(o.ClusterID)
			if miss := a.Missing[n.Key()]; len(miss) > 0 {
				fmt.Fprintf(w, "  import %s (RHCOS %s, %s, %s) into %s\n    from %s\n", name, n.Image.RHCOS, n.Image.Stream, n.Image.Arch,
					strings.Join(miss, ", "), o.MirrorURL(ic.BootImageMirrorFile(n.Image.File)))
			} else {
				fmt.Fprintf(w, "  %s (RHCOS %s, %s, %s): in %s\n", name, n.Image.RHCOS, n.Image.Stream, n.Image.Arch, strings.Join(n.Zones, ", "))
			}
		}
		for _, im := range a.Prune {
			fmt.Fprintf(w, "  prune %s (RHCOS %s, %s, %s) in %s: no MachineSet or Machine names it\n", im.Ref, im.RHCOS, im.Stream, im.Arch, strings.Join(im.Zones, ", "))
		}
	}
	fmt.Fprintln(w, "\nMachineSets:")
	for _, m := range p.Sets {
		var images []cloud.BootImage
		for _, a := range p.Accounts {
			if a.Secret == m.Secret {
				images = a.Images
			}
		}
		switch target := Target(images, m); {
		case !m.Ours || m.Want == nil:
			fmt.Fprintf(w, "  %s: left alone: %s\n", m.Key(), m.Problem)
		case target != nil && (m.Ref == target.Ref || m.Ref == target.ID):
			fmt.Fprintf(w, "  %s: boots the release's image %s\n", m.Key(), m.Ref)
		case !m.Follow:
			fmt.Fprintf(w, "  %s: boots %s, stays: %s\n", m.Key(), m.Ref, m.WhyNot)
		case target != nil:
			fmt.Fprintf(w, "  %s: %s -> %s\n", m.Key(), m.Ref, target.Ref)
		default:
			fmt.Fprintf(w, "  %s: %s -> %s once imported\n", m.Key(), m.Ref, m.Want.Name(o.ClusterID))
		}
	}
	fmt.Fprintln(w)
	if p.Oldest != "" {
		fmt.Fprintf(w, "Oldest boot image: RHCOS %s. To record it for the skew enforcement of OpenShift 4.22:\n  %s\n", p.Oldest, ClearCommand(p.Oldest))
	} else {
		fmt.Fprintf(w, "Oldest boot image: unknown: %s\n", p.Why)
	}
	if p.HeldBack != "" {
		fmt.Fprintf(w, "\nWarning: %s\n", p.HeldBack)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "(version unknown)"
	}
	return s
}

// Import imports what the plan lacks and moves the MachineSets that
// follow; without apply it prints the plan only.
func (t *Tool) Import(ctx context.Context, apply bool) error {
	p, err := t.Plan(ctx)
	if err != nil {
		return err
	}
	p.Print(t.Out, t.Options)
	if !apply {
		fmt.Fprintln(t.Out, "\nNothing changed: run with --apply to import and move the MachineSets that follow.")
		return nil
	}
	var errs []error
	for _, a := range p.Accounts {
		if a.Err != nil {
			errs = append(errs, a.Err)
			continue
		}
		for _, n := range a.Needs {
			if miss := a.Missing[n.Key()]; len(miss) > 0 {
				fmt.Fprintf(t.Out, "importing %s into %s ...\n", n.Image.Name(t.ClusterID), strings.Join(miss, ", "))
				// every zone: the cloud finds the image where it is (an
				// Exoscale template is copied, not downloaded again)
				imported, err := t.importNeed(ctx, a.Client, n, n.Zones)
				a.Images = append(a.Images, imported...)
				if err != nil {
					fmt.Fprintf(t.Out, "  failed: %v\n", err)
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(t.Out, "  done")
			}
			for _, m := range n.MachineSets {
				target := Target(a.Images, m)
				if !m.Follow || target == nil || m.Ref == target.Ref || m.Ref == target.ID {
					continue
				}
				from := m.Ref
				if err := SetImage(ctx, t.Client, t.Options, m, target.Ref); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(t.Out, "MachineSet %s: %s -> %s\n", m.Key(), from, target.Ref)
			}
		}
	}
	return errors.Join(errs...)
}

func (t *Tool) importNeed(ctx context.Context, ic cloud.ImageClient, n *Need, zones []string) ([]cloud.BootImage, error) {
	src, err := t.Source(n.Image, "")
	if err != nil {
		return nil, err
	}
	icl, _ := t.imageCloud()
	if icl.BootImageMirrorFile(n.Image.File) != n.Image.File {
		md5 := t.MD5
		if md5 == nil {
			md5 = func(ctx context.Context, url string) (string, error) { return FetchMD5(ctx, nil, url) }
		}
		if src.MD5, err = md5(ctx, src.URL); err != nil {
			return nil, err
		}
	}
	return ic.ImportBootImage(ctx, t.ClusterID, src, zones)
}

// Prune deletes the provider's images no MachineSet or Machine names;
// without apply it prints the plan only.
func (t *Tool) Prune(ctx context.Context, apply bool) error {
	p, err := t.Plan(ctx)
	if err != nil {
		return err
	}
	p.Print(t.Out, t.Options)
	if !apply {
		fmt.Fprintln(t.Out, "\nNothing changed: run with --apply to delete the images marked prune.")
		return nil
	}
	var errs []error
	for _, a := range p.Accounts {
		for _, im := range a.Prune {
			if err := a.Client.DeleteBootImage(ctx, t.ClusterID, im); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(t.Out, "deleted %s in %s\n", im.Ref, strings.Join(im.Zones, ", "))
		}
	}
	return errors.Join(errs...)
}
