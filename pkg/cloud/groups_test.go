package cloud

import (
	"context"
	"testing"
	"time"
)

func TestPlaceFillsTheOldestGroupFirst(t *testing.T) {
	k := GroupKey{ClusterID: "c", Key: "w", Zone: "z1"}
	t0 := time.Unix(1000, 0)
	groups := []Group{
		{ID: "new", Name: "c-w-2", Zone: "z1", Key: "w", ClusterID: "c", Members: []string{"a"}, CreatedAt: t0.Add(time.Hour)},
		{ID: "old", Name: "c-w-1", Zone: "z1", Key: "w", ClusterID: "c", Members: []string{"b", "c"}, CreatedAt: t0},
		{ID: "other-zone", Name: "c-w-1", Zone: "z2", Key: "w", ClusterID: "c", CreatedAt: t0},
		{ID: "other-key", Name: "c-x-1", Zone: "z1", Key: "x", ClusterID: "c", CreatedAt: t0},
		{ID: "user", Name: "mine", Zone: "z1", CreatedAt: t0},
	}
	if p := Place(groups, k, 3); p.ID != "old" {
		t.Errorf("Place = %+v, want the oldest group with room", p)
	}
	if p := Place(groups, k, 2); p.ID != "new" {
		t.Errorf("Place with the oldest full = %+v, want the next", p)
	}
	// All full: a new group, named after the key's groups in the zone,
	// skipping names in use anywhere.
	if p := Place(groups, k, 1); p.ID != "" || p.NewName != "c-w-3" {
		t.Errorf("Place with all full = %+v, want a new group c-w-3", p)
	}
	if p := Place(nil, k, 8); p.NewName != "c-w-1" {
		t.Errorf("Place without groups = %+v, want c-w-1", p)
	}
	taken := []Group{{ID: "x", Name: "c-w-1", Zone: "z9"}}
	if p := Place(taken, k, 8); p.NewName != "c-w-2" {
		t.Errorf("Place with the name taken elsewhere = %+v, want c-w-2", p)
	}
}

func TestEmptyGroups(t *testing.T) {
	now := time.Unix(10000, 0)
	groups := []Group{
		{ID: "empty-old", Key: "w", ClusterID: "c", CreatedAt: now.Add(-time.Hour)},
		{ID: "empty-young", Key: "w", ClusterID: "c", CreatedAt: now.Add(-time.Second)},
		{ID: "full", Key: "w", ClusterID: "c", Members: []string{"s"}, CreatedAt: now.Add(-time.Hour)},
		{ID: "user", ClusterID: "c", CreatedAt: now.Add(-time.Hour)},
		{ID: "other-cluster", Key: "w", ClusterID: "d", CreatedAt: now.Add(-time.Hour)},
	}
	got := EmptyGroups(groups, "c", time.Minute, now)
	if len(got) != 1 || got[0].ID != "empty-old" {
		t.Errorf("EmptyGroups = %+v, want only empty-old", got)
	}
}

func TestGroupLocks(t *testing.T) {
	var l GroupLocks
	k := GroupKey{ClusterID: "c", Key: "w", Zone: "z"}
	unlock, err := l.Lock(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	// Another key is independent.
	u2, err := l.Lock(context.Background(), GroupKey{ClusterID: "c", Key: "x", Zone: "z"})
	if err != nil {
		t.Fatal(err)
	}
	u2()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, k); err == nil {
		t.Fatal("a held lock was taken twice")
	}
	unlock()
	u3, err := l.Lock(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	u3()
}
