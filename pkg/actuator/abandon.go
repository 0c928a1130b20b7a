package actuator

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// AbandonServerAnnotation, set to "true" on a Machine being deleted, lets
// the Machine go without deleting its server. It is for the one case the
// provider cannot resolve by itself: the Machine may have a server, but the
// credentials that reach it are unusable (the secret is gone, or holds
// something else now). The server is then recorded as an orphan
// (pkg/orphans), never forgotten; delete it by hand.
const AbandonServerAnnotation = "machine.appuio.io/abandon-server"

// ConditionCredentials is the provider status condition that says why a
// Machine cannot be acted on with its credentials.
const ConditionCredentials = "CredentialsUsable"

// retryBlockedDelete is how often a deletion blocked on credentials looks
// again: fixing a secret takes a person.
const retryBlockedDelete = time.Minute

func abandoned(m *machinev1.Machine) bool {
	return m.DeletionTimestamp != nil && m.Annotations[AbandonServerAnnotation] == "true"
}

// abandon lets the Machine go without deleting its server, which is
// recorded as an orphan.
func (a *Actuator) abandon(ctx context.Context, m *machinev1.Machine) error {
	if a.mayHaveServer(m) {
		clusterID := m.Labels[ClusterIDLabel]
		id := a.recordedID(m)
		if id == "" {
			id = "unknown (" + m.Name + ")"
		}
		account := "default"
		if name, ok := a.cloud.CredentialsSecretOf(m.Spec.ProviderSpec); ok && name != "" {
			account = m.Namespace + "/" + name
		}
		if a.o.Orphans != nil {
			_, err := a.o.Orphans.Record(ctx, orphans.Orphan{
				Cloud: a.cloud.Name(), ServerID: id, ServerName: m.Name, Machine: m.Name, ClusterID: clusterID,
				Account: account, Since: a.now().UTC(),
				Reason: fmt.Sprintf("Machine %s/%s was deleted with %s=true: its server was not deleted", m.Namespace, m.Name, AbandonServerAnnotation),
			})
			if err != nil {
				return fmt.Errorf("recording the abandoned server as an orphan: %w", err)
			}
		}
		a.recorder.Eventf(m, corev1.EventTypeWarning, "ServerAbandoned",
			"%s server %s was not deleted (%s=true); it is recorded as an orphan in ConfigMap %s: delete it by hand",
			a.cloud.Name(), id, AbandonServerAnnotation, orphans.ConfigMapName(a.cloud.Name()))
	}
	a.forget(m)
	return nil
}

// blockedDelete handles a deletion the provider cannot carry out: the
// Machine may have a server, but its credentials cannot be had or used. The
// Machine keeps its finalizer, with a condition and an event that say which
// secret to fix (or how to let it go knowingly).
func (a *Actuator) blockedDelete(ctx context.Context, m *machinev1.Machine, cause error) error {
	var creds *cloud.CredentialsError
	if !errors.As(cause, &creds) {
		return a.fail(ctx, m, "FailedDelete", cause)
	}
	msg := cloud.Truncate(fmt.Sprintf("cannot delete the server of this Machine: %s. Fix the secret, or set the annotation %s=true to let the Machine go without deleting its server (it is then recorded as an orphan)",
		creds.Error(), AbandonServerAnnotation))
	a.recorder.Event(m, corev1.EventTypeWarning, "DeleteBlocked", msg)
	a.log.Info("deletion blocked on credentials", "machine", machineKey(m), "reason", creds.Error())
	if err := a.setCondition(ctx, m, metav1.Condition{Type: ConditionCredentials, Status: metav1.ConditionFalse, Reason: "DeleteBlocked", Message: msg}); err != nil {
		a.log.Info("could not set the credentials condition", "machine", machineKey(m), "error", err.Error())
	}
	return &machinecontroller.RequeueAfterError{RequeueAfter: retryBlockedDelete}
}

// setCondition writes one condition of the provider status.
func (a *Actuator) setCondition(ctx context.Context, m *machinev1.Machine, c metav1.Condition) error {
	st, err := decodeStatus(m)
	if err != nil {
		return err
	}
	if prev := meta.FindStatusCondition(st.Conditions, c.Type); prev != nil && prev.Status == c.Status && prev.Message == c.Message {
		return nil
	}
	meta.SetStatusCondition(&st.Conditions, c)
	raw, err := encodeStatus(st)
	if err != nil {
		return err
	}
	original := m.DeepCopy()
	m.Status.ProviderStatus = raw
	return a.patchStatus(ctx, original, m)
}
