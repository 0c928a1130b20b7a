package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fixture is a tiny API on a harness: GET and POST /v1/things, each counting
// how often its handler really ran.
type fixture struct {
	h     *Harness
	srv   *httptest.Server
	gets  atomic.Int64
	posts atomic.Int64
}

func newFixture(t *testing.T, rules ...Rule) *fixture {
	t.Helper()
	f := &fixture{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things", func(w http.ResponseWriter, _ *http.Request) {
		f.gets.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[{"id":1}]`)
	})
	mux.HandleFunc("POST /v1/things", func(w http.ResponseWriter, _ *http.Request) {
		f.posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":2}`)
	})
	mux.HandleFunc("/v1/legacy", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	h, err := New(mux, Options{
		Cloud: "test",
		Seed:  1,
		Rules: rules,
		ErrorBody: func(status int, msg string) any {
			return map[string]any{"status": status, "why": msg}
		},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.h = h
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// do sends one request on a fresh connection, so a dropped connection is
// never retried by the transport.
func (f *fixture) do(t *testing.T, method, path, body string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, b, nil
}

func (f *fixture) mustDo(t *testing.T, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := f.do(t, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp, b
}

func wantStatus(t *testing.T, resp *http.Response, body []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

func TestRequestCounters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 2 {
		resp, b := f.mustDo(t, "GET", "/v1/things", "")
		wantStatus(t, resp, b, http.StatusOK)
	}
	resp, b := f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, http.StatusCreated)
	resp, b = f.mustDo(t, "GET", "/v1/nowhere", "")
	wantStatus(t, resp, b, http.StatusNotFound)
	resp, b = f.mustDo(t, "GET", "/v1/legacy", "")
	wantStatus(t, resp, b, http.StatusOK)

	want := map[string]int64{
		"GET /v1/things":  2,
		"POST /v1/things": 1,
		"GET (unmatched)": 1,
		"GET /v1/legacy":  1, // a pattern without a method is keyed with the request's
	}
	if got := f.h.Requests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Requests() = %v, want %v", got, want)
	}
	if got := f.h.Count("GET /v1/things"); got != 2 {
		t.Errorf("Count(GET /v1/things) = %d, want 2", got)
	}
	if got := f.h.Count("DELETE /v1/things"); got != 0 {
		t.Errorf("Count(DELETE /v1/things) = %d, want 0", got)
	}
	if got := f.h.Total(); got != 5 {
		t.Errorf("Total() = %d, want 5", got)
	}

	// Over HTTP; admin and metrics requests are not counted themselves.
	resp, b = f.mustDo(t, "GET", "/metrics", "")
	wantStatus(t, resp, b, http.StatusOK)
	resp, b = f.mustDo(t, "GET", "/_emulator/requests", "")
	wantStatus(t, resp, b, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var overHTTP map[string]int64
	if err := json.Unmarshal(b, &overHTTP); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	if !reflect.DeepEqual(overHTTP, want) {
		t.Fatalf("GET /_emulator/requests = %v, want %v", overHTTP, want)
	}

	resp, b = f.mustDo(t, "DELETE", "/_emulator/requests", "")
	wantStatus(t, resp, b, http.StatusNoContent)
	if got := f.h.Total(); got != 0 {
		t.Fatalf("Total() after DELETE /_emulator/requests = %d, want 0", got)
	}
	f.mustDo(t, "POST", "/v1/things", "{}")
	f.h.ResetRequests()
	if got := f.h.Requests(); len(got) != 0 {
		t.Fatalf("Requests() after ResetRequests = %v, want empty", got)
	}
	f.mustDo(t, "GET", "/v1/things", "")
	if got := f.h.Requests(); !reflect.DeepEqual(got, map[string]int64{"GET /v1/things": 1}) {
		t.Fatalf("Requests() after reset and one GET = %v", got)
	}
}

func TestInjectedErrors(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 502, 503, 504} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Rule{Route: "POST /v1/things", ErrorRate: 1, ErrorStatus: status})
			resp, b := f.mustDo(t, "POST", "/v1/things", "{}")
			wantStatus(t, resp, b, status)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %s is not JSON: %v", b, err)
			}
			if body["status"] != float64(status) {
				t.Errorf("body %s was not rendered by the ErrorBody option with status %d", b, status)
			}
			if why, _ := body["why"].(string); !strings.Contains(why, http.StatusText(status)) {
				t.Errorf("message %q does not name %q", why, http.StatusText(status))
			}
			if resp.Header.Get("Retry-After") != "" {
				t.Errorf("Retry-After = %q on a %d, want none", resp.Header.Get("Retry-After"), status)
			}
			if n := f.posts.Load(); n != 0 {
				t.Fatalf("the handler ran %d times; an injected error must not reach it", n)
			}
			if got := f.h.Count("POST /v1/things"); got != 1 {
				t.Errorf("an injected error must still be counted: Count = %d, want 1", got)
			}
			// Other routes are untouched.
			resp, b = f.mustDo(t, "GET", "/v1/things", "")
			wantStatus(t, resp, b, http.StatusOK)
		})
	}
}

