package cloud

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cleanupClient counts CleanupGroups calls; block, when set, holds the
// next one until it is closed.
type cleanupClient struct {
	Client
	mu      sync.Mutex
	err     error
	block   chan struct{}
	started chan struct{}
	calls   atomic.Int32
}

func (c *cleanupClient) CleanupGroups(ctx context.Context, clusterID string, minAge time.Duration) ([]string, error) {
	c.calls.Add(1)
	c.mu.Lock()
	err, block, started := c.err, c.block, c.started
	c.block, c.started = nil, nil
	c.mu.Unlock()
	if started != nil {
		close(started)
	}
	if block != nil {
		<-block
	}
	if err != nil {
		return nil, err
	}
	return []string{"g"}, nil
}

func TestCleanupGroupsIsSharedByTheCallersItServes(t *testing.T) {
	block, started := make(chan struct{}), make(chan struct{})
	c := &cleanupClient{block: block, started: started}
	v, clock := newTestView(c, ViewOptions{})
	ctx := context.Background()
	since := clock.now()

	// 20 Machines whose servers went at the same moment: one cleanup, and
	// only the caller that ran it reports what it deleted.
	var reported atomic.Int32
	together(20, started, block, func(int) {
		deleted, err := v.CleanupGroups(ctx, since, time.Minute)
		if err != nil {
			t.Error(err)
		}
		reported.Add(int32(len(deleted)))
	})
	if n := c.calls.Load(); n != 1 {
		t.Errorf("20 callers made %d cleanups, want 1", n)
	}
	if n := reported.Load(); n != 1 {
		t.Errorf("the deleted group was reported %d times, want once", n)
	}

	// Covered already: no call.
	if _, err := v.CleanupGroups(ctx, since, time.Minute); err != nil || c.calls.Load() != 1 {
		t.Errorf("a caller the last cleanup covers made a call (%d in all, %v)", c.calls.Load(), err)
	}

	// A cleanup that began before the caller's servers went does not
	// count, even while it runs: the caller waits for it, then runs its own.
	block, started = make(chan struct{}), make(chan struct{})
	c.mu.Lock()
	c.block, c.started = block, started
	c.mu.Unlock()
	clock.add(time.Second)
	go func() { _, _ = v.CleanupGroups(ctx, time.Time{}, time.Minute) }()
	<-started
	clock.add(time.Second)
	later := make(chan error, 1)
	go func() { _, err := v.CleanupGroups(ctx, clock.now(), time.Minute); later <- err }()
	time.Sleep(50 * time.Millisecond)
	close(block)
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	if n := c.calls.Load(); n != 3 {
		t.Errorf("%d cleanups in all, want 3: the later caller's own after the early one", n)
	}

	// A failed cleanup covers nobody.
	c.mu.Lock()
	c.err = &RetryableError{Err: errors.New("503")}
	c.mu.Unlock()
	clock.add(time.Second)
	if _, err := v.CleanupGroups(ctx, time.Time{}, time.Minute); err == nil {
		t.Fatal("a failed cleanup reported no error")
	}
	c.mu.Lock()
	c.err = nil
	c.mu.Unlock()
	if _, err := v.CleanupGroups(ctx, clock.now(), time.Minute); err != nil || c.calls.Load() != 5 {
		t.Errorf("after a failed cleanup: %d cleanups in all (%v), want 5", c.calls.Load(), err)
	}
}
