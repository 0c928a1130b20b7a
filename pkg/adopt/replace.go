package adopt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/nodes"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// applyReplace replaces the members of an instance pool one at a time: the
// group's MachineSet grows by one, its new Machine runs on a Ready Node,
// the member's Node is drained, and exactly that member is evicted from
// the pool (which destroys it), then its Node deleted. It resumes where a
// run before it stopped: the MachineSet remembers how many members the
// pool had, the pool how many are left, the adoption record which member
// was evicted with which Node (finishEvictions).
//
// adopt acts only on what it recorded and matched right then: the Node it
// drains is the one the plan matched to the member (pkg/nodes: by
// providerID, or by name and address), read again and matched to the
// member as the cloud shows it right before the drain (memberNode); the
// eviction is refused by any other Node on the member (the Node veto,
// as every delete); the Node it deletes afterwards is checked again
// (deleteEvictedNode). Nothing any MachineSet annotation says is acted on.
func (a *Adopter) applyReplace(ctx context.Context, p *Plan, g *Group, r *Report) error {
	if err := a.ensureUserData(ctx, g, r); err != nil {
		return err
	}
	var ms machinev1beta1.MachineSet
	err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: g.Name}, &ms)
	switch {
	case apierrors.IsNotFound(err) && g.MachineSet != nil:
		if err := a.createOnce(ctx, g.MachineSet); err != nil {
			return fmt.Errorf("creating the MachineSet: %w", err)
		}
		r.MachineSetsCreated++
		a.progress("%s: MachineSet at 0 replicas, to replace the %d members of instance pool %s", g.Name, len(g.Pool.Members), g.Pool.Name)
		if err := a.kube.Get(ctx, client.ObjectKeyFromObject(g.MachineSet), &ms); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("reading the MachineSet: %w", err)
	}
	if ms.Annotations[PoolAnnotation] != g.Pool.ID {
		return fmt.Errorf("the MachineSet %s exists, but does not replace instance pool %s (annotation %s)", g.Name, g.Pool.Name, PoolAnnotation)
	}
	start, err := strconv.Atoi(ms.Annotations[PoolSizeAnnotation])
	if err != nil {
		return fmt.Errorf("the MachineSet %s: annotation %s: %w", g.Name, PoolSizeAnnotation, err)
	}
	for _, m := range g.Members {
		if m.Action != ActReplace {
			continue
		}
		left, err := a.poolLeft(ctx, g)
		if err != nil {
			return err
		}
		if !slices.Contains(left, m.Found.ID) {
			continue
		}
		want := int32(start - len(left) + 1)
		if err := a.scaleTo(ctx, g.Name, want); err != nil {
			return err
		}
		if err := a.awaitReady(ctx, g, want); err != nil {
			return err
		}
		node, addrs, err := a.memberNode(ctx, m)
		if err != nil {
			return err
		}
		ev := orphans.Eviction{Pool: g.Pool.ID, Addresses: addrs}
		if node != nil {
			if err := a.drain(ctx, node); err != nil {
				return fmt.Errorf("draining %s: %w", node.Name, err)
			}
			ev.Node, ev.NodeUID, ev.ProviderID = node.Name, string(node.UID), node.Spec.ProviderID
		}
		rec := orphans.Adoption{ServerID: m.Found.ID, ServerName: m.Found.Name, ClusterID: a.groupID(g), TaggedAs: m.Found.ClusterID,
			Since: time.Now().UTC(), Expires: time.Now().UTC().Add(orphans.AdoptionTTL), Eviction: &ev}
		if err := a.record.Evicting(ctx, rec, ev); err != nil {
			return fmt.Errorf("recording the eviction of %s in %s: %w", m.Found.Name, orphans.AdoptionsConfigMapName(a.cloud.Name()), err)
		}
		veto, err := a.evictionVeto(ctx, node)
		if err != nil {
			return err
		}
		if err := a.a.EvictPoolMember(ctx, *g.Pool, m.Found.ID, veto); err != nil {
			return fmt.Errorf("evicting %s from instance pool %s: %w", m.Found.Name, g.Pool.Name, err)
		}
		if err := a.deleteEvictedNode(ctx, p, rec); err != nil {
			return err
		}
		r.Replaced++
		a.progress("%s: %s replaced (%d of %d): drained, evicted from instance pool %s", g.Name, m.Found.Name, start-len(left)+1, start, g.Pool.Name)
	}
	return nil
}

