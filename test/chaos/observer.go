package chaos

import (
	"context"
	"sort"
	"sync"
	"time"
)

// observer reads the cloud's inventory every few hundred milliseconds, so
// that a duplicate server counts even when the provider deletes it again
// before the phase settles ("no duplicated servers, ever"), and so that
// every group has an age: the clouds do not say when a group was made in a
// way the checks could read on both.
type observer struct {
	cloud Cloud

	mu        sync.Mutex
	last      Inventory
	lastErr   error
	firstSeen map[string]time.Time         // group ID -> when first seen
	servers   map[string]map[string]bool   // this phase: Machine name -> server IDs seen
	serverAt  map[string]map[string]string // this phase: Machine name -> server ID -> when first seen (for reports)
}

func newObserver(c Cloud) *observer {
	return &observer{cloud: c, firstSeen: map[string]time.Time{}, servers: map[string]map[string]bool{}, serverAt: map[string]map[string]string{}}
}

// run observes until ctx ends.
func (o *observer) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		o.observe()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (o *observer) observe() Inventory {
	inv, err := o.cloud.Inventory()
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.lastErr = err
		return o.last
	}
	o.last, o.lastErr = inv, nil
	for _, g := range inv.Groups {
		if _, ok := o.firstSeen[g.ID]; !ok {
			o.firstSeen[g.ID] = now
		}
	}
	for _, s := range inv.Servers {
		if s.ClusterID != ClusterID || s.Machine == "" {
			continue
		}
		if o.servers[s.Machine] == nil {
			o.servers[s.Machine] = map[string]bool{}
			o.serverAt[s.Machine] = map[string]string{}
		}
		if !o.servers[s.Machine][s.ID] {
			o.servers[s.Machine][s.ID] = true
			o.serverAt[s.Machine][s.ID] = now.Format("15:04:05.000")
		}
	}
	return inv
}

// newPhase forgets the servers seen so far.
func (o *observer) newPhase() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.servers = map[string]map[string]bool{}
	o.serverAt = map[string]map[string]string{}
}

// now observes once more and returns the inventory.
func (o *observer) now() (Inventory, error) {
	inv := o.observe()
	o.mu.Lock()
	defer o.mu.Unlock()
	return inv, o.lastErr
}

// duplicatesEver lists the Machines that had more than one server at any
// time of the phase, with their servers and when each was first seen.
func (o *observer) duplicatesEver() map[string][]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]string{}
	for m, ids := range o.servers {
		if len(ids) < 2 {
			continue
		}
		for id := range ids {
			out[m] = append(out[m], id+" (seen "+o.serverAt[m][id]+")")
		}
		sort.Strings(out[m])
	}
	return out
}

// groupAge is how long ago the group was first seen.
func (o *observer) groupAge(id string, now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.firstSeen[id]; ok {
		return now.Sub(t)
	}
	return 0
}
