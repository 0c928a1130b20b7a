package cloudscale

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"sync"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/pkg/metrics"
)

// Client acts on one cloudscale.ch account with one token.
type Client struct {
	sdk *sdk.Client
	// token is kept only to scrub it from API messages, in case the API
	// ever echoes it; it is never printed.
	token        string
	defaultToken bool
	now          func() time.Time

	flavorsMu sync.Mutex
	flavors   []sdk.Flavor
	flavorsAt time.Time

	locksMu sync.Mutex
	locks   map[groupLockKey]chan struct{}

	// rootTags remembers, per server UUID, the hash of the root volume tags
	// this process last applied or found, so that a resync in steady state
	// needs no volume call.
	rootTagsMu sync.Mutex
	rootTags   map[string][sha256.Size]byte
}

func newClient(base *url.URL, hc *http.Client, token string, isDefault bool) *Client {
	s := sdk.NewClient(hc)
	u := *base
	s.BaseURL = &u
	s.AuthToken = token
	s.UserAgent = "appuio-machine-api-provider " + s.UserAgent
	return &Client{
		sdk:          s,
		token:        token,
		defaultToken: isDefault,
		now:          time.Now,
		locks:        map[groupLockKey]chan struct{}{},
		rootTags:     map[string][sha256.Size]byte{},
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
// before the metrics see it.
func reclassifying(f func(error) error) callOption {
	return func(o *callOptions) { o.reclassify = f }
}

// call runs one API call as operation op: it records the HTTP exchange for
// the error classification and observes the call's metrics.
func (c *Client) call(ctx context.Context, op string, fn func(ctx context.Context) error, opts ...callOption) error {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	ex := &exchange{}
	err := fn(withExchange(ctx, ex))
	if err != nil {
		err = c.classify(ctx, op, ex, err, o.redact)
		if o.reclassify != nil {
			err = o.reclassify(err)
		}
	}
	metrics.ObserveCloudCall(Name, op, start, err)
	return err
}
