package exoscale

import (
	"context"
	"fmt"
	"sync"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// catalogTTL is how long the lists of the account's catalogue (instance
// types, templates, security groups, private networks, SSH keys, deploy
// targets, zones) are trusted: they change when someone adds to them, not
// between two reconciles. A name not found lists once more.
const catalogTTL = 10 * time.Minute

// Client acts on one Exoscale account with one API key and secret.
type Client struct {
	cloud *Cloud
	// base is the SDK client on the configured endpoint, for the zone list
	// and the account-wide resources (groups, SSH keys, instance types);
	// zone clients are copies of it with their zone's endpoint.
	base *v3.Client
	// key and secret are kept only to scrub them from API messages, in
	// case the API ever echoes them; they are never printed.
	key, secret string
	// source says where the credentials came from, for auth errors.
	source string
	gate   *cloud.Gate
	now    func() time.Time

	zoneListCache cloud.Catalog[v3.Zone]
	zones         zoneRouting

	instanceTypes  cloud.Catalog[v3.InstanceType]
	securityGroups cloud.Catalog[v3.SecurityGroup]
	sshKeys        cloud.Catalog[v3.SSHKey]
	userGroups     cloud.Catalog[v3.AntiAffinityGroup]
	catalogMu      sync.Mutex
	templates      map[string]*cloud.Catalog[v3.Template]       // zone/visibility
	networks       map[string]*cloud.Catalog[v3.PrivateNetwork] // zone
	deployTargets  map[string]*cloud.Catalog[v3.DeployTarget]   // zone

	groupLocks cloud.GroupLocks

	// diskSize remembers the disk size of instances this process created
	// or read in full: the list does not say, and a resync should not
	// cost a read per instance to tell the disk size did not drift.
	diskMu   sync.Mutex
	diskSize map[string]int64
	// groupsOf remembers the same way the anti-affinity groups of
	// instances, which the list does not say either: a delete whose list
	// proves the instance the Machine's (cloud.ProvenOwned) needs no read
	// for the groups it may leave empty.
	groupsOf map[string][]v3.AntiAffinityGroup

	addrs privateAddrs
}

func newClient(c *Cloud, key, secret, source string, gate *cloud.Gate) (*Client, error) {
	base, err := v3.NewClient(credentials.NewStaticCredentials(key, secret),
		v3.ClientOptWithEndpoint(v3.Endpoint(c.endpoint)),
		// Never the SDK's default client, which retries POSTs: see doc.go.
		v3.ClientOptWithHTTPClient(c.httpClient),
		v3.ClientOptWithUserAgent("appuio-machine-api-provider"),
	)
	if err != nil {
		return nil, fmt.Errorf("exoscale: building the API client for the credentials from %s: %w", source, err)
	}
	cl := &Client{
		cloud: c, base: base, key: key, secret: secret, source: source, gate: gate, now: time.Now,
		templates:     map[string]*cloud.Catalog[v3.Template]{},
		networks:      map[string]*cloud.Catalog[v3.PrivateNetwork]{},
		deployTargets: map[string]*cloud.Catalog[v3.DeployTarget]{},
		diskSize:      map[string]int64{},
		groupsOf:      map[string][]v3.AntiAffinityGroup{},
	}
	cl.zones.init()
	return cl, nil
}

// call runs one API call as operation op through cloud.Call: the account's
// gate, the exchange for the classification, the metrics. reclassify, when
// given, lets a call that knows better change the class before the gate
// and the metrics see it.
func (c *Client) call(ctx context.Context, op string, fn func(ctx context.Context) error, reclassify ...func(error) error) error {
	redact := cloud.Redactions(ctx)
	return cloud.Call(ctx, Name, c.gate, op, fn, func(ctx context.Context, ex *cloud.Exchange, err error) error {
		err = c.classify(ctx, op, ex, err, redact)
		for _, f := range reclassify {
			err = f(err)
		}
		return err
	})
}

// zcall is call for a call to the endpoint of zone client zc: the
// account's gate holds an operation that zone refused back in that zone
// only (cloud.WithZone).
func (c *Client) zcall(ctx context.Context, zc *v3.Client, op string, fn func(ctx context.Context) error, reclassify ...func(error) error) error {
	zone := c.zones.zoneOfClient(zc)
	err := c.call(cloud.WithZone(ctx, zone), op, fn, reclassify...)
	if err == nil {
		// The zone answered these credentials: another zone's failure
		// meanwhile is that zone's (zoneRouting.othersAnswered).
		c.zones.answeredCall(zone, c.now())
	}
	return err
}

// find looks items up in a catalog of the client (see cloud.Catalog).
func find[T any](ctx context.Context, now time.Time, l *cloud.Catalog[T], fetch func(ctx context.Context) ([]T, error), match func(T) bool) ([]T, error) {
	return l.Find(ctx, now, catalogTTL, fetch, match)
}

func (c *Client) rememberDisk(id string, size int64) {
	c.diskMu.Lock()
	c.diskSize[id] = size
	c.diskMu.Unlock()
}

// rememberGroups records the anti-affinity groups of an instance, from a
// full record of it.
func (c *Client) rememberGroups(id string, groups []v3.AntiAffinityGroup) {
	c.diskMu.Lock()
	c.groupsOf[id] = groups
	c.diskMu.Unlock()
}

// withGroups returns the instance's record with its anti-affinity groups:
// d itself when it is a full record, a copy with the groups remembered,
// or nil when they are not known.
func (c *Client) withGroups(d *instance) *instance {
	if d.Full {
		return d
	}
	c.diskMu.Lock()
	groups, ok := c.groupsOf[string(d.ID)]
	c.diskMu.Unlock()
	if !ok {
		return nil
	}
	cp := *d
	cp.AntiAffinityGroups = groups
	return &cp
}

func (c *Client) knownDisk(id string) (int64, bool) {
	c.diskMu.Lock()
	defer c.diskMu.Unlock()
	s, ok := c.diskSize[id]
	return s, ok
}

func (c *Client) forgetInstance(id string) {
	c.diskMu.Lock()
	delete(c.diskSize, id)
	delete(c.groupsOf, id)
	c.diskMu.Unlock()
	c.zones.forget(id)
	c.addrs.mu.Lock()
	delete(c.addrs.m, id)
	c.addrs.mu.Unlock()
}
