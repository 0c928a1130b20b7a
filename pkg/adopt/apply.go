package adopt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// Report counts what Apply did.
type Report struct {
	MachinesCreated    int
	IdentitiesSet      int
	GroupsTakenOver    int
	SecretsCreated     int
	MachineSetsCreated int
	CPMSCreated        int
	// Replaced counts instance pool members replaced (a new Machine Ready,
	// the member drained and evicted).
	Replaced int
	// Errors are what went wrong, one per group or member; the rest went on.
	Errors []error
}

// Changed says whether Apply changed anything.
func (r *Report) Changed() bool {
	return r.MachinesCreated+r.IdentitiesSet+r.GroupsTakenOver+r.SecretsCreated+r.MachineSetsCreated+r.CPMSCreated+r.Replaced > 0
}

// Apply carries out a plan. One group's failure does not stop the others;
// the report lists every error.
//
// Before its first write it records the servers of the plan (pkg/orphans,
// Adoptions), so that the provider's janitor counts none of them as an
// orphan: those it takes over while the adoption is under way, though adopt
// tags each server just before it writes its Machine, the modules may have
// tagged it long before, and a run may be interrupted in between (each run
// renews them; an abandoned one's expire after orphans.AdoptionTTL, and
// the janitor reports them again); those it leaves alone (misfits, groups
// it cannot adopt or was told to leave, --leave-role) for good, with the
// reason. A run that ends without an error is done with the servers that
// have their Machines now; what it left alone stays recorded as such, and
// what an earlier run recorded that is not in this plan is left to expire,
// and said so.
func (a *Adopter) Apply(ctx context.Context, p *Plan) (*Report, error) {
	r := &Report{}
	if err := a.record.Begin(ctx, a.adoptions(p)...); err != nil {
		return r, fmt.Errorf("recording the servers being adopted, before anything else: %w", err)
	}
	a.finishEvictions(ctx, p, r)
	for _, g := range p.Groups {
		var err error
		switch {
		case g.Blocked != "" && !g.Master:
			a.progress("%s: left alone: %s", g.Name, g.Blocked)
			continue
		case g.Mode == Replace:
			err = a.applyReplace(ctx, p, g, r)
		default:
			err = a.applyInPlace(ctx, g, r)
		}
		if err != nil {
			r.Errors = append(r.Errors, fmt.Errorf("%s: %w", g.Name, err))
			a.progress("%s: %v", g.Name, err)
		}
	}
	if len(r.Errors) > 0 {
		return r, errors.Join(r.Errors...)
	}
	if err := a.done(ctx, p); err != nil {
		return r, fmt.Errorf("the adoption is done, but its record %s is not: %w", orphans.AdoptionsConfigMapName(a.cloud.Name()), err)
	}
	return r, nil
}

// done takes the servers that have their Machines now out of the adoption
// record: the plan's adopted ones. What the plan left alone stays,
// recorded as such (adoptions). An adoption under way that an earlier run
// recorded and this plan does not name (a server no Node runs on any more,
// in a zone not surveyed now) is not cleared: it expires, and the janitor
// reports its server then; it is listed here. Left-alone entries of
// servers that are gone go.
func (a *Adopter) done(ctx context.Context, p *Plan) error {
	var ids []string
	planned := map[string]bool{}
	for _, g := range p.Groups {
		for _, m := range g.Members {
			planned[m.Found.ID] = true
			if m.Action == ActAdopt || m.Action == ActAdopted {
				ids = append(ids, m.Found.ID)
			}
		}
	}
	recorded, err := a.record.List(ctx)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(recorded)) {
		rec := recorded[id]
		switch {
		case planned[id]:
		case rec.LeftAlone != "":
			_, err := a.c.GetServer(ctx, id)
			if cloud.IsNotFound(err) {
				ids = append(ids, id)
				a.progress("the adoption record: %s (%s), left alone before, is gone: its entry goes", id, rec.ServerName)
			}
		default:
			a.progress("the adoption record: %s (%s), recorded by an earlier run, is not in this plan: its entry stays until %s, then the janitor counts it as an orphan if it still carries the cluster's identity without a Machine",
				id, rec.ServerName, rec.ExpiresAt().Format(time.RFC3339))
		}
	}
	return a.record.Done(ctx, ids...)
}

