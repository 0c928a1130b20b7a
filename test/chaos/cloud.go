package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Cloud is what the run needs of one cloud: its emulator, started in this
// process with the run's seed, how the manager binary reaches it, a provider
// spec with an antiAffinityKey, and the emulator's inventory read without an
// API call (which the fault rules would hit and the counters would count).
// Everything else is cloud-neutral.
type Cloud interface {
	// Name is the --cloud value of the manager.
	Name() string
	// Start starts the emulator, serving until ctx ends. dir may hold its
	// state; seed makes its fault dice reproducible.
	Start(ctx context.Context, dir string, seed int64, faults []harness.Rule) error
	// Harness is the emulator's fault injection and request counters.
	Harness() *harness.Harness
	// ManagerArgs and ManagerEnv point the manager at the emulator with
	// the emulator's default credentials.
	ManagerArgs() []string
	ManagerEnv() []string
	// ProviderSpec is the MachineSet's provider spec (JSON), with
	// AntiAffinityKey as its antiAffinityKey.
	ProviderSpec() string
	// CreateRoute is the harness route of a server create, for slow
	// creates.
	CreateRoute() string
	// Inventory is every server and anti-affinity group of the account.
	Inventory() (Inventory, error)
	// CreatesInFlight are the names of the servers being created.
	CreatesInFlight() []string
}

// AntiAffinityKey is the key of the MachineSet's servers: the provider packs
// them into anti-affinity groups named <cluster>-<key>-<n> on every cloud.
const AntiAffinityKey = "workers"

// Server is a server as the checks see it: its Machine and cluster from the
// provider's tags or labels.
type Server struct {
	ID, Name           string
	Machine, ClusterID string
}

// Group is an anti-affinity group.
type Group struct {
	ID, Name string
	Members  []string
}

// Inventory is the cloud's side of the comparison.
type Inventory struct {
	Servers []Server
	Groups  []Group
}

// sort orders the inventory by ID, so that reports read the same run after
// run.
func (inv *Inventory) sort() {
	sort.Slice(inv.Servers, func(i, j int) bool { return inv.Servers[i].ID < inv.Servers[j].ID })
	sort.Slice(inv.Groups, func(i, j int) bool { return inv.Groups[i].ID < inv.Groups[j].ID })
}

// serveTracked serves an emulator on a free local port, tracking the
// creates of route (see creates); the server ends with ctx.
func serveTracked(ctx context.Context, route string, emu http.Handler) (url string, c *creates, err error) {
	c = newCreates(route)
	url, _, err = harness.Serve(ctx, "127.0.0.1:0", c.wrap(emu))
	return url, c, err
}

// groupOfCluster says whether a group is one the provider made for the
// cluster's key: both clouds name them cloud.GroupName(<cluster>, <key>, n).
func groupOfCluster(g Group, clusterID string) bool {
	return strings.HasPrefix(g.Name, clusterID+"-"+AntiAffinityKey+"-")
}

// clouds are the clouds the run knows, by --cloud name.
func clouds() map[string]func() Cloud {
	return map[string]func() Cloud{
		"cloudscale": func() Cloud { return &cloudscaleCloud{} },
		"exoscale":   func() Cloud { return &exoscaleCloud{} },
	}
}

// emulatorBootTime is how long a new server is booting in the emulators:
// short, the run is about creates and deletes.
const emulatorBootTime = time.Second

// creates tracks the server creates the emulator is working on, by the
// name in their request: the chaos takes Machines away while their create
// is in flight. A create carried out after its client went away is in
// flight until it is carried out.
type creates struct {
	method, path string

	mu       sync.Mutex
	inFlight map[string]int
}

func newCreates(route string) *creates {
	method, path, _ := strings.Cut(route, " ")
	return &creates{method: method, path: path, inFlight: map[string]int{}}
}

// wrap serves h, tracking the creates.
func (c *creates) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != c.method || r.URL.Path != c.path {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			h.ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(body, &req)
		c.mu.Lock()
		c.inFlight[req.Name]++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			if c.inFlight[req.Name]--; c.inFlight[req.Name] <= 0 {
				delete(c.inFlight, req.Name)
			}
			c.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// names are the server names of the creates in flight.
func (c *creates) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.inFlight))
	for n := range c.inFlight {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
