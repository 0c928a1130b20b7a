// Package janitor looks after what Machines leave behind in the cloud. Every
// interval, for each account and cluster the provider acts on, it reads the
// account's view of the cluster's servers (one list, shared with the
// actuator) and
//
//   - deletes the provider's empty anti-affinity groups, whatever failed
//     when the servers in them were deleted;
//   - reports servers carrying the cluster's identity that belong to no
//     Machine (orphans): a metric, an event and a log line with the server's
//     ID, and an entry in the orphan record (pkg/orphans);
//   - when enabled, deletes orphans after a grace period, never one a Node
//     runs on (pkg/nodes: by provider ID, or by name and every address the
//     server has, read right before the delete) and never a server without
//     the provider's identity.
//
// The grace counts from the last moment nothing vetoed, as this janitor saw
// it: a Node that runs on the orphan restarts it at every sweep, so a
// server once vetoed is deleted only after a full grace with no Node at
// all (not at the first sweep its Node object is missing for a minute: `oc
// delete node` before a reboot, a re-registration). The clock is the
// janitor's own, in memory: the orphan record (a ConfigMap anyone who may
// write ConfigMaps of the namespace can change) can lengthen the grace
// (its since), never shorten it. A restart or a new leader starts the
// clock again.
//
// It sweeps one cluster: the one the provider is pinned to (Options.
// ClusterID, the Infrastructure's infrastructureName) and the legacy IDs an
// admin declared it also owns (Options.LegacyClusterIDs, pkg/clusterid),
// whatever the labels of Machines or MachineSets say; views of other
// clusters an account may hold are dropped. A server is an orphan when no
// Machine carries the cluster ID and the name it is tagged with. Servers in
// the adoption record (pkg/orphans,
// Adoptions) are no orphans: those an adoption is taking over until their
// entry expires (then the janitor removes it, with an event), those left
// alone (adopt's --leave-role and misfits, servers uninstall or adopt
// --undo released) for good. Every entry that leaves a record goes with an
// event saying why.
//
// It also reports the servers held Machines record (held.go): Machines
// whose label names a cluster this one does not own, so that a server no
// provider acts on is never out of sight.
//
// It runs on the leader only.
package janitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/metrics"
	"github.com/appuio/machine-api-provider/pkg/nodes"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// MinDeleteOrphansAfter is the least --delete-orphans-after the provider
// accepts: an orphan must have stayed one through several scans, and a
// person must have had a chance to see the event, before it goes.
const MinDeleteOrphansAfter = 10 * time.Minute

// ClusterIDLabel names a Machine's cluster (as in pkg/actuator).
const ClusterIDLabel = clusterid.Label

// Options tune the janitor; zero values take the defaults.
type Options struct {
	// ClusterID is the one cluster it sweeps (the manager's
	// --cluster-id). Required.
	ClusterID string
	// LegacyClusterIDs are the cluster IDs it owns besides (the manager's
	// --legacy-cluster-ids): swept like ClusterID.
	LegacyClusterIDs []string
	// Adoptions is the record of the servers an adoption is taking over;
	// nil: none ever is.
	Adoptions *orphans.Adoptions
	// Now is the janitor's clock; nil: time.Now. A test that cannot wait
	// out DeleteOrphansAfter (at least MinDeleteOrphansAfter, which no
	// option lowers) runs it fast instead.
	Now func() time.Time
	// Interval between sweeps. Default 1 minute.
	Interval time.Duration
	// DeleteOrphansAfter deletes orphans this long after they were first
	// seen; 0 only reports them. At least MinDeleteOrphansAfter.
	DeleteOrphansAfter time.Duration
	// OrphanMinAge is how old a server must be before it can count as an
	// orphan. Default 2 minutes.
	OrphanMinAge time.Duration
	// GroupMinAge is how old an empty group must be before it is
	// deleted. Default 1 minute.
	GroupMinAge time.Duration
	// Linger is how long an account is still swept after its last Machine
	// and MachineSet are gone (cloud.AccountOptions.Linger, which the
	// manager sets from it). Default DefaultLinger; negative: not at all.
	Linger time.Duration
	Log    logr.Logger
}

// DefaultLinger is how long the janitor still sweeps an account and its
// clusters after their last Machine and MachineSet went: long enough for
// the groups they left (a minute old before they may go, GroupMinAge) and
// for a cloud that refuses a delete for a while, or still shows a
// destroyed server in its group; short enough that a cluster torn down is
// soon left alone.
const DefaultLinger = 10 * time.Minute

