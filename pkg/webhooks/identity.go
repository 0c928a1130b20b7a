package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// Identity is the cluster's identity, its Infrastructure's
// status.infrastructureName and the legacy cluster IDs its annotation
// declares (pkg/clusterid), which the validating webhooks hold the cluster
// label of Machines and MachineSets to: the provider acts for that cluster
// alone (pkg/actuator: a Machine naming another fails, a MachineSet naming
// another is left alone), so the webhooks refuse what names another at
// once. Until it is known (Set), they refuse every object they would
// validate, and Serve's /readyz answers not ready.
type Identity struct {
	v atomic.Pointer[clusterid.IDs]
	// refresh reads the Infrastructure again (readInfrastructure); nil
	// for a fixed identity.
	refresh func(context.Context)
	mu      sync.Mutex
	last    time.Time
}

// FixedIdentity is an Identity known from the start (--cluster-id), with
// the legacy IDs given (--legacy-cluster-ids).
func FixedIdentity(clusterID string, legacy ...string) *Identity {
	i := &Identity{}
	i.SetIDs(clusterid.IDs{Own: clusterID, Legacy: legacy})
	return i
}

// Set makes the identity known, without legacy IDs.
func (i *Identity) Set(clusterID string) { i.SetIDs(clusterid.IDs{Own: clusterID}) }

// SetIDs makes the identity known.
func (i *Identity) SetIDs(ids clusterid.IDs) { i.v.Store(&ids) }

// Get returns the cluster's own ID, and whether it is known.
func (i *Identity) Get() (string, bool) {
	ids, ok := i.IDs()
	return ids.Own, ok
}

// IDs returns the identity, and whether it is known.
func (i *Identity) IDs() (clusterid.IDs, bool) {
	if i == nil {
		return clusterid.IDs{}, false
	}
	p := i.v.Load()
	if p == nil || p.Own == "" {
		return clusterid.IDs{}, false
	}
	return *p, true
}

// refreshEvery bounds the reads of the Infrastructure that a label naming
// an ID not (yet) declared causes: a declaration counts within a second.
const refreshEvery = time.Second

// Owns says whether the identity owns id, reading the Infrastructure again
// first (at most once per refreshEvery) when it does not: an admin who
// has just declared a legacy ID is not refused until the next poll.
func (i *Identity) Owns(ctx context.Context, id string) (clusterid.IDs, bool) {
	ids, _ := i.IDs()
	if ids.Owns(id) || i.refresh == nil {
		return ids, ids.Owns(id)
	}
	i.mu.Lock()
	if time.Since(i.last) >= refreshEvery {
		i.last = time.Now()
		i.refresh(ctx)
	}
	i.mu.Unlock()
	ids, _ = i.IDs()
	return ids, ids.Owns(id)
}

// reload is how often the Infrastructure is read again once known: a
// legacy ID no longer declared stops being admitted within it.
const reload = time.Minute

// infrastructureReader is what reads the Infrastructure named cluster with
// cfg and sets id: the webhook's only request to the API server, with the
// pod's service account, which may get that one object (config/webhook).
// The machine-api-operator's own machine webhooks read the same object for
// the same label (openshift/machine-api-operator,
// pkg/webhooks/machine_webhook.go, which defaults the label from
// infra.Status.InfrastructureName). It is also id's refresh, for
// Identity.Owns.
func infrastructureReader(cfg *rest.Config, id *Identity, log logr.Logger) (func(context.Context) error, error) {
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("a client to read the Infrastructure: %w", err)
	}
	read := func(ctx context.Context) error {
		infra := &configv1.Infrastructure{}
		if err := c.Get(ctx, client.ObjectKey{Name: clusterid.InfrastructureName}, infra); err != nil {
			return err
		}
		if infra.Status.InfrastructureName == "" {
			return errors.New("it names no status.infrastructureName yet")
		}
		ids, err := clusterid.FromInfrastructure(infra)
		prev, known := id.IDs()
		if err != nil {
			// The infrastructureName holds; the legacy IDs read before
			// stay until the annotation parses again.
			ids.Legacy = prev.Legacy
			log.Info("the legacy cluster IDs cannot be read; those read before stay", "error", err.Error(), "legacyClusterIDs", ids.Legacy)
		}
		if !known || prev.Own != ids.Own || !slices.Equal(prev.Legacy, ids.Legacy) {
			log.Info("the cluster's identity", "infrastructureName", ids.Own, "legacyClusterIDs", ids.Legacy)
		}
		id.SetIDs(ids)
		return nil
	}
	id.refresh = func(ctx context.Context) {
		if err := read(ctx); err != nil {
			log.Info("reading the Infrastructure cluster again failed; the identity read before holds", "error", err.Error())
		}
	}
	return read, nil
}

// readInfrastructure reads the identity with read until it is known,
// retrying every poll, then again every reload: the infrastructureName
// never changes, the legacy IDs its annotation declares may (a label
// naming an ID not declared reads it at once, Identity.Owns).
func readInfrastructure(ctx context.Context, read func(context.Context) error, id *Identity, poll time.Duration, log logr.Logger) {
	for {
		err := read(ctx)
		if err == nil {
			break
		}
		log.Info("reading the Infrastructure cluster for the cluster's identity failed; the webhooks refuse Machines and MachineSets until it is known", "error", err.Error(), "retryIn", poll)
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(reload):
		}
		id.mu.Lock()
		id.last = time.Now()
		id.refresh(ctx)
		id.mu.Unlock()
	}
}
