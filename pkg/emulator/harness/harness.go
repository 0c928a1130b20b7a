package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminPrefix is where the admin endpoint lives, beside the emulated API.
const AdminPrefix = "/_emulator/"

// ErrorBody renders an injected error the way the emulated cloud would.
type ErrorBody func(status int, message string) any

// Options configure a Harness.
type Options struct {
	// Cloud names the emulated cloud in metrics ("cloudscale", "exoscale").
	Cloud string
	// ErrorBody renders injected errors; by default {"message": "..."}.
	ErrorBody ErrorBody
	// Rules are the fault-injection rules in force at start.
	Rules []Rule
	// Seed makes injected faults reproducible; 0 picks a random seed.
	Seed int64
	// Route names the route of a request ("PUT /v2/instance/{id}:start") for
	// the counters, metrics and fault rules; "" is unmatched. By default it is
	// the API mux's pattern, which cannot express every API's paths (a mux
	// wildcard is a whole path segment, Exoscale's actions are not).
	Route func(*http.Request) string
	// Zone names the zone whose endpoint a request went to, for the fault
	// rules that name one ("" for none); nil: no request has a zone.
	Zone func(*http.Request) string
	// MaxBodyBytes bounds a request's body; a larger one gets 413 in the
	// cloud's error shape. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Echo finds in a request what an echo rule quotes (Rule.Echo): the
	// user data or the credentials, as the emulated cloud carries them;
	// "" when the request has none. Without it, echo rules quote nothing.
	Echo func(r *http.Request, what string) string
	// AdminAuth, when set, must accept a request to the admin endpoint or
	// /metrics, which otherwise get 401: an emulator that requires
	// credentials for its API requires them for these too.
	AdminAuth func(*http.Request) bool
	// NoWriteAudit leaves the write audit (audit.go) out: BeginWrite
	// returns nil. Its cost grows with the account (every write indexes
	// it), which would distort a benchmark of the provider; tests of
	// ownership keep it on.
	NoWriteAudit bool
}

// Harness serves an emulated API through fault injection and request
// counting, plus the admin endpoint and /metrics.
type Harness struct {
	api       *http.ServeMux
	route     func(*http.Request) string
	zone      func(*http.Request) string
	maxBody   int64
	adminAuth func(*http.Request) bool
	echo      func(*http.Request, string) string
	errorBody ErrorBody
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	injected  *prometheus.CounterVec

	mu     sync.Mutex
	rules  []*Rule
	rng    *rand.Rand
	counts map[string]int64

	// audit records every write the emulated API answers (audit.go),
	// unless noAudit.
	audit   Audit
	noAudit bool
}

// New mounts api, whose routes must be registered with a method
// ("GET /v1/servers/{uuid}"), on a new Harness.
func New(api *http.ServeMux, opts Options) (*Harness, error) {
	seed := opts.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	h := &Harness{
		api:       api,
		route:     opts.Route,
		zone:      opts.Zone,
		maxBody:   opts.MaxBodyBytes,
		adminAuth: opts.AdminAuth,
		errorBody: opts.ErrorBody,
		echo:      opts.Echo,
		registry:  prometheus.NewRegistry(),
		rng:       rand.New(rand.NewSource(seed)),
		counts:    map[string]int64{},
		noAudit:   opts.NoWriteAudit,
	}
	if h.errorBody == nil {
		h.errorBody = func(_ int, msg string) any { return map[string]string{"message": msg} }
	}
	labels := prometheus.Labels{"cloud": opts.Cloud}
	h.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "emulator_requests_total", Help: "Requests received by the emulated cloud API, by method and route.",
		ConstLabels: labels,
	}, []string{"method", "route"})
	h.injected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "emulator_injected_faults_total", Help: "Faults injected, by route and kind (error, lost_response, latency, rate_limited).",
		ConstLabels: labels,
	}, []string{"route", "kind"})
	h.registry.MustRegister(h.requests, h.injected)
	if err := h.SetRules(opts.Rules); err != nil {
		return nil, err
	}
	return h, nil
}

// SetRules replaces the fault-injection rules.
func (h *Harness) SetRules(rules []Rule) error {
	rs := make([]*Rule, 0, len(rules))
	for i := range rules {
		r := rules[i]
		if err := r.Validate(); err != nil {
			return fmt.Errorf("rule %d: %w", i, err)
		}
		rs = append(rs, &r)
	}
	h.mu.Lock()
	h.rules = rs
	h.mu.Unlock()
	return nil
}

// AddRule appends one fault-injection rule.
func (h *Harness) AddRule(r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	h.mu.Lock()
	h.rules = append(h.rules, &r)
	h.mu.Unlock()
	return nil
}

// Rules returns a copy of the rules in force, with their Fired counts.
func (h *Harness) Rules() []Rule {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Rule, len(h.rules))
	for i, r := range h.rules {
		out[i] = *r
	}
	return out
}

// Requests returns how many requests each route received, keyed
// "METHOD /pattern" as registered on the API mux.
func (h *Harness) Requests() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int64, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}

// Count returns how many requests one route received.
func (h *Harness) Count(route string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[route]
}

// Total returns how many requests all routes received together.
func (h *Harness) Total() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for _, v := range h.counts {
		n += v
	}
	return n
}

// ResetRequests sets every request counter of the admin endpoint back to zero
// (the Prometheus counters, being counters, keep counting).
func (h *Harness) ResetRequests() {
	h.mu.Lock()
	h.counts = map[string]int64{}
	h.mu.Unlock()
}

