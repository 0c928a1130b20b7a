package deployer

// The stop switch: in an incident a person must be able to stop every
// controller that acts on Machines and servers (the provider's manager and
// the machine-api-operator's machineset, nodelink and machine-healthcheck
// controllers) and be sure they stay stopped, whatever the deployer
// reconciles meanwhile (an upgrade, a changed proxy, a deleted
// Deployment). Two ways, documented in docs/runbooks/stop-and-start.md:
//
//   - the ConfigMap StopConfigMap in the deployer's namespace: while it
//     exists, the deployer applies its Deployment with 0 replicas (and goes
//     on applying everything else, so that starting again runs the current
//     release); its key StopReasonKey, optional, says why, and the
//     condition Stopped repeats it. Deleting it starts the controllers
//     again. A deleted Deployment comes back stopped.
//
//	oc -n openshift-machine-api create configmap machine-api-provider-stop --from-literal=reason="INC-1234"
//
//   - `oc scale --replicas=0` of the Deployment: the deployer leaves a
//     Deployment someone scaled to 0 at 0 (any other count is set back to
//     1), until someone scales it up again. Its every write to the
//     Deployment is conditional on the Deployment it read
//     (its resourceVersion, Reconciler.apply): a reconcile that read it
//     before a scale never writes after it, so the scale is never undone.
//
// Stopping deletes nothing: Machines, their servers and their Nodes stay as
// they are, and what the controllers would have done meanwhile (a
// MachineSet scaled, a Machine deleted) is done once they run again.

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

const (
	// StopConfigMap stops the controllers while it exists.
	StopConfigMap = "machine-api-provider-stop"
	// StopReasonKey of StopConfigMap says why, for the condition.
	StopReasonKey = "reason"
	// StoppedAnnotation on the Deployment says that the deployer applied
	// it with 0 replicas for StopConfigMap: without it, 0 replicas are
	// someone's `oc scale`, which the deployer keeps.
	StoppedAnnotation = "machine.appuio.io/stopped"
	// ConditionStopped is True while the controllers are stopped on
	// purpose (the switch or a scale to 0), False while they run.
	ConditionStopped = "Stopped"
	// Its reasons.
	ReasonStopSwitch   = "StopSwitch"
	ReasonScaledToZero = "ScaledToZero"
	ReasonRunning      = "Running"
)

// stopState says whether the controllers are to be stopped, and the
// condition that says so: the switch, or a Deployment scaled to 0 by
// someone else than the deployer (current, nil when there is none).
func (r *Reconciler) stopState(ctx context.Context, current *appsv1.Deployment) (bool, metav1.Condition, error) {
	ns := r.opts.Namespace
	cm := &corev1.ConfigMap{}
	err := r.stopReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: StopConfigMap}, cm)
	switch {
	case err == nil:
		why := cm.Data[StopReasonKey]
		if why == "" {
			why = "no reason given"
		}
		return true, metav1.Condition{Type: ConditionStopped, Status: metav1.ConditionTrue, Reason: ReasonStopSwitch,
			Message: fmt.Sprintf("stopped by ConfigMap %s/%s (%s): the controllers run with 0 replicas until it is deleted%s", ns, StopConfigMap, why, stopNotes(cm, current))}, nil
	case !apierrors.IsNotFound(err):
		return false, metav1.Condition{}, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, StopConfigMap, err)
	}
	if current != nil && current.Spec.Replicas != nil && *current.Spec.Replicas == 0 && current.Annotations[StoppedAnnotation] == "" {
		return true, metav1.Condition{Type: ConditionStopped, Status: metav1.ConditionTrue, Reason: ReasonScaledToZero,
			Message: fmt.Sprintf("Deployment %s/%s was scaled to 0 replicas: it stays so until it is scaled up again", ns, current.Name)}, nil
	}
	return false, metav1.Condition{Type: ConditionStopped, Status: metav1.ConditionFalse, Reason: ReasonRunning,
		Message: "the controllers run (to stop them: ConfigMap " + StopConfigMap + ", or oc scale --replicas=0)"}, nil
}

// watchStop reads StopConfigMap through a cache of its own
// (newConfigMapCache) and has its changes reconciled.
func (r *Reconciler) watchStop(mgr ctrl.Manager, b *builder.Builder, toKey handler.EventHandler) (*builder.Builder, error) {
	c, err := newConfigMapCache(mgr, r.opts.Namespace, StopConfigMap)
	if err != nil {
		return nil, err
	}
	r.stopReader = c
	return b.WatchesRawSource(source.Kind[client.Object](c, &corev1.ConfigMap{}, toKey)), nil
}

// currentDeployment is our Deployment as it is, nil when there is none,
// read from the API server, not the cache: the cache may not have the
// latest scale yet, and the write that follows is conditional on what was
// read (Reconciler.apply), so a stale read would only cost a conflict.
func (r *Reconciler) currentDeployment(ctx context.Context) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: r.deploymentName()}, d)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}
