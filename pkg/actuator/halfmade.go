package actuator

import (
	"context"
	"errors"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// A half-made server is one whose create succeeded and a step after it (an
// Exoscale instance's private network attach) was refused for good: it
// runs, but not as the spec asks, and no attempt will complete it. Left
// alone, it would run behind a Machine stuck in Provisioning. It is
// deleted instead, and the Machine fails naming the field, as if the create
// itself had been refused.

// halfMade reports whether a sync of the Machine's server was refused a
// step that completes the server (cloud.IncompleteError) while the Machine
// has no Node yet: its server was never complete. A Machine with a Node
// keeps its server, whatever a sync is refused: it runs a workload.
func halfMade(m *machinev1.Machine, syncErr error) bool {
	var incomplete *cloud.IncompleteError
	return m.Status.NodeRef == nil && errors.As(syncErr, &incomplete)
}

// undoHalfMade deletes a half-made server and fails the Machine with cause,
// for good (refuse): the Machine no longer records the server or a create
// of it, so the next reconcile's existence check finds nothing and its
// create returns the refusal, which the machine controller turns into
// Failed. When the delete fails, it is retried: the next attempt finds the
// server and comes here again.
func (a *Actuator) undoHalfMade(ctx context.Context, s *scope, server *cloud.Server, reason string, cause error) error {
	m := s.machine
	a.recorder.Event(m, corev1.EventTypeWarning, "HalfMadeServer", cloud.Truncate(fmt.Sprintf(
		"%s server %s was made, but a step after its create was refused for good (%v): deleting it", a.cloud.Name(), server.ID, cause)))
	// Any Node vetoes: the Machine has none of its own yet (halfMade).
	veto, err := a.veto(ctx, m, false)
	if err != nil {
		return a.fail(ctx, m, reason, err)
	}
	err = s.client.DeleteServer(ctx, s.ref, server, veto)
	var vetoed *nodes.VetoedError
	if errors.As(err, &vetoed) {
		// It joined the cluster after all: its workloads outweigh what it
		// lacks. Left as it is, the Machine retried.
		a.refuseDelete(m, *server, "it is half-made", vetoed.Nodes)
		return a.fail(ctx, m, reason, cause)
	}
	if err != nil {
		return a.fail(ctx, m, reason, err)
	}
	s.view.Deleted(server.ID)
	a.recorder.Eventf(m, corev1.EventTypeNormal, "Deleted", "Deleted %s server %s", a.cloud.Name(), server.ID)
	if err := a.unrecord(ctx, m); err != nil {
		return err
	}
	a.seen.Delete(m.UID)
	return a.refuse(m, a.fail(ctx, m, reason, cause))
}

// unrecord removes from the Machine what says it has a server, or a
// create under way: the provider ID, addresses, instance ID and state, and
// the create intent.
func (a *Actuator) unrecord(ctx context.Context, m *machinev1.Machine) error {
	a.recorded.Delete(m.UID)
	original := m.DeepCopy()
	m.Spec.ProviderID = nil
	delete(m.Annotations, CreateIntentAnnotation)
	delete(m.Annotations, InstanceStateAnnotation)
	m.Status.Addresses = nil
	st, err := decodeStatus(m)
	if err != nil {
		return err
	}
	st.InstanceID, st.Status = "", ""
	raw, err := encodeStatus(st)
	if err != nil {
		return err
	}
	m.Status.ProviderStatus = raw
	if err := a.patch(ctx, original, m); err != nil {
		return fmt.Errorf("forgetting the deleted server on the Machine: %w", err)
	}
	return nil
}
