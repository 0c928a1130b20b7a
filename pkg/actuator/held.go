package actuator

import (
	"context"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ConditionClusterOwned is the provider status condition that says, False,
// that the Machine is held: its cluster label names a cluster this one does
// not own (pkg/clusterid), while its status records a server a provider
// made for it (appuio's provider on a fleet cluster, an earlier release of
// this one, or a label changed since). Nothing of it is acted on.
const ConditionClusterOwned = "ClusterOwned"

// ReasonHeldDelete is the condition's reason, and the event's, while the
// deletion of a held Machine waits.
const ReasonHeldDelete = "DeleteBlocked"

// heldDelete handles the deletion of a held Machine. Its server is not this
// provider's to delete (the label names a cluster it does not own), yet
// letting the Machine go would leave the server running with nobody to
// report it: the machine controller drains and deletes the Node, an
// autoscaler scale-down or a remediation counts the node as gone. So the
// deletion waits, with the condition ClusterOwned=False and an event saying
// the two ways on, until
//
//   - the cluster ID is declared as this cluster's (pkg/clusterid): the
//     Machine is the cluster's then, and its deletion deletes the server
//     after the ownership read proves it carries the Machine's identity
//     under that ID (deleteServers);
//   - or a person lets it go with AbandonServerAnnotation: the server is
//     recorded as an orphan (abandon), never forgotten;
//   - or the server is gone: a read of the server it records, with the
//     credentials its spec names, answers that it does not exist.
//
// That read only reads; nothing of another cluster is written.
func (a *Actuator) heldDelete(ctx context.Context, m *machinev1.Machine, cause error) error {
	id := a.verifiedID(m)
	acc, err := a.heldAccount(ctx, m)
	if err != nil {
		return a.blockedDelete(ctx, m, err)
	}
	srv, err := acc.Client.GetServer(ctx, id)
	switch {
	case cloud.IsNotFound(err):
		a.recorder.Event(m, corev1.EventTypeNormal, "NothingDeleted", cloud.Truncate(fmt.Sprintf(
			"the %s server %s this Machine records is gone: nothing to delete (the Machine's label: %v)", a.cloud.Name(), id, cause)))
		a.forget(m)
		return nil
	case err != nil:
		return a.fail(ctx, m, "FailedDelete", err)
	}
	carries := "no provider identity"
	if srv.ClusterID != "" || srv.Machine != "" {
		carries = fmt.Sprintf("cluster %q's identity (Machine %q)", srv.ClusterID, srv.Machine)
	}
	label := m.Labels[ClusterIDLabel]
	how := fmt.Sprintf("if %q is this cluster's legacy ID, declare it (%s): the deletion then goes on and deletes the server once it proves to carry this Machine's identity", label, a.ids.DeclareCommand(label))
	if label == "" {
		how = fmt.Sprintf("if the server is this cluster's, label the Machine %s=<the cluster ID its server carries> and declare that ID when it is not %q", ClusterIDLabel, a.o.ClusterID)
	}
	msg := cloud.Truncate(fmt.Sprintf("the %s server %s (%s), which this Machine records, was not deleted and keeps running: it carries %s, and the Machine's label %s (%q) does not name a cluster this one owns (%s), so it is not this provider's to delete. %s; else set %s=true to let the Machine go without deleting its server (it is recorded as an orphan; delete it by hand)",
		a.cloud.Name(), srv.ID, srv.Name, carries, ClusterIDLabel, label, a.ids.Describe(), how, AbandonServerAnnotation))
	a.recorder.Event(m, corev1.EventTypeWarning, ReasonHeldDelete, msg)
	a.log.Info("deletion of a held Machine waits: its server is not this cluster's to delete", "machine", machineKey(m), "server", srv.ID, "label", label)
	countFailure(m, ReasonHeldDelete, cause)
	if err := a.setCondition(ctx, m, metav1.Condition{Type: ConditionClusterOwned, Status: metav1.ConditionFalse, Reason: ReasonHeldDelete, Message: msg}); err != nil {
		a.log.Info("could not set the ClusterOwned condition", "machine", machineKey(m), "error", err.Error())
	}
	return &machinecontroller.RequeueAfterError{RequeueAfter: retryBlockedDelete}
}

// heldAccount is the account a held Machine's spec names: its credentials,
// read as deleteScope reads them (a spec that no longer validates still
// names them), and never others.
func (a *Actuator) heldAccount(ctx context.Context, m *machinev1.Machine) (*cloud.Account, error) {
	name, ok := a.cloud.CredentialsSecretOf(m.Spec.ProviderSpec)
	if !ok {
		return nil, &cloud.CredentialsError{Field: specPath.String(), Problem: fmt.Sprintf(
			"the provider spec is not even JSON, so which %s credentials reach its server is unknown", a.cloud.Name())}
	}
	creds, err := cloud.ReadCredentials(ctx, a.secrets, a.cloud, m.Namespace, name, specPath.String()+" (credentials secret)")
	if err != nil {
		return nil, err
	}
	return a.accounts.Get(owner(m), creds)
}
