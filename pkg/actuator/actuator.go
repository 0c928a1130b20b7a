package actuator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ClusterIDLabel names the cluster a Machine belongs to; its servers are
// tagged with it.
const ClusterIDLabel = "machine.openshift.io/cluster-api-cluster"

// Actuator creates, finds, updates and deletes the servers of Machines.
type Actuator struct {
	client   client.Client
	cloud    cloud.Cloud
	recorder record.EventRecorder
	log      logr.Logger
	now      func() time.Time

	// seen keeps the server Exists found for the Update that follows it in
	// the same reconcile, so a steady-state resync costs one cloud call.
	seen sync.Map // types.UID -> seenServer

	// refused remembers specs the cloud refused. The machine controller can
	// reconcile again from a cache that does not show the Machine Failed
	// yet; that must not make the cloud refuse the same server twice.
	refused sync.Map // types.UID -> refusedSpec
}

type refusedSpec struct {
	generation int64
	err        error
}

type seenServer struct {
	server *cloud.Server
	at     time.Time
}

// seenFor is how long a server found by Exists stands in for a fresh read.
const seenFor = 5 * time.Second

var _ machinecontroller.Actuator = (*Actuator)(nil)

// New returns an actuator for machines on c.
func New(c client.Client, cl cloud.Cloud, recorder record.EventRecorder, log logr.Logger) *Actuator {
	return &Actuator{client: c, cloud: cl, recorder: recorder, log: log, now: time.Now}
}

// Create creates the Machine's server, unless it exists already: a lost
// response, a restart or a requeue finds the first one again by its tags.
func (a *Actuator) Create(ctx context.Context, m *machinev1.Machine) error {
	if v, ok := a.refused.Load(m.UID); ok && v.(refusedSpec).generation == m.Generation {
		return v.(refusedSpec).err
	}
	s, err := a.scope(ctx, m)
	if err != nil {
		return a.fail(m, "FailedCreate", err)
	}
	// Exists looked for the server a moment ago in this same reconcile.
	var found []cloud.Server
	if v, ok := a.seen.LoadAndDelete(m.UID); !ok || v.(seenServer).server != nil || a.now().Sub(v.(seenServer).at) >= seenFor {
		if found, err = s.client.FindServers(ctx, s.ref); err != nil {
			return a.fail(m, "FailedCreate", err)
		}
	}
	var server *cloud.Server
	switch len(found) {
	case 0:
		userData, err := s.userData(ctx)
		if err != nil {
			return a.fail(m, "FailedCreate", err)
		}
		server, err = s.client.CreateServer(ctx, s.ref, s.spec, userData)
		if err != nil {
			err = a.fail(m, "FailedCreate", err)
			if isInvalid(err) {
				a.refused.Store(m.UID, refusedSpec{generation: m.Generation, err: err})
			}
			return err
		}
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Created", "Created %s server %s (%s in %s)", a.cloud.Name(), server.ID, server.InstanceType, server.Zone)
	case 1:
		server = &found[0]
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Adopted", "Found %s server %s of this Machine, created earlier", a.cloud.Name(), server.ID)
	default:
		return a.fail(m, "FailedCreate", duplicates(found))
	}
	// Record the server on the Machine at once: from now on it is found by ID.
	return a.record(ctx, s, server, nil)
}

// Exists reports whether the Machine has a server.
func (a *Actuator) Exists(ctx context.Context, m *machinev1.Machine) (bool, error) {
	s, err := a.scope(ctx, m)
	if err != nil {
		if isInvalid(err) {
			// Create reports it, and turns the Machine Failed.
			return false, nil
		}
		return false, a.fail(m, "FailedExists", err)
	}
	server, err := s.server(ctx)
	if err != nil {
		return false, a.fail(m, "FailedExists", err)
	}
	a.seen.Store(m.UID, seenServer{server: server, at: a.now()})
	return server != nil, nil
}

// Update reports the server on the Machine, keeps its tags in sync and says
// when the spec asks for something only a new server can have.
func (a *Actuator) Update(ctx context.Context, m *machinev1.Machine) error {
	s, err := a.scope(ctx, m)
	if err != nil {
		return a.fail(m, "FailedUpdate", err)
	}
	var server *cloud.Server
	if v, ok := a.seen.LoadAndDelete(m.UID); ok && v.(seenServer).server != nil && a.now().Sub(v.(seenServer).at) < seenFor {
		server = v.(seenServer).server
	} else if server, err = s.server(ctx); err != nil {
		return a.fail(m, "FailedUpdate", err)
	}
	if server == nil {
		return a.fail(m, "FailedUpdate", fmt.Errorf("the server of this Machine is gone"))
	}
	if a.recordedID(m) == "" {
		// Made by an earlier attempt whose answer was lost, or by a
		// manager that stopped before it could record it.
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Adopted", "Found %s server %s of this Machine, created earlier", a.cloud.Name(), server.ID)
	}
	drift, err := s.client.SyncServer(ctx, s.ref, s.spec, server)
	if err != nil {
		return a.fail(m, "FailedUpdate", err)
	}
	return a.record(ctx, s, server, drift)
}

// Delete deletes every server of the Machine: the recorded one and any
// other carrying its tags, so nothing is left behind.
func (a *Actuator) Delete(ctx context.Context, m *machinev1.Machine) error {
	s, err := a.scope(ctx, m)
	if err != nil {
		if !isInvalid(err) {
			return a.fail(m, "FailedDelete", err)
		}
		// A spec broken after the server was made must not leak the server:
		// look for it with the default token.
		if s, err = a.fallbackScope(ctx, m); err != nil {
			a.log.Info("cannot look for servers of a Machine with an invalid spec", "machine", m.Name, "error", err.Error())
			return nil
		}
	}
	servers, err := s.allServers(ctx)
	if err != nil {
		return a.fail(m, "FailedDelete", err)
	}
	for i := range servers {
		if err := s.client.DeleteServer(ctx, s.ref, &servers[i]); err != nil {
			return a.fail(m, "FailedDelete", err)
		}
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Deleted", "Deleted %s server %s", a.cloud.Name(), servers[i].ID)
	}
	a.seen.Delete(m.UID)
	a.refused.Delete(m.UID)
	return nil
}

func duplicates(found []cloud.Server) error {
	ids := make([]string, len(found))
	for i, s := range found {
		ids[i] = s.ID
	}
	return &duplicateServersError{ids: ids}
}

type duplicateServersError struct{ ids []string }

func (e *duplicateServersError) Error() string {
	return fmt.Sprintf("%d servers carry this Machine's tags (%v); delete the ones that are not in use: the provider does not guess which one is", len(e.ids), e.ids)
}

// machineKey is for logs.
func machineKey(m *machinev1.Machine) types.NamespacedName {
	return types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
}
