package cloud

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ViewOptions tune a View.
type ViewOptions struct {
	// Refresh is how old the list may be before a lookup lists again.
	Refresh time.Duration
	// MaxStale is how long a view whose refreshes fail keeps answering
	// from its last list; after that, lookups fail. Default 5 minutes.
	MaxStale time.Duration
	// WriteGrace is how long the provider's own creates and deletes stand
	// in the view when a list contradicts them (a list that started before
	// the write, an API whose lists lag behind). Default: twice Refresh,
	// at least 30 seconds.
	WriteGrace time.Duration
}

// View is the shared, per-account view of one cluster's servers: one list
// call refreshes what every reconcile of the cluster reads, so a resync of N
// settled Machines costs at most one list per refresh interval, not N calls,
// and the machine controller's two existence checks before a create cost
// none of their own.
//
// It stays consistent with the provider's own writes: a server it created
// (Created) is seen at once and stays seen until a list shows it, for
// WriteGrace; a server it deleted (Deleted) is gone at once. It is only ever
// used to find servers that exist: before anything is created, the create
// looks the Machine's servers up directly (Client.CreateServer does), so a
// stale view can delay an answer but never make a second server.
type View struct {
	client Client
	sel    Selector
	o      ViewOptions
	now    func() time.Time

	mu       sync.Mutex
	servers  map[string]Server
	listedAt time.Time // when the list behind servers started
	written  map[string]write
	// merged is the last list with the provider's writes, oldest first,
	// and byMachine the same by Machine. Every reconcile of the cluster
	// reads them: they are made again only after a list or a write, or
	// when a write's grace ends (after mergedUntil), not for each lookup,
	// which would cost a copy and a sort of the whole list each time.
	merged      []Server
	byMachine   map[string][]int // indexes into merged
	index       map[string]int   // server ID -> index into merged
	mergedUntil time.Time
	inFlight    *listRun // the running refresh
	lastErr     error
	lists       int
	// failedZones are the zones the last lists could not list (a
	// PartialListError): the view answers for Machines of the other zones
	// from the new list, and keeps the servers of these as last listed.
	failedZones map[string]zoneFailure
	// After a failed list, the next waits: retryAt is when it may run,
	// failWait how long the last wait was (doubling up to maxFailWait).
	retryAt  time.Time
	failWait time.Duration

	cleanup groupCleanup
}

// The view's own backoff after failed lists: every reconcile of the
// cluster reads through it, and the machine controller retries failed
// existence checks at once; without it each retry would be a list.
const (
	minFailWait = time.Second
	maxFailWait = 30 * time.Second
)

// zoneFailure is a zone the view's lists have been failing to list since
// a list after goodAt, the start of its last list that did (zero: none
// did).
type zoneFailure struct {
	err    *ZoneError
	goodAt time.Time
}

type write struct {
	server *Server // nil: deleted
	at     time.Time
}

// NewView returns an empty view of the cluster's servers through client.
func NewView(client Client, clusterID string, o ViewOptions) *View {
	if o.Refresh <= 0 {
		o.Refresh = 10 * time.Second
	}
	if o.MaxStale <= 0 {
		o.MaxStale = 5 * time.Minute
	}
	if o.WriteGrace <= 0 {
		o.WriteGrace = max(2*o.Refresh, 30*time.Second)
	}
	return &View{client: client, sel: Selector{ClusterID: clusterID}, o: o, now: time.Now, written: map[string]write{}}
}

// Machine returns the servers of one Machine, oldest first; MachineIn
// with the zone unknown.
func (v *View) Machine(ctx context.Context, name string) ([]Server, error) {
	return v.MachineIn(ctx, name, "")
}

// MachineIn returns the servers of one Machine of the zone, oldest first.
// When the view's lists fail in some zones only (PartialListError), the
// Machines of the other zones are answered as usual; those of a failing
// zone from the zone's last list while that is within MaxStale, and with
// an error naming the zone after that. A Machine of an unknown zone ("")
// gets that error when any zone is past MaxStale.
func (v *View) MachineIn(ctx context.Context, name, zone string) ([]Server, error) {
	if err := v.fresh(ctx, 0, zone); err != nil {
		return nil, err
	}
	return v.machine(name), nil
}