// memberNode reads the Node the plan matched to a pool member again, right
// before adopt drains it: the same Node (its UID), still running on the
// member as the cloud shows it now (every address read now). It returns
// the member's addresses too, for the record; no Node (nil) when the one
// the plan found is gone.
func (a *Adopter) memberNode(ctx context.Context, m *Member) (*corev1.Node, []string, error) {
	srv := m.Found.Server
	if err := a.c.ReadAddresses(ctx, &srv); err != nil {
		return nil, nil, fmt.Errorf("reading the addresses of %s: %w", m.Found.Name, err)
	}
	var addrs []string
	for _, ad := range srv.Addresses {
		if !slices.Contains(addrs, ad.Address) {
			addrs = append(addrs, ad.Address)
		}
	}
	var node corev1.Node
	err := a.kube.Get(ctx, client.ObjectKey{Name: m.Node.Name}, &node)
	switch {
	case apierrors.IsNotFound(err):
		return nil, addrs, nil
	case err != nil:
		return nil, nil, err
	case node.UID != m.Node.UID:
		return nil, nil, fmt.Errorf("the Node %s is another one than the plan found (UID %s, was %s): nothing drained or evicted, run adopt again", node.Name, node.UID, m.Node.UID)
	}
	if len(nodes.New(a.cloud.Name(), []corev1.Node{node}).On(srv)) == 0 {
		return nil, nil, fmt.Errorf("the Node %s no longer runs on %s (by providerID, or by name and address): nothing drained or evicted, run adopt again", node.Name, m.Found.Name)
	}
	return &node, addrs, nil
}

// evictionVeto is the Node veto of a member's eviction: every Node of the
// cluster that runs on it (read now), but the one adopt drained (its UID).
func (a *Adopter) evictionVeto(ctx context.Context, drained *corev1.Node) (nodes.Veto, error) {
	ix, err := nodes.List(ctx, a.kube, a.cloud.Name())
	if err != nil {
		return nodes.Veto{}, err
	}
	v := nodes.Veto{Index: ix}
	if drained != nil {
		v.Except = func(m nodes.Match) bool { return m.Node.UID == drained.UID }
	}
	return v, nil
}

// deleteEvictedNode deletes the Node of a pool member adopt recorded as
// evicted (rec.Eviction), once the member is gone: its kubelet is gone
// with it, and without a cloud controller manager the Node would stay
// NotReady forever. It deletes only that Node, checked right before:
//
//   - the member is gone, as the cloud says;
//   - the Node is the one recorded (its UID), and cordoned (adopt drained
//     it);
//   - it runs on the member: its providerID is the member's, or it has
//     none, the member's name and one of the addresses recorded;
//   - without a providerID, no server of the plan's survey runs it (by name
//     and address): a Node whose server is there is no evicted member's.
//
// The delete is conditional on the UID. Then the member leaves the
// adoption record. A Node that is gone already, or another one now, is
// left and said so.
func (a *Adopter) deleteEvictedNode(ctx context.Context, p *Plan, rec orphans.Adoption) error {
	ev := rec.Eviction
	_, err := a.c.GetServer(ctx, rec.ServerID)
	switch {
	case err == nil:
		return fmt.Errorf("the evicted member %s (%s) is still there: its Node is not deleted, run adopt again", rec.ServerID, rec.ServerName)
	case !cloud.IsNotFound(err):
		return fmt.Errorf("looking up the evicted member %s: %w", rec.ServerID, err)
	}
	if ev.Node == "" {
		return a.record.Done(ctx, rec.ServerID)
	}
	var node corev1.Node
	err = a.kube.Get(ctx, client.ObjectKey{Name: ev.Node}, &node)
	switch {
	case apierrors.IsNotFound(err):
		a.progress("the Node %s of the evicted member %s is gone already", ev.Node, rec.ServerName)
		return a.record.Done(ctx, rec.ServerID)
	case err != nil:
		return err
	case string(node.UID) != ev.NodeUID:
		a.progress("the Node %s is another one than the evicted member %s had (UID %s, recorded %s): left as it is", ev.Node, rec.ServerName, node.UID, ev.NodeUID)
		return a.record.Done(ctx, rec.ServerID)
	}
	if why := a.notEvictedMembers(p, rec, &node); why != "" {
		return fmt.Errorf("the Node %s is not deleted: %s", node.Name, why)
	}
	uid := node.UID
	if err := a.kube.Delete(ctx, &node, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the Node %s of the evicted member: %w", node.Name, err)
	}
	a.progress("the Node %s of the evicted member %s is deleted", node.Name, rec.ServerName)
	return a.record.Done(ctx, rec.ServerID)
}

