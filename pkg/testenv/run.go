package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Starter is what runs until its context ends: a controller-runtime
// manager.
type Starter interface {
	Start(context.Context) error
}

// Run starts m in the background. The returned stop ends it and waits for it,
// as a crash or a restart would; it also runs when the test ends. A manager
// that fails, or does not stop within 30 s, fails the test.
func Run(t testing.TB, m Starter) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("manager: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("manager did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
