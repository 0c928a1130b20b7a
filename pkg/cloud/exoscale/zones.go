package exoscale

import (
	"context"
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
// not know the instance's.
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

// zoneRouting is what a client knows about where things are.
type zoneRouting struct {
	mu      sync.Mutex
	clients map[string]*v3.Client
	// used are the zones the client created, found or was asked about
	// instances in.
	used *zoneSet
	// instance is the zone of each instance the client has seen.
	instance map[string]string
	// swept is when each cluster's list last covered every zone.
	swept map[string]time.Time
}

func (r *zoneRouting) init() {
	r.clients = map[string]*v3.Client{}
	r.used = newZoneSet()
	r.instance = map[string]string{}
	r.swept = map[string]time.Time{}
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
	c.zones.clients[zone] = cl
	c.zones.mu.Unlock()
	return cl, nil
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
