package cloudscale

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Name is the cloud's name and the scheme of its provider IDs.
const Name = "cloudscale"

// displayName names the cloud in messages.
const displayName = "cloudscale.ch"

const (
	// EnvAPIURL and EnvAPIToken are the environment variables the SDK and
	// the cloudscale.ch tooling use; they are the defaults of Options.
	EnvAPIURL   = "CLOUDSCALE_API_URL"
	EnvAPIToken = "CLOUDSCALE_API_TOKEN"

	// TokenKey is the key of the token in a tokenSecret.
	TokenKey = "token"

	defaultBaseURL = "https://api.cloudscale.ch/"
	defaultTimeout = 30 * time.Second
)

// Options configure a Cloud. The zero value reads the environment.
type Options struct {
	// BaseURL of the API; default $CLOUDSCALE_API_URL, else the real API.
	BaseURL string
	// DefaultToken is used when a Machine names no tokenSecret; default
	// $CLOUDSCALE_API_TOKEN. It is never used for a Machine that names one.
	DefaultToken string
	// HTTPClient carries the API calls; default a client with a 30s
	// timeout, which is also the timeout of a client without one
	// (--cloud-api-timeout sets it). Its Transport is wrapped, not replaced.
	HTTPClient *http.Client
	// RateLimit overrides DefaultRateLimit.
	RateLimit cloud.RateLimit
	// DefaultSecret, when named, holds the default token under "token"
	// instead of DefaultToken and $CLOUDSCALE_API_TOKEN, read at every use
	// (cloud.ReadCredentials): a replaced token counts for the next call.
	DefaultSecret types.NamespacedName
}

// Cloud is cloudscale.ch.
type Cloud struct {
	baseURL       *url.URL
	rawBaseURL    string
	baseURLErr    error
	defaultCreds  *cloud.Credentials
	defaultSecret types.NamespacedName
	defaultErr    error
	httpClient    *http.Client
	rateLimit     cloud.RateLimit
}

var (
	_ cloud.Cloud  = (*Cloud)(nil)
	_ cloud.Client = (*Client)(nil)
	_ cloud.Spec   = (*Spec)(nil)
)

// New builds a Cloud. An unusable BaseURL or default token is reported by
// NewClient (and Check), so that New can be called where no error can be
// returned.
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
	c := &Cloud{rawBaseURL: base, rateLimit: opts.RateLimit, defaultSecret: opts.DefaultSecret}
	token, source := opts.DefaultToken, "the manager's default token"
	if token == "" {
		token, source = os.Getenv(EnvAPIToken), "$"+EnvAPIToken+" (the manager's default token)"
	}
	switch {
	case token != "" && opts.DefaultSecret.Name != "":
		// one default, used exactly as named
		c.defaultErr = fmt.Errorf("the default cloudscale.ch API token comes from %s and from secret %s: give only one", source, opts.DefaultSecret)
	case token != "":
		if problem := cloud.CheckCredentialValue(token); problem != "" {
			c.defaultErr = fmt.Errorf("the default cloudscale.ch API token (%s) is unusable: %s", source, problem)
		} else {
			c.defaultCreds = &cloud.Credentials{Values: map[string]string{TokenKey: token}, Source: source}
		}
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
	wrapped.Transport = &cloud.RecordingTransport{Base: hc.Transport}
	if wrapped.Timeout <= 0 {
		// Every call is bounded: a create whose answer never comes must
		// end, and the create grace is measured against this.
		wrapped.Timeout = defaultTimeout
	}
	c.httpClient = &wrapped
	return c
}

// CallTimeout is the HTTP client's timeout, which bounds every call
// (cloud.Cloud).
func (c *Cloud) CallTimeout() time.Duration { return c.httpClient.Timeout }

// Check reports a configuration the manager cannot start with: an unusable
// API URL or default token.
func (c *Cloud) Check() error {
	if c.baseURLErr != nil {
		return fmt.Errorf("cloudscale.ch API URL %q is not usable: %w", c.rawBaseURL, c.baseURLErr)
	}
	return c.defaultErr
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

// CredentialsSecretOf reads tokenSecret.name alone from a spec that may be
// invalid otherwise.
func (c *Cloud) CredentialsSecretOf(ps machinev1.ProviderSpec) (string, bool) {
	if ps.Value == nil || len(ps.Value.Raw) == 0 {
		return "", false
	}
	var partial struct {
		TokenSecret *struct {
			Name string `json:"name"`
		} `json:"tokenSecret"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &partial); err != nil {
		return "", false
	}
	if partial.TokenSecret == nil {
		return "", true
	}
	return partial.TokenSecret.Name, true
}

// CredentialKeys: a tokenSecret holds the API token under "token".
func (c *Cloud) CredentialKeys() []string { return []string{TokenKey} }

// DefaultCredentials are the manager's default token, if it has one.
func (c *Cloud) DefaultCredentials() *cloud.Credentials { return c.defaultCreds }

// DefaultCredentialsSecret is Options.DefaultSecret.
func (c *Cloud) DefaultCredentialsSecret() types.NamespacedName { return c.defaultSecret }

// DefaultRateLimit is 50 calls per second with bursts of 100 per token:
// cloudscale.ch publishes no limit; this keeps ten concurrent reconciles of
// a large scale-up flowing (each makes two calls) while a runaway loop
// cannot flood the API.
func (c *Cloud) DefaultRateLimit() cloud.RateLimit {
	if c.rateLimit != (cloud.RateLimit{}) {
		return c.rateLimit
	}
	return cloud.RateLimit{QPS: 50, Burst: 100}
}

// NewClient returns a client acting with the credentials' token.
func (c *Cloud) NewClient(creds cloud.Credentials, gate *cloud.Gate) (cloud.Client, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	token := creds.Values[TokenKey]
	if token == "" {
		return nil, fmt.Errorf("no cloudscale.ch API token in the credentials from %s", creds.Source)
	}
	return newClient(c.baseURL, c.httpClient, token, creds.Source, gate), nil
}

// SpecPrototype is the type of the provider spec, for the webhook's
// warnings about unknown fields of specs that do not even parse.
func (c *Cloud) SpecPrototype() any { return &v1beta1.CloudscaleMachineProviderSpec{} }
