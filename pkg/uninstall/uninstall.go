// Package uninstall takes the provider off a cluster, or undoes adopt,
// without losing a node: `machine-api-provider uninstall` and `adopt
// --undo`.
//
// Every Machine, MachineSet and ControlPlaneMachineSet of the provider (or,
// for the undo, those adopt wrote) goes, while every server and every Node
// stays as it is. What would otherwise act on them is prevented, not raced:
//
//   - first the controllers stop: the deployer, then the machine-api
//     controllers' Deployment, scaled to zero, until none of their pods is
//     left and the machine controller's lease has lapsed. No machine
//     controller then drains a Node, deletes a server or a Node; no
//     MachineSet controller makes or deletes a Machine; no
//     MachineHealthCheck remediates;
//   - MachineAutoscalers of the released MachineSets are deleted, so the
//     cluster autoscaler no longer counts them as node groups;
//   - each Machine loses its finalizers and its owner references to what
//     is released, under an optimistic lock, and is then deleted with a
//     precondition on that very version: the API server removes it at once,
//     or refuses if anything wrote it in between (then it is read again).
//     Without a finalizer a deleted Machine never has a deletion timestamp
//     anyone could act on; without an owner reference the garbage collector
//     has nothing to cascade;
//   - the MachineSets and ControlPlaneMachineSets then go with orphaned
//     dependents (none is left).
//
// The servers keep the provider's identity (tags or labels): installing the
// provider again and running adopt finds them, Machines named as before,
// without a create. Nothing is written to the cloud.
package uninstall

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/adopt"
)

// APIVersion and kinds of the provider specs of this provider.
const specAPIVersion = "machine.appuio.io/v1beta1"

var specKinds = map[string]string{"cloudscale": "CloudscaleMachineProviderSpec", "exoscale": "ExoscaleMachineProviderSpec"}

// Annotations adopt writes, by which the undo knows what adopt made: on the
// Machines it adopted, and on the MachineSets and the ControlPlaneMachineSet
// it wrote.
const (
	AdoptedAnnotation = adopt.AdoptedAnnotation
	WrittenAnnotation = adopt.WrittenAnnotation
)

// Options say what to release.
type Options struct {
	// Namespace of the Machine API (openshift-machine-api).
	Namespace string
	// Cloud is the cloud whose Machines are released: "cloudscale" or
	// "exoscale". Machines of other providers are never touched.
	Cloud string
	// AdoptedOnly releases what adopt wrote, and starts the controllers
	// again afterwards (adopt --undo). Otherwise every Machine, MachineSet
	// and ControlPlaneMachineSet of the cloud's provider spec is released
	// and the controllers stay stopped.
	AdoptedOnly bool
	// Stopper stops the controllers before anything is released; default:
	// the Deployments of the deployer and the controllers.
	Stopper Stopper
	// Remove are the provider's own objects deleted last (uninstall; nil
	// for the undo): what the install applied, and what the deployer made.
	Remove []client.Object
	// Wait bounds each wait (the controllers to stop); Poll is how often it
	// looks. Defaults 5 minutes and 1 second.
	Wait, Poll time.Duration
	// Out receives the plan and the progress.
	Out io.Writer
	Log logr.Logger
}

// Uninstaller releases the provider's objects of one cluster.
type Uninstaller struct {
	kube client.Client
	o    Options
}

// New returns an Uninstaller.
func New(kube client.Client, o Options) (*Uninstaller, error) {
	if _, ok := specKinds[o.Cloud]; !ok {
		return nil, fmt.Errorf("cloud %q: the clouds are cloudscale and exoscale", o.Cloud)
	}
	if o.Namespace == "" {
		o.Namespace = "openshift-machine-api"
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Stopper == nil {
		o.Stopper = &DeploymentStopper{Client: kube, Namespace: o.Namespace, Cloud: o.Cloud, Wait: o.Wait, Poll: o.Poll}
	}
	return &Uninstaller{kube: kube, o: o}, nil
}

// ours says whether a provider spec is of this provider and cloud.
func (u *Uninstaller) ours(ps machinev1beta1.ProviderSpec) bool {
	if ps.Value == nil {
		return false
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &tm); err != nil {
		return false
	}
	// A spec stored without apiVersion and kind is ours if its cloud's
	// fields say so; the provider reads such specs as its own (defaulting).
	if tm.APIVersion == "" && tm.Kind == "" {
		return u.bareSpecOfCloud(ps.Value)
	}
	return tm.APIVersion == specAPIVersion && tm.Kind == specKinds[u.o.Cloud]
}

// bareSpecOfCloud tells a spec without apiVersion and kind by the field only
// the cloud's spec has: flavor (cloudscale.ch) or instanceType (Exoscale).
func (u *Uninstaller) bareSpecOfCloud(raw *runtime.RawExtension) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw.Raw, &fields) != nil {
		return false
	}
	_, flavor := fields["flavor"]
	_, instanceType := fields["instanceType"]
	if u.o.Cloud == "cloudscale" {
		return flavor && !instanceType
	}
	return instanceType && !flavor
}

// cpmsSpec is a ControlPlaneMachineSet's Machine template's provider spec.
func cpmsSpec(c *machinev1.ControlPlaneMachineSet) machinev1beta1.ProviderSpec {
	if t := c.Spec.Template.OpenShiftMachineV1Beta1Machine; t != nil {
		return t.Spec.ProviderSpec
	}
	return machinev1beta1.ProviderSpec{}
}

func (u *Uninstaller) progress(format string, args ...any) {
	fmt.Fprintf(u.o.Out, "==> "+format+"\n", args...)
	u.o.Log.V(1).Info(fmt.Sprintf(format, args...))
}

// poll calls cond every `every` until it holds, fails, or wait passes; the
// error then says what it last saw.
func poll(ctx context.Context, wait, every time.Duration, what string, cond func() (bool, string, error)) error {
	last := ""
	err := kwait.PollUntilContextTimeout(ctx, every, wait, true, func(context.Context) (bool, error) {
		ok, why, err := cond()
		if why != "" {
			last = why
		}
		return ok, err
	})
	switch {
	case err == nil:
		return nil
	case kwait.Interrupted(err) && ctx.Err() == nil:
		return fmt.Errorf("gave up waiting %s for %s (last: %s)", wait, what, last)
	}
	return fmt.Errorf("waiting for %s: %w", what, err)
}
