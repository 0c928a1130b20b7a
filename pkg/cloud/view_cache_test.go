package cloud

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The existence check that follows the provider's own delete needs no
// lookup of the server: the view knows it is gone, for the write grace.
func TestViewKnowsWhatItDeleted(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"), srv("2", "b"))
	v, clock := newTestView(c, ViewOptions{Refresh: time.Second, WriteGrace: 30 * time.Second})
	if _, err := v.Machine(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	v.Deleted("1")
	v.Created(srv("3", "c"))
	if !v.WasDeleted("1") {
		t.Error("WasDeleted(1) = false right after Deleted(1)")
	}
	for _, id := range []string{"2", "3", "unknown"} {
		if v.WasDeleted(id) {
			t.Errorf("WasDeleted(%s) = true for a server the provider did not delete", id)
		}
	}
	clock.add(31 * time.Second)
	if v.WasDeleted("1") {
		t.Error("WasDeleted(1) still true after the write grace: the lists speak again")
	}
}

// A server the provider created stands in the view for the write grace,
// even when no list comes in between to say otherwise.
func TestViewForgetsAWriteAfterItsGrace(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"))
	v, clock := newTestView(c, ViewOptions{Refresh: time.Hour, WriteGrace: 30 * time.Second})
	ctx := context.Background()
	if _, err := v.Machine(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	v.Created(srv("2", "a"))
	if got, _ := v.Machine(ctx, "a"); len(got) != 2 {
		t.Fatalf("right after the create: %v, want both servers", got)
	}
	clock.add(29 * time.Second)
	if got, _ := v.Machine(ctx, "a"); len(got) != 2 {
		t.Errorf("within the grace: %v, want both servers", got)
	}
	clock.add(2 * time.Second)
	if got, _ := v.Machine(ctx, "a"); len(got) != 1 || got[0].ID != "1" {
		t.Errorf("after the grace, with a list that never showed it: %v, want only server 1", got)
	}
	if n := c.lists.Load(); n != 1 {
		t.Errorf("%d lists, want 1", n)
	}
}

// A lookup hands out its own slice: what the caller does with it (the
// actuator appends to it) never reaches the view.
func TestViewLookupsAreCopies(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"), srv("2", "a"), srv("3", "b"))
	v, _ := newTestView(c, ViewOptions{})
	ctx := context.Background()
	got, err := v.Machine(ctx, "a")
	if err != nil || len(got) != 2 {
		t.Fatal(got, err)
	}
	got[0].ID = "changed"
	_ = append(got[:1], srv("x", "a"))
	again, _ := v.Machine(ctx, "a")
	if len(again) != 2 || again[0].ID != "1" || again[1].ID != "2" {
		t.Errorf("the view changed with the caller's slice: %v", again)
	}
}

// BenchmarkViewMachine is one existence check in a cluster of 1000 servers:
// it must not cost a copy of the whole list.
func BenchmarkViewMachine(b *testing.B) {
	c := &listClient{}
	var servers []Server
	for i := range 1000 {
		servers = append(servers, srv(fmt.Sprint(i), fmt.Sprint("m", i)))
	}
	c.set(servers...)
	v := NewView(c, "c", ViewOptions{Refresh: time.Hour})
	ctx := context.Background()
	v.Created(srv("new", "m-new"))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := v.Machine(ctx, fmt.Sprint("m", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
}

// A fresher record of a server the view holds replaces its old one, and
// that is all: it adds no server and extends no write's grace.
func TestViewTakesFresherRecords(t *testing.T) {
	c := &listClient{}
	c.set(srv("1", "a"))
	v, clock := newTestView(c, ViewOptions{Refresh: time.Hour, WriteGrace: 30 * time.Second})
	ctx := context.Background()
	if _, err := v.Machine(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	stub := srv("2", "b")
	v.Created(stub)
	clock.add(20 * time.Second)
	full := stub
	full.Status = "running"
	v.Observed(full)
	listed := srv("1", "a")
	listed.Status = "running"
	v.Observed(listed)
	v.Observed(srv("3", "c"))
	if got, _ := v.Machine(ctx, "b"); len(got) != 1 || got[0].Status != "running" {
		t.Errorf("Machine(b) = %v, want the fresher record", got)
	}
	if got, _ := v.Machine(ctx, "a"); len(got) != 1 || got[0].Status != "running" {
		t.Errorf("Machine(a) = %v, want the fresher record", got)
	}
	if got, _ := v.Machine(ctx, "c"); len(got) != 0 {
		t.Errorf("a server the view never held was added: %v", got)
	}
	clock.add(11 * time.Second)
	if got, _ := v.Machine(ctx, "b"); len(got) != 0 {
		t.Errorf("the write's grace was extended by a fresher record: %v", got)
	}
}
