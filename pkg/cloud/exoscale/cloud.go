package exoscale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Name is the cloud's name and the scheme of its provider IDs
// (exoscale://<instance id>).
const Name = "exoscale"

// displayName names the cloud in messages.
const displayName = "Exoscale"

const (
	// EnvAPIKey and EnvAPISecret are the environment variables the
	// Exoscale CLI, CCM and CSI driver read the credentials from; they are
	// the manager's default credentials.
	EnvAPIKey    = "EXOSCALE_API_KEY"
	EnvAPISecret = "EXOSCALE_API_SECRET"
	// EnvAPIEndpoint overrides DefaultEndpoint.
	EnvAPIEndpoint = "EXOSCALE_API_ENDPOINT"

	// KeyAPIKey and KeyAPISecret are the keys of a credentialsSecret, as
	// in the exoscale-credentials secret of Exoscale's cloud controller
	// manager.
	KeyAPIKey    = "api-key"
	KeyAPISecret = "api-secret"

	// DefaultEndpoint is the real API's endpoint of ch-gva-2; the
	// endpoints of the other zones are looked up from its zone list.
	DefaultEndpoint = "https://api-ch-gva-2.exoscale.com/v2"

	defaultTimeout = 30 * time.Second
)

// Options configure a Cloud. The zero value reads the environment.
type Options struct {
	// APIEndpoint is where the zone list is read, e.g.
	// https://api-ch-gva-2.exoscale.com/v2; default $EXOSCALE_API_ENDPOINT,
	// else DefaultEndpoint. Every zone's own endpoint comes from that list.
	APIEndpoint string
	// DefaultAPIKey and DefaultAPISecret are used when a Machine names no
	// credentialsSecret; default $EXOSCALE_API_KEY and $EXOSCALE_API_SECRET.
	// They are never used for a Machine that names one.
	DefaultAPIKey, DefaultAPISecret string
	// HTTPClient carries the API calls; default a client with a 30s
	// timeout, which is also the timeout of a client without one
	// (--cloud-api-timeout sets it). Its Transport is wrapped, not replaced; it must not retry.
	HTTPClient *http.Client
	// RateLimit overrides DefaultRateLimit.
	RateLimit cloud.RateLimit
	// DefaultSecret, when named, holds the default API key and secret
	// under "api-key" and "api-secret" instead of DefaultAPIKey,
	// DefaultAPISecret and the environment, read at every use
	// (cloud.ReadCredentials): replaced credentials count for the next
	// call.
	DefaultSecret types.NamespacedName
}

// Cloud is Exoscale.
type Cloud struct {
	endpoint      string
	endpointErr   error
	defaultCreds  *cloud.Credentials
	defaultSecret types.NamespacedName
	defaultErr    error
	httpClient    *http.Client
	rateLimit     cloud.RateLimit
	// zones are the zones the specs this process parsed name: every
	// Machine's spec is parsed before its servers are looked up, so they
	// are the zones a cluster's lists must cover (zones.go).
	zones *zoneSet
}

var (
	_ cloud.Cloud  = (*Cloud)(nil)
	_ cloud.Client = (*Client)(nil)
	_ cloud.Spec   = (*Spec)(nil)
)

