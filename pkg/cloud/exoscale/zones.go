package exoscale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Instances, templates, private networks and deploy targets live in a zone,
// and each zone has its own API endpoint: a call about them goes to their
// zone's endpoint, which the zone list on the configured endpoint names
// (looked up once and cached). Anti-affinity groups, security groups, SSH
// keys and instance types are the account's, in every zone.
//
// A cluster's servers may be in several zones, and a list of instances
// covers one zone only. Which zones a cluster's list covers:
//
//   - every zone a spec parsed by this process names (Cloud.ParseSpec): the
//     actuator parses a Machine's spec before it looks up its servers, so
//     the zone of every Machine that exists is among them;
//   - every zone the client itself created or found an instance in;
//   - and every zone of the account on the first list of a cluster and then
//     every fullSweepEvery: an instance whose zone no spec names any more
//     (its Machine's spec was edited, or the Machine is gone and the
//     instance is an orphan) is still found, a little later.
//
// Listing every zone on every refresh would be correct too, but it costs
// one call per zone (eight today) where the usual cluster needs one. An
// instance the lists miss is never taken for gone: a Machine that records
// its instance finds it with GetServer, which asks every zone when it does
// not know the instance's (and a zone that does not answer is not taken
// for one that does not have it).
//
// A zone whose earlier list failed is listed again too, once its wait is
// over (below), until it answers; until then every list names it as one it
// could not see.
const fullSweepEvery = 10 * time.Minute

// zoneSet is a set of zone names, safe for concurrent use.
type zoneSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func newZoneSet() *zoneSet { return &zoneSet{m: map[string]bool{}} }

func (s *zoneSet) add(z string) {
	if z == "" {
		return
	}
	s.mu.Lock()
	s.m[z] = true
	s.mu.Unlock()
}

func (s *zoneSet) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.m))
	for z := range s.m {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}

// A zone whose endpoint fails (5xx, a timeout, a refusal) must not stop
// the Machines of the others: the zones of a list are asked at once, a zone
// that fails is left out of the following lists for a while (1 s, doubling
// up to zoneMaxWait, or its Retry-After) and reported as failed meanwhile,
// and a zone still not answering stragglerWait after every other zone has
// answered is given up on for this list. Every failed zone makes the list
// a cloud.PartialListError naming it, which degrades the Machines of that
// zone only (and those whose zone is unknown): also a zone no Machine is
// known to use (one only a full sweep looks at), as an orphan or a moved
// Machine's instance may be there, and nothing may conclude that an
// instance is absent from a zone that was not read.
const (
	zoneMinWait   = time.Second
	zoneMaxWait   = time.Minute
	stragglerWait = 5 * time.Second
)

// zoneDown is a zone whose last list failed, and until when it is left
// out of lists.
type zoneDown struct {
	err   *cloud.ZoneError
	until time.Time
	wait  time.Duration
}

// zoneRouting is what a client knows about where things are.
type zoneRouting struct {
	mu      sync.Mutex
	clients map[string]*v3.Client
	// clientZone is the zone of each client of clients.
	clientZone map[*v3.Client]string
	// answers is when each zone's endpoint last answered a call of the
	// client's credentials (zcall).
	answers map[string]time.Time
	// used are the zones the client created, found or was asked about
	// instances in.
	used *zoneSet
	// instance is the zone of each instance the client has seen.
	instance map[string]string
	// swept is when each cluster's list last covered every zone.
	swept map[string]time.Time
	// down are the zones whose last list failed.
	down map[string]*zoneDown
}

func (r *zoneRouting) init() {
	r.clients = map[string]*v3.Client{}
	r.clientZone = map[*v3.Client]string{}
	r.answers = map[string]time.Time{}
	r.used = newZoneSet()
	r.instance = map[string]string{}
	r.swept = map[string]time.Time{}
	r.down = map[string]*zoneDown{}
}

// downNow returns the zone's failure while it is left out of lists.
func (r *zoneRouting) downNow(zone string, now time.Time) *cloud.ZoneError {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.down[zone]; d != nil && now.Before(d.until) {
		return d.err
	}
	return nil
}

