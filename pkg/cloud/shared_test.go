package cloud

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// panicClient panics in each of its calls.
type panicClient struct{ Client }

func (panicClient) ListServers(context.Context, Selector) ([]Server, error) { panic("list bug") }
func (panicClient) CleanupGroups(context.Context, string, time.Duration) ([]string, error) {
	panic("cleanup bug")
}

// The list every Machine of a cluster waits for is not its first caller's:
// the first one giving up (its reconcile's context ends) leaves the list
// running for the others, who get its answer.
func TestSharedListOutlivesItsFirstCaller(t *testing.T) {
	block, started := make(chan struct{}), make(chan struct{})
	c := &listClient{block: block, started: started}
	c.set(srv("1", "a"))
	v, _ := newTestView(c, ViewOptions{})
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := v.Machine(first, "a")
		firstErr <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		got, err := v.Machine(context.Background(), "a")
		if err == nil && len(got) != 1 {
			err = errors.New("no server")
		}
		second <- err
	}()
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the first caller, cancelled: %v", err)
	}
	close(block)
	if err := <-second; err != nil {
		t.Errorf("the second caller got %v: the first caller's cancel ended the list it shared", err)
	}
	if n := c.lists.Load(); n != 1 {
		t.Errorf("%d lists, want 1", n)
	}
}

// A panic in the shared list or the shared cleanup releases every caller
// with an error, instead of leaving them waiting for good.
func TestPanicInASharedRunReleasesItsWaiters(t *testing.T) {
	v, _ := newTestView(panicClient{}, ViewOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 4)
	for range 2 {
		go func() {
			_, err := v.Machine(ctx, "a")
			errs <- err
		}()
		go func() {
			_, err := v.CleanupGroups(ctx, time.Time{}, time.Minute)
			errs <- err
		}()
	}
	for range 4 {
		err := <-errs
		var pe *PanicError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "bug") {
			t.Errorf("a caller got %v, want the panic as an error", err)
		}
	}
	// And the next caller tries again.
	if _, err := v.CleanupGroups(ctx, time.Time{}, time.Minute); err == nil {
		t.Error("a cleanup after a panicked one did not run again")
	}
}

// A cleanup shared by Machines deleted together is not its first caller's
// either.
func TestSharedCleanupOutlivesItsFirstCaller(t *testing.T) {
	block, started := make(chan struct{}), make(chan struct{})
	c := &cleanupClient{block: block, started: started}
	v, clock := newTestView(c, ViewOptions{})
	since := clock.now()
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := v.CleanupGroups(first, since, time.Minute)
		firstErr <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		_, err := v.CleanupGroups(context.Background(), since, time.Minute)
		second <- err
	}()
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the first caller, cancelled: %v", err)
	}
	close(block)
	if err := <-second; err != nil {
		t.Errorf("the second caller: %v", err)
	}
}

// A slow catalogue fetch holds no lock: a caller may give up waiting for
// it, and what the catalogue holds can be read meanwhile.
func TestCatalogFetchHoldsNoLock(t *testing.T) {
	var c Catalog[string]
	now := time.Unix(1000, 0)
	release := make(chan struct{})
	fetching := make(chan struct{})
	slow := func(ctx context.Context) ([]string, error) {
		close(fetching)
		<-release
		return []string{"a"}, nil
	}
	done := make(chan []string, 1)
	go func() {
		got, _ := c.Get(context.Background(), now, time.Minute, slow)
		done <- got
	}()
	<-fetching
	read := make(chan struct{})
	go func() {
		_ = c.Cached()
		close(read)
	}()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("reading the catalogue waited for the fetch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Get(ctx, now, time.Minute, slow); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a caller that gave up got %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("giving up took %s", took)
	}
	close(release)
	if got := <-done; len(got) != 1 {
		t.Errorf("the fetch answered %v", got)
	}
}
