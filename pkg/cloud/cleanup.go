package cloud

import (
	"context"
	"sync"
	"time"
)

// groupCleanup shares the cleanup of one cluster's empty anti-affinity
// groups among everyone who needs it: when many Machines are deleted
// together, each one's delete needs a cleanup that began after its servers
// were gone, and one such cleanup serves them all. A cleanup of each would
// cost several calls of each (a list, a read per empty group, the
// deletes); under a storm of 429s, where every 429 closes the account's
// gate for everyone, sequences that long rarely get through and the
// Machines stayed in Deleting for as long as the storm lasted (found by
// `make chaos`, Exoscale, 20 Machines).
type groupCleanup struct {
	mu sync.Mutex
	// done is when the last successful cleanup began.
	done    time.Time
	running *cleanupRun
}

type cleanupRun struct {
	start   time.Time
	end     chan struct{}
	err     error
	deleted []string
}

// CleanupGroups deletes the cluster's empty anti-affinity groups of the
// provider older than minAge (Client.CleanupGroups) unless a cleanup that
// began at or after since has succeeded; a running one that began early
// enough is waited for. A zero since asks for a cleanup that begins after
// the call. It returns the groups deleted by the cleanup this call started
// (nil when it shared another's), and the error of the cleanup it relied
// on. The cleanup runs on its own (runShared): a caller that gives up
// stops waiting, and neither its cancellation nor a panic of the cleanup
// leaves the others waiting.
func (v *View) CleanupGroups(ctx context.Context, since time.Time, minAge time.Duration) ([]string, error) {
	c := &v.cleanup
	if since.IsZero() {
		since = v.now()
	}
	for {
		c.mu.Lock()
		if !c.done.Before(since) {
			c.mu.Unlock()
			return nil, nil
		}
		run, mine := c.running, false
		if run == nil {
			run, mine = &cleanupRun{start: v.now(), end: make(chan struct{})}, true
			c.running = run
			runShared(ctx, "cleaning up the anti-affinity groups of cluster "+v.sel.ClusterID, func(ctx context.Context) (err error) {
				run.deleted, err = v.client.CleanupGroups(ctx, v.sel.ClusterID, minAge)
				return err
			}, func(err error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				run.err = err
				c.running = nil
				if err == nil && run.start.After(c.done) {
					c.done = run.start
				}
				close(run.end)
			})
		}
		c.mu.Unlock()
		select {
		case <-run.end:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if mine {
			return run.deleted, run.err
		}
		if run.start.Before(since) {
			// It began too early to count: the next one.
			continue
		}
		return nil, run.err
	}
}
