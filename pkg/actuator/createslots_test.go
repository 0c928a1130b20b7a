package actuator_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// inFlight is an HTTP proxy in front of the emulator that counts the
// server creates under way at once.
type inFlight struct {
	url      string
	mu       sync.Mutex
	now, max int
}

func newInFlight(t *testing.T, e *fixture.Env) *inFlight {
	t.Helper()
	target, err := url.Parse(e.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	f := &inFlight{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/servers" {
			proxy.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.now++
		f.max = max(f.max, f.now)
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.now--
			f.mu.Unlock()
		}()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/"
	return f
}

func (f *inFlight) most() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}

// Servers are created at most MaxConcurrentCreates at a time, while the
// machine controller runs more reconciles than that.
func TestCreatesAreBounded(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	f := newInFlight(t, e)
	e.StartManager(t, manager.Options{
		Cloud:                   cscloud.New(cscloud.Options{BaseURL: f.url}),
		MaxConcurrentReconciles: 8,
		MaxConcurrentCreates:    2,
	})
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("worker-%d", i))
		createMachine(t, e, names[i], spec(nil))
	}
	for _, name := range names {
		waitPhase(t, e, name, machinev1.PhaseProvisioned)
	}
	if n := f.most(); n != 2 {
		t.Errorf("at most %d creates at once, want 2", n)
	}
	if n := h.Count(createPOST); n != int64(len(names)) {
		t.Errorf("%d creates for %d Machines", n, len(names))
	}
}

// A create waiting for an anti-affinity key's lock holds no create slot:
// a MachineSet whose Machines share a key (their creates go one after the
// other, under the key's lock) leaves the slots to the other keys'
// Machines. (The slot used to be taken first: the key's Machines took
// every slot while they waited for the lock, and another key's Machine
// waited for both.)
func TestCreateWaitingForAGroupLockHoldsNoSlot(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	const latency = 6 * time.Second
	if err := h.AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(latency)}); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{MaxConcurrentCreates: 2})
	keyed := spec(func(s map[string]any) { s["antiAffinityKey"] = "workers" })
	for _, name := range []string{"keyed-a", "keyed-b", "keyed-c"} {
		createMachine(t, e, name, keyed)
	}
	// The first keyed create is under way; the others wait for its lock.
	fixture.Eventually(t, 60*time.Second, "a keyed create in flight", func() (bool, error) {
		return h.Count(createPOST) >= 1, nil
	})
	start := time.Now()
	createMachine(t, e, "other", spec(nil))
	fixture.Eventually(t, 60*time.Second, "the server of the Machine without a key", func() (bool, error) {
		return len(serversOf(t, e, "other")) == 1, nil
	})
	// A slot was free at once: its own create, not a keyed one's before
	// it (which would be twice the latency).
	if took := time.Since(start); took > latency+4*time.Second {
		t.Errorf("the server of the Machine without a key took %s: it waited for a slot the keyed Machines held while waiting for their lock", took)
	}
	for _, name := range []string{"keyed-a", "keyed-b", "keyed-c"} {
		fixture.Eventually(t, 2*time.Minute, name+"'s server", func() (bool, error) {
			return len(serversOf(t, e, name)) == 1, nil
		})
	}
}
