package cloud

import (
	"context"
	"sync"
	"time"
)

// Catalog is an API list trusted for a while: a cloud's catalogue (flavors
// or instance types, images or templates, networks, security groups)
// changes when someone adds to it, not between two reconciles. Callers wait
// for one refresh rather than each making their own; a failed refresh falls
// back to the old list, which is as good as it was a moment ago. The zero
// value is an empty catalog.
//
// The lock is held only to look at the list, never during a fetch: the
// fetch runs on its own (runShared) and every caller waits for it with its
// own context, so a slow catalogue (its calls may take minutes with
// retries) holds up only those who need it, each as long as they choose.
type Catalog[T any] struct {
	mu       sync.Mutex
	list     []T
	at       time.Time
	fetching *catalogFetch[T]
}

type catalogFetch[T any] struct {
	done chan struct{}
	list []T
	err  error
}

// Get returns the list, fetching it when it is older than ttl.
func (l *Catalog[T]) Get(ctx context.Context, now time.Time, ttl time.Duration, fetch func(ctx context.Context) ([]T, error)) ([]T, error) {
	l.mu.Lock()
	if l.list != nil && now.Sub(l.at) < ttl {
		list := l.list
		l.mu.Unlock()
		return list, nil
	}
	f := l.fetching
	if f == nil {
		f = &catalogFetch[T]{done: make(chan struct{})}
		l.fetching = f
		runShared(ctx, "fetching a catalogue", func(ctx context.Context) (err error) {
			f.list, err = fetch(ctx)
			return err
		}, func(err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			defer close(f.done)
			l.fetching = nil
			f.err = err
			if err != nil {
				return
			}
			if f.list == nil {
				f.list = []T{}
			}
			l.list, l.at = f.list, now
		})
	}
	l.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err == nil {
		return f.list, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.list != nil {
		return l.list, nil
	}
	return nil, f.err
}

// Invalidate makes the next Get fetch again.
func (l *Catalog[T]) Invalidate() {
	l.mu.Lock()
	l.at = time.Time{}
	l.mu.Unlock()
}

// Cached returns the list as it is, without fetching (nil before the first
// fetch).
func (l *Catalog[T]) Cached() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.list
}

// Find returns the items of the list that match, fetching it once more when
// none does and the list is older than a second: the item may have been
// made a moment ago.
func (l *Catalog[T]) Find(ctx context.Context, now time.Time, ttl time.Duration, fetch func(ctx context.Context) ([]T, error), match func(T) bool) ([]T, error) {
	for attempt := 0; attempt < 2; attempt++ {
		items, err := l.Get(ctx, now, ttl, fetch)
		if err != nil {
			return nil, err
		}
		var out []T
		for _, it := range items {
			if match(it) {
				out = append(out, it)
			}
		}
		if len(out) > 0 || attempt == 1 || l.fresh(now, time.Second) {
			return out, nil
		}
		l.Invalidate()
	}
	return nil, nil
}

func (l *Catalog[T]) fresh(now time.Time, d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.list != nil && now.Sub(l.at) < d
}
