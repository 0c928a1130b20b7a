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
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/orphans"
	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// ClusterIDLabel names the cluster a Machine belongs to; its servers are
// tagged with it.
const ClusterIDLabel = clusterid.Label

// Options tune the actuator; zero values take the defaults.
type Options struct {
	// ClusterID is the cluster's identity, the Infrastructure's
	// infrastructureName (the manager's --cluster-id): the servers it acts
	// on carry it, and a Machine whose cluster label names another cluster
	// is refused (scope.go, clusterOf). Required.
	ClusterID string
	// LegacyClusterIDs are the cluster IDs an admin declared this cluster
	// also owns (pkg/clusterid): a Machine labelled with one is the
	// cluster's, and its servers are those carrying that ID and its name,
	// as for ClusterID. Parsed and checked by the manager.
	LegacyClusterIDs []string
	// CreateGrace is how long after a create whose answer was never seen
	// (a timeout, a lost response, a crash of this or a predecessor
	// process) the server may still appear: no second create is sent for
	// the Machine within it unless the first is known to have failed.
	// Default DefaultCreateGrace.
	CreateGrace time.Duration
	// SecretReader reads the secrets Machines name. Default: the client.
	// The manager passes its uncached API reader: only the named secrets
	// are read, no Secret informer is kept.
	SecretReader client.Reader
	// Orphans records servers of Machines let go without deleting them.
	Orphans *orphans.Registry
	// GroupMinAge is how old an empty anti-affinity group must be before
	// a Machine's deletion removes it (younger ones may be about to
	// receive a server of another process). Default 1 minute.
	GroupMinAge time.Duration
	// UserData renders user data, templates in its sandbox with its
	// limits. Default userdata.Default.
	UserData *userdata.Renderer
	// MaxConcurrentCreates bounds the creates in flight, whatever the
	// account: a create holds one from just before its intent is recorded
	// until the cloud has answered. The machine controller can then run
	// more reconciles than that, and those with nothing to create (the
	// steps before a create, the update after it, deletions) never wait
	// behind creates waiting for the cloud. Default 10.
	MaxConcurrentCreates int
}

// DefaultCreateGrace is how long a create whose answer was never seen may
// still make its server, by default. Both clouds make a server a resource
// the moment they accept its create: cloudscale.ch answers the create with
// the server itself (201, "changing"), Exoscale with an operation whose
// reference is the new instance, listed from then on ("starting"). So a
// create whose answer was lost shows in the next list; what can come later
// is a create the cloud is still working on after the client gave up
// (--cloud-api-timeout, 30 s), which neither cloud bounds in its
// documentation: 2 minutes leave it three times as long again, and the
// shared view a refresh to see the server. docs/operations.md has the
// reasoning. Only a Machine whose create may actually have been sent waits
// it out (the intent is written right before the create).
const DefaultCreateGrace = 2 * time.Minute

