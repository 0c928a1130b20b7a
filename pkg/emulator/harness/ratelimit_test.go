package harness

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRateLimitRefusesBeyondTheBucket(t *testing.T) {
	t.Parallel()
	// One token a second, two saved up: the third request in a row finds
	// the bucket empty.
	f := newFixture(t, Rule{Route: "GET /v1/things", RateLimit: &RateLimit{QPS: 1, Burst: 2}})
	for i := range 2 {
		resp, b := f.mustDo(t, "GET", "/v1/things", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 from the burst; body %s", i+1, resp.StatusCode, b)
		}
	}
	resp, b := f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, http.StatusTooManyRequests)
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1 (the next token comes within a second)", got)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	if why, _ := body["why"].(string); !strings.Contains(why, "1 seconds") || body["status"] != float64(429) {
		t.Errorf("body %s is not the cloud's 429 saying when to come back", b)
	}
	if n := f.gets.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2: a refused request is not handled", n)
	}
	// Other routes are not the rule's.
	resp, b = f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, http.StatusCreated)

	// After the Retry-After, a token is there again.
	time.Sleep(1100 * time.Millisecond)
	resp, b = f.mustDo(t, "GET", "/v1/things", "")
	wantStatus(t, resp, b, http.StatusOK)
	if rules := f.h.Rules(); rules[0].Fired != 1 {
		t.Errorf("rule fired %d times, want 1 (the one refusal)", rules[0].Fired)
	}
	if got := f.h.Count("GET /v1/things"); got != 4 {
		t.Errorf("counted %d requests, want 4: refused ones count as received", got)
	}
}

// A refused request is answered at once: the latency of the rule (or of
// others) is for requests the API handles.
func TestRateLimitedRequestSkipsLatency(t *testing.T) {
	t.Parallel()
	f := newFixture(t,
		Rule{Route: "*", Latency: Duration(time.Hour)},
		Rule{Route: "*", RateLimit: &RateLimit{QPS: 0.001, Burst: 1}},
	)
	// The first request takes the only token and would wait an hour; it
	// gives up when the test ends (cleanups run last first: before the
	// server closes, which waits for it).
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/things", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for f.h.Count("GET /v1/things") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan *http.Response, 1)
	go func() {
		resp, _, err := f.do(t, "GET", "/v1/things", "")
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	select {
	case resp := <-done:
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("second request: %v, want a 429", resp)
		}
		if got := resp.Header.Get("Retry-After"); got != "1000" {
			t.Errorf("Retry-After = %q, want 1000 (seconds until the next token)", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the refused request waited for the latency")
	}
}

func TestRateLimitRuleForms(t *testing.T) {
	t.Parallel()
	want := Rule{Route: "*", RateLimit: &RateLimit{QPS: 5, Burst: 10}}
	got, err := ParseRule("route=*,rateLimit.qps=5,rateLimit.burst=10")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseRule = %+v, %v; want %+v", got, err, want)
	}
	var fromJSON Rule
	if err := json.Unmarshal([]byte(`{"route":"*","rateLimit":{"qps":5,"burst":10}}`), &fromJSON); err != nil || !reflect.DeepEqual(fromJSON, want) {
		t.Errorf("JSON rule = %+v, %v; want %+v", fromJSON, err, want)
	}
	b, err := json.Marshal(want)
	if err != nil || !strings.Contains(string(b), `"rateLimit":{"qps":5,"burst":10}`) {
		t.Errorf("rule as JSON: %s (%v)", b, err)
	}
	for _, in := range []string{
		"route=*,rateLimit.qps=0",
		"route=*,rateLimit.qps=-1",
		"route=*,rateLimit.qps=5,rateLimit.burst=-1",
		"route=*,rateLimit.rate=5",
		"route=*,rateLimit.qps=fast",
	} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %+v, want an error", in, r)
		}
	}
	// Without a burst, the bucket holds a second's worth of tokens.
	r := Rule{Route: "*", RateLimit: &RateLimit{QPS: 2.5}}
	now := time.Now()
	for i := range 3 {
		if ok, _ := r.take(now); !ok {
			t.Fatalf("token %d refused; the default burst is 3", i+1)
		}
	}
	if ok, wait := r.take(now); ok || wait <= 0 || wait > time.Second {
		t.Errorf("fourth token: ok %v, wait %s; want a refusal for at most 400ms", ok, wait)
	}
}

func TestRateLimitOverTheAdminEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, b := f.mustDo(t, "POST", AdminPrefix+"faults", `{"route":"POST /v1/things","rateLimit":{"qps":1,"burst":1}}`)
	wantStatus(t, resp, b, http.StatusCreated)
	resp, b = f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, http.StatusCreated)
	resp, b = f.mustDo(t, "POST", "/v1/things", "{}")
	wantStatus(t, resp, b, http.StatusTooManyRequests)
	resp, b = f.mustDo(t, "POST", AdminPrefix+"faults", `{"route":"*","rateLimit":{"qps":0}}`)
	wantStatus(t, resp, b, http.StatusBadRequest)
}