// MachineNow returns the servers of one Machine, oldest first; MachineNowIn
// with the zone unknown.
func (v *View) MachineNow(ctx context.Context, name string) ([]Server, error) {
	return v.MachineNowIn(ctx, name, "")
}

// MachineNowIn returns the servers of one Machine of the zone, oldest
// first, from a list that started after the call: as direct as a lookup of
// the Machine's own, but shared by every caller that list serves (the
// Machines deleted together). A failed list is an error, never an older
// list's answer; so is a list that failed in the Machine's zone (in any
// zone, for a zone unknown).
func (v *View) MachineNowIn(ctx context.Context, name, zone string) ([]Server, error) {
	if err := v.listedSince(ctx, v.now(), true, zone); err != nil {
		return nil, err
	}
	return v.machine(name), nil
}

// machine is the Machine's servers in the merged view, oldest first.
func (v *View) machine(name string) []Server {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.merge()
	idx := v.byMachine[name]
	out := make([]Server, len(idx))
	for i, j := range idx {
		out[i] = v.merged[j]
	}
	return out
}

// All returns every server of the cluster, oldest first, from a list no
// older than maxAge (0: the view's refresh interval). When some zones could
// not be listed, it returns the servers with a *PartialListError: those of
// the failing zones are as last listed, and a server missing from them may
// exist all the same.
func (v *View) All(ctx context.Context, maxAge time.Duration) ([]Server, error) {
	if maxAge <= 0 {
		maxAge = v.o.Refresh
	}
	if err := v.listedSince(ctx, v.now().Add(-maxAge), false, allZones); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.merge()
	out := append([]Server(nil), v.merged...)
	if len(v.failedZones) > 0 {
		return out, v.partial(nil)
	}
	return out, nil
}

// allZones asks fresh and listedSince for the whole list, failed zones
// and all: All reports them itself.
const allZones = "\x00all"

// Get returns the server with the ID if the view has it.
func (v *View) Get(ctx context.Context, id string) (*Server, bool, error) {
	if err := v.fresh(ctx, 0, allZones); err != nil {
		return nil, false, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.merge()
	if i, ok := v.index[id]; ok {
		s := v.merged[i]
		return &s, true, nil
	}
	return nil, false, nil
}

// Created puts a server the provider just created (or found) into the view.
func (v *View) Created(s Server) {
	v.mu.Lock()
	defer v.mu.Unlock()
	cp := s
	v.written[s.ID] = write{server: &cp, at: v.now()}
	v.merged = nil
}

// Deleted takes a server the provider just deleted out of the view.
func (v *View) Deleted(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.written[id] = write{at: v.now()}
	v.merged = nil
}

// Observed takes a fresher record of a server the view holds, one the
// provider read or updated directly, in place of the one it has until the
// next list, so that later lookups need not read it again. It adds nothing
// and extends no write's grace: a server the view does not hold stays out.
func (v *View) Observed(s Server) {
	v.mu.Lock()
	defer v.mu.Unlock()
	held := false
	if w, ok := v.written[s.ID]; ok && w.server != nil {
		cp := s
		v.written[s.ID] = write{server: &cp, at: w.at}
		held = true
	}
	if _, ok := v.servers[s.ID]; ok {
		v.servers[s.ID] = s
		held = true
	}
	if !held || v.merged == nil {
		return
	}
	// In place when it keeps its place (its Machine and age), which a
	// server does: no merge for every update of every Machine.
	if i, ok := v.index[s.ID]; ok && v.merged[i].Machine == s.Machine && v.merged[i].CreatedAt.Equal(s.CreatedAt) {
		v.merged[i] = s
		return
	}
	v.merged = nil
}

// WasDeleted reports whether the provider deleted the server itself, within
// the write grace: such a server is gone, and need not be looked up again.
func (v *View) WasDeleted(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.written[id]
	return ok && w.server == nil && v.now().Sub(w.at) <= v.o.WriteGrace
}

// Lists counts the list calls the view made, for tests and benchmarks.
func (v *View) Lists() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lists
}

