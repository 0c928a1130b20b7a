package actuator

import (
	"context"
	"errors"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// ConditionServerOwned is the provider status condition that says, False,
// that the server the Machine records carries another identity than the
// Machine's (another cluster's, another Machine's, none): the provider
// leaves it alone (pkg/cloud, owner.go).
const ConditionServerOwned = "ServerOwned"

// recordedField names where the Machine records its server: the provider
// status's instance ID, which the provider writes, else the provider ID,
// which anyone who may write Machines can set.
func (a *Actuator) recordedField(m *machinev1.Machine) string {
	if st, err := decodeStatus(m); err == nil && st.InstanceID != "" {
		return "status.providerStatus.instanceId"
	}
	return "spec.providerID"
}

// notOwnedMessage says which field names which server, and whose it is.
func (a *Actuator) notOwnedMessage(m *machinev1.Machine, err error) string {
	return cloud.Truncate(fmt.Sprintf("%s: the %s %v", a.recordedField(m), a.cloud.Name(), err))
}

// notOwned reports a server the Machine records that is not the Machine's:
// a Warning event and the condition ServerOwned=False, once per message,
// which it returns. The server is left alone. A Machine without another
// server of its own then has none: the machine controller turns a Machine
// whose recorded server it cannot find Failed; the event and the condition
// say why.
func (a *Actuator) notOwned(ctx context.Context, m *machinev1.Machine, err error) string {
	msg := a.notOwnedMessage(m, err)
	countFailure(m, "ServerNotOwned", err)
	if st, derr := decodeStatus(m); derr == nil {
		if c := meta.FindStatusCondition(st.Conditions, ConditionServerOwned); c != nil && c.Message == msg {
			return msg
		}
	}
	a.recorder.Event(m, corev1.EventTypeWarning, "ServerNotOwned", msg)
	a.log.Info("a server the Machine records is not its own: left alone", "machine", machineKey(m), "reason", msg)
	c := metav1.Condition{Type: ConditionServerOwned, Status: metav1.ConditionFalse, Reason: "ServerNotOwned", Message: msg}
	if err := a.setCondition(ctx, m, c); err != nil {
		a.log.Info("could not set the ServerOwned condition", "machine", machineKey(m), "error", err.Error())
	}
	return msg
}

// checkRecorded returns a *cloud.NotOwnedError when the server the Machine
// records exists and is not the Machine's: a create must not give it
// another server while it names that one (the Machine fails instead).
func (s *scope) checkRecorded(ctx context.Context) error {
	id := s.a.recordedID(s.machine)
	if id == "" {
		return nil
	}
	srv, err := s.client.GetServer(cloud.ProvingOwnership(ctx), id)
	switch {
	case cloud.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return cloud.CheckOwned(s.ref, srv)
}

// ownNode says whether a Node is the Machine's own: linked to it (its
// nodeRef, or the nodelink controller's annotation), or running on the
// server the Machine records by provider ID, which is how the nodelink
// controller links them.
func ownNode(m *machinev1.Machine, n nodes.Match) bool {
	if m.Status.NodeRef != nil && m.Status.NodeRef.Name == n.Node.Name {
		return true
	}
	if n.Node.Annotations[machineAnnotation] == m.Namespace+"/"+m.Name {
		return true
	}
	return n.By == nodes.ByProviderID && m.Spec.ProviderID != nil && *m.Spec.ProviderID == n.Node.Spec.ProviderID
}

// machineAnnotation is the nodelink controller's annotation on a Node
// naming its Machine (namespace/name).
const machineAnnotation = "machine.openshift.io/machine"

// veto is the Node veto of the Machine's deletes (DeleteServer asks it
// right before each): every Node that runs on the server (pkg/nodes: by
// provider ID, or by name and every address the server has then), but the
// Machine's own when own is set (a Machine deleting its own server, whose
// Node the machine controller deletes after it). It reads the cluster's
// Nodes now.
func (a *Actuator) veto(ctx context.Context, m *machinev1.Machine, own bool) (nodes.Veto, error) {
	ix, err := nodes.List(ctx, a.client, a.cloud.Name())
	if err != nil {
		return nodes.Veto{}, err
	}
	v := nodes.Veto{Index: ix}
	if own {
		v.Except = func(n nodes.Match) bool { return ownNode(m, n) }
	}
	return v, nil
}

// refuseDelete reports a server not deleted because Nodes run on it.
func (a *Actuator) refuseDelete(m *machinev1.Machine, s cloud.Server, why string, on []nodes.Match) {
	msg := cloud.Truncate(fmt.Sprintf("%s server %s (%s) was not deleted (%s): %s runs on it. Delete that Node and its server by hand, or set %s=true to let the Machine go without deleting its server",
		a.cloud.Name(), s.ID, s.Name, why, nodes.Describe(on), AbandonServerAnnotation))
	a.recorder.Event(m, corev1.EventTypeWarning, "DeleteRefused", msg)
	a.log.Info("server not deleted: a Node runs on it", "machine", machineKey(m), "server", s.ID, "nodes", nodes.Describe(on))
}

// failGiven fails a Machine whose provider ID was given, not recorded by
// this provider, and names a server that is not the Machine's (or whose
// cluster label names another cluster): phase Failed, errorReason
// InvalidConfiguration, and msg, which names the field and why, in its
// status. Left to the machine controller, such a Machine fails with "can't
// find created instance" (machine-api-operator, pkg/controller/machine,
// controller.go, Reconcile: a provisioned Machine whose Exists is false),
// which says neither.
//
// The status is written here, and Exists returns the returned error. On an
// error the machine controller patches the Machine's conditions against
// its copy (m) and writes the phase m holds: m keeps its phase, so the
// patch leaves ours as it is (a phase it never had is set to "", which the
// patch then does not change either; Failed in m would have it read the
// stored status first and clear our reason and message). Its next
// reconcile sees Failed and stops.
func (a *Actuator) failGiven(ctx context.Context, m *machinev1.Machine, msg string) error {
	failed := m.DeepCopy()
	phase, reason := machinev1.PhaseFailed, machinev1.InvalidConfigurationMachineError
	failed.Status.Phase, failed.Status.ErrorReason, failed.Status.ErrorMessage = &phase, &reason, &msg
	if err := a.patchStatus(ctx, m, failed); err != nil {
		return err
	}
	if m.Status.Phase == nil {
		none := ""
		m.Status.Phase = &none
	}
	return fmt.Errorf("the Machine is failed: %s", msg)
}

// isNotOwned says whether err is a server that is not the Machine's.
func isNotOwned(err error) bool {
	var no *cloud.NotOwnedError
	return errors.As(err, &no)
}