// notEvictedMembers says why a Node may not be the Node of the evicted
// member rec ("" when it is: deleteEvictedNode).
func (a *Adopter) notEvictedMembers(p *Plan, rec orphans.Adoption, node *corev1.Node) string {
	ev := rec.Eviction
	if !node.Spec.Unschedulable {
		return "it is not cordoned, and adopt cordoned the Node it drained"
	}
	if node.Spec.ProviderID != "" {
		if node.Spec.ProviderID != a.cloud.Name()+"://"+rec.ServerID {
			return fmt.Sprintf("its providerID %s is not the evicted member's %s", node.Spec.ProviderID, rec.ServerID)
		}
		return ""
	}
	member := cloud.Server{ID: rec.ServerID, Name: rec.ServerName}
	for _, ip := range ev.Addresses {
		member.Addresses = append(member.Addresses, corev1.NodeAddress{Address: ip})
	}
	ix := nodes.New(a.cloud.Name(), []corev1.Node{*node})
	if len(ix.On(member)) == 0 {
		return fmt.Sprintf("it has neither the evicted member %s's providerID nor its name and one of its addresses %v", rec.ServerName, ev.Addresses)
	}
	if !p.surveyed {
		return "it has no providerID, and without a survey of the account adopt cannot tell that no server runs it"
	}
	for _, f := range p.servers {
		if f.ID != rec.ServerID && len(ix.On(f.Server)) > 0 {
			return fmt.Sprintf("server %s (%s) runs it (by name and address)", f.ID, f.Name)
		}
	}
	return ""
}

// finishEvictions finishes what a run before stopped after: a member the
// adoption record says was evicted is gone, its Node is not yet; its pool
// (and so its group) may be gone too. A member still there is left to
// applyReplace, which evicts it (again).
func (a *Adopter) finishEvictions(ctx context.Context, p *Plan, r *Report) {
	a.ignoreEvictingAnnotations(ctx)
	recorded, err := a.record.List(ctx)
	if err != nil {
		r.Errors = append(r.Errors, err)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(recorded)) {
		rec := recorded[id]
		if rec.Eviction == nil || !a.ids().Owns(rec.ClusterID) {
			continue
		}
		if _, err := a.c.GetServer(ctx, id); err == nil {
			continue
		}
		if err := a.deleteEvictedNode(ctx, p, rec); err != nil {
			r.Errors = append(r.Errors, fmt.Errorf("%w; the adoption record %s names it as the Node of the evicted member %s: once you have dealt with the Node, remove that key",
				err, orphans.AdoptionsConfigMapName(a.cloud.Name()), id))
			continue
		}
		r.Replaced++
	}
}