// Registry holds the emulator's Prometheus metrics.
func (h *Harness) Registry() *prometheus.Registry { return h.registry }

// decision is what the rules say about one request.
type decision struct {
	latency    time.Duration
	errStatus  int
	retryAfter int
	lose       bool
	loseStatus int
	committed  bool
	// limited: a rate limit refused the request, which is answered at once.
	limited bool
	// echo is the rule whose error quotes the request, nil for none.
	echo *Rule
}

func (h *Harness) decide(method, route, zone string) decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[route]++
	var d decision
	for _, r := range h.rules {
		if !r.matches(method, route, zone) {
			continue
		}
		fired := false
		if r.Latency > 0 {
			d.latency += time.Duration(r.Latency)
			d.committed = d.committed || r.Committed
			h.injected.WithLabelValues(route, "latency").Inc()
			fired = true
		}
		undecided := d.errStatus == 0 && !d.lose
		if undecided && r.RateLimit != nil {
			if ok, wait := r.take(time.Now()); !ok {
				d.errStatus, d.limited = http.StatusTooManyRequests, true
				d.retryAfter = max(1, int(math.Ceil(wait.Seconds())))
				h.injected.WithLabelValues(route, "rate_limited").Inc()
				r.Fired++
				continue
			}
		}
		if undecided && r.ErrorRate > 0 && h.rng.Float64() < r.ErrorRate {
			d.errStatus, d.retryAfter = r.ErrorStatus, r.RetryAfterSeconds
			if d.errStatus == 0 {
				d.errStatus = http.StatusServiceUnavailable
			}
			if d.errStatus == http.StatusTooManyRequests && d.retryAfter == 0 {
				d.retryAfter = 1
			}
			if r.Echo != "" {
				echo := *r
				d.echo = &echo
			}
			h.injected.WithLabelValues(route, "error").Inc()
			fired = true
		} else if undecided && r.LostResponseRate > 0 && h.rng.Float64() < r.LostResponseRate {
			d.lose, d.loseStatus = true, r.LostResponseStatus
			h.injected.WithLabelValues(route, "lost_response").Inc()
			fired = true
		}
		if fired {
			r.Fired++
		}
	}
	return d
}

func (h *Harness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.readBody(w, r) {
		return
	}
	if (strings.HasPrefix(r.URL.Path, AdminPrefix) || r.URL.Path == "/metrics") && !h.adminAllowed(w, r) {
		return
	}
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		h.serveAdmin(w, r)
		return
	}
	if r.URL.Path == "/metrics" {
		promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	var pattern string
	if h.route != nil {
		pattern = h.route(r)
	} else {
		_, pattern = h.api.Handler(r)
	}
	if pattern == "" {
		pattern = "(unmatched)"
	}
	if !strings.Contains(pattern, " ") {
		pattern = r.Method + " " + pattern
	}
	h.requests.WithLabelValues(r.Method, pattern).Inc()
	zone := ""
	if h.zone != nil {
		zone = h.zone(r)
	}
	d := h.decide(r.Method, pattern, zone)
	if d.latency > 0 && !d.limited {
		timer := time.NewTimer(d.latency)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			if !d.committed || d.errStatus != 0 {
				timer.Stop()
				return
			}
			// Nobody waits for the answer, but the request was received:
			// it is carried out all the same, when its time has come.
			<-timer.C
			h.api.ServeHTTP(&discard{header: http.Header{}}, r.WithContext(context.WithoutCancel(r.Context())))
			return
		}
	}
	if d.errStatus != 0 {
		if d.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(d.retryAfter))
		}
		msg := injectedMessage(d.errStatus, d.retryAfter)
		if d.echo != nil && h.echo != nil {
			if quote := d.echo.window(h.echo(r, d.echo.Echo)); quote != "" {
				msg = echoMessage(d.errStatus, d.echo.Echo, quote)
			}
		}
		h.writeError(w, d.errStatus, msg)
		return
	}
	if !d.lose {
		h.api.ServeHTTP(w, r)
		return
	}
	// The request is handled and its effect committed; only the answer is lost.
	h.api.ServeHTTP(&discard{header: http.Header{}}, r)
	if d.loseStatus == 0 {
		// net/http closes the connection without a response and logs nothing.
		panic(http.ErrAbortHandler)
	}
	h.writeError(w, d.loseStatus, injectedMessage(d.loseStatus, 0))
}

func injectedMessage(status, retryAfter int) string {
	if status == http.StatusTooManyRequests {
		return fmt.Sprintf("Request was throttled. Expected available in %d seconds.", retryAfter)
	}
	return http.StatusText(status) + " (injected by the emulator)"
}

// echoMessage is an injected error that quotes the request, as a cloud's
// parser or a proxy would.
func echoMessage(status int, what, quote string) string {
	if what == EchoCredentials {
		return fmt.Sprintf("%s (injected by the emulator): invalid credentials '%s'", http.StatusText(status), quote)
	}
	return fmt.Sprintf("%s (injected by the emulator): user data: unexpected token near '%s'", http.StatusText(status), quote)
}

func (h *Harness) writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(h.errorBody(status, msg))
}

// discard is a ResponseWriter whose response nobody will read.
type discard struct {
	header http.Header
	body   bytes.Buffer
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return d.body.Write(b) }
func (d *discard) WriteHeader(int)             {}