// Janitor sweeps the accounts' clusters.
//
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
type Janitor struct {
	client   client.Client
	accounts *cloud.Accounts
	orphans  *orphans.Registry
	o        Options
	now      func() time.Time
	// ids is the cluster's identity, ClusterID and LegacyClusterIDs.
	ids clusterid.IDs
	// held remembers, per held Machine, the server last reported: one
	// event per change, not one per sweep.
	held map[string]string
	// vetoed remembers, per server, the Nodes last reported as keeping it
	// from deletion: one event per change, not one per sweep.
	vetoed map[string]string
	// swept is when the last sweep ended, by the wall clock (listAge).
	swept time.Time
	// clear is, per orphan it may delete, when this janitor first saw it
	// with no Node vetoing, since when none has: the grace counts from
	// there (or from the record's since, if later).
	clear map[string]time.Time
}

var (
	_ manager.Runnable               = (*Janitor)(nil)
	_ manager.LeaderElectionRunnable = (*Janitor)(nil)
)

// New returns a janitor; add it to a manager (mgr.Add) to run it.
func New(c client.Client, accounts *cloud.Accounts, registry *orphans.Registry, o Options) (*Janitor, error) {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.OrphanMinAge <= 0 {
		o.OrphanMinAge = 2 * time.Minute
	}
	if o.GroupMinAge <= 0 {
		o.GroupMinAge = time.Minute
	}
	if o.DeleteOrphansAfter != 0 && o.DeleteOrphansAfter < MinDeleteOrphansAfter {
		return nil, fmt.Errorf("deleting orphans after %s is too soon: at least %s", o.DeleteOrphansAfter, MinDeleteOrphansAfter)
	}
	if o.ClusterID == "" {
		return nil, errors.New("janitor: no cluster ID")
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Janitor{client: c, accounts: accounts, orphans: registry, o: o, now: now, vetoed: map[string]string{}, clear: map[string]time.Time{},
		ids: clusterid.IDs{Own: o.ClusterID, Legacy: o.LegacyClusterIDs}, held: map[string]string{}}, nil
}

// NeedLeaderElection: only the leader sweeps.
func (j *Janitor) NeedLeaderElection() bool { return true }

// Start sweeps every interval until ctx ends.
func (j *Janitor) Start(ctx context.Context) error {
	t := time.NewTicker(j.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := j.Sweep(ctx); err != nil && ctx.Err() == nil {
			j.o.Log.Info("janitor sweep incomplete", "error", err.Error())
		}
	}
}

// Report is what one sweep found and did.
type Report struct {
	Orphans        []orphans.Orphan
	OrphansDeleted []string
	GroupsDeleted  []string
	// LeftAlone are the servers with the cluster's identity and no Machine
	// that the adoption record says are left alone: no orphans.
	LeftAlone []string
	// Held are the servers held Machines record (held.go).
	Held []HeldServer
}

// Sweep looks at every account and cluster once.
func (j *Janitor) Sweep(ctx context.Context) (Report, error) {
	var rep Report
	defer func() { j.swept = time.Now() }()
	machines, held, err := j.machines(ctx)
	if err != nil {
		return rep, err
	}
	rep.Held = j.reportHeld(held)
	recorded, err := j.orphans.List(ctx)
	if err != nil {
		return rep, err
	}
	cloudName := j.accounts.Cloud().Name()
	ix, err := nodes.List(ctx, j.client, cloudName)
	if err != nil {
		return rep, err
	}
	adopting, err := j.adoptions(ctx)
	if err != nil {
		return rep, err
	}
	watched := map[string]bool{}
	defer func() {
		// The clock of an orphan not seen deletable and clear in this
		// sweep starts again.
		for id := range j.clear {
			if !watched[id] {
				delete(j.clear, id)
			}
		}
	}()
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	seen := map[string]bool{}
	for _, acc := range j.accounts.All() {
		account := acc.Secret
		if account == "" {
			account = "default"
		}
		// Only the clusters the provider owns: a view of another (none
		// is made any more; a label never enrols a cluster) goes.
		acc.KeepViews(j.ids.All()...)
		for _, cluster := range acc.Clusters() {
			view := acc.View(cluster)
			servers, err := view.All(ctx, j.listAge())
			// Some zones could not be listed: what they hold is unknown,
			// so nothing recorded is forgotten for not being seen.
			var partial *cloud.PartialListError
			if err != nil && !errors.As(err, &partial) {
				keep(err)
				continue
			}
			keep(err)
			present := map[string]bool{}
			var found []orphans.Orphan
			for _, s := range servers {
				present[s.ID] = true
				if s.ClusterID != cluster || machines[cluster][s.Machine] || j.now().Sub(s.CreatedAt) < j.o.OrphanMinAge {
					continue
				}
				if a, ok := adopting[s.ID]; ok {
					// On its way to a Machine, or left alone.
					if a.LeftAlone != "" {
						rep.LeftAlone = append(rep.LeftAlone, s.ID)
					}
					continue
				}
				reason := fmt.Sprintf("it is tagged as Machine %q's, which does not exist", s.Machine)
				if id := otherID(machines, cluster, s.Machine); id != "" {
					reason = fmt.Sprintf("it is tagged as Machine %q's of cluster %q, and Machine %s carries cluster %q", s.Machine, cluster, s.Machine, id)
				}
				if s.Machine == "" {
					reason = "it carries the cluster's identity but no Machine's"
				}
				found = append(found, orphans.Orphan{
					Cloud: cloudName, ServerID: s.ID, ServerName: s.Name, Machine: s.Machine, ClusterID: cluster,
					Account: account, Reason: reason, Since: j.now().UTC(), Verified: true,
				})
			}
			added, err := j.orphans.Record(ctx, found...)
			keep(err)
			for _, o := range added {
				j.o.Log.Info("orphan server", "cloud", cloudName, "server", o.ServerID, "name", o.ServerName, "cluster", cluster, "reason", o.Reason)
			}
			// What the record says of this account and cluster, checked
			// against what the cloud shows now.
			var gone []string
			forget := func(o orphans.Orphan, why string) {
				gone = append(gone, o.ServerID)
				if why == "" {
					return
				}
				j.o.Log.Info("orphan server forgotten", "server", o.ServerID, "name", o.ServerName, "cluster", o.ClusterID, "reason", why)
				j.orphans.Event(ctx, corev1.EventTypeNormal, "OrphanForgotten", fmt.Sprintf("%s server %s (%s) of cluster %s is no orphan any more: %s",
					cloudName, o.ServerID, o.ServerName, o.ClusterID, why))
			}
			byID := map[string]*cloud.Server{}
			for i := range servers {
				byID[servers[i].ID] = &servers[i]
			}
			for _, o := range append(recorded, added...) {
				if o.ClusterID != cluster || o.Account != account {
					continue
				}
				srv := byID[o.ServerID]
				if srv == nil {
					// A list need not show every server: a zone did not
					// answer, or the list left out a zone no Machine uses
					// (Exoscale lists those only now and then). Only the
					// cloud's answer about the server itself says it is
					// gone; forgetting it would restart its time to
					// deletion.
					got, err := acc.Client.GetServer(ctx, o.ServerID)
					switch {
					case cloud.IsNotFound(err):
						forget(o, "the server is gone")
						continue
					case err != nil:
						keep(err)
						seen[o.ServerID] = true
						rep.Orphans = append(rep.Orphans, o)
						continue
					}
					srv = got
				}
				if a, ok := adopting[o.ServerID]; ok {
					why := "an adoption is taking it over (the adoption record)"
					if a.LeftAlone != "" {
						why = "it is left alone (the adoption record): " + a.LeftAlone
					}
					forget(o, why)
					continue
				}
				if machines[o.ClusterID][o.Machine] {
					forget(o, fmt.Sprintf("Machine %q exists (again)", o.Machine))
					continue
				}
				seen[o.ServerID] = true
				rep.Orphans = append(rep.Orphans, o)
				if deleted, err := j.maybeDelete(ctx, acc, view, o, srv, ix, watched); err != nil {
					keep(err)
				} else if deleted {
					rep.OrphansDeleted = append(rep.OrphansDeleted, o.ServerID)
					forget(o, "")
				}
			}
			keep(j.orphans.Forget(ctx, gone...))
			// Shared with the deletes of the cluster's Machines running
			// now: one cleanup for all.
			names, err := view.CleanupGroups(ctx, time.Time{}, j.o.GroupMinAge)
			keep(err)
			if len(names) > 0 {
				metrics.GroupsDeleted(cloudName, len(names))
				rep.GroupsDeleted = append(rep.GroupsDeleted, names...)
				j.o.Log.Info("deleted empty anti-affinity groups", "cloud", cloudName, "cluster", cluster, "groups", names)
				j.orphans.Event(ctx, corev1.EventTypeNormal, "DeletedGroups", fmt.Sprintf("Deleted empty %s anti-affinity group(s) %v of cluster %s", cloudName, names, cluster))
			}
		}
	}
	// Orphans the provider cannot look at (abandoned with unusable
	// credentials) still count.
	for _, o := range recorded {
		if !seen[o.ServerID] && !o.Verified {
			rep.Orphans = append(rep.Orphans, o)
		}
	}
	metrics.SetOrphans(cloudName, len(rep.Orphans)-len(rep.OrphansDeleted))
	return rep, firstErr
}

// listAge is how old a list of the cluster's servers a sweep takes: one
// made since the last sweep ended (by the Machines' reconciles, which
// share the view), else it lists. A list of the last sweep's own never
// serves the next, which comes an interval later: whether it would (was
// the list begun a moment later than the sweep is now, an interval on?)
// was a toss-up, and so was what a settled cluster cost the account.
func (j *Janitor) listAge() time.Duration {
	if j.swept.IsZero() {
		return j.o.Interval
	}
	return min(j.o.Interval, time.Since(j.swept))
}

// maybeDelete deletes an orphan past its grace, if it carries a Machine's
// identity of the cluster and no Node runs on it (ix). Its grace counts
// from the last sweep at which a Node vetoed, as this janitor saw it
// (clear), or from the record's since when that is later; srv is the
// server as the sweep found it, read again by the delete. watched collects
// the orphans whose clock runs.
func (j *Janitor) maybeDelete(ctx context.Context, acc *cloud.Account, view *cloud.View, o orphans.Orphan, srv *cloud.Server, ix *nodes.Index, watched map[string]bool) (bool, error) {
	if j.o.DeleteOrphansAfter <= 0 || o.Machine == "" || !j.ids.Owns(o.ClusterID) {
		return false, nil
	}
	cloudName := j.accounts.Cloud().Name()
	ref := cloud.MachineRef{Name: o.Machine, ClusterID: o.ClusterID}
	veto := nodes.Veto{Index: ix}
	if on, err := j.vetoes(ctx, acc, veto, srv); err != nil {
		return false, err
	} else if len(on) > 0 {
		j.refused(ctx, o, on)
		return false, nil
	}
	watched[o.ServerID] = true
	now := j.now()
	from, ok := j.clear[o.ServerID]
	if !ok {
		from = now
		j.clear[o.ServerID] = from
	}
	if o.Since.After(from) {
		// The record's since may lengthen the grace, never shorten it.
		from = o.Since
	}
	if now.Sub(from) < j.o.DeleteOrphansAfter {
		return false, nil
	}
	err := acc.Client.DeleteServer(ctx, ref, srv, veto)
	var vetoed *nodes.VetoedError
	var notOwned *cloud.NotOwnedError
	switch {
	case errors.As(err, &vetoed):
		// A Node came, or an address read right before the delete
		// showed one: the grace starts again.
		delete(j.clear, o.ServerID)
		delete(watched, o.ServerID)
		j.refused(ctx, o, vetoed.Nodes)
		return false, nil
	case errors.As(err, &notOwned):
		// Its tags changed between the two reads: no longer an orphan
		// of this cluster's.
		j.o.Log.Info("orphan server not deleted: its identity changed", "server", o.ServerID, "reason", err.Error())
		return false, nil
	case err != nil:
		return false, err
	}
	delete(j.vetoed, o.ServerID)
	delete(j.clear, o.ServerID)
	view.Deleted(o.ServerID)
	metrics.OrphanDeleted(cloudName)
	j.o.Log.Info("deleted orphan server", "server", o.ServerID, "name", o.ServerName, "cluster", o.ClusterID, "orphanSince", o.Since, "clearSince", from)
	j.orphans.Event(ctx, corev1.EventTypeWarning, "OrphanDeleted", fmt.Sprintf("Deleted %s orphan server %s (%s) of cluster %s, an orphan since %s, with no Node on it since %s",
		cloudName, o.ServerID, o.ServerName, o.ClusterID, o.Since.Format(time.RFC3339), from.Format(time.RFC3339)))
	return true, nil
}

// vetoes are the Nodes that run on the orphan (pkg/nodes), at every sweep:
// a veto restarts its grace. What the sweep's list says decides when it
// can: a Node by provider ID, or by name and an address the list has, or
// no Node of its name at all. Only when a Node of its name could run on it
// by an address the list lacks (an Exoscale instance's private addresses)
// are its addresses read now.
func (j *Janitor) vetoes(ctx context.Context, acc *cloud.Account, veto nodes.Veto, srv *cloud.Server) ([]nodes.Match, error) {
	on := veto.Index.Vetoes(*srv)
	for _, m := range on {
		if m.By != nodes.ByNameOnly {
			return on, nil
		}
	}
	if len(on) == 0 {
		return nil, nil
	}
	fresh := *srv
	if err := acc.Client.ReadAddresses(ctx, &fresh); err != nil {
		return nil, err
	}
	return veto.Index.Vetoes(fresh), nil
}

// refused reports an orphan kept because Nodes run on it: once per change
// of the Nodes.
func (j *Janitor) refused(ctx context.Context, o orphans.Orphan, on []nodes.Match) {
	d := nodes.Describe(on)
	if j.vetoed[o.ServerID] == d {
		return
	}
	j.vetoed[o.ServerID] = d
	// Never a server a Node runs on, whatever its tags say: a node no
	// Machine describes yet (an adoption to come, a node left alone by
	// one, a cluster without a cloud controller manager).
	j.o.Log.Info("orphan server not deleted: a Node runs on it", "server", o.ServerID, "nodes", d)
	j.orphans.Event(ctx, corev1.EventTypeWarning, "OrphanNotDeleted", fmt.Sprintf("%s orphan server %s (%s) of cluster %s is not deleted: %s runs on it; its grace starts again once no Node does",
		j.accounts.Cloud().Name(), o.ServerID, o.ServerName, o.ClusterID, d))
}

// adoptions are the entries of the adoption record that keep servers from
// orphan reporting now. Expired adoptions under way are removed first, each
// with an event: their servers count as orphans again.
func (j *Janitor) adoptions(ctx context.Context) (map[string]orphans.Adoption, error) {
	if j.o.Adoptions == nil {
		return nil, nil
	}
	expired, err := j.o.Adoptions.Expire(ctx, j.now())
	if err != nil {
		return nil, err
	}
	cloudName := j.accounts.Cloud().Name()
	var record *corev1.ConfigMap
	if len(expired) > 0 {
		if record, err = j.o.Adoptions.Get(ctx); err != nil {
			return nil, err
		}
	}
	for _, a := range expired {
		j.o.Log.Info("adoption record expired", "server", a.ServerID, "name", a.ServerName, "since", a.Since, "expires", a.ExpiresAt())
		j.orphans.EventOn(record, corev1.EventTypeWarning, "AdoptionRecordExpired", fmt.Sprintf(
			"%s server %s (%s) was recorded as being adopted since %s and the adoption was not completed or renewed by %s: it counts as an orphan again unless it has a Machine. Run `machine-api-provider adopt --apply` again to resume the adoption",
			cloudName, a.ServerID, a.ServerName, a.Since.Format(time.RFC3339), a.ExpiresAt().Format(time.RFC3339)))
	}
	all, err := j.o.Adoptions.List(ctx)
	if err != nil {
		return nil, err
	}
	now := j.now()
	for id, a := range all {
		if !a.Active(now) {
			delete(all, id)
		}
	}
	return all, nil
}

// otherID is another of the cluster's IDs a Machine of the name carries,
// "" for none.
func otherID(machines map[string]map[string]bool, cluster, name string) string {
	for id, names := range machines {
		if id != cluster && names[name] {
			return id
		}
	}
	return ""
}

// machines are the names of the Machines of the cluster, by the cluster ID
// their label names (the cluster's own, or a declared legacy one), and the
// held Machines (held.go).
func (j *Janitor) machines(ctx context.Context) (map[string]map[string]bool, []machinev1.Machine, error) {
	var list machinev1.MachineList
	if err := j.client.List(ctx, &list); err != nil {
		return nil, nil, err
	}
	out := map[string]map[string]bool{}
	var held []machinev1.Machine
	for _, m := range list.Items {
		id := m.Labels[ClusterIDLabel]
		switch {
		case j.ids.Owns(id):
			if out[id] == nil {
				out[id] = map[string]bool{}
			}
			out[id][m.Name] = true
		case heldServer(m) != "":
			held = append(held, m)
		}
	}
	return out, held, nil
}
