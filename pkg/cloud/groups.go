package cloud

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Group is an anti-affinity group as packing sees it, on any cloud.
type Group struct {
	ID   string
	Name string
	Zone string
	// Key is the antiAffinityKey the provider made the group for; "" for
	// groups it did not make (a user's), which packing never touches.
	Key       string
	ClusterID string
	// Members are the IDs of the servers in the group.
	Members   []string
	CreatedAt time.Time
}

// GroupKey names the groups of one antiAffinityKey of one cluster in one
// zone. A client is per account, so with it a key is per (account,
// cluster, key, zone).
type GroupKey struct {
	ClusterID, Key, Zone string
}

// GroupName is the name of the n-th group of a key, on every cloud:
// <cluster>-<key>-<n>.
func GroupName(k GroupKey, n int) string {
	return fmt.Sprintf("%s-%s-%d", k.ClusterID, k.Key, n)
}

// Placement says where the next server of a key goes: into the oldest group
// of the key in the zone that has room (ID set), or into a new group named
// NewName when all are full.
type Placement struct {
	ID      string
	NewName string
}

// Place packs servers into the groups of a key, at most capacity each: the
// oldest group with room first, so that groups fill up before new ones are
// opened and a scale-down empties the newest. groups may hold any groups; only
// those of the key and zone count. New groups are numbered after the key's
// groups in the zone, skipping names in use.
func Place(groups []Group, k GroupKey, capacity int) Placement {
	var mine []Group
	names := map[string]bool{}
	for _, g := range groups {
		names[g.Name] = true
		if g.Key == k.Key && g.ClusterID == k.ClusterID && g.Zone == k.Zone {
			mine = append(mine, g)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].CreatedAt.Before(mine[j].CreatedAt) })
	for _, g := range mine {
		if len(g.Members) < capacity {
			return Placement{ID: g.ID}
		}
	}
	n := len(mine) + 1
	for names[GroupName(k, n)] {
		n++
	}
	return Placement{NewName: GroupName(k, n)}
}

// EmptyGroups are the provider's groups of a cluster without members,
// older than minAge (a group just made may be about to receive its first
// server, from this process or another).
func EmptyGroups(groups []Group, clusterID string, minAge time.Duration, now time.Time) []Group {
	var out []Group
	for _, g := range groups {
		if g.Key == "" || g.ClusterID != clusterID || len(g.Members) > 0 || now.Sub(g.CreatedAt) < minAge {
			continue
		}
		out = append(out, g)
	}
	return out
}

// GroupLocks serialise, within this process, choosing or creating a group
// of a key and creating the server in it, so that concurrent creates fill a
// group before opening the next one and no group is deleted while a server
// is on its way into it. Channels rather than mutexes, so that a caller
// whose context ends stops waiting.
type GroupLocks struct {
	mu    sync.Mutex
	locks map[GroupKey]chan struct{}
	// gone holds the groups this process deleted (or found gone), by ID,
	// and when: the Machines whose deletes emptied a group together each
	// mean to delete it, one after the other under the key's lock, and
	// all but the first need not look at it again.
	gone map[string]time.Time
}

// goneFor is how long a deleted group is remembered; IDs are never reused.
const goneFor = 10 * time.Minute

// Gone records that the group with the ID no longer exists.
func (l *GroupLocks) Gone(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.gone == nil {
		l.gone = map[string]time.Time{}
	}
	for g, at := range l.gone {
		if now.Sub(at) > goneFor {
			delete(l.gone, g)
		}
	}
	l.gone[id] = now
}

// DeleteUnlessGone runs del, which deletes the group with the ID if it is
// empty, under the key's lock, unless the group is known gone (before or
// after the wait for the lock).
func (l *GroupLocks) DeleteUnlessGone(ctx context.Context, k GroupKey, id string, del func() (bool, error)) (bool, error) {
	if l.IsGone(id) {
		return false, nil
	}
	unlock, err := l.Lock(ctx, k)
	if err != nil {
		return false, err
	}
	defer unlock()
	if l.IsGone(id) {
		return false, nil
	}
	return del()
}

// IsGone reports whether Gone recorded the group.
func (l *GroupLocks) IsGone(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.gone[id]
	return ok
}

// Lock takes the lock of k; unlock gives it back.
func (l *GroupLocks) Lock(ctx context.Context, k GroupKey) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[GroupKey]chan struct{}{}
	}
	ch := l.locks[k]
	if ch == nil {
		ch = make(chan struct{}, 1)
		l.locks[k] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the anti-affinity groups of %q in %s: %w", k.Key, k.Zone, ctx.Err())
	}
}
