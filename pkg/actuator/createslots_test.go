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

	"github.com/appuio/machine-api-provider/pkg/actuator"
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

// A create that waited long for a slot records its intent again before it
// is sent: a successor counts the grace period from the intent, and the
// create may land up to the grace period after it is sent.
func TestLongWaitForACreateSlotRenewsTheIntent(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	intents := watchIntents(t, e)
	// A tenth of the grace period is 300ms: the second create waits about
	// a second for the first.
	e.StartManager(t, manager.Options{
		MaxConcurrentCreates: 1,
		Actuator:             actuator.Options{CreateGrace: 3 * time.Second},
	})
	createMachine(t, e, "worker-a", spec(nil))
	createMachine(t, e, "worker-b", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	waitPhase(t, e, "worker-b", machinev1.PhaseProvisioned)
	a, b := intents.of("worker-a"), intents.of("worker-b")
	if len(a)+len(b) != 3 || (len(a) != 2 && len(b) != 2) {
		t.Errorf("intents recorded: worker-a %v, worker-b %v; want one for the Machine created first, two for the one that waited", a, b)
	}
	if n := h.Count(createPOST); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
}

// intentLog records the create intents Machines show, in order.
type intentLog struct {
	mu sync.Mutex
	by map[string][]string
}

func (l *intentLog) of(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.by[name]...)
}

func watchIntents(t *testing.T, e *fixture.Env) *intentLog {
	t.Helper()
	l := &intentLog{by: map[string][]string{}}
	watchMachines(t, e, func(m *machinev1.Machine) {
		at, ok := m.Annotations[actuator.CreateIntentAnnotation]
		if !ok {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if seen := l.by[m.Name]; len(seen) == 0 || seen[len(seen)-1] != at {
			l.by[m.Name] = append(seen, at)
		}
	})
	return l
}