// New builds a Cloud. An unusable endpoint or default credentials are
// reported by NewClient (and Check), so that New can be called where no
// error can be returned.
func New(opts Options) *Cloud {
	ep := opts.APIEndpoint
	if ep == "" {
		ep = os.Getenv(EnvAPIEndpoint)
	}
	if ep == "" {
		ep = DefaultEndpoint
	}
	ep = strings.TrimSuffix(ep, "/")
	c := &Cloud{endpoint: ep, rateLimit: opts.RateLimit, zones: newZoneSet(), defaultSecret: opts.DefaultSecret}
	if u, err := url.Parse(ep); err != nil {
		c.endpointErr = err
	} else if u.Scheme == "" || u.Host == "" {
		c.endpointErr = fmt.Errorf("it needs a scheme and a host")
	}
	key, secret, source := opts.DefaultAPIKey, opts.DefaultAPISecret, "the manager's default API key and secret"
	if key == "" && secret == "" {
		key, secret = os.Getenv(EnvAPIKey), os.Getenv(EnvAPISecret)
		source = "$" + EnvAPIKey + " and $" + EnvAPISecret + " (the manager's default credentials)"
	}
	switch {
	case key == "" && secret == "":
	case opts.DefaultSecret.Name != "":
		// one default, used exactly as named
		c.defaultErr = fmt.Errorf("the default Exoscale credentials come from %s and from secret %s: give only one", source, opts.DefaultSecret)
	case key == "":
		c.defaultErr = fmt.Errorf("the default Exoscale credentials (%s) have a secret but no API key", source)
	case secret == "":
		c.defaultErr = fmt.Errorf("the default Exoscale credentials (%s) have an API key but no secret", source)
	default:
		if problem := cloud.CheckCredentialValue(key); problem != "" {
			c.defaultErr = fmt.Errorf("the default Exoscale API key (%s) is unusable: %s", source, problem)
		} else if problem := cloud.CheckCredentialValue(secret); problem != "" {
			c.defaultErr = fmt.Errorf("the default Exoscale API secret (%s) is unusable: %s", source, problem)
		} else {
			c.defaultCreds = &cloud.Credentials{Values: map[string]string{KeyAPIKey: key, KeyAPISecret: secret}, Source: source}
		}
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
// endpoint or default credentials.
func (c *Cloud) Check() error {
	if c.endpointErr != nil {
		return fmt.Errorf("%s API endpoint %q is not usable: %w", displayName, c.endpoint, c.endpointErr)
	}
	return c.defaultErr
}

// Name returns "exoscale".
func (c *Cloud) Name() string { return Name }

// SpecKind is the kind of the provider spec this cloud parses.
func (c *Cloud) SpecKind() string { return v1beta1.SpecKind }

// SpecPrototype is the type of the provider spec, for the webhook's
// unknown-field warnings on specs that do not parse.
func (c *Cloud) SpecPrototype() any { return &v1beta1.ExoscaleMachineProviderSpec{} }

// ParseSpec decodes, defaults and validates an ExoscaleMachineProviderSpec,
// and remembers its zone as one that lists must cover.
func (c *Cloud) ParseSpec(ps machinev1.ProviderSpec, path *field.Path) (cloud.Spec, field.ErrorList) {
	s, errs := v1beta1.SpecFromProviderSpec(ps, path)
	if len(errs) > 0 {
		// A nil interface, not a nil *Spec in one.
		return nil, errs
	}
	c.zones.add(s.Zone)
	return &Spec{ExoscaleMachineProviderSpec: s}, nil
}

// CredentialsSecretOf reads credentialsSecret.name alone from a spec that
// may be invalid otherwise.
func (c *Cloud) CredentialsSecretOf(ps machinev1.ProviderSpec) (string, bool) {
	if ps.Value == nil || len(ps.Value.Raw) == 0 {
		return "", false
	}
	var partial struct {
		CredentialsSecret *struct {
			Name string `json:"name"`
		} `json:"credentialsSecret"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &partial); err != nil {
		return "", false
	}
	if partial.CredentialsSecret == nil {
		return "", true
	}
	return partial.CredentialsSecret.Name, true
}

// CredentialKeys: a credentialsSecret holds the API key and the API secret
// under "api-key" and "api-secret".
func (c *Cloud) CredentialKeys() []string { return []string{KeyAPIKey, KeyAPISecret} }

// DefaultCredentials are the manager's default API key and secret, if it
// has them.
func (c *Cloud) DefaultCredentials() *cloud.Credentials { return c.defaultCreds }

// DefaultCredentialsSecret is Options.DefaultSecret.
func (c *Cloud) DefaultCredentialsSecret() types.NamespacedName { return c.defaultSecret }

// DefaultRateLimit is 50 calls per second with bursts of 100 per account,
// as for cloudscale.ch: Exoscale publishes no per-organization figure we
// could find, and its 429s close the account's gate for their Retry-After
// anyway.
func (c *Cloud) DefaultRateLimit() cloud.RateLimit {
	if c.rateLimit != (cloud.RateLimit{}) {
		return c.rateLimit
	}
	return cloud.RateLimit{QPS: 50, Burst: 100}
}

// NewClient returns a client acting with the credentials' API key and
// secret.
func (c *Cloud) NewClient(creds cloud.Credentials, gate *cloud.Gate) (cloud.Client, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	key, secret := creds.Values[KeyAPIKey], creds.Values[KeyAPISecret]
	if key == "" || secret == "" {
		return nil, fmt.Errorf("no Exoscale API key and secret in the credentials from %s", creds.Source)
	}
	return newClient(c, key, secret, creds.Source, gate)
}
