package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingProxy stands between one cluster's manager and the account's
// emulator and counts that cluster's calls by route, with their answers'
// bytes and times: the emulator counts the account's calls, and N managers
// with one account (the fleet) are told apart by the endpoint each is
// given. It forwards the Host the manager asked for, so that the Exoscale
// emulator names the zones' endpoints at the proxy too (their calls are
// counted as well); Exoscale's signatures cover the path and the body, not
// the host.
type countingProxy struct {
	URL string

	mu     sync.Mutex
	routes map[string]int64
	bytes  int64
	at     []time.Time
}

func newCountingProxy(b testing.TB, target string) *countingProxy {
	to, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	p := &countingProxy{routes: map[string]int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(to)
			r.Out.Host = r.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &countingBody{ReadCloser: resp.Body, p: p}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := routeOf(r)
		p.mu.Lock()
		p.routes[route]++
		p.at = append(p.at, time.Now())
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	p.URL = srv.URL + "/"
	return p
}

type countingBody struct {
	io.ReadCloser
	p *countingProxy
}

func (c *countingBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.p.mu.Lock()
	c.p.bytes += int64(n)
	c.p.mu.Unlock()
	return n, err
}

// reset starts counting from zero.
func (p *countingProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes, p.bytes, p.at = map[string]int64{}, 0, nil
}

// counted returns the calls since the last reset, the bytes of their
// answers and when each was made.
func (p *countingProxy) counted() (calls, int64, []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	routes := make(map[string]int64, len(p.routes))
	for k, v := range p.routes {
		routes[k] = v
	}
	return calls{routes: routes}, p.bytes, append([]time.Time(nil), p.at...)
}

var idSegment = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// routeOf names a request's route as the emulators' counters do, with
// {id} for IDs ("GET /v2/instance/{id}", "PUT /v2/security-group/{id}:attach"),
// and "/{zone}" before it when it went to another zone's endpoint than the
// default one (Exoscale's "/<zone>/v2/…"), where the benchmarks' Machines
// are not: those are the lists of a cluster's sweep of every zone.
func routeOf(r *http.Request) string {
	path, zone := r.URL.Path, ""
	for _, v := range []string{"/v1/", "/v2/"} {
		if i := strings.Index(path, v); i >= 0 {
			if strings.Trim(path[:i], "/") != "" {
				zone = "/{zone}"
			}
			path = path[i:]
			break
		}
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if m := idSegment.FindString(s); m != "" {
			segs[i] = "{id}" + s[len(m):]
		}
	}
	return r.Method + " " + zone + strings.Join(segs, "/")
}

// peakPerSecond is the most calls of times within any one second.
func peakPerSecond(times []time.Time) int {
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range times {
		for times[i].Sub(times[j]) >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