// Actuator creates, finds, updates and deletes the servers of Machines.
type Actuator struct {
	client   client.Client
	secrets  client.Reader
	cloud    cloud.Cloud
	accounts *cloud.Accounts
	recorder record.EventRecorder
	log      logr.Logger
	o        Options
	userData *userdata.Renderer
	now      func() time.Time
	// ids is the cluster's identity: ClusterID and LegacyClusterIDs.
	ids clusterid.IDs

	// seen keeps the server Exists found for the Update that follows it in
	// the same reconcile.
	seen sync.Map // types.UID -> seenServer
	// refused remembers specs the cloud refused. The machine controller can
	// reconcile again from a cache that does not show the Machine Failed
	// yet; that must not make the cloud refuse the same server twice.
	refused sync.Map // types.UID -> refusedSpec
	// settled remembers create intents known to have made nothing (the
	// cloud refused or never got the request), so that the next attempt
	// need not wait out the grace period.
	settled sync.Map // types.UID -> intent time (string)
	// unreadable remembers the create intents that are not a time, and
	// when they were first seen (intentSince).
	unreadable sync.Map // types.UID -> unreadableIntent
	// serversGone remembers when a deleted Machine's servers were found
	// gone, so that a delete retried after a later step failed (the group
	// cleanup) need not look for them again.
	serversGone sync.Map // types.UID -> time.Time
	// deleted remembers when Delete last succeeded for the existence
	// check that follows it.
	deleted sync.Map // types.UID -> time.Time
	// recorded remembers the server this process last recorded on each
	// Machine. The machine controller's cache can be behind that write: a
	// reconcile queued by an earlier write of the same Machine (the create
	// intent) runs from a copy without the provider ID. That server is the
	// Machine's own, just recorded, not one adopted.
	recorded sync.Map // types.UID -> server ID
	backoff  backoffs
	// createSlots holds a token for each create in flight.
	createSlots chan struct{}
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

// New returns an actuator for machines on the accounts' cloud.
func New(c client.Client, accounts *cloud.Accounts, recorder record.EventRecorder, log logr.Logger, o Options) *Actuator {
	if o.CreateGrace <= 0 {
		o.CreateGrace = DefaultCreateGrace
	}
	if o.GroupMinAge <= 0 {
		o.GroupMinAge = time.Minute
	}
	if o.MaxConcurrentCreates <= 0 {
		o.MaxConcurrentCreates = 10
	}
	secrets := o.SecretReader
	if secrets == nil {
		secrets = c
	}
	userData := o.UserData
	if userData == nil {
		userData = userdata.Default
	}
	return &Actuator{
		client: c, secrets: secrets, cloud: accounts.Cloud(), accounts: accounts,
		recorder: recorder, log: log, o: o, userData: userData, now: time.Now,
		ids:         clusterid.IDs{Own: o.ClusterID, Legacy: o.LegacyClusterIDs},
		createSlots: make(chan struct{}, o.MaxConcurrentCreates),
	}
}

// Create creates the Machine's server, unless it exists already or an
// earlier create of it may still land. The intent is recorded on the
// Machine before the call, so that neither a lost answer nor a crash (of
// this process or of a predecessor that lost its leadership) can lead to a
// second server: the next attempt waits out the grace period, looking for
// the first server meanwhile, unless the first create is known to have made
// nothing.
func (a *Actuator) Create(ctx context.Context, m *machinev1.Machine) error {
	if v, ok := a.refused.Load(m.UID); ok && v.(refusedSpec).generation == m.Generation {
		return v.(refusedSpec).err
	}
	if err := a.backoff.held(m.UID, a.now()); err != nil {
		return err
	}
	ctx = a.withWarnings(ctx, m)
	s, err := a.scope(ctx, m)
	if err != nil {
		return a.fail(ctx, m, "FailedCreate", err)
	}
	// A Machine that names another identity's server is not given one of
	// its own: it fails, naming the field (owner.go).
	if err := s.checkRecorded(ctx); err != nil {
		return a.refuse(m, a.fail(ctx, m, "FailedCreate", err))
	}
	a.seen.Delete(m.UID)
	if at, ok := intentOf(m); ok && !a.isSettled(m, at) {
		done, err := a.awaitEarlierCreate(ctx, s, at)
		if done || err != nil {
			return err
		}
	}
	userData, err := s.userData(ctx)
	if err != nil {
		return a.fail(ctx, m, "FailedCreate", err)
	}
	if max := s.spec.MaxUserDataBytes(); max > 0 && len(userData) > max {
		return a.fail(ctx, m, "FailedCreate", invalidf(specPath.Child("userDataSecret"),
			"the rendered user data is %d bytes, more than the %d bytes %s accepts", len(userData), max, a.cloud.Name()))
	}
	if err := s.client.CheckSpec(ctx, s.spec); err != nil {
		return a.refuse(m, a.fail(ctx, m, "FailedCreate", err))
	}
	// The slot and the intent come right before the create is sent, after
	// the create's own waits (an anti-affinity key's lock, the account's
	// rate limit): a Machine waiting for either holds no slot, and carries
	// no intent that would hold it a grace period after a restart.
	var (
		intent string
		sent   bool
	)
	before := func(ctx context.Context) (func(bool), error) {
		release, err := a.awaitCreateSlot(ctx)
		if err != nil {
			return nil, err
		}
		if intent, err = a.recordIntent(ctx, m); err != nil {
			// The write may have landed all the same (its answer lost):
			// nothing was sent under it.
			a.settled.Store(m.UID, intent)
			release()
			return nil, err
		}
		return func(s bool) { sent = s; release() }, nil
	}
	server, created, err := s.client.CreateServer(cloud.WithBeforeCreate(ctx, before), s.ref, s.spec, userData)
	if err != nil {
		if intent != "" && (!sent || cloud.NotPerformed(err)) {
			// The create was never sent (a look or a placement before
			// it failed), or the cloud refused it or never got it.
			a.settled.Store(m.UID, intent)
		}
		return a.refuse(m, a.fail(ctx, m, "FailedCreate", err))
	}
	a.backoff.reset(m.UID)
	s.view.Created(*server)
	if created {
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Created", "Created %s server %s (%s in %s)", a.cloud.Name(), server.ID, server.InstanceType, server.Zone)
	} else {
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Adopted", "Found %s server %s of this Machine, created earlier", a.cloud.Name(), server.ID)
	}
	// Sync it at once, out of the create slot: where the create's answer
	// lacks what only a read has (an Exoscale instance's addresses), the
	// Machine is then written once, complete, not once now and again by
	// the next update. A sync that fails is left to that update.
	drift, err := s.client.SyncServer(ctx, s.ref, s.spec, server)
	switch {
	case created && halfMade(m, err):
		return a.undoHalfMade(ctx, s, server, "FailedCreate", err)
	case err != nil:
		a.log.V(1).Info("syncing a new server failed; the next update retries", "machine", machineKey(m), "server", server.ID, "error", err.Error())
		drift = nil
	default:
		s.view.Observed(*server)
	}
	// Record the server on the Machine at once: from now on it is found by ID.
	return a.record(ctx, s, server, drift)
}

// awaitCreateSlot waits for one of the MaxConcurrentCreates slots, or for
// ctx to end, and returns what gives the slot back. It is taken right
// before the create is sent (cloud.WithBeforeCreate), so that the steps of
// a Machine that only write to the Kubernetes API, and the creates waiting
// for a lock or the rate limit, never hold one.
func (a *Actuator) awaitCreateSlot(ctx context.Context) (release func(), err error) {
	select {
	case a.createSlots <- struct{}{}:
		return func() { <-a.createSlots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free create slot: %w", ctx.Err())
	}
}

// refuse remembers a spec the cloud refused, so it is not sent again.
func (a *Actuator) refuse(m *machinev1.Machine, err error) error {
	if isInvalid(err) {
		a.refused.Store(m.UID, refusedSpec{generation: m.Generation, err: err})
	}
	return err
}

// Exists reports whether the Machine has a server, from the account's view
// of the cluster's servers: no cloud call of its own in steady state.
func (a *Actuator) Exists(ctx context.Context, m *machinev1.Machine) (bool, error) {
	exists, err := a.exists(ctx, m)
	if m.DeletionTimestamp != nil && err == nil && !exists {
		// The machine controller's last call for a deleted Machine: it
		// lets the Machine go now, and the Machine its account. (Delete
		// keeps the account for this call: its view knows the servers it
		// deleted are gone; a new one would have to look again.)
		a.accounts.Release(owner(m))
	}
	return exists, err
}

func (a *Actuator) exists(ctx context.Context, m *machinev1.Machine) (bool, error) {
	if m.DeletionTimestamp != nil && (abandoned(m) || !a.mayHaveServer(m)) {
		return false, nil
	}
	if err := a.checkCluster(m); err != nil {
		// A Machine of another cluster (or of none) has no server here,
		// and nothing of it is looked up. Create fails one without a
		// server naming the label; one given a provider ID is failed here
		// naming it (failGiven), as the machine controller would fail it
		// for its missing server in words that say neither. One whose server this provider recorded (the label changed
		// since, or it was pinned to another identity before) is not
		// failed, which would have its Node remediated: it is held, the
		// error saying what to fix, until the label is the cluster's.
		switch {
		case m.DeletionTimestamp != nil:
		case a.verifiedID(m) != "":
			return false, a.fail(ctx, m, "FailedExists", err)
		case m.Spec.ProviderID != nil:
			_ = a.fail(ctx, m, "FailedExists", err)
			return false, a.failGiven(ctx, m, cloud.Truncate(err.Error()))
		}
		return false, nil
	}
	if v, ok := a.deleted.LoadAndDelete(m.UID); ok && m.DeletionTimestamp != nil && a.now().Sub(v.(time.Time)) < seenFor {
		// The machine controller's check right after Delete succeeded:
		// Delete saw the servers gone on a list that began after it
		// was called. Another list, for every Machine deleted at once,
		// would only be one more call to fail.
		return false, nil
	}
	s, err := a.scope(ctx, m)
	if isInvalid(err) {
		if !a.mayHaveServer(m) {
			// It has no server: Create reports the spec, and turns the
			// Machine Failed.
			return false, nil
		}
		// The spec stopped validating after the server was made (a
		// stricter check of a newer provider): the server is still found,
		// by its tags and with the credentials the spec names. Saying it
		// does not exist would fail a Machine whose server runs, and have
		// a MachineHealthCheck replace a healthy Node (Update reports the
		// spec).
		s, err = a.deleteScope(ctx, m)
	}
	if err != nil {
		return false, a.fail(ctx, m, "FailedExists", err)
	}
	server, err := s.server(ctx)
	if err != nil {
		return false, a.fail(ctx, m, "FailedExists", err)
	}
	if server == nil && s.notOwned != nil && m.DeletionTimestamp == nil && a.verifiedID(m) == "" {
		// A given provider ID names another identity's server.
		return false, a.failGiven(ctx, m, a.notOwnedMessage(m, s.notOwned))
	}
	if m.DeletionTimestamp == nil {
		a.seen.Store(m.UID, seenServer{server: server, at: a.now()})
	}
	return server != nil, nil
}

// Update reports the server on the Machine, keeps its tags in sync and says
// when the spec asks for something only a new server can have.
//
// A Machine whose spec no longer validates keeps its server as it is: the
// server is found and recorded, nothing is synced to it, and the conditions
// SpecValid and SpecInSync with an InvalidSpec event say what to fix.
func (a *Actuator) Update(ctx context.Context, m *machinev1.Machine) error {
	ctx = a.withWarnings(ctx, m)
	s, err := a.scope(ctx, m)
	if isInvalid(err) && a.mayHaveServer(m) {
		return a.updateInvalid(ctx, m)
	}
	if err != nil {
		return a.fail(ctx, m, "FailedUpdate", err)
	}
	server, err := a.currentServer(ctx, s)
	if err != nil {
		return a.fail(ctx, m, "FailedUpdate", err)
	}
	if a.recordedID(m) == "" && !a.justRecorded(m, server.ID) {
		// Made by an earlier attempt whose answer was lost, or by a
		// manager that stopped before it could record it.
		a.recorder.Eventf(m, corev1.EventTypeNormal, "Adopted", "Found %s server %s of this Machine, created earlier", a.cloud.Name(), server.ID)
	}
	drift, err := s.client.SyncServer(ctx, s.ref, s.spec, server)
	if halfMade(m, err) {
		// The create's own sync did not get as far (a transient failure,
		// a restart): the server never became what the spec asks.
		return a.undoHalfMade(ctx, s, server, "FailedUpdate", err)
	}
	if err != nil {
		return a.fail(ctx, m, "FailedUpdate", err)
	}
	// The sync may have read the server afresh (a create's record lacks
	// what only a read has) or changed it: the next lookups take this.
	s.view.Observed(*server)
	return a.record(ctx, s, server, drift)
}

// updateInvalid records the server of a Machine whose spec no longer
// validates, without syncing anything to it (see Update).
func (a *Actuator) updateInvalid(ctx context.Context, m *machinev1.Machine) error {
	s, err := a.deleteScope(ctx, m)
	if err != nil {
		return a.fail(ctx, m, "FailedUpdate", err)
	}
	server, err := a.currentServer(ctx, s)
	if err != nil {
		return a.fail(ctx, m, "FailedUpdate", err)
	}
	return a.record(ctx, s, server, nil)
}

// currentServer is the Machine's server for Update: the one Exists found
// moments ago, else a fresh lookup (a failing zone set on the Machine's
// condition). A server that is gone is an error.
func (a *Actuator) currentServer(ctx context.Context, s *scope) (*cloud.Server, error) {
	m := s.machine
	if v, ok := a.seen.LoadAndDelete(m.UID); ok && v.(seenServer).server != nil && a.now().Sub(v.(seenServer).at) < seenFor {
		return v.(seenServer).server, nil
	}
	server, err := s.server(ctx)
	if err != nil {
		return nil, err
	}
	if server == nil {
		return nil, fmt.Errorf("the server of this Machine is gone")
	}
	return server, nil
}

// forget drops what the actuator keeps about a Machine that is gone,
// its use of its account included.
func (a *Actuator) forget(m *machinev1.Machine) {
	a.forgetState(m)
	a.accounts.Release(owner(m))
}

// forgetState drops what the actuator keeps about a Machine, but not its
// account.
func (a *Actuator) forgetState(m *machinev1.Machine) {
	a.seen.Delete(m.UID)
	a.refused.Delete(m.UID)
	a.settled.Delete(m.UID)
	a.unreadable.Delete(m.UID)
	a.serversGone.Delete(m.UID)
	a.recorded.Delete(m.UID)
	a.backoff.reset(m.UID)
}

// machineKey is for logs.
func machineKey(m *machinev1.Machine) types.NamespacedName {
	return types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
}
