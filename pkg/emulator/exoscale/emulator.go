package exoscale

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"sync"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Emulator is an emulated Exoscale cloud. It is an http.Handler: mount it on
// any server, or use Start to listen on an address.
type Emulator struct {
	cfg     Config
	harness *harness.Harness
	router  *router
	now     func() time.Time
	// accounts are the configured accounts, keys maps their API keys.
	accounts []Account
	keys     map[string]*Account
	// refusals counts the requests each key's role refused, by operation.
	refusals map[string]map[string]int64

	mu       sync.Mutex
	world    *world
	rng      *rand.Rand
	failures []*OperationFailure
}

// New builds an emulator, loading its state file if there is one.
func New(cfg Config) (*Emulator, error) {
	e := &Emulator{cfg: cfg, now: cfg.Clock, world: newWorld(), keys: map[string]*Account{}}
	if e.now == nil {
		e.now = time.Now
	}
	if cfg.ActionTime == 0 {
		e.cfg.ActionTime = cfg.BootTime
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	e.rng = rand.New(rand.NewSource(seed))
	if err := e.SetOperationFailures(cfg.OperationFailures); err != nil {
		return nil, err
	}

	e.accounts = cfg.Accounts
	if len(e.accounts) == 0 {
		e.accounts = []Account{DefaultAccount}
	}
	names := map[string]bool{}
	for i := range e.accounts {
		a := &e.accounts[i]
		if a.Name == "" || a.Key == "" || a.Secret == "" {
			return nil, fmt.Errorf("account %d: name, key and secret are required", i)
		}
		if names[a.Name] || e.keys[a.Key] != nil {
			return nil, fmt.Errorf("account %q: name and key must be unique", a.Name)
		}
		for _, dt := range a.DeployTargets {
			if !zoneExists(dt.Zone) || dt.Name == "" {
				return nil, fmt.Errorf("account %q: deploy target %q: a name and one of the zones %v are required", a.Name, dt.Name, Zones)
			}
			if dt.Type != "" && dt.Type != "dedicated" && dt.Type != "edge" {
				return nil, fmt.Errorf("account %q: deploy target %q: type %q is neither dedicated nor edge", a.Name, dt.Name, dt.Type)
			}
		}
		names[a.Name] = true
		e.keys[a.Key] = a
	}

	loaded := false
	if cfg.StateFile != "" {
		w, err := loadState(cfg.StateFile)
		if err != nil {
			return nil, err
		}
		if w != nil {
			e.world, loaded = w, true
		}
	}
	for _, a := range e.accounts {
		if e.world.Accounts[a.Name] == nil {
			e.world.Accounts[a.Name] = newAccount(a.Name)
		}
		e.world.Accounts[a.Name].fill()
		e.ensureDefaultSecurityGroup(e.world.Accounts[a.Name])
	}
	// Seed a new world only: a saved one already holds its templates, and
	// one whose templates were deleted must stay without.
	if !loaded {
		seeds := cfg.Templates
		if seeds == nil {
			seeds = DefaultTemplates
		}
		for _, s := range seeds {
			if err := e.seedTemplate(s); err != nil {
				return nil, err
			}
		}
	}

	// Registrations under way when the state was saved download again.
	for name, a := range e.world.Accounts {
		for _, op := range a.Operations {
			if t := a.Templates[op.Ref]; op.Fetching && t != nil {
				e.startFetch(name, op.ID, t.ID, t.URL, t.Checksum, false)
			}
		}
	}
	e.router = e.routes()
	mux := http.NewServeMux()
	mux.HandleFunc("/", e.serveAPI)
	h, err := harness.New(mux, harness.Options{
		Cloud: "exoscale",
		Seed:  cfg.Seed,
		Rules: cfg.Faults,
		ErrorBody: func(_ int, msg string) any {
			return map[string]string{"message": msg}
		},
		Route:        e.routeName,
		Zone:         requestZone,
		AdminAuth:    e.adminAuthorized,
		Echo:         echo,
		NoWriteAudit: cfg.NoWriteAudit,
	})
	if err != nil {
		return nil, fmt.Errorf("fault rules: %w", err)
	}
	e.harness = h
	return e, nil
}

// Harness gives access to fault injection and request counters.
func (e *Emulator) Harness() *harness.Harness { return e.harness }

func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.harness.ServeHTTP(w, r) }

// Start serves the emulator on addr ("127.0.0.1:0" picks a free port) until
// ctx ends, and returns its base URL ("http://127.0.0.1:8383/"); the API
// endpoint of the default zone is that URL with "v2".
func (e *Emulator) Start(ctx context.Context, addr string) (string, <-chan error, error) {
	return harness.Serve(ctx, addr, e)
}

// routeName names a request's route for the harness: the vendor's path with
// /v2 in front, whatever zone prefix the request had.
func (e *Emulator) routeName(r *http.Request) string {
	_, path, found := splitZone(r.URL.Path)
	if !found {
		return ""
	}
	if rt, _, _ := e.router.match(r.Method, path); rt != nil {
		return rt.Name()
	}
	return ""
}

// requestZone is the zone whose endpoint a request went to ("" for none):
// fault rules can fail one zone (harness.Rule.Zone).
func requestZone(r *http.Request) string {
	zone, _, ok := splitZone(r.URL.Path)
	if !ok {
		return ""
	}
	return zone
}

// Routes lists the routes the emulator serves, "METHOD /v2/pattern", in the
// vendor's notation.
func (e *Emulator) Routes() []string {
	out := make([]string, 0, len(e.router.routes))
	for _, rt := range e.router.routes {
		out = append(out, rt.Name())
	}
	return out
}

// RouteOperations maps each route to its operationId, what IAM policies
// name ("GET /v2/instance" -> "list-instances").
func (e *Emulator) RouteOperations() map[string]string {
	out := make(map[string]string, len(e.router.routes))
	for _, rt := range e.router.routes {
		out[rt.Name()] = rt.operation
	}
	return out
}

func (e *Emulator) newMeta() meta {
	e.world.Seq++
	return meta{ID: newUUID(), Seq: e.world.Seq, CreatedAt: e.now().UTC().Truncate(time.Millisecond)}
}

// echo finds what an echo fault rule quotes: the user data a create sends
// (user-data, decoded from its base64, as a parser of it would see it), or
// the API key that signed the request.
func echo(r *http.Request, what string) string {
	switch what {
	case harness.EchoCredentials:
		a, err := parseAuthorization(r.Header.Get("Authorization"))
		if err != nil {
			return ""
		}
		return a.Key
	case harness.EchoUserData:
		var body struct {
			UserData string `json:"user-data"`
		}
		if r.Body != nil {
			_ = json.NewDecoder(r.Body).Decode(&body)
		}
		ud, err := base64.StdEncoding.DecodeString(body.UserData)
		if err != nil {
			return body.UserData
		}
		return string(ud)
	}
	return ""
}
