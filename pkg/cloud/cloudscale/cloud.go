package cloudscale

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Name is the cloud's name and the scheme of its provider IDs.
const Name = "cloudscale"

const (
	// EnvAPIURL and EnvAPIToken are the environment variables the SDK and
	// the cloudscale.ch tooling use; they are the defaults of Options.
	EnvAPIURL   = "CLOUDSCALE_API_URL"
	EnvAPIToken = "CLOUDSCALE_API_TOKEN"

	defaultBaseURL = "https://api.cloudscale.ch/"
	defaultTimeout = 30 * time.Second
)

// Options configure a Cloud. The zero value reads the environment.
type Options struct {
	// BaseURL of the API; default $CLOUDSCALE_API_URL, else the real API.
	BaseURL string
	// DefaultToken is used when a Machine names no tokenSecret; default
	// $CLOUDSCALE_API_TOKEN.
	DefaultToken string
	// HTTPClient carries the API calls; default a client with a 30s
	// timeout. Its Transport is wrapped, not replaced.
	HTTPClient *http.Client
}

// Cloud is cloudscale.ch. It keeps one Client per token so that the caches
// and locks of a Client are shared by every Machine using that token.
type Cloud struct {
	baseURL      *url.URL
	rawBaseURL   string
	baseURLErr   error
	defaultToken string
	httpClient   *http.Client

	mu      sync.Mutex
	clients map[clientKey]*Client
}

var (
	_ cloud.Cloud  = (*Cloud)(nil)
	_ cloud.Client = (*Client)(nil)
	_ cloud.Spec   = (*Spec)(nil)
)

// clientKey identifies a Client without holding the token itself: a map
// key may end up in a heap dump or a debugger, a hash is harmless there.
type clientKey struct {
	hash         [sha256.Size]byte
	defaultToken bool
}

// New builds a Cloud. An unusable BaseURL is reported by Client, so that
// New can be called where no error can be returned.
func New(opts Options) *Cloud {
	base := opts.BaseURL
	if base == "" {
		base = os.Getenv(EnvAPIURL)
	}
	if base == "" {
		base = defaultBaseURL
	}
	// The SDK resolves "v1/servers" against the base URL: without the
	// trailing slash the last path element would be replaced.
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	c := &Cloud{rawBaseURL: base, defaultToken: opts.DefaultToken, clients: map[clientKey]*Client{}}
	if c.defaultToken == "" {
		c.defaultToken = os.Getenv(EnvAPIToken)
	}
	c.baseURL, c.baseURLErr = url.Parse(base)
	if c.baseURLErr == nil && (c.baseURL.Scheme == "" || c.baseURL.Host == "") {
		c.baseURLErr = errors.New("it needs a scheme and a host")
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: defaultTimeout}
	}
	wrapped := *hc
	wrapped.Transport = &recordingTransport{base: hc.Transport}
	c.httpClient = &wrapped
	return c
}

// Name returns "cloudscale".
func (c *Cloud) Name() string { return Name }

// SpecKind is the kind of the provider spec this cloud parses.
func (c *Cloud) SpecKind() string { return v1beta1.SpecKind }

// ParseSpec decodes, defaults and validates a CloudscaleMachineProviderSpec.
func (c *Cloud) ParseSpec(ps machinev1.ProviderSpec, path *field.Path) (cloud.Spec, field.ErrorList) {
	s, errs := v1beta1.SpecFromProviderSpec(ps, path)
	if len(errs) > 0 {
		// A nil interface, not a nil *Spec in one.
		return nil, errs
	}
	return &Spec{CloudscaleMachineProviderSpec: s}, nil
}

// Client returns the client for token, "" meaning the default token.
func (c *Cloud) Client(token string) (cloud.Client, error) {
	if c.baseURLErr != nil {
		return nil, fmt.Errorf("cloudscale.ch API URL %q is not usable: %w", c.rawBaseURL, c.baseURLErr)
	}
	isDefault := token == ""
	if isDefault {
		token = c.defaultToken
	}
	if token == "" {
		return nil, fmt.Errorf("no cloudscale.ch API token: set %s for the manager or tokenSecret in the Machine's providerSpec", EnvAPIToken)
	}
	key := clientKey{hash: sha256.Sum256([]byte(token)), defaultToken: isDefault}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.clients[key]; cl != nil {
		return cl, nil
	}
	cl := newClient(c.baseURL, c.httpClient, token, isDefault)
	c.clients[key] = cl
	return cl, nil
}