// legacyEvictingAnnotation is what earlier releases recorded an eviction
// in, on the replacing MachineSet: "<member ID> <Node>". Anyone who may
// patch a MachineSet can write it, so it is not acted on, only named.
const legacyEvictingAnnotation = "machine.appuio.io/evicting-pool-member"

// ignoreEvictingAnnotations says which MachineSets carry
// legacyEvictingAnnotation, and that nothing is done about it.
func (a *Adopter) ignoreEvictingAnnotations(ctx context.Context) {
	var sets machinev1beta1.MachineSetList
	if err := a.kube.List(ctx, &sets, client.InNamespace(a.o.Namespace)); err != nil {
		return
	}
	for _, ms := range sets.Items {
		if v, ok := ms.Annotations[legacyEvictingAnnotation]; ok {
			a.progress("%s: annotation %s=%q is not acted on (adopt acts only on its adoption record): if it names a Node whose server is gone, check and delete that Node by hand",
				ms.Name, legacyEvictingAnnotation, v)
		}
	}
}

// poolLeft are the pool's members that are still there.
func (a *Adopter) poolLeft(ctx context.Context, g *Group) ([]string, error) {
	var left []string
	for _, id := range g.Pool.Members {
		_, err := a.c.GetServer(ctx, id)
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		left = append(left, id)
	}
	return left, nil
}

// scaleTo raises the MachineSet's replicas to n (never lowers them).
func (a *Adopter) scaleTo(ctx context.Context, name string, n int32) error {
	var ms machinev1beta1.MachineSet
	if err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: name}, &ms); err != nil {
		return err
	}
	if ms.Spec.Replicas != nil && *ms.Spec.Replicas >= n {
		return nil
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = &n
	if err := a.kube.Patch(ctx, &ms, patch); err != nil {
		return fmt.Errorf("scaling the MachineSet %s to %d: %w", name, n, err)
	}
	return nil
}

// awaitReady waits until the MachineSet has n Machines running on Ready
// Nodes.
func (a *Adopter) awaitReady(ctx context.Context, g *Group, n int32) error {
	return a.poll(ctx, fmt.Sprintf("%s: %d Machines Running on Ready Nodes", g.Name, n), func() (bool, string, error) {
		var list machinev1beta1.MachineList
		if err := a.kube.List(ctx, &list, client.InNamespace(a.o.Namespace), client.MatchingLabels{machineSetLabel: g.Name}); err != nil {
			return false, "", err
		}
		ready := int32(0)
		for i := range list.Items {
			m := &list.Items[i]
			if m.DeletionTimestamp != nil || m.Status.NodeRef == nil {
				continue
			}
			var node corev1.Node
			if err := a.kube.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &node); err != nil {
				continue
			}
			if nodeReady(&node) {
				ready++
			}
		}
		return ready >= n, fmt.Sprintf("%d of %d ready", ready, n), nil
	})
}

// drain cordons a Node (the one read, by its UID) and evicts its pods (as
// oc adm drain --ignore-daemonsets --delete-emptydir-data), then waits
// until they are gone.
func (a *Adopter) drain(ctx context.Context, node *corev1.Node) error {
	name := node.Name
	if !node.Spec.Unschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = true
		if err := a.kube.Patch(ctx, node, patch); err != nil {
			return fmt.Errorf("cordoning: %w", err)
		}
	}
	return a.poll(ctx, "the pods of "+name+" to be evicted", func() (bool, string, error) {
		var pods corev1.PodList
		if err := a.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": name}); err != nil {
			return false, "", err
		}
		left := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if drainSkips(p) {
				continue
			}
			left++
			if p.DeletionTimestamp != nil {
				continue
			}
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if err := a.kube.SubResource("eviction").Create(ctx, p, ev); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
				return false, "", fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		return left == 0, fmt.Sprintf("%d pods left", left), nil
	})
}

// drainSkips are the pods a drain leaves: DaemonSets' (they run on every
// node and are not rescheduled) and mirror pods, and pods that are done.
func drainSkips(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return true
	}
	return false
}
