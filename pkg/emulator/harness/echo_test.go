package harness

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEchoRuleQuotesAWindow: an echo rule answers with the cloud's error
// shape and quotes a window of what the emulator says the request carried,
// as a parser quotes the input it choked on; not the whole of it.
func TestEchoRuleQuotesAWindow(t *testing.T) {
	const secret = "Q7vX2mLp9RtK4wZs8NcBd3Hf"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	h, err := New(mux, Options{
		Cloud: "test",
		Rules: []Rule{{Route: "POST /v1/things", ErrorRate: 1, ErrorStatus: 400, Echo: EchoUserData, EchoOffset: 4, EchoLength: 10, Times: 1}},
		Echo: func(r *http.Request, what string) string {
			b, _ := io.ReadAll(r.Body)
			if what == EchoUserData {
				return string(b)
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func() (int, string) {
		resp, err := http.Post(srv.URL+"/v1/things", "text/plain", strings.NewReader(secret))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Message
	}
	status, msg := post()
	if status != 400 || !strings.Contains(msg, "'"+secret[4:14]+"'") || strings.Contains(msg, secret) {
		t.Errorf("echo answer %d %q, want 400 quoting %q only", status, msg, secret[4:14])
	}
	// Spent: the next request is handled.
	if status, _ := post(); status != http.StatusCreated {
		t.Errorf("after the echo rule is spent: %d", status)
	}
	for _, bad := range []Rule{
		{Route: "*", ErrorRate: 1, ErrorStatus: 400},
		{Route: "*", Echo: EchoUserData, ErrorStatus: 400},
		{Route: "*", ErrorRate: 1, Echo: "headers"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("rule %+v accepted", bad)
		}
	}
	if r, err := ParseRule("route=POST /v1/servers,errorRate=1,errorStatus=400,echo=userData,times=1"); err != nil || r.Echo != EchoUserData {
		t.Errorf("ParseRule: %+v, %v", r, err)
	}
}