// fresh makes sure the view can answer for a Machine of zone from a list
// no older than maxAge (0: the refresh interval), listing when it must: nil
// when it can, from its last list while a failing refresh leaves that
// within MaxStale.
func (v *View) fresh(ctx context.Context, maxAge time.Duration, zone string) error {
	if maxAge <= 0 {
		maxAge = v.o.Refresh
	}
	return v.listedSince(ctx, v.now().Add(-maxAge), false, zone)
}

// listedSince makes sure the view answers for a Machine of zone from a
// list that started at or after since, listing when it must, and sharing
// each list with every caller it serves: one list serves all the Machines
// that need one at the same time, where a lookup of each would cost a call
// of each.
//
// Strict, the answer is as of since: a list that began earlier, even one
// still running, does not count, and a failed list is an error (the
// Machines deleted together need the cluster's servers as they are now).
// Else a running list is taken as it is, and a failed one leaves the view
// answering from its last list while that is within MaxStale. Either way,
// a list that failed in some zones only answers for the others
// (zoneErr).
//
// The list runs on its own (runShared): a caller that gives up stops
// waiting, the others still get their answer.
func (v *View) listedSince(ctx context.Context, since time.Time, strict bool, zone string) error {
	failed := v.staleOrErr
	if strict {
		failed = v.listErr
	}
	for {
		v.mu.Lock()
		if v.servers != nil && !v.listedAt.Before(since) {
			err := v.zoneErr(zone, strict)
			v.mu.Unlock()
			return err
		}
		if v.lastErr != nil && v.now().Before(v.retryAt) {
			err := failed()
			if err == nil {
				err = v.zoneErr(zone, strict)
			}
			v.mu.Unlock()
			return err
		}
		run := v.listRun(ctx)
		v.mu.Unlock()
		select {
		case <-run.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if strict && run.start.Before(since) {
			// It began too early to answer: the next one.
			continue
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		if run.err != nil {
			if err := failed(); err != nil {
				return err
			}
		}
		return v.zoneErr(zone, strict)
	}
}

// listRun is one list of the cluster's servers; done closes when it ends,
// with err set (nil for a list that failed in some zones only).
type listRun struct {
	start time.Time
	done  chan struct{}
	err   error
}

// listRun returns the running list, or starts one. Callers hold mu.
func (v *View) listRun(ctx context.Context) *listRun {
	if v.inFlight != nil {
		return v.inFlight
	}
	run := &listRun{start: v.now(), done: make(chan struct{})}
	v.inFlight = run
	var list []Server
	runShared(ctx, "listing the servers of cluster "+v.sel.ClusterID, func(ctx context.Context) (err error) {
		list, err = v.client.ListServers(ctx, v.sel)
		return err
	}, func(err error) { v.listed(run, list, err) })
	return run
}

// listed takes a list's outcome into the view and lets its waiters go.
func (v *View) listed(run *listRun, list []Server, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	defer close(run.done)
	v.inFlight = nil
	v.lists++
	var partial *PartialListError
	if err != nil && errors.As(err, &partial) {
		v.takePartial(run, list, partial)
		return
	}
	v.lastErr = err
	run.err = err
	if err != nil {
		v.failWait = min(max(2*v.failWait, minFailWait), maxFailWait)
		wait := v.failWait
		var re *RetryableError
		if errors.As(err, &re) && re.RetryAfter > wait {
			wait = re.RetryAfter
		}
		v.retryAt = v.now().Add(wait)
		return
	}
	v.servers = make(map[string]Server, len(list))
	for _, s := range list {
		v.servers[s.ID] = s
	}
	v.listedAt = run.start
	v.failWait = 0
	v.failedZones = nil
	v.merged = nil
}

// takePartial takes a list that some zones did not answer: the servers of
// the others as listed, those of the failing zones as last listed, and the
// failing zones remembered with when they were last listed. Callers hold
// mu.
func (v *View) takePartial(run *listRun, list []Server, partial *PartialListError) {
	failed := map[string]zoneFailure{}
	for _, f := range partial.Failed {
		prev, known := v.failedZones[f.Zone]
		goodAt := prev.goodAt
		if !known && v.servers != nil {
			goodAt = v.listedAt
		}
		failed[f.Zone] = zoneFailure{err: f, goodAt: goodAt}
	}
	servers := make(map[string]Server, len(list)+len(v.servers))
	for id, s := range v.servers {
		if _, ok := failed[s.Zone]; ok {
			servers[id] = s
		}
	}
	for _, s := range list {
		servers[s.ID] = s
	}
	v.servers = servers
	v.listedAt = run.start
	v.lastErr = nil
	v.failWait = 0
	v.failedZones = failed
	v.merged = nil
}

// zoneErr says whether the view cannot answer for a Machine of zone ("":
// unknown, allZones: the caller reports failed zones itself) because its
// lists fail there: strict, when the zone failed at all; else when its last
// good list is past MaxStale. Callers hold mu.
func (v *View) zoneErr(zone string, strict bool) error {
	if zone == allZones || len(v.failedZones) == 0 {
		return nil
	}
	var bad []*ZoneError
	for z, f := range v.failedZones {
		if zone != "" && z != zone {
			continue
		}
		if !strict && !f.goodAt.IsZero() && v.now().Sub(f.goodAt) < v.o.MaxStale {
			continue
		}
		bad = append(bad, f.err)
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("listing the servers of cluster %s: %w", v.sel.ClusterID, v.partial(bad))
}

// partial is the view's failing zones (those of only, when given) as one
// error, in the order of their names. Callers hold mu.
func (v *View) partial(only []*ZoneError) *PartialListError {
	if only == nil {
		for _, f := range v.failedZones {
			only = append(only, f.err)
		}
	}
	sort.Slice(only, func(i, j int) bool { return only[i].Zone < only[j].Zone })
	return &PartialListError{Failed: only}
}

// listErr is the last list's error. Callers hold mu.
func (v *View) listErr() error {
	return fmt.Errorf("listing the servers of cluster %s: %w", v.sel.ClusterID, v.lastErr)
}

// staleOrErr says whether the view may answer from its last list after a
// failed refresh: while that list is not too old. Callers hold mu.
func (v *View) staleOrErr() error {
	if v.servers != nil && v.now().Sub(v.listedAt) < v.o.MaxStale {
		return nil
	}
	return v.listErr()
}

// merge makes merged and byMachine current: the last list with the
// provider's own writes. Callers hold mu.
func (v *View) merge() {
	now := v.now()
	if v.merged != nil && !now.After(v.mergedUntil) {
		return
	}
	all := make(map[string]Server, len(v.servers)+len(v.written))
	for id, s := range v.servers {
		all[id] = s
	}
	var until time.Time
	for id, w := range v.written {
		// A list that started after the write and agrees with it makes
		// the write redundant; one that disagrees wins after the grace.
		_, inList := v.servers[id]
		switch {
		case now.Sub(w.at) > v.o.WriteGrace:
			delete(v.written, id)
			continue
		case w.server == nil:
			delete(all, id)
		case !inList:
			all[id] = *w.server
		case !v.listedAt.Before(w.at):
			delete(v.written, id)
			continue
		}
		if end := w.at.Add(v.o.WriteGrace); until.IsZero() || end.Before(until) {
			until = end
		}
	}
	if until.IsZero() {
		// No write to expire: good until the next list or write.
		until = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	merged := make([]Server, 0, len(all))
	for _, s := range all {
		merged = append(merged, s)
	}
	sort.Slice(merged, func(i, j int) bool {
		if !merged[i].CreatedAt.Equal(merged[j].CreatedAt) {
			return merged[i].CreatedAt.Before(merged[j].CreatedAt)
		}
		return merged[i].ID < merged[j].ID
	})
	byMachine := make(map[string][]int)
	index := make(map[string]int, len(merged))
	for i, s := range merged {
		byMachine[s.Machine] = append(byMachine[s.Machine], i)
		index[s.ID] = i
	}
	v.merged, v.byMachine, v.index, v.mergedUntil = merged, byMachine, index, until
}
