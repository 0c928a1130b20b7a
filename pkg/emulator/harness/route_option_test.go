package harness

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An API whose paths a ServeMux cannot express names its routes itself:
// counters and fault rules use those names.
func TestRouteOption(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h, err := New(mux, Options{
		Route: func(r *http.Request) string {
			if strings.HasSuffix(r.URL.Path, ":start") {
				return "PUT /v2/instance/{id}:start"
			}
			return ""
		},
		Rules: []Rule{{Route: "PUT /v2/instance/{id}:start", ErrorRate: 1, ErrorStatus: 503, Times: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(method, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec.Code
	}
	if got := serve("PUT", "/v2/instance/abc:start"); got != 503 {
		t.Fatalf("first start: status %d, want the injected 503", got)
	}
	if got := serve("PUT", "/v2/instance/abc:start"); got != 200 {
		t.Fatalf("second start: status %d, want 200", got)
	}
	if got := serve("GET", "/v2/elsewhere"); got != 200 {
		t.Fatalf("unnamed route: status %d, want 200", got)
	}
	want := map[string]int64{"PUT /v2/instance/{id}:start": 2, "GET (unmatched)": 1}
	got := h.Requests()
	if len(got) != len(want) {
		t.Fatalf("Requests() = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("Requests() = %v, want %v", got, want)
		}
	}
}
