package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Rule is one fault-injection rule. A rule applies to the requests its Route
// selects; a request is matched against every rule, in order.
type Rule struct {
	// Route selects requests by method and route pattern, written as the
	// request counters list them ("POST /v1/servers",
	// "GET /v1/servers/{uuid}"). Either half may be "*": "POST *" is every
	// POST, "*" alone is every request.
	Route string `json:"route"`
	// Zone, when set, narrows the rule to the requests to that zone's
	// endpoint (Options.Zone says which that is): one zone of a cloud can
	// fail while the others answer. A cloud with one endpoint for every
	// zone (cloudscale.ch) names no zone, and such a rule matches none of
	// its requests.
	Zone string `json:"zone,omitempty"`

	// Latency is added before the request is handled.
	Latency Duration `json:"latency,omitempty"`
	// Committed makes the request be carried out after its Latency even
	// when the client gives up or goes away meanwhile, as a real API that
	// has started a slow create finishes it: the server appears although
	// nobody heard of it. Without it, a client that leaves takes its
	// request with it.
	Committed bool `json:"committed,omitempty"`

	// ErrorRate is the probability (0..1) that the request fails with
	// ErrorStatus without being handled at all.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// ErrorStatus is the status of injected errors: 500, 502, 503, 504,
	// 429, or 403 (the request refused, as a policy that leaves out an
	// operation or a zone refuses it). Defaults to 503.
	ErrorStatus int `json:"errorStatus,omitempty"`
	// RetryAfterSeconds is sent as Retry-After with injected 429s (default 1).
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`

	// Echo makes the injected error quote a window of what the request
	// carried, as a cloud's parser quotes the input it choked on ("unexpected
	// token near '…'") and a proxy's error page a header: "userData" (the
	// user data the request sends) or "credentials" (the token or API key it
	// is authenticated with). The window is EchoLength characters (default
	// 16) from EchoOffset (default: the middle). With Echo, ErrorStatus may
	// also be a refusal: 400, 401, 403 or 422. A request without that
	// material gets the error without a quote.
	Echo       string `json:"echo,omitempty"`
	EchoOffset int    `json:"echoOffset,omitempty"`
	EchoLength int    `json:"echoLength,omitempty"`

	// LostResponseRate is the probability (0..1) that the request is handled
	// and its effect committed, but the client never sees the answer: it gets
	// LostResponseStatus instead, or, when that is 0, a dropped connection.
	LostResponseRate   float64 `json:"lostResponseRate,omitempty"`
	LostResponseStatus int     `json:"lostResponseStatus,omitempty"`

	// RateLimit refuses the requests the rule selects beyond a token
	// bucket, as a cloud's API rate limit does: a request that finds the
	// bucket empty is answered 429 at once, with a Retry-After of the
	// seconds until the next token, and is not handled. One bucket serves
	// every request the rule selects.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// Times limits how often the rule fires; 0 means without limit. A spent
	// rule stays listed, so tests can read Fired, but matches nothing.
	Times int `json:"times,omitempty"`
	// Fired counts how often the rule has fired (read-only).
	Fired int `json:"fired"`

	// bucket is RateLimit's token bucket, made when the rule first sees a
	// request.
	bucket *rate.Limiter
}

// What an echo rule quotes.
const (
	EchoUserData    = "userData"
	EchoCredentials = "credentials"
	// defaultEchoLength is how much an echo quotes, about what a parser
	// shows of the input around an error.
	defaultEchoLength = 16
)

// window is the part of material an echo rule quotes.
func (r *Rule) window(material string) string {
	if material == "" {
		return ""
	}
	n := r.EchoLength
	if n <= 0 {
		n = defaultEchoLength
	}
	n = min(n, len(material))
	off := r.EchoOffset
	if off == 0 {
		off = (len(material) - n) / 2
	}
	off = min(off, len(material)-n)
	return material[off : off+n]
}

// RateLimit is a token bucket: QPS tokens a second, at most Burst of them
// saved up (default: QPS rounded up, at least 1).
type RateLimit struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst,omitempty"`
}

