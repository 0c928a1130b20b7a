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

// Machine returns the servers of one Machine, oldest first.
func (v *View) Machine(ctx context.Context, name string) ([]Server, error) {
	if err := v.fresh(ctx, 0); err != nil {
		return nil, err
	}
	return v.machine(name), nil
}

// MachineNow returns the servers of one Machine, oldest first, from a list
// that started after the call: as direct as a lookup of the Machine's own,
// but shared by every caller that list serves (the Machines deleted
// together). A failed list is an error, never an older list's answer.
func (v *View) MachineNow(ctx context.Context, name string) ([]Server, error) {
	if err := v.listedSince(ctx, v.now(), true); err != nil {
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
// older than maxAge (0: the view's refresh interval).
func (v *View) All(ctx context.Context, maxAge time.Duration) ([]Server, error) {
	if err := v.fresh(ctx, maxAge); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.merge()
	return append([]Server(nil), v.merged...), nil
}

// Get returns the server with the ID if the view has it.
func (v *View) Get(ctx context.Context, id string) (*Server, bool, error) {
	if err := v.fresh(ctx, 0); err != nil {
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

// fresh makes sure the view can answer from a list no older than maxAge
// (0: the refresh interval), listing when it must: nil when it can, from
// its last list while a failing refresh leaves that within MaxStale.
func (v *View) fresh(ctx context.Context, maxAge time.Duration) error {
	if maxAge <= 0 {
		maxAge = v.o.Refresh
	}
	return v.listedSince(ctx, v.now().Add(-maxAge), false)
}

// listedSince makes sure the view answers from a list that started at or
// after since, listing when it must, and sharing each list with every caller it
// serves: one list serves all the Machines that need one at the same time,
// where a lookup of each would cost a call of each.
//
// Strict, the answer is as of since: a list that began earlier, even one
// still running, does not count, and a failed list is an error (the
// Machines deleted together need the cluster's servers as they are now).
// Else a running list is taken as it is, and a failed one leaves the view
// answering from its last list while that is within MaxStale.
func (v *View) listedSince(ctx context.Context, since time.Time, strict bool) error {
	failed := v.staleOrErr
	if strict {
		failed = v.listErr
	}
	for {
		v.mu.Lock()
		if v.servers != nil && !v.listedAt.Before(since) {
			v.mu.Unlock()
			return nil
		}
		if v.lastErr != nil && v.now().Before(v.retryAt) {
			err := failed()
			v.mu.Unlock()
			return err
		}
		run, mine := v.listRun()
		v.mu.Unlock()
		if err := v.await(ctx, run, mine); err != nil {
			return err
		}
		if strict && run.start.Before(since) {
			// It began too early to answer: the next one.
			continue
		}
		if run.err != nil {
			v.mu.Lock()
			defer v.mu.Unlock()
			return failed()
		}
		return nil
	}
}

// listRun is one list of the cluster's servers; done closes when it ends,
// with err set.
type listRun struct {
	start time.Time
	done  chan struct{}
	err   error
}

// listRun returns the running list, or a new one the caller is to run
// (mine). Callers hold mu.
func (v *View) listRun() (run *listRun, mine bool) {
	if v.inFlight != nil {
		return v.inFlight, false
	}
	v.inFlight = &listRun{start: v.now(), done: make(chan struct{})}
	return v.inFlight, true
}

// await runs the list if it is the caller's, else waits for it to end.
func (v *View) await(ctx context.Context, run *listRun, mine bool) error {
	if mine {
		v.list(ctx, run)
		return nil
	}
	select {
	case <-run.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (v *View) list(ctx context.Context, run *listRun) {
	list, err := v.client.ListServers(ctx, v.sel)

	v.mu.Lock()
	defer v.mu.Unlock()
	v.inFlight = nil
	v.lists++
	v.lastErr = err
	run.err = err
	if err == nil {
		v.servers = make(map[string]Server, len(list))
		for _, s := range list {
			v.servers[s.ID] = s
		}
		v.listedAt = run.start
		v.failWait = 0
		v.merged = nil
	} else if ctx.Err() == nil {
		v.failWait = min(max(2*v.failWait, minFailWait), maxFailWait)
		wait := v.failWait
		var re *RetryableError
		if errors.As(err, &re) && re.RetryAfter > wait {
			wait = re.RetryAfter
		}
		v.retryAt = v.now().Add(wait)
	}
	close(run.done)
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
