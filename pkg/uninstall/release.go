package uninstall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/gitops"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// Plan is what Apply releases, and what it leaves.
type Plan struct {
	Cloud       string
	AdoptedOnly bool
	// Stops names what is stopped first.
	Stops []string
	// Autoscalers are the MachineAutoscalers of released MachineSets.
	Autoscalers []string
	CPMS        []string
	MachineSets []string
	// Machines are released, each with the server it records ("" while it
	// has none) and a note (being deleted, not yet provisioned).
	Machines []PlannedMachine
	// Kept are Machines left as they are, and why.
	Kept []string
	// Remove are the provider's own objects deleted last.
	Remove []string
	// GitOps are the objects of the plan Argo CD or Flux keeps in sync
	// (gitops.go); GitOpsUnread says what of Argo CD could not be read.
	GitOps       []gitops.Finding
	GitOpsUnread string

	cpms        []machinev1.ControlPlaneMachineSet
	machineSets []machinev1beta1.MachineSet
	machines    []machinev1beta1.Machine
	// disowned are kept Machines of released owners: they lose the owner
	// reference only.
	disowned    []machinev1beta1.Machine
	autoscalers []unstructured.Unstructured
}

// PlannedMachine is a Machine the plan releases.
type PlannedMachine struct {
	Name, Server, Node, Note string
}

// machineAutoscalerGVK is the cluster-autoscaler-operator's kind.
var machineAutoscalerGVK = schema.GroupVersionKind{Group: "autoscaling.openshift.io", Version: "v1beta1", Kind: "MachineAutoscaler"}

