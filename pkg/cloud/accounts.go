package cloud

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// AccountOptions tune Accounts.
type AccountOptions struct {
	// RateLimit of every account; zero: the cloud's DefaultRateLimit.
	RateLimit RateLimit
	// View tunes the accounts' views of their clusters' servers.
	View ViewOptions
	// Linger is how long an account stays after its last owner is gone,
	// for the janitor (which sweeps every account All returns): the empty
	// groups and orphans of a cluster whose last Machine and MachineSet
	// were just deleted are still cleaned up and reported, with the client
	// (the credentials) they were made with; a group the cloud refused to
	// delete at that moment, or one it still showed a destroyed server in,
	// is not left behind. Zero: the account goes with its last owner.
	Linger time.Duration
}

// Accounts keeps one Account per set of credentials, so that every Machine,
// MachineSet and controller acting with the same credentials shares one
// client, one gate (rate limit, Retry-After, auth backoff) and one view of
// each cluster's servers. An account lives while something uses it: users
// register as owners (a Machine, a MachineSet) and the account, with its
// client, is released when its last owner is gone.
type Accounts struct {
	cloud Cloud
	o     AccountOptions

	now func() time.Time

	mu     sync.Mutex
	byKey  map[string]*Account
	owners map[string]string // owner -> account key
}

// Account is one cloud account as the provider uses it.
type Account struct {
	// Key is the credentials' fingerprint.
	Key string
	// Source says where the credentials come from, for messages.
	Source string
	// Secret names the credentials' secret ("namespace/name"); "" for the
	// manager's default credentials.
	Secret string
	// Client holds the credentials, as they were when the account was
	// made; they are never read again, logged or shown.
	Client Client
	Gate   *Gate

	o      ViewOptions
	mu     sync.Mutex
	views  map[string]*View
	owners int
	// used is when an owner last asked for the account.
	used time.Time
	// releasedAt is when its last owner went; zero while it has owners.
	releasedAt time.Time
}

// NewAccounts returns an empty registry for the cloud.
func NewAccounts(c Cloud, o AccountOptions) *Accounts {
	if o.RateLimit == (RateLimit{}) {
		o.RateLimit = c.DefaultRateLimit()
	}
	return &Accounts{cloud: c, o: o, byKey: map[string]*Account{}, owners: map[string]string{}, now: time.Now}
}

// Cloud is the cloud of the accounts.
func (a *Accounts) Cloud() Cloud { return a.cloud }

// Get returns the account of the credentials, creating its client on first
// use, and records owner as one of its users ("" records nobody). An owner
// that used other credentials before is moved.
func (a *Accounts) Get(owner string, creds Credentials) (*Account, error) {
	key := creds.Fingerprint()
	a.mu.Lock()
	defer a.mu.Unlock()
	acc := a.byKey[key]
	if acc == nil {
		gate := NewGate(a.cloud.Name(), a.o.RateLimit)
		cl, err := a.cloud.NewClient(creds, gate)
		if err != nil {
			return nil, err
		}
		acc = &Account{Key: key, Source: creds.Source, Secret: creds.Secret, Client: cl, Gate: gate, o: a.o.View, views: map[string]*View{}}
		a.byKey[key] = acc
	}
	acc.used = a.now()
	if owner != "" {
		if old, ok := a.owners[owner]; ok && old != key {
			a.releaseLocked(owner)
		}
		if _, ok := a.owners[owner]; !ok {
			a.owners[owner] = key
			acc.owners++
			acc.releasedAt = time.Time{}
		}
	}
	return acc, nil
}

// Release forgets owner; an account without owners is dropped with its
// client and views, after Linger.
func (a *Accounts) Release(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(owner)
}

func (a *Accounts) releaseLocked(owner string) {
	key, ok := a.owners[owner]
	if !ok {
		return
	}
	delete(a.owners, owner)
	if acc := a.byKey[key]; acc != nil {
		acc.owners--
		if acc.owners <= 0 {
			acc.owners = 0
			acc.releasedAt = a.now()
			if a.o.Linger <= 0 {
				delete(a.byKey, key)
			}
		}
	}
}

// prune drops the accounts that have lingered long enough. Callers hold
// mu.
func (a *Accounts) prune() {
	for key, acc := range a.byKey {
		if acc.owners <= 0 && a.now().Sub(acc.releasedAt) >= a.o.Linger {
			delete(a.byKey, key)
		}
	}
}

// All returns the accounts in use, and those lingering after their last
// owner went (AccountOptions.Linger), by key.
func (a *Accounts) All() []*Account {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune()
	out := make([]*Account, 0, len(a.byKey))
	for _, acc := range a.byKey {
		out = append(out, acc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Len is how many accounts are in use (have owners).
func (a *Accounts) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, acc := range a.byKey {
		if acc.owners > 0 {
			n++
		}
	}
	return n
}

// View returns the account's view of a cluster's servers.
func (acc *Account) View(clusterID string) *View {
	acc.mu.Lock()
	defer acc.mu.Unlock()
	v := acc.views[clusterID]
	if v == nil {
		v = NewView(acc.Client, clusterID, acc.o)
		acc.views[clusterID] = v
	}
	return v
}

// Clusters lists the clusters the account has views of.
func (acc *Account) Clusters() []string {
	acc.mu.Lock()
	defer acc.mu.Unlock()
	out := make([]string, 0, len(acc.views))
	for id := range acc.views {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// KeepViews drops the account's views of clusters other than those given:
// the janitor sweeps every cluster an account has a view of, and a view
// made for a cluster no object of this provider names (any more) must not
// keep that cluster's servers under its eyes.
func (acc *Account) KeepViews(clusters ...string) {
	acc.mu.Lock()
	defer acc.mu.Unlock()
	for id := range acc.views {
		if !slices.Contains(clusters, id) {
			delete(acc.views, id)
		}
	}
}
