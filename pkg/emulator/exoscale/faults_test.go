package exoscale_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Injected errors have the real API's body and map to the SDK's sentinels;
// nothing is done.
func TestInjectedErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		sentinel error
	}{
		{http.StatusServiceUnavailable, v3.ErrServiceUnavailable},
		{http.StatusInternalServerError, v3.ErrInternalServerError},
		{http.StatusBadGateway, v3.ErrBadGateway},
		{http.StatusTooManyRequests, v3.ErrTooManyRequests},
	} {
		v := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: "POST /v2/instance", ErrorRate: 1, ErrorStatus: tc.status, RetryAfterSeconds: 7}}})
		_, err := v.client.CreateInstance(v.ctx, instanceReq("never"))
		msg := apiError(t, err, tc.sentinel)
		if tc.status == http.StatusTooManyRequests {
			wantContains(t, msg, "throttled")
		} else {
			wantContains(t, msg, "injected by the emulator")
		}
		// The provider withholds a message that holds 8 bytes of the
		// credentials in use: a fault's own words must not look like a
		// piece of the default secret, or every test would see Withheld.
		if cloud.Quotes(msg, emu.DefaultAPIKey, emu.DefaultAPISecret) {
			t.Fatalf("%d: %q quotes a piece of the default credentials: the provider would withhold it", tc.status, msg)
		}
		if n := v.emu.CountInstances(); n != 0 {
			t.Fatalf("%d: %d instances, want none", tc.status, n)
		}
	}
	// The Retry-After of a 429.
	v := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: "GET /v2/instance", ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 7}}})
	resp, body := v.raw("GET", "/v2/instance", nil, true)
	wantStatus(t, resp, body, http.StatusTooManyRequests)
	if resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	wantMessage(t, body, "Expected available in 7 seconds")
}

// A lost answer: the change is made, the client never hears of it.
func TestLostResponseOnCreateStillCreates(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "POST /v2/instance", LostResponseRate: 1, Times: 1}); err != nil {
		t.Fatal(err)
	}
	op, err := v.client.CreateInstance(v.ctx, instanceReq("ghost"))
	if err == nil {
		t.Fatalf("create answered %+v through a lost response", op)
	}
	var ae *v3.APIError
	if errors.As(err, &ae) {
		t.Fatalf("got API error %v, want a transport error", ae)
	}
	l, err := v.client.ListInstances(v.ctx, v3.ListInstancesWithLabels(""))
	if err != nil || len(l.Instances) != 1 || l.Instances[0].Name != "ghost" {
		t.Fatalf("instances after the lost answer: %+v, %v", l, err)
	}
	// With a status instead of a dropped connection.
	if err := v.emu.Harness().SetRules([]harness.Rule{{Route: "PUT /v2/instance/{id}:stop", LostResponseRate: 1, LostResponseStatus: 502}}); err != nil {
		t.Fatal(err)
	}
	_, err = v.client.StopInstance(v.ctx, l.Instances[0].ID)
	wantContains(t, apiError(t, err, v3.ErrBadGateway), "injected")
	v.wantState(v.client, l.Instances[0].ID, v3.InstanceStateStopped)
	if got := v.emu.Harness().Count("PUT /v2/instance/{id}:stop"); got != 1 {
		t.Fatalf("Count(stop) = %d", got)
	}
	if got := v.emu.Harness().Count("POST /v2/instance"); got != 1 {
		t.Fatalf("Count(create) = %d", got)
	}
}

func TestMetricsAndAdminEndpoint(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	v.create(v.client, instanceReq("counted"))
	// Without the account's credentials, neither answers.
	for _, path := range []string{"/metrics", "/_emulator/requests", "/_emulator/faults"} {
		resp, body := v.raw("GET", path, nil, false)
		wantStatus(t, resp, body, http.StatusUnauthorized)
	}
	// Signed as an API call, or with the key and secret as basic auth.
	resp, body := v.raw("GET", "/metrics", nil, true)
	wantStatus(t, resp, body, http.StatusOK)
	want := `emulator_requests_total{cloud="exoscale",method="POST",route="POST /v2/instance"} 1`
	if !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %s:\n%s", want, body)
	}
	req, _ := http.NewRequest("GET", v.srv.URL+"/_emulator/requests", nil)
	req.SetBasicAuth(emu.DefaultAPIKey, emu.DefaultAPISecret)
	r2, err := v.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	b2, _ := io.ReadAll(r2.Body)
	wantStatus(t, r2, b2, http.StatusOK)
	if !strings.Contains(string(b2), `"POST /v2/instance":1`) {
		t.Fatalf("requests %s", b2)
	}
	req, _ = http.NewRequest("GET", v.srv.URL+"/_emulator/requests", nil)
	req.SetBasicAuth(emu.DefaultAPIKey, "wrong-secret")
	r3, err := v.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r3.Body.Close()
	if r3.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong secret got %d", r3.StatusCode)
	}
}

// A fault rule can fail one zone's endpoint: that zone's requests fail (a
// 403 too, in the API's error shape), the other zones answer.
func TestFaultsOfOneZone(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusForbidden} {
		v := newEnv(t, emu.Config{Faults: []harness.Rule{{Route: "*", Zone: "de-fra-1", ErrorRate: 1, ErrorStatus: status}}})
		fra := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "de-fra-1")
		vie := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "at-vie-1")
		_, err := fra.ListInstances(v.ctx)
		sentinel := v3.ErrServiceUnavailable
		if status == http.StatusForbidden {
			sentinel = v3.ErrForbidden
		}
		wantContains(t, apiError(t, err, sentinel), "injected by the emulator")
		if _, err := vie.ListInstances(v.ctx); err != nil {
			t.Errorf("%d in de-fra-1: at-vie-1 failed too: %v", status, err)
		}
		if _, err := v.client.ListInstances(v.ctx); err != nil {
			t.Errorf("%d in de-fra-1: the default zone failed too: %v", status, err)
		}
	}
}