func TestInjectedErrorDefaultsTo503(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Rule{Route: "*", ErrorRate: 1})
	resp, b := f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, http.StatusServiceUnavailable)
	if f.gets.Load() != 0 {
		t.Fatal("handler ran despite the injected error")
	}
}

func TestInjected429CarriesRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rule Rule
		want string
	}{
		{"default", Rule{Route: "*", ErrorRate: 1, ErrorStatus: 429}, "1"},
		{"explicit", Rule{Route: "*", ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 7}, "7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.rule)
			resp, b := f.mustDo(t, "POST", "/v1/things", "{}")
			wantStatus(t, resp, b, http.StatusTooManyRequests)
			if got := resp.Header.Get("Retry-After"); got != tc.want {
				t.Errorf("Retry-After = %q, want %q", got, tc.want)
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			if why, _ := body["why"].(string); !strings.Contains(why, tc.want+" seconds") {
				t.Errorf("message %q does not say when to retry (%s seconds)", why, tc.want)
			}
			if f.posts.Load() != 0 {
				t.Fatal("handler ran despite the injected 429")
			}
		})
	}
}

func TestTimesLimitsARule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Rule{Route: "GET /v1/things", ErrorRate: 1, ErrorStatus: 500, Times: 1})
	resp, b := f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, 500)
	for range 2 {
		resp, b = f.mustDo(t, "GET", "/v1/things", "")
		wantStatus(t, resp, b, 200)
	}
	if n := f.gets.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (after the one failure)", n)
	}
	rules := f.h.Rules()
	if len(rules) != 1 || rules[0].Fired != 1 {
		t.Fatalf("Rules() = %+v, want the one spent rule with Fired 1", rules)
	}

	resp, b = f.mustDo(t, "GET", "/_emulator/faults", "")
	wantStatus(t, resp, b, 200)
	var got struct {
		Rules []Rule `json:"rules"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	want := []Rule{{Route: "GET /v1/things", ErrorRate: 1, ErrorStatus: 500, Times: 1, Fired: 1}}
	if !reflect.DeepEqual(got.Rules, want) {
		t.Fatalf("GET /_emulator/faults = %+v, want %+v", got.Rules, want)
	}
}

func TestRulesReturnsACopy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Rule{Route: "*", ErrorRate: 1, Times: 1})
	rules := f.h.Rules()
	rules[0].Fired = 1 // would spend the rule if it were shared
	resp, b := f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, http.StatusServiceUnavailable)
}

func TestLatency(t *testing.T) {
	t.Parallel()
	const latency = 80 * time.Millisecond
	f := newFixture(t, Rule{Route: "GET /v1/things", Latency: Duration(latency)})
	start := time.Now()
	resp, b := f.mustDo(t, "GET", "/v1/things", "")
	elapsed := time.Since(start)
	wantStatus(t, resp, b, 200)
	if elapsed < latency {
		t.Fatalf("request took %v, want at least the injected %v", elapsed, latency)
	}
	if f.gets.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1: latency delays but does not fail", f.gets.Load())
	}
	if r := f.h.Rules(); r[0].Fired != 1 {
		t.Errorf("latency rule Fired = %d, want 1", r[0].Fired)
	}
}

func TestLatencyAddsUpAndFirstErrorWins(t *testing.T) {
	t.Parallel()
	const each = 30 * time.Millisecond
	f := newFixture(t,
		Rule{Route: "*", Latency: Duration(each)},
		Rule{Route: "POST *", Latency: Duration(each), ErrorRate: 1, ErrorStatus: 502},
		Rule{Route: "POST /v1/things", ErrorRate: 1, ErrorStatus: 500},
	)
	start := time.Now()
	resp, b := f.mustDo(t, "POST", "/v1/things", "{}")
	elapsed := time.Since(start)
	wantStatus(t, resp, b, 502)
	if elapsed < 2*each {
		t.Errorf("request took %v, want at least %v (both latencies)", elapsed, 2*each)
	}
	rules := f.h.Rules()
	if rules[0].Fired != 1 || rules[1].Fired != 1 || rules[2].Fired != 0 {
		t.Errorf("Fired = %d,%d,%d; want 1,1,0 (the error of the third rule was pre-empted)", rules[0].Fired, rules[1].Fired, rules[2].Fired)
	}
}

func TestLostResponseDropsTheConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Rule{Route: "POST /v1/things", LostResponseRate: 1, Times: 1})
	resp, _, err := f.do(t, "POST", "/v1/things", "{}")
	if err == nil {
		t.Fatalf("got status %d, want a transport error (dropped connection)", resp.StatusCode)
	}
	if n := f.posts.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1: a lost response commits its effect", n)
	}
	// The rule is spent: the next request gets through and is answered.
	resp, b := f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, http.StatusCreated)
	if n := f.posts.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
	if r := f.h.Rules(); r[0].Fired != 1 {
		t.Errorf("Fired = %d, want 1", r[0].Fired)
	}
}

func TestLostResponseWithStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Rule{Route: "POST /v1/things", LostResponseRate: 1, LostResponseStatus: 502})
	resp, b := f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, http.StatusBadGateway)
	if strings.Contains(string(b), `"id"`) {
		t.Errorf("the handler's answer leaked through the lost response: %s", b)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil || body["status"] != float64(502) {
		t.Errorf("body %s is not the ErrorBody rendering of a 502 (err %v)", b, err)
	}
	if n := f.posts.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1: the effect is committed", n)
	}
}

func TestRouteMatching(t *testing.T) {
	t.Parallel()
	cases := []struct {
		route         string
		getFails      bool
		postFails     bool
		unmatchedFail bool
	}{
		{"POST /v1/things", false, true, false},
		{"GET /v1/things", true, false, false},
		{"POST *", false, true, false},
		{"* /v1/things", true, true, false},
		{"*", true, true, true},
		{"GET /v1/other", false, false, false},
		{"DELETE /v1/things", false, false, false},
		{"GET (unmatched)", false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.route, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Rule{Route: tc.route, ErrorRate: 1, ErrorStatus: 500})
			check := func(method, path string, fails bool, ok int) {
				t.Helper()
				resp, b := f.mustDo(t, method, path, "{}")
				want := ok
				if fails {
					want = 500
				}
				wantStatus(t, resp, b, want)
			}
			check("GET", "/v1/things", tc.getFails, 200)
			check("POST", "/v1/things", tc.postFails, 201)
			check("GET", "/v1/unknown", tc.unmatchedFail, 404)
			fired := 0
			for _, fails := range []bool{tc.getFails, tc.postFails, tc.unmatchedFail} {
				if fails {
					fired++
				}
			}
			if got := f.h.Rules()[0].Fired; got != fired {
				t.Errorf("Fired = %d, want %d", got, fired)
			}
		})
	}
}

func TestSeedMakesFaultsReproducible(t *testing.T) {
	t.Parallel()
	run := func() []int {
		f := newFixture(t, Rule{Route: "*", ErrorRate: 0.5})
		var out []int
		for range 40 {
			resp, b := f.mustDo(t, "GET", "/v1/things", "")
			_ = b
			out = append(out, resp.StatusCode)
		}
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different faults:\n%v\n%v", a, b)
	}
	seen := map[int]bool{}
	for _, s := range a {
		seen[s] = true
	}
	if !seen[200] || !seen[503] || len(seen) != 2 {
		t.Fatalf("errorRate 0.5 over 40 requests gave statuses %v, want both 200 and 503", seen)
	}
}

func TestAdminFaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	decodeRules := func(b []byte) []Rule {
		t.Helper()
		var v struct {
			Rules []Rule `json:"rules"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		return v.Rules
	}

	// PUT replaces all rules.
	resp, b := f.mustDo(t, "PUT", "/_emulator/faults", `{"rules":[{"route":"GET /v1/things","errorRate":1,"errorStatus":500},{"route":"*","latency":"1ms"}]}`)
	wantStatus(t, resp, b, http.StatusOK)
	want := []Rule{
		{Route: "GET /v1/things", ErrorRate: 1, ErrorStatus: 500},
		{Route: "*", Latency: Duration(time.Millisecond)},
	}
	if got := decodeRules(b); !reflect.DeepEqual(got, want) {
		t.Fatalf("PUT answered %+v, want %+v", got, want)
	}
	if got := f.h.Rules(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Rules() after PUT = %+v, want %+v", got, want)
	}
	resp, b = f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, 500)

	// POST appends one.
	resp, b = f.mustDo(t, "POST", "/_emulator/faults", `{"route":"POST /v1/things","errorRate":1,"errorStatus":429,"retryAfterSeconds":3}`)
	wantStatus(t, resp, b, http.StatusCreated)
	if got := decodeRules(b); len(got) != 3 || got[2].Route != "POST /v1/things" || got[2].RetryAfterSeconds != 3 {
		t.Fatalf("POST answered %+v, want the two old rules and the new one", got)
	}
	resp, b = f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, 429)
	if resp.Header.Get("Retry-After") != "3" {
		t.Errorf("Retry-After = %q, want 3", resp.Header.Get("Retry-After"))
	}

	// Invalid rules are refused and change nothing.
	before := f.h.Rules()
	invalid := []struct{ method, body string }{
		{"POST", `{"route":"*","errorRate":2}`},
		{"POST", `{"route":"*","errorRate":1,"errorStatus":404}`},
		{"POST", `{"route":"","errorRate":1}`},
		{"POST", `{"errorRate":1}`},
		{"POST", `{"route":"*","bogus":1}`},
		{"POST", `{"route":"*","latency":300}`},
		{"POST", `{"route":"*","lostResponseRate":1,"lostResponseStatus":404}`},
		{"POST", `{"route":"*","times":-1}`},
		{"POST", `not json`},
		{"PUT", `{"rules":[{"route":"*"},{"route":"*","errorRate":2}]}`},
		{"PUT", `{"rules":[{"route":""}]}`},
		{"PUT", `{"rules":[],"extra":true}`},
	}
	for _, tc := range invalid {
		resp, b := f.mustDo(t, tc.method, "/_emulator/faults", tc.body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s: status %d, want 400; body %s", tc.method, tc.body, resp.StatusCode, b)
			continue
		}
		var e map[string]string
		if err := json.Unmarshal(b, &e); err != nil || e["error"] == "" {
			t.Errorf("%s %s: body %s is not {\"error\": ...}", tc.method, tc.body, b)
		}
	}
	if got := f.h.Rules(); !reflect.DeepEqual(got, before) {
		t.Fatalf("refused requests changed the rules:\n%+v\nwant\n%+v", got, before)
	}

	// DELETE removes them all.
	resp, b = f.mustDo(t, "DELETE", "/_emulator/faults", "")
	wantStatus(t, resp, b, http.StatusNoContent)
	if len(b) != 0 {
		t.Errorf("DELETE answered a body: %q", b)
	}
	if got := f.h.Rules(); len(got) != 0 {
		t.Fatalf("Rules() after DELETE = %+v, want none", got)
	}
	resp, b = f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, 200)
	resp, b = f.mustDo(t, "GET", "/_emulator/faults", "")
	wantStatus(t, resp, b, 200)
	if got := decodeRules(b); len(got) != 0 {
		t.Fatalf("GET /_emulator/faults after DELETE = %+v, want []", got)
	}

	// Unknown admin endpoints are a JSON 404.
	resp, b = f.mustDo(t, "GET", "/_emulator/nothing", "")
	wantStatus(t, resp, b, http.StatusNotFound)
	if !json.Valid(b) {
		t.Errorf("unknown admin endpoint answered non-JSON %q", b)
	}
	if f.h.Total() != 3 {
		t.Errorf("Total() = %d; admin requests must not be counted, want 3", f.h.Total())
	}
}

