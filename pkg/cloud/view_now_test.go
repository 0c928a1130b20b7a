package cloud

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A delete's lookup is as direct as a list of its own: never the answer of
// a list that began before the lookup, even one still running, and never
// an older list's answer when the new one fails.
func TestMachineNowAnswersOnlyFromALaterList(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"))
	v, clock := newTestView(c, ViewOptions{Refresh: time.Minute})
	ctx := context.Background()
	if _, err := v.Machine(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// A second server of the Machine appears (a create whose answer was
	// lost): the view, fresh enough for lookups, does not show it yet.
	c.set(srv("1", "a"), srv("2", "a"))
	clock.add(time.Millisecond)
	if got, _ := v.Machine(ctx, "a"); len(got) != 1 {
		t.Fatalf("Machine = %v, want the last list's one server", got)
	}
	got, err := v.MachineNow(ctx, "a")
	if err != nil || len(got) != 2 {
		t.Fatalf("MachineNow = %v, %v; want both servers from a new list", got, err)
	}

	// A list that began before the call, still running, does not count.
	block, started := make(chan struct{}), make(chan struct{})
	c.mu.Lock()
	c.block, c.started = block, started
	c.mu.Unlock()
	clock.add(2 * time.Minute)
	early := make(chan error, 1)
	go func() { _, err := v.All(ctx, 0); early <- err }()
	<-started
	c.set(srv("1", "a"), srv("2", "a"), srv("3", "a"))
	clock.add(time.Millisecond)
	late := make(chan []Server, 1)
	go func() { got, _ := v.MachineNow(ctx, "a"); late <- got }()
	time.Sleep(50 * time.Millisecond)
	close(block)
	if err := <-early; err != nil {
		t.Fatal(err)
	}
	if got := <-late; len(got) != 3 {
		t.Errorf("MachineNow during an earlier list = %d servers, want 3 from a list of its own", len(got))
	}

	c.mu.Lock()
	c.err = &RetryableError{Err: errors.New("503")}
	c.mu.Unlock()
	clock.add(time.Millisecond)
	if _, err := v.MachineNow(ctx, "a"); err == nil {
		t.Error("MachineNow after a failed list answered from an older one")
	}
	if got, err := v.Machine(ctx, "a"); err != nil || len(got) != 3 {
		t.Errorf("Machine after a failed list = %v, %v; want the last list within MaxStale", got, err)
	}
}

// Machines deleted together share the list that began after all of them
// asked.
func TestMachineNowSharesOneList(t *testing.T) {
	block, started := make(chan struct{}), make(chan struct{})
	c := &listClient{block: block, started: started}
	c.set(srv("1", "a"), srv("2", "b"))
	v, _ := newTestView(c, ViewOptions{})
	together(20, started, block, func(i int) {
		name := []string{"a", "b"}[i%2]
		if got, err := v.MachineNow(context.Background(), name); err != nil || len(got) != 1 || got[0].Machine != name {
			t.Errorf("MachineNow(%s) = %v, %v", name, got, err)
		}
	})
	if n := c.lists.Load(); n != 1 {
		t.Errorf("20 lookups at the same moment made %d lists, want 1", n)
	}
}
