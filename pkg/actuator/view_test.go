package actuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The tests of this file prove, with the real machine controller, SDK and
// emulator, that the shared view of a cluster's servers never makes a
// second server, whatever its lists miss.

const serverGET = "GET /v1/servers/{uuid}"

// laggingLists is an HTTP proxy in front of the emulator whose lists of a
// whole cluster's servers (the shared view's refreshes) lag behind, as the
// lists of an eventually consistent API can: the emulator's answer is held
// back for delay before it is passed on, or, when frozen, the first answer
// is given again and again. Every other request (the direct look for a
// Machine's servers, creates, reads by ID) passes at once.
type laggingLists struct {
	url    string
	emu    func() []string // the IDs of the cluster's servers in the emulator now
	delay  time.Duration
	frozen bool

	mu    sync.Mutex
	first []byte
	// stale counts the list answers that missed a server the emulator
	// held when they were given: the race the tests want.
	stale int
}

func newLaggingLists(t *testing.T, e *fixture.Env, delay time.Duration, frozen bool) *laggingLists {
	t.Helper()
	target, err := url.Parse(e.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	l := &laggingLists{delay: delay, frozen: frozen, emu: func() []string {
		var ids []string
		for _, s := range e.Emulator.Servers() {
			if s.Tags[v1beta1.TagClusterID] == fixture.ClusterID {
				ids = append(ids, s.UUID)
			}
		}
		return ids
	}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || strings.TrimSuffix(r.URL.Path, "/") != "/v1/servers" || r.URL.Query().Has("tag:"+v1beta1.TagMachineName) {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if l.frozen && rec.Code == http.StatusOK {
			l.mu.Lock()
			if l.first == nil {
				l.first = body
			}
			body = l.first
			l.mu.Unlock()
		}
		time.Sleep(l.delay)
		l.count(body)
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	l.url = srv.URL + "/"
	return l
}

// count notes whether an answer misses a server the emulator has.
func (l *laggingLists) count(body []byte) {
	var listed []struct {
		UUID string `json:"uuid"`
	}
	if json.Unmarshal(body, &listed) != nil {
		return
	}
	in := map[string]bool{}
	for _, s := range listed {
		in[s.UUID] = true
	}
	for _, id := range l.emu() {
		if !in[id] {
			l.mu.Lock()
			l.stale++
			l.mu.Unlock()
			return
		}
	}
}

func (l *laggingLists) staleAnswers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stale
}

// touch makes the machine controller reconcile the Machine again.
func touch(t *testing.T, e *fixture.Env, name string) {
	t.Helper()
	if err := touchErr(e, name); err != nil {
		t.Fatal(err)
	}
}

func touchErr(e *fixture.Env, name string) error {
	m := &machinev1.Machine{}
	m.Namespace, m.Name = fixture.Namespace, name
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test/touched":"%d"}}}`, time.Now().UnixNano())))
	return e.Client.Patch(context.Background(), m, patch)
}

// reconcileLine is what the machine controller logs (into the fixture's
// capture, through klog) each time it reconciles a Machine whose server
// exists: "<name>: reconciling machine triggers idempotent update".
const reconcileLine = ": reconciling machine triggers idempotent update"

// reconcilesOf counts the reconciles of a Machine with a server so far.
func reconcilesOf(e *fixture.Env, name string) int {
	return strings.Count(e.Logs.String(), name+reconcileLine)
}

// awaitReconcile waits, up to 30 seconds, for a reconcile of a Machine with
// a server after the before-th: a quiet period after a touch proves nothing
// until the touch's reconcile has run.
func awaitReconcile(t *testing.T, e *fixture.Env, name string, before int) {
	t.Helper()
	fixture.Eventually(t, 30*time.Second, "a reconcile of "+name, func() (bool, error) {
		n := reconcilesOf(e, name)
		if n > before {
			return true, nil
		}
		m := &machinev1.Machine{}
		if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: fixture.Namespace, Name: name}, m); err != nil {
			return false, err
		}
		return false, fmt.Errorf("%d reconciles logged; phase %q", n, phase(m))
	})
}

func noEvent(t *testing.T, e *fixture.Env, name, reason string) {
	t.Helper()
	if events := fixture.EventText(e.Events(t, name)); strings.Contains(events, reason) {
		t.Errorf("%s has a %s event:\n%s", name, reason, events)
	}
}