// Plan reads what Apply would release. It changes nothing.
func (u *Uninstaller) Plan(ctx context.Context) (*Plan, error) {
	p := &Plan{Cloud: u.o.Cloud, AdoptedOnly: u.o.AdoptedOnly, Stops: u.o.Stopper.Describe()}
	var cpms machinev1.ControlPlaneMachineSetList
	if err := u.kube.List(ctx, &cpms, client.InNamespace(u.o.Namespace)); err != nil && !noKind(err) {
		return nil, fmt.Errorf("listing ControlPlaneMachineSets: %w", err)
	}
	released := map[types.UID]bool{}
	for _, c := range cpms.Items {
		if u.ours(cpmsSpec(&c)) && (!u.o.AdoptedOnly || c.Annotations[WrittenAnnotation] != "") {
			p.cpms = append(p.cpms, c)
			p.CPMS = append(p.CPMS, c.Name)
			released[c.UID] = true
		}
	}
	var sets machinev1beta1.MachineSetList
	if err := u.kube.List(ctx, &sets, client.InNamespace(u.o.Namespace)); err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	for _, ms := range sets.Items {
		if u.ours(ms.Spec.Template.Spec.ProviderSpec) && (!u.o.AdoptedOnly || ms.Annotations[WrittenAnnotation] != "") {
			p.machineSets = append(p.machineSets, ms)
			p.MachineSets = append(p.MachineSets, ms.Name)
			released[ms.UID] = true
		}
	}
	var machines machinev1beta1.MachineList
	if err := u.kube.List(ctx, &machines, client.InNamespace(u.o.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	for _, m := range machines.Items {
		if !u.ours(m.Spec.ProviderSpec) {
			continue
		}
		ref := metav1.GetControllerOf(&m)
		switch {
		case u.o.AdoptedOnly && m.Annotations[AdoptedAnnotation] == "":
			if ref != nil && released[ref.UID] {
				p.disowned = append(p.disowned, m)
				p.Kept = append(p.Kept, fmt.Sprintf("Machine %s: the provider made it, adopt did not; it stays the provider's, in no MachineSet (delete it to delete its server)", m.Name))
			}
			continue
		case ref != nil && !released[ref.UID]:
			// Its owner would make another Machine in its place.
			p.Kept = append(p.Kept, fmt.Sprintf("Machine %s: its %s %s is not released", m.Name, ref.Kind, ref.Name))
			continue
		}
		pm := PlannedMachine{Name: m.Name}
		if m.Spec.ProviderID != nil {
			pm.Server = *m.Spec.ProviderID
		}
		if m.Status.NodeRef != nil {
			pm.Node = m.Status.NodeRef.Name
		}
		switch {
		case m.DeletionTimestamp != nil:
			pm.Note = "being deleted: its deletion stops, its server (if still there) stays"
		case pm.Server == "":
			pm.Note = "no server recorded yet: one being made stays, with the Machine's identity"
		}
		p.machines = append(p.machines, m)
		p.Machines = append(p.Machines, pm)
	}
	var mas unstructured.UnstructuredList
	mas.SetGroupVersionKind(machineAutoscalerGVK)
	if err := u.kube.List(ctx, &mas, client.InNamespace(u.o.Namespace)); err != nil && !noKind(err) {
		return nil, fmt.Errorf("listing MachineAutoscalers: %w", err)
	}
	for _, ma := range mas.Items {
		target, _, _ := unstructured.NestedString(ma.Object, "spec", "scaleTargetRef", "name")
		if slices.Contains(p.MachineSets, target) {
			p.autoscalers = append(p.autoscalers, ma)
			p.Autoscalers = append(p.Autoscalers, ma.GetName())
		}
	}
	for _, obj := range u.o.Remove {
		p.Remove = append(p.Remove, describe(obj))
	}
	if err := u.gitOps(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if ns := obj.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}

// Report counts what Apply did.
type Report struct {
	Autoscalers, CPMS, MachineSets, Machines, Removed int
	Errors                                            []error
}

// Apply carries out a plan: the controllers stop, the MachineAutoscalers,
// the Machines, the MachineSets and the ControlPlaneMachineSets go, the
// provider's own objects go (uninstall) or the controllers start again
// (undo). Nothing is released unless the controllers stopped. One object's
// failure does not stop the others; the report names each.
func (u *Uninstaller) Apply(ctx context.Context, p *Plan) (*Report, error) {
	r := &Report{}
	fail := func(err error) {
		r.Errors = append(r.Errors, err)
		u.progress("error: %v", err)
	}
	for _, ma := range p.autoscalers {
		if err := u.kube.Delete(ctx, &ma); err != nil && !apierrors.IsNotFound(err) {
			fail(fmt.Errorf("MachineAutoscaler %s: %w", ma.GetName(), err))
			continue
		}
		r.Autoscalers++
		u.progress("MachineAutoscaler %s deleted: the autoscaler no longer scales its MachineSet", ma.GetName())
	}
	if err := u.o.Stopper.Stop(ctx, u.progress); err != nil {
		return r, fmt.Errorf("the controllers did not stop, so nothing was released: %w", err)
	}
	if err := u.leaveAlone(ctx, p); err != nil {
		return r, fmt.Errorf("recording the servers left alone, before any Machine is released (nothing was released): %w", err)
	}
	owners := map[types.UID]bool{}
	for _, ms := range p.machineSets {
		owners[ms.UID] = true
	}
	for _, c := range p.cpms {
		owners[c.UID] = true
	}
	// An owner goes only once every Machine it owns is unhooked: the
	// garbage collector never has one to delete.
	stuck := map[types.UID]bool{}
	var released []*machinev1beta1.Machine
	for i := range p.machines {
		m, err := u.unhook(ctx, &p.machines[i], owners, false)
		if err != nil {
			markOwners(&p.machines[i], owners, stuck)
			fail(fmt.Errorf("releasing Machine %s: %w", p.machines[i].Name, err))
			continue
		}
		if m != nil {
			released = append(released, m)
		}
	}
	for i := range p.disowned {
		if _, err := u.unhook(ctx, &p.disowned[i], owners, true); err != nil {
			markOwners(&p.disowned[i], owners, stuck)
			fail(fmt.Errorf("releasing Machine %s: %w", p.disowned[i].Name, err))
		}
	}
	var owned []client.Object
	for i := range p.machineSets {
		owned = append(owned, &p.machineSets[i])
	}
	for i := range p.cpms {
		owned = append(owned, &p.cpms[i])
	}
	for _, o := range owned {
		kind := "MachineSet"
		if _, cpms := o.(*machinev1.ControlPlaneMachineSet); cpms {
			kind = "ControlPlaneMachineSet"
		}
		if stuck[o.GetUID()] {
			fail(fmt.Errorf("%s %s: kept, since one of its Machines could not be released", kind, o.GetName()))
			continue
		}
		if err := u.deleteOwner(ctx, o); err != nil {
			fail(fmt.Errorf("%s %s: %w", kind, o.GetName(), err))
			continue
		}
		if kind == "MachineSet" {
			r.MachineSets++
		} else {
			r.CPMS++
		}
		u.progress("%s %s deleted, its Machines unhooked first", kind, o.GetName())
	}
	for _, m := range released {
		if err := u.deleteReleased(ctx, m, owners); err != nil {
			fail(fmt.Errorf("releasing Machine %s: %w", m.Name, err))
			continue
		}
		r.Machines++
		u.progress("Machine %s released: its server and its Node stay", m.Name)
	}
	if u.o.AdoptedOnly {
		if err := u.o.Stopper.Start(ctx, u.progress); err != nil {
			fail(fmt.Errorf("starting the controllers again: %w", err))
		}
	} else {
		for _, obj := range u.o.Remove {
			err := u.kube.Delete(ctx, obj)
			switch {
			case apierrors.IsNotFound(err), noKind(err):
			case err != nil:
				fail(fmt.Errorf("%s: %w", describe(obj), err))
			default:
				r.Removed++
			}
		}
		u.progress("%d objects of the provider deleted", r.Removed)
	}
	return r, errors.Join(r.Errors...)
}

// leaveAlone records the servers of the Machines the plan releases as left
// alone in the adoption record (pkg/orphans, Adoptions): they keep the
// provider's identity without a Machine, on purpose, and the janitor (of
// the controllers started again by the undo, or of a later install) must
// never take them for orphans, nor delete one whose Node is missing for a
// minute. adopt run again gives them their Machines back and takes them
// out of the record.
func (u *Uninstaller) leaveAlone(ctx context.Context, p *Plan) error {
	by := "`machine-api-provider uninstall`"
	if u.o.AdoptedOnly {
		by = "`machine-api-provider adopt --undo`"
	}
	now := time.Now().UTC()
	var left []orphans.Adoption
	for _, m := range p.machines {
		id := serverID(u.o.Cloud, &m)
		if id == "" {
			continue
		}
		left = append(left, orphans.Adoption{ServerID: id, Machine: m.Name, ClusterID: m.Labels[clusterLabel], Since: now,
			LeftAlone: fmt.Sprintf("released by %s from Machine %s on %s", by, m.Name, now.Format(time.RFC3339))})
	}
	record := &orphans.Adoptions{Client: u.kube, Namespace: u.o.Namespace, Cloud: u.o.Cloud}
	return record.Begin(ctx, left...)
}

// clusterLabel names a Machine's cluster.
const clusterLabel = "machine.openshift.io/cluster-api-cluster"

// serverID is the server a Machine records: its provider ID's (the
// provider writes it), "" for none or another cloud's.
func serverID(cloudName string, m *machinev1beta1.Machine) string {
	if m.Spec.ProviderID == nil {
		return ""
	}
	id, ok := strings.CutPrefix(*m.Spec.ProviderID, cloudName+"://")
	if !ok {
		return ""
	}
	return id
}

// unhook takes a Machine's finalizers (unless keepFinalizers: a Machine
// that stays) and its owner references to released owners away, under an
// optimistic lock. It returns the Machine as written (nil when it is gone
// already).
func (u *Uninstaller) unhook(ctx context.Context, m *machinev1beta1.Machine, owners map[types.UID]bool, keepFinalizers bool) (*machinev1beta1.Machine, error) {
	for attempt := 0; ; attempt++ {
		cur := &machinev1beta1.Machine{}
		err := u.kube.Get(ctx, client.ObjectKeyFromObject(m), cur)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if cur.UID != m.UID {
			return nil, nil // another Machine of that name since: not the planned one
		}
		if (keepFinalizers || len(cur.Finalizers) == 0) && !ownedBy(cur, owners) {
			return cur, nil
		}
		base := cur.DeepCopy()
		if !keepFinalizers {
			cur.Finalizers = nil
		}
		cur.OwnerReferences = slices.DeleteFunc(cur.OwnerReferences, func(r metav1.OwnerReference) bool { return owners[r.UID] })
		err = u.kube.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return cur, nil
		case apierrors.IsConflict(err) && attempt < 10:
			continue
		default:
			return nil, err
		}
	}
}

// markOwners marks the released owners of a Machine that could not be
// unhooked.
func markOwners(m *machinev1beta1.Machine, owners, stuck map[types.UID]bool) {
	for _, r := range m.OwnerReferences {
		if owners[r.UID] {
			stuck[r.UID] = true
		}
	}
}

func ownedBy(m *machinev1beta1.Machine, owners map[types.UID]bool) bool {
	return slices.ContainsFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool { return owners[r.UID] })
}

// deleteReleased deletes a Machine as unhook left it: with a precondition
// on its version, so that it goes at once, without a finalizer anyone could
// act on. Should anything have written it since (a finalizer put back), it
// is unhooked again.
func (u *Uninstaller) deleteReleased(ctx context.Context, m *machinev1beta1.Machine, owners map[types.UID]bool) error {
	for attempt := 0; ; attempt++ {
		uid, rv := m.UID, m.ResourceVersion
		// No propagation policy: Orphan would add the garbage collector's
		// finalizer, and with it the deletion timestamp this avoids.
		err := u.kube.Delete(ctx, m, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 10:
			next, err := u.unhook(ctx, m, owners, false)
			if err != nil {
				return err
			}
			if next == nil {
				return nil
			}
			m = next
		default:
			return err
		}
	}
}

// deleteOwner deletes a MachineSet or ControlPlaneMachineSet whose Machines
// are unhooked: without finalizers (a ControlPlaneMachineSet operator's
// would wait for nothing), orphaning any dependent.
func (u *Uninstaller) deleteOwner(ctx context.Context, obj client.Object) error {
	if len(obj.GetFinalizers()) > 0 {
		base := obj.DeepCopyObject().(client.Object)
		obj.SetFinalizers(nil)
		if err := u.kube.Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	uid := obj.GetUID()
	err := u.kube.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationOrphan))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// noKind says the API server does not know a kind (a cluster without the
// ControlPlaneMachineSet or MachineAutoscaler CRD).
func noKind(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}
