package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// guard bounds how long a test waits for something that must happen; it is
// a hang detector, not a speed target.
const guard = 30 * time.Second

// lockedAPI is an API whose handlers work under one lock and read the body
// there, as the emulators' handlers do with their world.
type lockedAPI struct {
	mu      sync.Mutex
	reads   atomic.Int64
	written atomic.Int64
}

func (a *lockedAPI) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.reads.Add(1)
		_, _ = io.WriteString(w, `[]`)
	})
	mux.HandleFunc("POST /v1/things", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.written.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	})
	return mux
}

func serveLocked(t *testing.T, o ServeOptions, opts Options) (*lockedAPI, *Harness, string) {
	t.Helper()
	api := &lockedAPI{}
	if opts.ErrorBody == nil {
		opts.ErrorBody = func(status int, msg string) any { return map[string]any{"status": status, "why": msg} }
	}
	h, err := New(api.mux(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, done, err := ServeWith(ctx, "127.0.0.1:0", h, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return api, h, url
}

// rawConn opens a TCP connection to the server at url.
func rawConn(t *testing.T, url string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestSlowBodyDoesNotStallOthers(t *testing.T) {
	// The server's own timeouts are out of the way: only the harness reading
	// bodies before the handler runs keeps the others going.
	api, _, url := serveLocked(t, ServeOptions{ReadTimeout: time.Hour, ReadHeaderTimeout: time.Hour}, Options{})

	slow := rawConn(t, url)
	fmt.Fprintf(slow, "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na")

	// Meanwhile every other client is served, reads and writes alike.
	client := &http.Client{Timeout: guard}
	for i := range 5 {
		resp, err := client.Get(url + "v1/things")
		if err != nil {
			t.Fatalf("GET %d while a client sends its body slowly: %v", i, err)
		}
		resp.Body.Close()
		resp, err = client.Post(url+"v1/things", "application/json", strings.NewReader(`{"name":"x"}`))
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %d while a client sends its body slowly: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	if api.reads.Load() != 5 || api.written.Load() != 5 {
		t.Errorf("reads %d, writes %d; want 5 each", api.reads.Load(), api.written.Load())
	}

	// The slow request reaches its handler once its body is complete.
	fmt.Fprintf(slow, "me\":\"slow\"}%s", strings.Repeat(" ", 100-len(`{"name":"slow"}`)))
	_ = slow.SetReadDeadline(time.Now().Add(guard))
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(string(body), `{"name":"slow"}`) {
		t.Errorf("slow request: %d %q", resp.StatusCode, body)
	}
}

func TestServerDropsClientsThatNeverFinish(t *testing.T) {
	_, _, url := serveLocked(t, ServeOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond}, Options{})
	client := &http.Client{Timeout: guard}

	// Headers that never end, and a body that never ends: the server hangs
	// up on both, and serves the others all along.
	headers := rawConn(t, url)
	fmt.Fprintf(headers, "GET /v1/things HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	body := rawConn(t, url)
	fmt.Fprintf(body, "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	resp, err := client.Get(url + "v1/things")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	for name, conn := range map[string]net.Conn{"headers": headers, "body": body} {
		_ = conn.SetReadDeadline(time.Now().Add(guard))
		b, err := io.ReadAll(conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the server kept the connection of a client that never finished", name)
			continue
		}
		// Whatever it says first (400, or nothing), it closed the connection.
		if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 4") {
			t.Errorf("%s: answered %q", name, b)
		}
	}
}

func TestBodiesAreBounded(t *testing.T) {
	api, h, url := serveLocked(t, ServeOptions{}, Options{MaxBodyBytes: 1000})
	client := &http.Client{Timeout: guard}
	post := func(body io.Reader, contentLength int64) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", url+"v1/things", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = contentLength
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	// At the limit: served.
	if resp, _ := post(strings.NewReader(strings.Repeat("x", 1000)), 1000); resp.StatusCode != http.StatusCreated {
		t.Errorf("1000 bytes: %d", resp.StatusCode)
	}
	// Over it, announced or streamed (chunked): 413 in the cloud's shape,
	// and the handler never runs.
	for name, c := range map[string]struct {
		body io.Reader
		n    int64
	}{
		"content-length": {strings.NewReader(strings.Repeat("x", 1001)), 1001},
		"chunked":        {io.MultiReader(strings.NewReader(strings.Repeat("x", 600)), strings.NewReader(strings.Repeat("x", 600))), -1},
		"huge":           {io.LimitReader(zeros{}, 1<<30), 1 << 30},
	} {
		resp, b := post(c.body, c.n)
		var e struct {
			Status int    `json:"status"`
			Why    string `json:"why"`
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &e) != nil || e.Status != 413 || !strings.Contains(e.Why, "at most 1000 bytes") {
			t.Errorf("%s: %d %s, want 413 in the cloud's error shape", name, resp.StatusCode, b)
		}
	}
	if n := api.written.Load(); n != 1 {
		t.Errorf("handler ran %d times, want once (for the body at the limit)", n)
	}
	if n := h.Count("POST /v1/things"); n != 1 {
		t.Errorf("counted %d POSTs, want the one served", n)
	}

	// The default bounds a harness without the option.
	_, _, url = serveLocked(t, ServeOptions{}, Options{})
	req, _ := http.NewRequest("POST", url+"v1/things", io.LimitReader(zeros{}, DefaultMaxBodyBytes+1))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("default limit: %d, want 413", resp.StatusCode)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestAdminAuth(t *testing.T) {
	allowed := func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer admin-token" }
	_, _, url := serveLocked(t, ServeOptions{}, Options{AdminAuth: allowed})
	client := &http.Client{Timeout: guard}
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+strings.TrimPrefix(path, "/"), strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/_emulator/faults", ""},
		{"PUT", "/_emulator/faults", `{"rules":[{"route":"GET /v1/things","errorRate":1}]}`},
		{"POST", "/_emulator/faults", `{"route":"GET /v1/things","errorRate":1}`},
		{"DELETE", "/_emulator/faults", ""},
		{"GET", "/_emulator/requests", ""},
		{"DELETE", "/_emulator/requests", ""},
		{"GET", "/metrics", ""},
	} {
		for _, token := range []string{"", "wrong"} {
			status, body := do(c.method, c.path, token, c.body)
			if status != http.StatusUnauthorized || !strings.Contains(body, `"status":401`) {
				t.Errorf("%s %s with token %q: %d %s, want 401 in the cloud's shape", c.method, c.path, token, status, body)
			}
		}
	}
	// Nothing changed: the API still answers.
	if status, _ := do("GET", "/v1/things", "", ""); status != http.StatusOK {
		t.Errorf("API after refused admin writes: %d", status)
	}
	// With the token, all works; the API itself is not the admin's business.
	if status, _ := do("POST", "/_emulator/faults", "admin-token", `{"route":"GET /v1/things","errorRate":1}`); status != http.StatusCreated {
		t.Errorf("POST faults with the token: %d", status)
	}
	if status, _ := do("GET", "/v1/things", "", ""); status != http.StatusServiceUnavailable {
		t.Errorf("API after the fault was added: %d, want the injected 503", status)
	}
	if status, body := do("GET", "/metrics", "admin-token", ""); status != http.StatusOK || !strings.Contains(body, "emulator_requests_total") {
		t.Errorf("metrics with the token: %d", status)
	}
}
