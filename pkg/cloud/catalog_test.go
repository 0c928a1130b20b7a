package cloud

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCatalog(t *testing.T) {
	var c Catalog[string]
	ctx := context.Background()
	now := time.Unix(1000, 0)
	fetches := 0
	list := []string{"a"}
	fetch := func(context.Context) ([]string, error) { fetches++; return list, nil }
	if got, _ := c.Get(ctx, now, time.Minute, fetch); len(got) != 1 || fetches != 1 {
		t.Fatalf("got %v after %d fetches", got, fetches)
	}
	if _, _ = c.Get(ctx, now.Add(30*time.Second), time.Minute, fetch); fetches != 1 {
		t.Errorf("fetched again within the ttl")
	}
	// A miss lists once more (the item may be new), but not twice.
	list = []string{"a", "b"}
	found, _ := c.Find(ctx, now.Add(40*time.Second), time.Minute, fetch, func(s string) bool { return s == "b" })
	if len(found) != 1 || fetches != 2 {
		t.Errorf("found %v after %d fetches", found, fetches)
	}
	found, _ = c.Find(ctx, now.Add(40*time.Second), time.Minute, fetch, func(s string) bool { return s == "c" })
	if len(found) != 0 || fetches != 2 {
		t.Errorf("a miss on a list a moment old fetched again: %d fetches", fetches)
	}
	// A failed refresh falls back to the old list.
	failing := func(context.Context) ([]string, error) { return nil, errors.New("down") }
	if got, err := c.Get(ctx, now.Add(time.Hour), time.Minute, failing); err != nil || len(got) != 2 {
		t.Errorf("got %v, %v", got, err)
	}
	var empty Catalog[string]
	if _, err := empty.Get(ctx, now, time.Minute, failing); err == nil {
		t.Errorf("no list and a failed fetch: no error")
	}
}

func TestRedactions(t *testing.T) {
	ctx := WithRedaction(WithRedaction(context.Background(), "one"), "two")
	if r := Redactions(ctx); len(r) != 2 || r[0] != "one" || r[1] != "two" {
		t.Errorf("redactions %v", r)
	}
	if r := Redactions(context.Background()); r != nil {
		t.Errorf("redactions %v", r)
	}
}
