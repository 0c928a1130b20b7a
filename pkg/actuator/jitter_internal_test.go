package actuator

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The Machines one 429 held back do not all come back at the moment the
// Retry-After ends: each waits at least that long, and they spread.
func TestMachinesHeldTogetherComeBackSpread(t *testing.T) {
	var b backoffs
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for i := range 20 {
		wait := b.failed(types.UID(rune('a'+i)), now, time.Second)
		if wait < time.Second || wait >= time.Second+jitterMin {
			t.Fatalf("waits %s after a Retry-After of 1s, want 1s to %s", wait, time.Second+jitterMin)
		}
		seen[wait] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 Machines held by the same 429 come back at %d moments, want them spread", len(seen))
	}
	// Without a hint: the Machine's own steps, spread too.
	if wait := b.failed("x", now, 0); wait < backoffMin || wait >= backoffMin+backoffMin/4+time.Millisecond {
		t.Errorf("a first failure without a hint waits %s, want %s to %s", wait, backoffMin, backoffMin+backoffMin/4)
	}
}
