package uninstall

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Stopper stops whatever acts on Machines before anything is released.
type Stopper interface {
	// Describe names what Stop stops, for the plan.
	Describe() []string
	// Stop returns once none of it runs any more.
	Stop(ctx context.Context, progress func(string, ...any)) error
	// Start starts it again as it was (adopt --undo).
	Start(ctx context.Context, progress func(string, ...any)) error
}

// Names of what the provider's install runs (config/, the deployer).
const (
	DeployerName = "machine-api-provider-deployer"
	// ReplicasAnnotation on a stopped Deployment records its replicas, so
	// that Start (also of a run after an interrupted one) restores them.
	ReplicasAnnotation = "machine.appuio.io/replicas-before-stop"
	// olmOwnerLabel marks a Deployment OLM installed from a
	// ClusterServiceVersion: OLM scales it back up.
	olmOwnerLabel = "olm.owner"
)

// ControllersName is the controllers' Deployment the deployer applies.
func ControllersName(cloud string) string { return "machine-api-controllers-" + cloud }

// LeaseName is the machine controller's leader election lease (the
// manager's default --leader-election-id).
func LeaseName(cloud string) string { return cloud + "-machine-api-provider" }

// DeploymentStopper stops the deployer and then the controllers'
// Deployment (the machine controller, the MachineSet, nodelink and
// MachineHealthCheck controllers) by scaling them to zero: in that order,
// so the deployer does not apply the controllers again.
type DeploymentStopper struct {
	Client     client.Client
	Namespace  string
	Cloud      string
	Wait, Poll time.Duration
}

func (s *DeploymentStopper) names() []string {
	return []string{DeployerName, ControllersName(s.Cloud)}
}

// Describe names the Deployments.
func (s *DeploymentStopper) Describe() []string {
	var out []string
	for _, n := range s.names() {
		out = append(out, "Deployment "+n+" (scaled to 0)")
	}
	return append(out, "the lease "+LeaseName(s.Cloud)+" lapsed (no machine controller anywhere)")
}

// Stop scales each Deployment to zero and waits until none of its pods is
// left, then until the machine controller's lease has lapsed: a machine
// controller run elsewhere (by hand, another install) holds it.
func (s *DeploymentStopper) Stop(ctx context.Context, progress func(string, ...any)) error {
	for _, name := range s.names() {
		var d appsv1.Deployment
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &d)
		if apierrors.IsNotFound(err) {
			progress("Deployment %s: not there", name)
			continue
		}
		if err != nil {
			return err
		}
		if owner := d.Labels[olmOwnerLabel]; owner != "" {
			return fmt.Errorf("OLM installed Deployment %s (ClusterServiceVersion %s) and would scale it up again: delete the Subscription and the ClusterServiceVersion first "+
				"(oc -n %s delete subscription machine-api-provider-%s; oc -n %s delete csv %s), which removes the deployer", name, owner, s.Namespace, s.Cloud, s.Namespace, owner)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			base := d.DeepCopy()
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations[ReplicasAnnotation] = strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1)))
			d.Spec.Replicas = ptr.To(int32(0))
			if err := s.Client.Patch(ctx, &d, client.MergeFrom(base)); err != nil {
				return fmt.Errorf("scaling Deployment %s to 0: %w", name, err)
			}
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return err
		}
		err = poll(ctx, s.Wait, s.Poll, "the pods of Deployment "+name+" to be gone", func() (bool, string, error) {
			var pods corev1.PodList
			if err := s.Client.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
				return false, "", err
			}
			return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
		})
		if err != nil {
			return err
		}
		progress("Deployment %s at 0 replicas, none of its pods left", name)
	}
	return s.leaseLapsed(ctx, progress)
}

// leaseLapsed waits until the machine controller's lease is held by no one
// or was last renewed longer ago than it lasts.
func (s *DeploymentStopper) leaseLapsed(ctx context.Context, progress func(string, ...any)) error {
	name := LeaseName(s.Cloud)
	err := poll(ctx, s.Wait, s.Poll, "the machine controller's lease "+name+" to lapse", func() (bool, string, error) {
		var l coordinationv1.Lease
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &l)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" || l.Spec.RenewTime == nil {
			return true, "", nil
		}
		lasts := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 15)) * time.Second
		if time.Since(l.Spec.RenewTime.Time) > lasts {
			return true, "", nil
		}
		return false, fmt.Sprintf("held by %s, renewed %s ago", holder, time.Since(l.Spec.RenewTime.Time).Round(time.Second)), nil
	})
	if err != nil {
		return fmt.Errorf("a machine controller still runs (%w): stop it (a manager run by hand, another install of the provider) and run this again", err)
	}
	progress("the machine controller's lease %s has lapsed: no machine controller runs", name)
	return nil
}

// Start scales the Deployments back to what they had before Stop.
func (s *DeploymentStopper) Start(ctx context.Context, progress func(string, ...any)) error {
	var errs []error
	for _, name := range s.names() {
		var d appsv1.Deployment
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &d)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		before, ok := d.Annotations[ReplicasAnnotation]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(before)
		if err != nil || n < 0 {
			n = 1
		}
		base := d.DeepCopy()
		delete(d.Annotations, ReplicasAnnotation)
		d.Spec.Replicas = ptr.To(int32(n))
		if err := s.Client.Patch(ctx, &d, client.MergeFrom(base)); err != nil {
			errs = append(errs, fmt.Errorf("scaling Deployment %s back to %d: %w", name, n, err))
			continue
		}
		progress("Deployment %s back at %d replicas", name, n)
	}
	return errors.Join(errs...)
}
