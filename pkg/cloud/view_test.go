package cloud

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// listClient is a Client whose only real method is ListServers, answering
// from servers; block, when set, holds each list until it is closed. The
// View is tested on its own here; the clouds' clients are tested against
// their emulators.
type listClient struct {
	Client
	mu      sync.Mutex
	servers []Server
	err     error
	block   chan struct{}
	started chan struct{}
	lists   atomic.Int32
}

func (c *listClient) ListServers(ctx context.Context, sel Selector) ([]Server, error) {
	c.lists.Add(1)
	c.mu.Lock()
	out, err, block, started := append([]Server{}, c.servers...), c.err, c.block, c.started
	c.block, c.started = nil, nil
	c.mu.Unlock()
	if started != nil {
		close(started)
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, err
}

func (c *listClient) set(servers ...Server) {
	c.mu.Lock()
	c.servers = servers
	c.mu.Unlock()
}

func srv(id, machine string) Server { return Server{ID: id, Machine: machine, ClusterID: "c"} }

func ids(servers []Server) map[string]bool {
	out := map[string]bool{}
	for _, s := range servers {
		out[s.ID] = true
	}
	return out
}

// together runs fn n times at once while the call they share is held
// (started closes when it begins, block holds it), lets it go once they all
// had time to ask, and waits for them.
func together(n int, started, block chan struct{}, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	<-started
	time.Sleep(50 * time.Millisecond)
	close(block)
	wg.Wait()
}

func newTestView(c Client, o ViewOptions) (*View, *fakeClock) {
	v := NewView(c, "c", o)
	clock := newClock()
	v.now = clock.now
	return v, clock
}

func TestViewListsOncePerRefresh(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"), srv("2", "b"))
	v, clock := newTestView(c, ViewOptions{Refresh: 10 * time.Second})
	ctx := context.Background()
	for i := range 100 {
		got, err := v.Machine(ctx, []string{"a", "b", "x"}[i%3])
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 && len(got) != 0 {
			t.Fatalf("Machine(x) = %v", got)
		}
	}
	if n := c.lists.Load(); n != 1 {
		t.Errorf("100 lookups made %d lists, want 1", n)
	}
	clock.add(11 * time.Second)
	if _, err := v.Machine(ctx, "a"); err != nil || c.lists.Load() != 2 {
		t.Errorf("a lookup after the refresh interval made %d lists in all (%v), want 2", c.lists.Load(), err)
	}
}

func TestViewConcurrentLookupsShareOneList(t *testing.T) {
	block, started := make(chan struct{}), make(chan struct{})
	c := &listClient{block: block, started: started}
	c.set(srv("1", "a"))
	v, _ := newTestView(c, ViewOptions{})
	together(20, started, block, func(int) {
		if got, err := v.Machine(context.Background(), "a"); err != nil || len(got) != 1 {
			t.Errorf("lookup = %v, %v", got, err)
		}
	})
	if n := c.lists.Load(); n != 1 {
		t.Errorf("20 concurrent lookups made %d lists, want 1", n)
	}
}

// A server created while a list is on its way, which the list does not
// show, stays in the view: it is never taken for missing.
func TestViewKeepsACreateThatRacesARefresh(t *testing.T) {
	c := &listClient{}
	v, clock := newTestView(c, ViewOptions{Refresh: time.Second})
	ctx := context.Background()
	if _, err := v.All(ctx, 0); err != nil {
		t.Fatal(err)
	}
	clock.add(2 * time.Second)
	block, started := make(chan struct{}), make(chan struct{})
	c.mu.Lock()
	c.block, c.started = block, started
	c.mu.Unlock()
	done := make(chan []Server)
	go func() {
		got, _ := v.Machine(ctx, "a")
		done <- got
	}()
	<-started
	clock.add(100 * time.Millisecond)
	v.Created(srv("new", "a")) // the create completes while the list runs
	close(block)
	if got := <-done; !ids(got)["new"] {
		t.Errorf("the lookup behind the racing list = %v, want the new server", got)
	}
	// Later lists that still do not show it (an API that lags) do not
	// make it vanish within the grace period.
	clock.add(2 * time.Second)
	if got, _ := v.Machine(ctx, "a"); !ids(got)["new"] {
		t.Errorf("a lagging list hid the new server: %v", got)
	}
	// Once a list shows it, the list speaks.
	c.set(srv("new", "a"))
	clock.add(2 * time.Second)
	if got, _ := v.Machine(ctx, "a"); len(got) != 1 {
		t.Errorf("got %v", got)
	}
	// Deleted out of band after that, it is gone with the next list.
	c.set()
	clock.add(2 * time.Second)
	if got, _ := v.Machine(ctx, "a"); len(got) != 0 {
		t.Errorf("a server deleted out of band is still seen: %v", got)
	}
}

func TestViewHidesADeleteAtOnce(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"))
	v, clock := newTestView(c, ViewOptions{Refresh: time.Second, WriteGrace: 30 * time.Second})
	ctx := context.Background()
	if got, _ := v.Machine(ctx, "a"); len(got) != 1 {
		t.Fatal(got)
	}
	v.Deleted("1")
	if got, _ := v.Machine(ctx, "a"); len(got) != 0 {
		t.Errorf("deleted server still seen: %v", got)
	}
	clock.add(5 * time.Second) // a list still shows it (a server being torn down)
	if got, _ := v.Machine(ctx, "a"); len(got) != 0 {
		t.Errorf("deleted server back from a lagging list: %v", got)
	}
}

func TestViewAnswersStaleThenFailsAndBacksOff(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"))
	v, clock := newTestView(c, ViewOptions{Refresh: time.Second, MaxStale: time.Minute})
	ctx := context.Background()
	if _, err := v.Machine(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.err = &RetryableError{Err: errors.New("503")}
	c.mu.Unlock()
	clock.add(2 * time.Second)
	if got, err := v.Machine(ctx, "a"); err != nil || len(got) != 1 {
		t.Errorf("a failed refresh within MaxStale = %v, %v; want the last list", got, err)
	}
	lists := c.lists.Load()
	for range 50 {
		_, _ = v.Machine(ctx, "a")
	}
	if n := c.lists.Load() - lists; n != 0 {
		t.Errorf("%d more lists right after a failed one, want none before the view's backoff", n)
	}
	clock.add(2 * time.Minute)
	if _, err := v.Machine(ctx, "a"); err == nil {
		t.Error("a view whose lists fail for longer than MaxStale still answers")
	}
}
