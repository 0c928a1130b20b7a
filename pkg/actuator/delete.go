package actuator

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// Delete deletes every server of the Machine: the recorded one and any
// other carrying its identity, so nothing is left behind, and then the
// empty anti-affinity groups of the cluster. A Machine for which no server
// was ever created goes at once, whatever state its secrets are in; one
// whose credentials are unusable now keeps its finalizer until they are
// fixed or a person abandons its server (abandon.go).
//
// Each step is done once: a delete retried after a later step failed
// starts from there. And the calls of Machines deleted together are
// shared: one list of the cluster's servers, one cleanup of its groups.
// Under a storm of 429s (each closes the account's gate for every
// Machine) long per-Machine sequences would rarely get through.
func (a *Actuator) Delete(ctx context.Context, m *machinev1.Machine) error {
	err := a.delete(ctx, m)
	if isInvalid(err) {
		// The machine controller takes an invalid configuration from
		// Delete, for a Machine without addresses, for "nothing to delete"
		// and lets it go without asking again: a refusal while deleting
		// must never mean that. fail has reported it; it is retried.
		return &machinecontroller.RequeueAfterError{RequeueAfter: retryBlockedDelete}
	}
	return err
}

func (a *Actuator) delete(ctx context.Context, m *machinev1.Machine) error {
	if abandoned(m) {
		return a.abandon(ctx, m)
	}
	if !a.mayHaveServer(m) {
		a.forget(m)
		return nil
	}
	if err := a.checkCluster(m); err != nil {
		if a.verifiedID(m) != "" {
			// Held (heldDelete): a provider recorded its server.
			return a.heldDelete(ctx, m, err)
		}
		// A Machine that names another cluster (or none) and never
		// recorded a server got none from this provider, which refuses
		// it, and the server its provider ID may name is another
		// cluster's: it goes without a cloud call, and nothing of it is
		// touched.
		a.recorder.Event(m, corev1.EventTypeNormal, "NothingDeleted", cloud.Truncate(fmt.Sprintf(
			"no server was deleted: %v", err)))
		a.forget(m)
		return nil
	}
	if err := a.backoff.held(m.UID, a.now()); err != nil {
		return err
	}
	ctx = a.withWarnings(ctx, m)
	s, err := a.deleteScope(ctx, m)
	if err != nil {
		return a.blockedDelete(ctx, m, err)
	}
	var gone time.Time
	if v, ok := a.serversGone.Load(m.UID); ok {
		gone = v.(time.Time)
	} else {
		if err := a.deleteServers(ctx, m, s); err != nil {
			return err
		}
		gone = a.now()
		a.serversGone.Store(m.UID, gone)
	}
	// Whatever failed after an earlier attempt deleted the server (the
	// group lookup, the group delete, a lost answer), the groups it left
	// empty are looked at again before the Machine goes.
	if s.spec == nil || s.spec.AntiAffinityKey() != "" {
		deleted, err := s.view.CleanupGroups(ctx, gone, a.o.GroupMinAge)
		var perm *cloud.PermissionError
		switch {
		case errors.As(err, &perm):
			// The credentials may not delete (or read) groups: retrying
			// cannot help until a person grants it, and holding every
			// Machine's deletion for it would turn one missing permission
			// into stuck scale-downs. The server is gone; the empty groups
			// stay until the permission is granted (the janitor's sweep
			// deletes them then).
			a.recorder.Event(m, corev1.EventTypeWarning, "PermissionDenied", cloud.Truncate(fmt.Sprintf(
				"the empty anti-affinity groups are left behind: %v", err)))
		case err != nil:
			return a.fail(ctx, m, "FailedDelete", err)
		}
		a.groupsDeleted(m, deleted)
	}
	a.forgetState(m)
	a.deleted.Store(m.UID, a.now())
	return nil
}

// deleteServers deletes the Machine's servers, once no create of it can
// still land. A server a Node runs on that is not the Machine's own Node
// (pkg/nodes: by provider ID, or by name and address) is not deleted: the
// deletion waits, saying so, until the Node is gone or a person lets the
// Machine go (the abandon annotation). A server that does not carry the
// Machine's identity when the delete reads it (pkg/cloud, owner.go) is
// left alone: the list of the Machine's servers, which begins after this
// point, is that read (cloud.DeleteDecided), and a server it does not show
// (the recorded one) is read on its own.
func (a *Actuator) deleteServers(ctx context.Context, m *machinev1.Machine, s *scope) error {
	ctx = cloud.DeleteDecided(ctx, time.Now())
	servers, err := s.allServers(ctx)
	if err != nil {
		return a.fail(ctx, m, "FailedDelete", err)
	}
	if len(servers) == 0 {
		if err := a.awaitCreateBeforeDelete(m); err != nil {
			return err
		}
		return nil
	}
	veto, err := a.veto(ctx, m, true)
	if err != nil {
		return a.fail(ctx, m, "FailedDelete", err)
	}
	refused := false
	for i := range servers {
		err := s.client.DeleteServer(ctx, s.ref, &servers[i], veto)
		var vetoed *nodes.VetoedError
		if errors.As(err, &vetoed) {
			a.refuseDelete(m, servers[i], "this Machine is being deleted", vetoed.Nodes)
			refused = true
			continue
		}
		if isNotOwned(err) {
			a.recorder.Event(m, corev1.EventTypeWarning, "ServerNotOwned", cloud.Truncate(fmt.Sprintf(
				"the %s %v", a.cloud.Name(), err)))
			continue
		}
		if err != nil {
			return a.fail(ctx, m, "FailedDelete", err)
		}
		s.view.Deleted(servers[i].ID)
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Deleted", "Deleted %s server %s", a.cloud.Name(), servers[i].ID)
	}
	if refused {
		return &machinecontroller.RequeueAfterError{RequeueAfter: retryBlockedDelete}
	}
	return nil
}
