package cloudscale

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Emulator is an emulated cloudscale.ch account. It is an http.Handler: mount
// it on any server, or use Start to listen on an address.
type Emulator struct {
	cfg     Config
	harness *harness.Harness
	now     func() time.Time
	// tokens are Config.Tokens, or those SetTokens gave since.
	tokens atomic.Pointer[map[string]Access]
	// patterns are the API's routes, as handle registered them.
	patterns []string

	mu    sync.Mutex
	world *world
}

// New builds an emulator, loading its state file if there is one.
func New(cfg Config) (*Emulator, error) {
	e := &Emulator{cfg: cfg, now: cfg.Clock, world: newWorld()}
	e.tokens.Store(&cfg.Tokens)
	if e.now == nil {
		e.now = time.Now
	}
	if cfg.ActionTime == 0 {
		e.cfg.ActionTime = cfg.BootTime
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
	// Seed a new world only: a saved one already holds its custom images,
	// and one whose images were deleted must stay without.
	if !loaded {
		seeds := cfg.CustomImages
		if seeds == nil {
			seeds = DefaultCustomImages
		}
		for _, s := range seeds {
			e.seedCustomImage(s)
		}
	}
	// Imports under way when the state was saved download again.
	for _, imp := range e.world.Imports {
		if imp.Status == "in_progress" && !imp.Fetched {
			e.startFetch(imp)
		}
	}
	mux := http.NewServeMux()
	e.routes(mux)
	h, err := harness.New(mux, harness.Options{
		Cloud: "cloudscale",
		Seed:  cfg.Seed,
		Rules: cfg.Faults,
		ErrorBody: func(_ int, msg string) any {
			return map[string]string{"detail": msg}
		},
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

// Harness gives access to fault injection, request counters and the
// audit of every write.
func (e *Emulator) Harness() *harness.Harness { return e.harness }

// Routes lists the routes of the emulated API, "METHOD /v1/pattern".
func (e *Emulator) Routes() []string { return slices.Clone(e.patterns) }

func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.harness.ServeHTTP(w, r) }

// Start serves the emulator on addr ("127.0.0.1:0" picks a free port) until
// ctx ends, and returns its base URL.
func (e *Emulator) Start(ctx context.Context, addr string) (string, <-chan error, error) {
	return harness.Serve(ctx, addr, e)
}

func (e *Emulator) nextID() (string, int64) {
	e.world.Seq++
	return newUUID(), e.world.Seq
}

func (e *Emulator) newMeta(tags map[string]string) meta {
	id, seq := e.nextID()
	if tags == nil {
		tags = map[string]string{}
	}
	return meta{UUID: id, Seq: seq, Tags: tags, CreatedAt: e.now().UTC().Truncate(time.Microsecond)}
}

// echo finds what an echo fault rule quotes: the user data a create sends
// (user_data, as it is), or the token of the request.
func echo(r *http.Request, what string) string {
	switch what {
	case harness.EchoCredentials:
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return token
	case harness.EchoUserData:
		var body struct {
			UserData string `json:"user_data"`
		}
		if r.Body != nil {
			_ = json.NewDecoder(r.Body).Decode(&body)
		}
		return body.UserData
	}
	return ""
}
