package adopt

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// applyReplace replaces the members of an instance pool one at a time: the
// group's MachineSet grows by one, its new Machine runs on a Ready Node,
// the member's Node is drained, and exactly that member is evicted from
// the pool (which destroys it). It resumes where a run before it stopped:
// the MachineSet remembers how many members the pool had, the pool how
// many are left.
func (a *Adopter) applyReplace(ctx context.Context, g *Group, r *Report) error {
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
	id, node, resume := strings.Cut(ms.Annotations[EvictingAnnotation], " ")
	if resume {
		// A run before stopped at this member, drained and replaced
		// already: whether the pool let it go or not, it goes now.
		if err := a.a.EvictPoolMember(ctx, *g.Pool, id); err != nil {
			return fmt.Errorf("evicting %s from instance pool %s: %w", id, g.Pool.Name, err)
		}
		if err := a.forgetEvicted(ctx, g.Name, node); err != nil {
			return err
		}
		r.Replaced++
		a.progress("%s: the member %s evicted before is gone, its Node %s deleted", g.Name, id, node)
	}
	for _, m := range g.Members {
		if m.Action != ActReplace || resume && m.Found.ID == id {
			continue
		}
		left, err := a.poolLeft(ctx, g)
		if err != nil {
			return err
		}
		// The member evicted above may still be being destroyed: it
		// counts as gone.
		left = slices.DeleteFunc(left, func(x string) bool { return resume && x == id })
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
		if err := a.drain(ctx, m.Node.Name); err != nil {
			return fmt.Errorf("draining %s: %w", m.Node.Name, err)
		}
		if err := a.annotate(ctx, g.Name, m.Found.ID+" "+m.Node.Name); err != nil {
			return err
		}
		if err := a.a.EvictPoolMember(ctx, *g.Pool, m.Found.ID); err != nil {
			return fmt.Errorf("evicting %s from instance pool %s: %w", m.Found.Name, g.Pool.Name, err)
		}
		if err := a.forgetEvicted(ctx, g.Name, m.Node.Name); err != nil {
			return err
		}
		r.Replaced++
		a.progress("%s: %s replaced (%d of %d): drained, evicted from instance pool %s", g.Name, m.Found.Name, start-len(left)+1, start, g.Pool.Name)
	}
	return nil
}

// annotate sets the MachineSet's EvictingAnnotation to value, or removes it
// when value is "".
func (a *Adopter) annotate(ctx context.Context, name, value string) error {
	var ms machinev1beta1.MachineSet
	if err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: name}, &ms); err != nil {
		return err
	}
	if ms.Annotations[EvictingAnnotation] == value {
		return nil
	}
	patch := client.MergeFrom(ms.DeepCopy())
	if value == "" {
		delete(ms.Annotations, EvictingAnnotation)
	} else {
		metav1.SetMetaDataAnnotation(&ms.ObjectMeta, EvictingAnnotation, value)
	}
	if err := a.kube.Patch(ctx, &ms, patch); err != nil {
		return fmt.Errorf("recording the eviction on the MachineSet %s: %w", name, err)
	}
	return nil
}

// forgetEvicted deletes the Node of an evicted member, then the record of
// the eviction. The kubelet is gone with its instance; without a cloud
// controller manager its Node would stay NotReady forever.
func (a *Adopter) forgetEvicted(ctx context.Context, ms, node string) error {
	err := a.kube.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the Node %s of the evicted member: %w", node, err)
	}
	return a.annotate(ctx, ms, "")
}

// finishEvictions finishes what a run before stopped after: the member a
// MachineSet records as evicting is gone, its Node is not yet; its pool
// (and so its group) may be gone too. A member still there is left to
// applyReplace, which evicts it (again).
func (a *Adopter) finishEvictions(ctx context.Context, r *Report) {
	var sets machinev1beta1.MachineSetList
	if err := a.kube.List(ctx, &sets, client.InNamespace(a.o.Namespace)); err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("listing MachineSets: %w", err))
		return
	}
	for _, ms := range sets.Items {
		id, node, ok := strings.Cut(ms.Annotations[EvictingAnnotation], " ")
		if !ok {
			continue
		}
		_, err := a.c.GetServer(ctx, id)
		switch {
		case err == nil:
			continue
		case !cloud.IsNotFound(err):
			r.Errors = append(r.Errors, fmt.Errorf("%s: looking up the evicted member %s: %w", ms.Name, id, err))
			continue
		}
		if err := a.forgetEvicted(ctx, ms.Name, node); err != nil {
			r.Errors = append(r.Errors, fmt.Errorf("%s: %w", ms.Name, err))
			continue
		}
		r.Replaced++
		a.progress("%s: the Node %s of the member evicted before is deleted", ms.Name, node)
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

// drain cordons a Node and evicts its pods (as oc adm drain
// --ignore-daemonsets --delete-emptydir-data), then waits until they are
// gone.
func (a *Adopter) drain(ctx context.Context, name string) error {
	var node corev1.Node
	if err := a.kube.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !node.Spec.Unschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = true
		if err := a.kube.Patch(ctx, &node, patch); err != nil {
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