// Refreshes of the view run while creates complete and are answered after
// them, without the new servers: the servers stay in the view, so that no
// Machine is ever found without its server, neither by its existence checks
// nor by a second create; nothing needs to be looked up again by ID.
func TestCreatesRacingRefreshesMakeOneServerEach(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	if err := h.AddRule(harness.Rule{Route: createPOST, Latency: harness.Duration(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	lists := newLaggingLists(t, e, time.Second, false)
	e.StartManager(t, manager.Options{
		Cloud:             cscloud.New(cscloud.Options{BaseURL: lists.url}),
		ServerViewRefresh: 100 * time.Millisecond,
	})
	// A Machine reconciled again and again keeps refreshing the view
	// while the others' servers are created.
	createMachine(t, e, "bystander", spec(nil))
	waitPhase(t, e, "bystander", machinev1.PhaseProvisioned)
	stop := make(chan struct{})
	touched := make(chan struct{})
	go func() {
		defer close(touched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if err := touchErr(e, "bystander"); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	names := []string{"worker-a", "worker-b", "worker-c", "worker-d"}
	for _, name := range names {
		createMachine(t, e, name, spec(nil))
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range names {
		waitPhase(t, e, name, machinev1.PhaseProvisioned)
	}
	// Reconciles after the creates read the view while lagging lists
	// keep coming in.
	reconciles := map[string]int{}
	for _, name := range names {
		reconciles[name] = reconcilesOf(e, name)
	}
	for range 3 {
		for _, name := range names {
			touch(t, e, name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The checks below are of what did not happen: first await what did,
	// a reconcile of each Machine since the touches began, and a lagging
	// answer that missed a new server (each is held back a second after
	// it was asked for: the last may still be on its way).
	for _, name := range names {
		awaitReconcile(t, e, name, reconciles[name])
	}
	fixture.Eventually(t, 30*time.Second, "a list answer that missed a new server (the race this test is about)", func() (bool, error) {
		return lists.staleAnswers() > 0, nil
	})
	close(stop)
	<-touched
	names = append(names, "bystander")
	for _, name := range names {
		if n := len(serversOf(t, e, name)); n != 1 {
			t.Errorf("%s has %d servers, want 1", name, n)
		}
		if p := phase(getMachine(t, e, name)); p != machinev1.PhaseProvisioned {
			t.Errorf("%s is %s, want Provisioned", name, p)
		}
		noEvent(t, e, name, "Adopted")
	}
	if n := h.Count(createPOST); n != int64(len(names)) {
		t.Errorf("%d creates for %d Machines", n, len(names))
	}
	if n := h.Count(serverGET); n != 0 {
		t.Errorf("%d servers looked up by ID: the view lost servers it had made", n)
	}
}

// Every refresh of the view misses the server just created, for longer than
// the grace the view gives its own writes: the Machine's server is looked up
// by ID and found, and the Machine keeps it; no second server is made.
func TestRefreshesMissingANewServerNeverMakeASecond(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	lists := newLaggingLists(t, e, 0, true)
	e.StartManager(t, manager.Options{
		Cloud:                cscloud.New(cscloud.Options{BaseURL: lists.url}),
		ServerViewRefresh:    100 * time.Millisecond,
		ServerViewWriteGrace: time.Second,
	})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	for range 8 {
		touch(t, e, "worker-a")
		time.Sleep(500 * time.Millisecond)
	}
	// The write grace (1 s) has passed by now, but the lookup by ID it
	// leads to comes with a reconcile: keep reconciling until it came.
	fixture.Eventually(t, 60*time.Second, "a list answer missing the new server, then the server looked up by ID after the write grace", func() (bool, error) {
		if lists.staleAnswers() > 0 && h.Count(serverGET) > 0 {
			return true, nil
		}
		touch(t, e, "worker-a")
		return false, fmt.Errorf("%d stale list answers, %d lookups by ID", lists.staleAnswers(), h.Count(serverGET))
	})
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers, want 1", n)
	}
	if n := h.Count(createPOST); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if p := phase(getMachine(t, e, "worker-a")); p != machinev1.PhaseProvisioned {
		t.Errorf("phase %s, want Provisioned", p)
	}
	noEvent(t, e, "worker-a", "Adopted")
}

// A server deleted behind the provider's back leaves the view with the next
// refresh: the Machine goes Failed, as the machine controller makes a
// Machine whose server is gone, and no server is made in its place.
func TestServerDeletedOutOfBandFailsTheMachine(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	// The view's own create stands in it for a second against lists that
	// do not show it (30 seconds by default).
	e.StartManager(t, manager.Options{ServerViewRefresh: 100 * time.Millisecond, ServerViewWriteGrace: time.Second})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	servers := serversOf(t, e, "worker-a")
	if len(servers) != 1 {
		t.Fatalf("%d servers, want 1", len(servers))
	}
	if err := sdk(e).Servers.Delete(context.Background(), servers[0].UUID); err != nil {
		t.Fatal(err)
	}
	var m *machinev1.Machine
	fixture.Eventually(t, 60*time.Second, "worker-a Failed", func() (bool, error) {
		touch(t, e, "worker-a")
		m = getMachine(t, e, "worker-a")
		return phase(m) == machinev1.PhaseFailed, fmt.Errorf("phase %q", phase(m))
	})
	if m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, "can't find created instance") {
		t.Errorf("error message %v, want the machine controller's for a missing instance", m.Status.ErrorMessage)
	}
	for range 4 {
		touch(t, e, "worker-a")
		time.Sleep(250 * time.Millisecond)
	}
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Errorf("%d servers after the out-of-band delete, want 0", n)
	}
	if n := h.Count(createPOST); n != 1 {
		t.Errorf("%d creates, want 1: a Machine whose server is gone is not given another", n)
	}
}