// take takes a token from the rule's bucket, or says how long until one is
// there.
func (r *Rule) take(now time.Time) (ok bool, wait time.Duration) {
	if r.bucket == nil {
		burst := r.RateLimit.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(r.RateLimit.QPS)))
		}
		r.bucket = rate.NewLimiter(rate.Limit(r.RateLimit.QPS), burst)
	}
	res := r.bucket.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Duration is a time.Duration written as "300ms" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"300ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Validate reports the first thing wrong with r.
func (r *Rule) Validate() error {
	if r.Route == "" {
		return fmt.Errorf("route is required (e.g. %q or %q)", "POST /v1/servers", "*")
	}
	if method, path, ok := strings.Cut(r.Route, " "); r.Route != "*" && (!ok || method == "" || path == "") {
		return fmt.Errorf("route %q must be \"METHOD /pattern\" (either half may be *) or \"*\"", r.Route)
	}
	for name, p := range map[string]float64{"errorRate": r.ErrorRate, "lostResponseRate": r.LostResponseRate} {
		if p < 0 || p > 1 {
			return fmt.Errorf("%s must be between 0 and 1, got %v", name, p)
		}
	}
	switch r.ErrorStatus {
	case 0, 403, 429, 500, 502, 503, 504:
	case 400, 401, 422:
		if r.Echo == "" {
			return fmt.Errorf("errorStatus %d is for echo rules only (an injected refusal that quotes the request)", r.ErrorStatus)
		}
	default:
		return fmt.Errorf("errorStatus must be one of 403, 429, 500, 502, 503, 504 (with echo also 400, 401, 422), got %d", r.ErrorStatus)
	}
	switch r.Echo {
	case "", EchoUserData, EchoCredentials:
	default:
		return fmt.Errorf("echo must be %q or %q, got %q", EchoUserData, EchoCredentials, r.Echo)
	}
	if r.Echo != "" && r.ErrorRate == 0 {
		return fmt.Errorf("echo quotes the request in an injected error: it needs an errorRate")
	}
	if r.EchoOffset < 0 || r.EchoLength < 0 {
		return fmt.Errorf("echoOffset and echoLength must not be negative")
	}
	if r.LostResponseStatus != 0 && r.LostResponseStatus < 500 {
		return fmt.Errorf("lostResponseStatus must be 0 (drop the connection) or a 5xx status, got %d", r.LostResponseStatus)
	}
	if r.Latency < 0 || r.Times < 0 || r.RetryAfterSeconds < 0 {
		return fmt.Errorf("latency, times and retryAfterSeconds must not be negative")
	}
	if rl := r.RateLimit; rl != nil && (!(rl.QPS > 0) || math.IsInf(rl.QPS, 0) || rl.Burst < 0) {
		return fmt.Errorf("rateLimit needs a qps above 0 and a burst not below 0, got qps %v, burst %d", rl.QPS, rl.Burst)
	}
	return nil
}

func (r *Rule) matches(method, route, zone string) bool {
	if r.Times > 0 && r.Fired >= r.Times {
		return false
	}
	if r.Zone != "" && r.Zone != zone {
		return false
	}
	if r.Route == "*" {
		return true
	}
	wantMethod, wantPath, ok := strings.Cut(r.Route, " ")
	if !ok {
		return false
	}
	_, path, _ := strings.Cut(route, " ")
	return (wantMethod == "*" || wantMethod == method) && (wantPath == "*" || wantPath == path)
}

// ParseRule reads a rule from its command-line form: comma-separated
// key=value pairs, the rate limit's as rateLimit.qps and rateLimit.burst,
// e.g.
//
//	route=POST /v1/servers,lostResponseRate=1,times=1
//	route=*,rateLimit.qps=10,rateLimit.burst=20
func ParseRule(s string) (Rule, error) {
	fields := map[string]any{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Rule{}, fmt.Errorf("fault %q: %q is not key=value", s, kv)
		}
		k = strings.TrimSpace(k)
		if sub, ok := strings.CutPrefix(k, "rateLimit."); ok {
			rl, _ := fields["rateLimit"].(map[string]any)
			if rl == nil {
				rl = map[string]any{}
				fields["rateLimit"] = rl
			}
			rl[sub] = json.RawMessage(v)
			continue
		}
		switch k {
		case "route", "latency", "echo", "zone":
			fields[k] = v
		default:
			fields[k] = json.RawMessage(v)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Rule{}, fmt.Errorf("fault %q: %w", s, err)
	}
	return r, r.Validate()
}