// adoptions are the plan's servers for the adoption record: each member
// adopt takes over, or replaces, as an adoption under way (renewed, it
// expires orphans.AdoptionTTL from now); each member it leaves alone as
// left alone, with why. Members adopted already need no entry.
func (a *Adopter) adoptions(p *Plan) []orphans.Adoption {
	var out []orphans.Adoption
	now := time.Now().UTC()
	for _, g := range p.Groups {
		for _, m := range g.Members {
			if m.Action == ActAdopted {
				continue
			}
			ad := orphans.Adoption{ServerID: m.Found.ID, ServerName: m.Found.Name,
				ClusterID: a.groupID(g), TaggedAs: m.Found.ClusterID, Since: now}
			switch m.Action {
			case ActAdopt:
				ad.Machine, ad.Expires = m.MachineName, now.Add(orphans.AdoptionTTL)
			case ActReplace:
				ad.Expires = now.Add(orphans.AdoptionTTL)
			default:
				ad.LeftAlone = "adopt left it alone"
				if len(m.Misfits) > 0 {
					ad.LeftAlone += ": " + strings.Join(m.Misfits, "; ")
				}
			}
			out = append(out, ad)
		}
	}
	return out
}

func (a *Adopter) progress(format string, args ...any) {
	fmt.Fprintf(a.o.Out, "==> "+format+"\n", args...)
	a.o.Log.V(1).Info(fmt.Sprintf(format, args...))
}

// applyInPlace adopts a group's servers where they are: Machines that
// record them, their identity, then the MachineSet (or, for masters, the
// ControlPlaneMachineSet) once the Machines run.
func (a *Adopter) applyInPlace(ctx context.Context, g *Group, r *Report) error {
	var adopt, all []*Member
	for _, m := range g.Members {
		switch m.Action {
		case ActAdopt:
			adopt = append(adopt, m)
			all = append(all, m)
		case ActAdopted:
			all = append(all, m)
		}
	}
	if len(all) == 0 {
		return nil
	}
	if g.Blocked != "" {
		// Masters whose spec is not a Machine's: nothing to do.
		return nil
	}
	if err := a.ensureUserData(ctx, g, r); err != nil {
		return err
	}
	for _, fg := range g.TakeOver {
		changed, err := a.a.TakeOverGroup(ctx, a.groupID(g), g.AntiAffinityKey, fg)
		if err != nil {
			return fmt.Errorf("taking over the anti-affinity group %s: %w", fg.Name, err)
		}
		if changed {
			r.GroupsTakenOver++
			a.progress("%s: the anti-affinity group %s is the provider's for key %q now", g.Name, fg.Name, g.AntiAffinityKey)
		}
	}
	var failed []error
	for _, m := range adopt {
		if err := a.adoptMember(ctx, g, m, r); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", m.Found.Name, err))
		}
	}
	for _, m := range all {
		if !m.Restore || g.Spec == nil {
			continue
		}
		changed, err := a.a.Identify(ctx, cloud.MachineRef{Name: m.MachineName, ClusterID: m.restoreID}, g.Spec, m.Found)
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: giving the server its Machine's identity back: %w", m.Found.Name, err))
			continue
		}
		if changed {
			r.IdentitiesSet++
			a.progress("%s: %s is Machine %s's again", g.Name, m.Found.Name, m.MachineName)
		}
	}
	if err := a.awaitMachines(ctx, g, all); err != nil {
		failed = append(failed, err)
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if g.MachineSet != nil {
		if err := a.awaitQuiet(ctx, g, all); err != nil {
			return err
		}
		if err := a.createOnce(ctx, g.MachineSet); err != nil {
			return fmt.Errorf("creating the MachineSet: %w", err)
		}
		r.MachineSetsCreated++
		a.progress("%s: MachineSet at %d replicas, over the adopted Machines", g.Name, *g.MachineSet.Spec.Replicas)
		if err := a.awaitMachineSet(ctx, g, all); err != nil {
			return err
		}
	}
	if g.CPMS != nil {
		if err := a.createOnce(ctx, g.CPMS); err != nil {
			return fmt.Errorf("creating the ControlPlaneMachineSet: %w", err)
		}
		r.CPMSCreated++
		a.progress("%s: ControlPlaneMachineSet %s, Inactive", g.Name, g.CPMS.Name)
	}
	return nil
}