func TestNewRefusesInvalidRules(t *testing.T) {
	t.Parallel()
	_, err := New(http.NewServeMux(), Options{Rules: []Rule{{Route: "*", ErrorRate: -0.1}}})
	if err == nil {
		t.Fatal("New accepted errorRate -0.1")
	}
	h, err := New(http.NewServeMux(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddRule(Rule{Route: "*", ErrorStatus: 418}); err == nil {
		t.Fatal("AddRule accepted errorStatus 418")
	}
	if err := h.SetRules([]Rule{{Route: "*"}, {}}); err == nil || !strings.Contains(err.Error(), "rule 1") {
		t.Fatalf("SetRules with an empty route: err = %v, want one naming rule 1", err)
	}
	if len(h.Rules()) != 0 {
		t.Fatalf("refused rules were installed: %+v", h.Rules())
	}
}

func TestDefaultErrorBody(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x", func(http.ResponseWriter, *http.Request) {})
	h, err := New(mux, Options{Rules: []Rule{{Route: "*", ErrorRate: 1, ErrorStatus: 500}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != 500 {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["message"] == "" || len(body) != 1 {
		t.Fatalf("default error body %q, want {\"message\": ...} (err %v)", rec.Body.String(), err)
	}
}

func TestParseRule(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want Rule
	}{
		{"route=POST /v1/servers,lostResponseRate=1,times=1", Rule{Route: "POST /v1/servers", LostResponseRate: 1, Times: 1}},
		{"route=*,latency=300ms", Rule{Route: "*", Latency: Duration(300 * time.Millisecond)}},
		{"route=GET /v1/servers/{uuid},errorRate=0.25,errorStatus=429,retryAfterSeconds=5", Rule{Route: "GET /v1/servers/{uuid}", ErrorRate: 0.25, ErrorStatus: 429, RetryAfterSeconds: 5}},
		{"route=POST *,lostResponseRate=1,lostResponseStatus=502", Rule{Route: "POST *", LostResponseRate: 1, LostResponseStatus: 502}},
	}
	for _, tc := range good {
		got, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRule(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	bad := []struct{ in, mention string }{
		{"nonsense", "not key=value"},
		{"route=*,bogus=1", "bogus"},
		{"route=*,errorRate=2", "errorRate"},
		{"route=*,latency=soon", "soon"},
		{"errorRate=1", "route"},
		{"route=*,times=many", ""},
	}
	for _, tc := range bad {
		r, err := ParseRule(tc.in)
		if err == nil {
			t.Errorf("ParseRule(%q) = %+v, want an error", tc.in, r)
			continue
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ParseRule(%q) error %q does not mention %q", tc.in, err, tc.mention)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Rule{Route: "*", Latency: Duration(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"latency":"1.5s"`)) {
		t.Fatalf("latency marshals as %s, want \"1.5s\"", b)
	}
	var r Rule
	if err := json.Unmarshal(b, &r); err != nil || r.Latency != Duration(1500*time.Millisecond) {
		t.Fatalf("round trip: %+v, %v", r, err)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Rule{Route: "POST /v1/things", ErrorRate: 1, ErrorStatus: 503, Times: 1})
	f.mustDo(t, "GET", "/v1/things", "")
	f.mustDo(t, "GET", "/v1/things", "")
	f.mustDo(t, "POST", "/v1/things", "{}")
	f.h.ResetRequests() // resets the admin counters, not the Prometheus ones

	resp, b := f.mustDo(t, "GET", "/metrics", "")
	wantStatus(t, resp, b, 200)
	samples := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		samples[line[:i]] = line[i+1:]
	}
	want := map[string]string{
		`emulator_requests_total{cloud="test",method="GET",route="GET /v1/things"}`:         "2",
		`emulator_requests_total{cloud="test",method="POST",route="POST /v1/things"}`:       "1",
		`emulator_injected_faults_total{cloud="test",kind="error",route="POST /v1/things"}`: "1",
	}
	for k, v := range want {
		if samples[k] != v {
			t.Errorf("metric %s = %q, want %q\n%s", k, samples[k], v, b)
		}
	}
	if _, ok := samples[`emulator_requests_total{cloud="test",method="GET",route="GET /metrics"}`]; ok {
		t.Error("/metrics counts itself as an API request")
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") })
	h, err := New(mux, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done, err := Serve(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/") {
		t.Fatalf("base URL %q", base)
	}
	resp, err := http.Get(base + "ping")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "pong" || h.Count("GET /ping") != 1 {
		t.Fatalf("GET /ping = %q, count %d", b, h.Count("GET /ping"))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server ended with %v, want nil after the context ends", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop when its context ended")
	}
	if _, err := http.Get(base + "ping"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

func TestServeRefusesBadAddress(t *testing.T) {
	t.Parallel()
	h, _ := New(http.NewServeMux(), Options{})
	_, _, err := Serve(t.Context(), "256.0.0.1:99999", h)
	if err == nil {
		t.Fatal("Serve listened on an impossible address")
	}
}
