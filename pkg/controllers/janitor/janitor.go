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
//     runs on (pkg/nodes: by provider ID, or by name and address) and never
//     a server without the provider's identity.
//
// It sweeps one cluster: the one the provider is pinned to (Options.
// ClusterID, the Infrastructure's infrastructureName), whatever the labels
// of Machines or MachineSets say; views of other clusters an account may
// hold are dropped. Servers an adoption is taking over (pkg/orphans,
// Adoptions) are no orphans while it runs.
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
	"github.com/appuio/machine-api-provider/pkg/metrics"
	"github.com/appuio/machine-api-provider/pkg/nodes"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// MinDeleteOrphansAfter is the least --delete-orphans-after the provider
// accepts: an orphan must have stayed one through several scans, and a
// person must have had a chance to see the event, before it goes.
const MinDeleteOrphansAfter = 10 * time.Minute

// ClusterIDLabel names a Machine's cluster (as in pkg/actuator).
const ClusterIDLabel = "machine.openshift.io/cluster-api-cluster"

// Options tune the janitor; zero values take the defaults.
type Options struct {
	// ClusterID is the one cluster it sweeps (the manager's
	// --cluster-id). Required.
	ClusterID string
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
	// vetoed remembers, per server, the Nodes last reported as keeping it
	// from deletion: one event per change, not one per sweep.
	vetoed map[string]string
	// swept is when the last sweep ended, by the wall clock (listAge).
	swept time.Time
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
	return &Janitor{client: c, accounts: accounts, orphans: registry, o: o, now: now, vetoed: map[string]string{}}, nil
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
}

// Sweep looks at every account and cluster once.
func (j *Janitor) Sweep(ctx context.Context) (Report, error) {
	var rep Report
	defer func() { j.swept = time.Now() }()
	machines, err := j.machines(ctx)
	if err != nil {
		return rep, err
	}
	recorded, err := j.orphans.List(ctx)
	if err != nil {
		return rep, err
	}
	cloudName := j.accounts.Cloud().Name()
	ix, err := nodes.List(ctx, j.client, cloudName)
	if err != nil {
		return rep, err
	}
	adopting, err := j.o.Adoptions.List(ctx)
	if err != nil {
		return rep, err
	}
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
		// Only the cluster the provider is pinned to: a view of another
		// (none is made any more; a label never enrols a cluster) goes.
		acc.KeepViews(j.o.ClusterID)
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
				if s.ClusterID != cluster || machines[s.Machine] || j.now().Sub(s.CreatedAt) < j.o.OrphanMinAge {
					continue
				}
				if _, ok := adopting[s.ID]; ok {
					// On its way to a Machine.
					continue
				}
				reason := fmt.Sprintf("it is tagged as Machine %q's, which does not exist", s.Machine)
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
			for _, o := range append(recorded, added...) {
				if o.ClusterID != cluster || o.Account != account {
					continue
				}
				if !present[o.ServerID] {
					// A list need not show every server: a zone did not
					// answer, or the list left out a zone no Machine uses
					// (Exoscale lists those only now and then). Only the
					// cloud's answer about the server itself says it is
					// gone; forgetting it would restart its time to
					// deletion.
					_, err := acc.Client.GetServer(ctx, o.ServerID)
					switch {
					case cloud.IsNotFound(err):
						gone = append(gone, o.ServerID)
						continue
					case err != nil:
						keep(err)
						seen[o.ServerID] = true
						rep.Orphans = append(rep.Orphans, o)
						continue
					}
				}
				if _, ok := adopting[o.ServerID]; ok || machines[o.Machine] {
					// A Machine of that name exists again, or an
					// adoption takes the server over: not an orphan.
					gone = append(gone, o.ServerID)
					continue
				}
				seen[o.ServerID] = true
				rep.Orphans = append(rep.Orphans, o)
				if deleted, err := j.maybeDelete(ctx, acc, view, o, ix); err != nil {
					keep(err)
				} else if deleted {
					rep.OrphansDeleted = append(rep.OrphansDeleted, o.ServerID)
					gone = append(gone, o.ServerID)
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

// maybeDelete deletes an orphan past DeleteOrphansAfter, if it carries a
// Machine's identity of the cluster and no Node runs on it (ix).
func (j *Janitor) maybeDelete(ctx context.Context, acc *cloud.Account, view *cloud.View, o orphans.Orphan, ix *nodes.Index) (bool, error) {
	if j.o.DeleteOrphansAfter <= 0 || o.Machine == "" || o.ClusterID != j.o.ClusterID || j.now().Sub(o.Since) < j.o.DeleteOrphansAfter {
		return false, nil
	}
	cloudName := j.accounts.Cloud().Name()
	// This read is the delete's own (cloud.DeleteDecided): the delete
	// below needs no other.
	ctx = cloud.DeleteDecided(ctx, time.Now())
	srv, err := acc.Client.GetServer(cloud.ProvingOwnership(ctx), o.ServerID)
	if cloud.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	ref := cloud.MachineRef{Name: o.Machine, ClusterID: o.ClusterID}
	if cloud.CheckOwned(ref, srv) != nil {
		return false, nil
	}
	if on := ix.On(*srv); len(on) > 0 {
		// Never a server a Node runs on, whatever its tags say: a node
		// no Machine describes yet (an adoption to come, a node left
		// alone by one, a cluster without a cloud controller manager).
		if d := nodes.Describe(on); j.vetoed[o.ServerID] != d {
			j.vetoed[o.ServerID] = d
			j.o.Log.Info("orphan server not deleted: a Node runs on it", "server", o.ServerID, "nodes", d)
			j.orphans.Event(ctx, corev1.EventTypeWarning, "OrphanNotDeleted", fmt.Sprintf("%s orphan server %s (%s) of cluster %s is not deleted: %s runs on it",
				cloudName, o.ServerID, o.ServerName, o.ClusterID, d))
		}
		return false, nil
	}
	delete(j.vetoed, o.ServerID)
	err = acc.Client.DeleteServer(ctx, ref, srv)
	var notOwned *cloud.NotOwnedError
	if errors.As(err, &notOwned) {
		// Its tags changed between the two reads: no longer an orphan
		// of this cluster's.
		j.o.Log.Info("orphan server not deleted: its identity changed", "server", o.ServerID, "reason", err.Error())
		return false, nil
	}
	if err != nil {
		return false, err
	}
	view.Deleted(o.ServerID)
	metrics.OrphanDeleted(cloudName)
	j.o.Log.Info("deleted orphan server", "server", o.ServerID, "name", o.ServerName, "cluster", o.ClusterID, "orphanSince", o.Since)
	j.orphans.Event(ctx, corev1.EventTypeWarning, "OrphanDeleted", fmt.Sprintf("Deleted %s orphan server %s (%s) of cluster %s, an orphan since %s",
		cloudName, o.ServerID, o.ServerName, o.ClusterID, o.Since.Format(time.RFC3339)))
	return true, nil
}

// machines are the names of the Machines of the cluster (those whose label
// names it).
func (j *Janitor) machines(ctx context.Context) (map[string]bool, error) {
	var list machinev1.MachineList
	if err := j.client.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range list.Items {
		if m.Labels[ClusterIDLabel] == j.o.ClusterID {
			out[m.Name] = true
		}
	}
	return out, nil
}