// adoptMember names the server in its Machine's identity, then writes the
// Machine. In that order: the provider acts only on a server whose identity
// is the Machine's (pkg/cloud, owner.go), so a Machine that recorded a
// server without it would be failed; taking over a server without the
// identity (or with the one adopt was told to take over) is adopt's alone,
// and it does it here, right after reading the server again (Identify).
// Between the two writes the server carries the identity without a Machine:
// the adoption record (Apply) keeps the janitor from counting it as an
// orphan, and a rerun finds the Machine's name in its tags.
func (a *Adopter) adoptMember(ctx context.Context, g *Group, m *Member, r *Report) error {
	changed, err := a.a.Identify(ctx, cloud.MachineRef{Name: m.MachineName, ClusterID: a.groupID(g)}, g.Spec, m.Found)
	if err != nil {
		return fmt.Errorf("giving the server its Machine's identity (no Machine written; run adopt again): %w", err)
	}
	if changed {
		r.IdentitiesSet++
	}
	err = a.kube.Create(ctx, m.Machine.DeepCopy())
	switch {
	case apierrors.IsAlreadyExists(err):
		var cur machinev1beta1.Machine
		if err := a.kube.Get(ctx, client.ObjectKeyFromObject(m.Machine), &cur); err != nil {
			return err
		}
		if cur.Spec.ProviderID == nil || *cur.Spec.ProviderID != *m.Machine.Spec.ProviderID {
			return fmt.Errorf("a Machine %s exists already, for another server", m.MachineName)
		}
	case err != nil:
		return fmt.Errorf("creating its Machine: %w", err)
	default:
		r.MachinesCreated++
	}
	a.progress("%s: %s is Machine %s", g.Name, m.Found.Name, m.MachineName)
	return nil
}

func (a *Adopter) ensureUserData(ctx context.Context, g *Group, r *Report) error {
	if g.UserData.Create == nil || g.UserData.Exists {
		return nil
	}
	err := a.kube.Create(ctx, g.UserData.Create.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the user data secret %s: %w", g.UserData.Secret, err)
	}
	r.SecretsCreated++
	a.progress("%s: user data secret %s (%s)", g.Name, g.UserData.Secret, g.UserData.Source)
	return nil
}

// createOnce creates an object; one that exists is left as it is.
func (a *Adopter) createOnce(ctx context.Context, obj client.Object) error {
	err := a.kube.Create(ctx, obj.DeepCopyObject().(client.Object))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// awaitMachines waits until every Machine of the members runs on its Node
// with its spec in sync: what the machine controller and the nodelink
// controller make of them.
func (a *Adopter) awaitMachines(ctx context.Context, g *Group, members []*Member) error {
	return a.poll(ctx, fmt.Sprintf("%s: the Machines to be Running, linked to their Nodes, in sync", g.Name), func() (bool, string, error) {
		for _, m := range members {
			var mach machinev1beta1.Machine
			if err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: m.MachineName}, &mach); err != nil {
				return false, "", err
			}
			if ok, why := settled(&mach); !ok {
				return false, fmt.Sprintf("Machine %s: %s", mach.Name, why), nil
			}
		}
		return true, "", nil
	})
}

// settled says whether an adopted Machine is done: Running, linked to its
// Node, its spec in sync.
func settled(m *machinev1beta1.Machine) (bool, string) {
	phase := ""
	if m.Status.Phase != nil {
		phase = *m.Status.Phase
	}
	if phase == machinev1beta1.PhaseFailed {
		msg := ""
		if m.Status.ErrorMessage != nil {
			msg = *m.Status.ErrorMessage
		}
		return false, "Failed: " + msg
	}
	if phase != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil {
		return false, fmt.Sprintf("phase %q, node %v", phase, m.Status.NodeRef != nil)
	}
	c := specInSync(m)
	if c == nil || c.Status != metav1.ConditionTrue {
		if c != nil {
			return false, "SpecInSync " + string(c.Status) + ": " + c.Message
		}
		return false, "no SpecInSync yet"
	}
	return true, ""
}

