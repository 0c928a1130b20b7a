package cloudscale

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"sync"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Client acts on one cloudscale.ch account with one token.
type Client struct {
	sdk *sdk.Client
	// token is kept only to scrub it from API messages, in case the API
	// ever echoes it; it is never printed.
	token string
	// source says where the token came from, for auth errors.
	source string
	gate   *cloud.Gate
	now    func() time.Time

	flavors  cloud.Catalog[sdk.Flavor]
	images   cloud.Catalog[sdk.CustomImage]
	networks cloud.Catalog[sdk.Network]
	subnets  cloud.Catalog[sdk.Subnet]
	// groups are the account's server groups, for whose a spec's
	// serverGroups are (check.go)
	groups     cloud.Catalog[sdk.ServerGroup]
	groupLocks cloud.GroupLocks

	// rootTags remembers, per server UUID, the hash of the root volume tags
	// this process last applied or found, so that a resync in steady state
	// needs no volume call; untagged remembers servers this process just
	// created, whose root volume has no tags yet (no read needed).
	rootTagsMu sync.Mutex
	rootTags   map[string][sha256.Size]byte
	untagged   map[string]bool

	// deleted remembers the servers this client deleted, and when: the
	// API may still show a deleted server for a while ("changing", as any
	// server in a change), and no lookup may take it for a Machine's. A
	// server is forgotten deletedFor after its delete.
	deletedMu sync.Mutex
	deleted   map[string]time.Time
}

// deletedFor is how long a deleted server is kept out of lookups: far
// longer than the API shows one.
const deletedFor = 10 * time.Minute

// markDeleted records that the server's delete was answered.
func (c *Client) markDeleted(id string) {
	c.deletedMu.Lock()
	defer c.deletedMu.Unlock()
	now := c.now()
	for old, at := range c.deleted {
		if now.Sub(at) > deletedFor {
			delete(c.deleted, old)
		}
	}
	c.deleted[id] = now
}

// dying reports whether the server is one this client deleted.
func (c *Client) dying(id string) bool {
	c.deletedMu.Lock()
	defer c.deletedMu.Unlock()
	at, ok := c.deleted[id]
	return ok && c.now().Sub(at) <= deletedFor
}

func newClient(base *url.URL, hc *http.Client, token, source string, gate *cloud.Gate) *Client {
	s := sdk.NewClient(hc)
	u := *base
	s.BaseURL = &u
	s.AuthToken = token
	s.UserAgent = "appuio-machine-api-provider " + s.UserAgent
	return &Client{
		sdk:      s,
		token:    token,
		source:   source,
		gate:     gate,
		now:      time.Now,
		rootTags: map[string][sha256.Size]byte{},
		untagged: map[string]bool{},
		deleted:  map[string]time.Time{},
	}
}

// callOption adjusts one call.
type callOption func(*callOptions)

type callOptions struct {
	redact     []string
	reclassify func(error) error
}

// redacting keeps a further secret (the user data) out of the call's error.
func redacting(secret string) callOption {
	return func(o *callOptions) { o.redact = append(o.redact, secret) }
}

// reclassifying lets a call that knows better change the classification
// before the gate and the metrics see it.
func reclassifying(f func(error) error) callOption {
	return func(o *callOptions) { o.reclassify = f }
}

// call runs one API call as operation op through cloud.Call: the account's
// gate, the exchange for the classification, the metrics.
func (c *Client) call(ctx context.Context, op string, fn func(ctx context.Context) error, opts ...callOption) error {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	o.redact = append(o.redact, cloud.Redactions(ctx)...)
	return cloud.Call(ctx, Name, c.gate, op, fn, func(ctx context.Context, ex *cloud.Exchange, err error) error {
		err = c.classify(ctx, op, ex, err, o.redact)
		if o.reclassify != nil {
			err = o.reclassify(err)
		}
		return err
	})
}
