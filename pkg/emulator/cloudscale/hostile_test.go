package cloudscale_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

// guard only detects a hang; no test here measures speed.
const guard = 30 * time.Second

func TestAdminEndpointTakesTheAPITokens(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Tokens: map[string]emu.Access{"rw": emu.ReadWrite, "ro": emu.ReadOnly}})
	do := func(method, path, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, v.srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		if resp.StatusCode == http.StatusUnauthorized {
			wantBody(t, b, `{"detail":"The admin endpoint and /metrics need the emulator's credentials."}`)
		}
		return resp.StatusCode
	}
	fault := `{"route":"POST /v1/servers","errorRate":1}`
	for _, c := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"POST", "/_emulator/faults", "", fault, http.StatusUnauthorized},
		{"POST", "/_emulator/faults", "unknown", fault, http.StatusUnauthorized},
		{"POST", "/_emulator/faults", "ro", fault, http.StatusUnauthorized},
		{"DELETE", "/_emulator/requests", "ro", "", http.StatusUnauthorized},
		{"GET", "/_emulator/requests", "", "", http.StatusUnauthorized},
		{"GET", "/metrics", "", "", http.StatusUnauthorized},
		{"GET", "/_emulator/requests", "ro", "", http.StatusOK},
		{"GET", "/metrics", "ro", "", http.StatusOK},
		{"POST", "/_emulator/faults", "rw", fault, http.StatusCreated},
	} {
		if got := do(c.method, c.path, c.token, c.body); got != c.want {
			t.Errorf("%s %s with %q: %d, want %d", c.method, c.path, c.token, got, c.want)
		}
	}
	if n := len(v.emu.Harness().Rules()); n != 1 {
		t.Errorf("%d fault rules, want only the one added with the read-write token", n)
	}

	// Without tokens configured, the admin endpoint stays open, as before.
	open := newEnv(t, emu.Config{})
	resp, err := http.Get(open.srv.URL + "/_emulator/requests")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("open emulator's admin endpoint: %d", resp.StatusCode)
	}
}

func TestLargeBodyIsRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	body := `{"name":"big","flavor":"flex-4-2","image":"debian-12","zone":"rma1","user_data":"` + strings.Repeat("x", 2<<20) + `"}`
	req, _ := http.NewRequest("POST", v.srv.URL+"/v1/servers", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, resp)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"detail":"Request body too large`) {
		t.Errorf("got %d %s, want 413 with a detail", resp.StatusCode, b)
	}
	if n := len(v.listServers()); n != 0 {
		t.Errorf("%d servers after a refused create", n)
	}
}

func TestSlowClientDoesNotStallTheAccount(t *testing.T) {
	t.Parallel()
	e, err := emu.New(emu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	url, _, err := e.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A create whose body trickles in: the emulator must not hold its
	// world while waiting for it.
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	full := `{"name":"slow","flavor":"flex-4-2","image":"debian-12","zone":"rma1"}`
	fmt.Fprintf(conn, "POST /v1/servers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(full), full[:10])

	client := &http.Client{Timeout: guard}
	for i := range 3 {
		req, _ := http.NewRequest("GET", url+"v1/servers", nil)
		req.Header.Set("Authorization", "Bearer t")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("list %d while a create trickles in: %v", i, err)
		}
		resp.Body.Close()
	}
	fmt.Fprint(conn, full[10:])
	_ = conn.SetReadDeadline(time.Now().Add(guard))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("slow create: %d %s", resp.StatusCode, b)
	}
}