// specInSync is the provider status's SpecInSync condition.
func specInSync(m *machinev1beta1.Machine) *metav1.Condition {
	if m.Status.ProviderStatus == nil {
		return nil
	}
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if json.Unmarshal(m.Status.ProviderStatus.Raw, &st) != nil {
		return nil
	}
	return meta.FindStatusCondition(st.Conditions, "SpecInSync")
}

// awaitQuiet waits until no one writes the Machines any more: the
// MachineSet controller takes an orphan over with an update of the Machine
// as its cache has it, and one it fails to take over it does not count; it
// would make a Machine (and a server) in its place.
func (a *Adopter) awaitQuiet(ctx context.Context, g *Group, members []*Member) error {
	last := map[string]string{}
	return a.poll(ctx, fmt.Sprintf("%s: the Machines to settle", g.Name), func() (bool, string, error) {
		quiet := len(last) > 0
		for _, m := range members {
			var mach machinev1beta1.Machine
			if err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: m.MachineName}, &mach); err != nil {
				return false, "", err
			}
			if last[mach.Name] != mach.ResourceVersion {
				quiet = false
			}
			last[mach.Name] = mach.ResourceVersion
		}
		return quiet, "the Machines are still being written", nil
	})
}

// awaitMachineSet waits until the MachineSet owns the adopted Machines and
// counts them as its replicas. Should it have made a Machine of its own
// all the same (it failed to take one of them over, and made one in its
// place), it owns one too many once it takes the adopted one over: that
// Machine is marked as the one to go (the MachineSet controller's
// delete-machine annotation), and the MachineSet deletes it, not an adopted
// one. adopt itself never deletes a Machine: every Machine it made, in this
// run or an earlier one, records a server (AdoptedAnnotation), and those
// the MachineSet made may have one by now.
func (a *Adopter) awaitMachineSet(ctx context.Context, g *Group, members []*Member) error {
	return a.poll(ctx, fmt.Sprintf("%s: the MachineSet to take over its Machines", g.Name), func() (bool, string, error) {
		var ms machinev1beta1.MachineSet
		if err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: g.Name}, &ms); err != nil {
			return false, "", err
		}
		var list machinev1beta1.MachineList
		if err := a.kube.List(ctx, &list, client.InNamespace(a.o.Namespace), client.MatchingLabels(ms.Spec.Selector.MatchLabels)); err != nil {
			return false, "", err
		}
		for i := range list.Items {
			extra := &list.Items[i]
			if extra.Annotations[AdoptedAnnotation] != "" || extra.Annotations[deleteMachineAnnotation] != "" || extra.DeletionTimestamp != nil || !metav1.IsControlledBy(extra, &ms) {
				continue
			}
			a.progress("%s: the MachineSet made Machine %s while it took the adopted ones over; it is marked as the one the MachineSet removes", g.Name, extra.Name)
			patch := client.MergeFrom(extra.DeepCopy())
			if extra.Annotations == nil {
				extra.Annotations = map[string]string{}
			}
			extra.Annotations[deleteMachineAnnotation] = "true"
			if err := a.kube.Patch(ctx, extra, patch); err != nil && !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		for _, m := range members {
			var mach machinev1beta1.Machine
			if err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: m.MachineName}, &mach); err != nil {
				return false, "", err
			}
			if ref := metav1.GetControllerOf(&mach); ref == nil || ref.UID != ms.UID {
				return false, "Machine " + mach.Name + " not owned yet", nil
			}
		}
		if ms.Status.Replicas != *ms.Spec.Replicas {
			return false, fmt.Sprintf("%d of %d replicas", ms.Status.Replicas, *ms.Spec.Replicas), nil
		}
		return true, "", nil
	})
}

// deleteMachineAnnotation marks the Machine a MachineSet that owns more
// than its replicas deletes first (the machine-api-operator's
// machineset controller, delete_policy.go, DeleteNodeAnnotation).
const deleteMachineAnnotation = "machine.openshift.io/delete-machine"

// poll calls cond until it holds, fails, or Options.Wait passes.
func (a *Adopter) poll(ctx context.Context, what string, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(a.o.Wait)
	last := ""
	for {
		ok, why, err := cond()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if why != "" {
			last = why
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up waiting %s for %s (last: %s)", a.o.Wait, what, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.o.Poll):
		}
	}
}

// nodeReady says whether a Node is Ready.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
