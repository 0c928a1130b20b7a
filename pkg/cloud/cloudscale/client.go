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

	flavors    cachedList[sdk.Flavor]
	images     cachedList[sdk.CustomImage]
	networks   cachedList[sdk.Network]
	groupLocks cloud.GroupLocks

	// rootTags remembers, per server UUID, the hash of the root volume tags
	// this process last applied or found, so that a resync in steady state
	// needs no volume call; untagged remembers servers this process just
	// created, whose root volume has no tags yet (no read needed).
	rootTagsMu sync.Mutex
	rootTags   map[string][sha256.Size]byte
	untagged   map[string]bool
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

type redactKey struct{}

// withRedaction keeps further secrets (the user data) out of the errors of
// every call made with ctx, not only of the one that sends them: an API may
// echo anything anywhere.
func withRedaction(ctx context.Context, secrets ...string) context.Context {
	prev, _ := ctx.Value(redactKey{}).([]string)
	return context.WithValue(ctx, redactKey{}, append(append([]string{}, prev...), secrets...))
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
	if r, ok := ctx.Value(redactKey{}).([]string); ok {
		o.redact = append(o.redact, r...)
	}
	return cloud.Call(ctx, Name, c.gate, op, fn, func(ctx context.Context, ex *cloud.Exchange, err error) error {
		err = c.classify(ctx, op, ex, err, o.redact)
		if o.reclassify != nil {
			err = o.reclassify(err)
		}
		return err
	})
}

// cachedList is an API list trusted for a while: the catalog (flavors,
// custom images, networks) changes when someone adds to it, not between two
// reconciles. Callers wait for one refresh rather than each making their
// own; a failed refresh falls back to the old list, which is as good as it
// was a moment ago.
type cachedList[T any] struct {
	mu   sync.Mutex
	list []T
	at   time.Time
}

func (l *cachedList[T]) get(ctx context.Context, now time.Time, ttl time.Duration, fetch func(ctx context.Context) ([]T, error)) ([]T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.list != nil && now.Sub(l.at) < ttl {
		return l.list, nil
	}
	list, err := fetch(ctx)
	if err != nil {
		if l.list != nil {
			return l.list, nil
		}
		return nil, err
	}
	if list == nil {
		list = []T{}
	}
	l.list, l.at = list, now
	return list, nil
}

// invalidate makes the next get fetch again.
func (l *cachedList[T]) invalidate() {
	l.mu.Lock()
	l.at = time.Time{}
	l.mu.Unlock()
}