// failed records a failed list of the zone: it is left out of the next
// lists for twice as long as after its last failure (its Retry-After, if
// longer).
func (r *zoneRouting) failed(zone string, err error, now time.Time) *cloud.ZoneError {
	ze, ok := err.(*cloud.ZoneError)
	if !ok {
		ze = &cloud.ZoneError{Zone: zone, Err: err}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.down[zone]
	if d == nil {
		d = &zoneDown{}
		r.down[zone] = d
	}
	d.wait = min(max(2*d.wait, zoneMinWait), zoneMaxWait)
	wait := d.wait
	var re *cloud.RetryableError
	if errors.As(err, &re) && re.RetryAfter > wait {
		wait = re.RetryAfter
	}
	d.err, d.until = ze, now.Add(wait)
	return ze
}

// answerShowsCredentials is how long a zone's answer shows that the
// credentials work, so that another zone's failure meanwhile is that
// zone's outage: longer than the full sweep, which asks every zone.
const answerShowsCredentials = 2 * fullSweepEvery

// answeredCall records a call the zone's endpoint answered.
func (r *zoneRouting) answeredCall(zone string, now time.Time) {
	if zone == "" {
		return
	}
	r.mu.Lock()
	r.answers[zone] = now
	r.mu.Unlock()
}

// othersAnswered reports whether a zone other than zone answered the
// client's credentials lately: then zone's failure is confined to it
// (cloud.ZoneError.Confined), a zone outage. A failure of every zone
// asked is none's.
func (r *zoneRouting) othersAnswered(zone string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for z, at := range r.answers {
		if z != zone && now.Sub(at) < answerShowsCredentials {
			return true
		}
	}
	return false
}

// confined is ze, marked Confined when other zones answered the
// credentials lately (a copy: ze may be shared).
func (c *Client) confined(ze *cloud.ZoneError) *cloud.ZoneError {
	if ze == nil || ze.Confined || !c.zones.othersAnswered(ze.Zone, c.now()) {
		return ze
	}
	cp := *ze
	cp.Confined = true
	return &cp
}

// answered records a zone that listed again.
func (r *zoneRouting) answered(zone string) {
	r.mu.Lock()
	delete(r.down, zone)
	r.mu.Unlock()
}

func (r *zoneRouting) seen(id, zone string) {
	if id == "" || zone == "" {
		return
	}
	r.used.add(zone)
	r.mu.Lock()
	r.instance[id] = zone
	r.mu.Unlock()
}

func (r *zoneRouting) zoneOf(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.instance[id]
}

func (r *zoneRouting) forget(id string) {
	r.mu.Lock()
	delete(r.instance, id)
	r.mu.Unlock()
}

// zoneList is the zone list of the account's endpoint, cached.
func (c *Client) zoneList(ctx context.Context) ([]v3.Zone, error) {
	return c.zoneListCache.Get(ctx, c.now(), catalogTTL, func(ctx context.Context) (out []v3.Zone, err error) {
		err = c.call(ctx, "zone.list", func(ctx context.Context) error {
			resp, err := c.base.ListZones(ctx)
			if err == nil {
				out = resp.Zones
			}
			return err
		})
		return out, err
	})
}

// allZones are the names of every zone, in the API's order.
func (c *Client) allZones(ctx context.Context) ([]string, error) {
	zones, err := c.zoneList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(zones))
	for _, z := range zones {
		out = append(out, string(z.Name))
	}
	return out, nil
}

// zoneClient returns the SDK client of a zone's endpoint. A zone the API
// does not list is an InvalidConfigError of the spec's zone.
func (c *Client) zoneClient(ctx context.Context, zone string) (*v3.Client, error) {
	c.zones.mu.Lock()
	cl := c.zones.clients[zone]
	c.zones.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	zones, err := c.zoneList(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(zones, func(z v3.Zone) bool { return string(z.Name) == zone })
	if i < 0 {
		names := make([]string, 0, len(zones))
		for _, z := range zones {
			names = append(names, string(z.Name))
		}
		return nil, &cloud.InvalidConfigError{Field: "zone", Message: fmt.Sprintf("zone %q does not exist on Exoscale; the zones are %s", zone, strings.Join(names, ", "))}
	}
	ep := strings.TrimSuffix(string(zones[i].APIEndpoint), "/")
	if ep == "" {
		return nil, fmt.Errorf("exoscale: the zone list names no API endpoint for zone %s", zone)
	}
	cl = c.base.WithEndpoint(v3.Endpoint(ep))
	c.zones.mu.Lock()
	if have := c.zones.clients[zone]; have != nil {
		cl = have // another call made it meanwhile
	} else {
		c.zones.clients[zone] = cl
		c.zones.clientZone[cl] = zone
	}
	c.zones.mu.Unlock()
	return cl, nil
}

// zoneOfClient names the zone of a client zoneClient returned.
func (r *zoneRouting) zoneOfClient(cl *v3.Client) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clientZone[cl]
}

// listZones says which zones a list of a cluster's servers covers (see
// above), and whether they are all of them.
func (c *Client) listZones(ctx context.Context, clusterID string) ([]string, bool, error) {
	all, err := c.allZones(ctx)
	if err != nil {
		return nil, false, err
	}
	c.zones.mu.Lock()
	last, swept := c.zones.swept[clusterID]
	c.zones.mu.Unlock()
	if !swept || c.now().Sub(last) >= fullSweepEvery {
		return all, true, nil
	}
	want := map[string]bool{}
	for _, z := range c.cloud.zones.list() {
		want[z] = true
	}
	for _, z := range c.zones.used.list() {
		want[z] = true
	}
	// Zones that failed in a sweep are asked again until they answer.
	c.zones.mu.Lock()
	for z := range c.zones.down {
		want[z] = true
	}
	c.zones.mu.Unlock()
	var out []string
	for _, z := range all {
		if want[z] {
			out = append(out, z)
		}
	}
	return out, false, nil
}

func (c *Client) sweptAt(clusterID string, t time.Time) {
	c.zones.mu.Lock()
	c.zones.swept[clusterID] = t
	c.zones.mu.Unlock()
}
