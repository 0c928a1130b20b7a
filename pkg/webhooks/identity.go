package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Identity is the cluster's identity, its Infrastructure's
// status.infrastructureName, which the validating webhooks hold the cluster
// label of Machines and MachineSets to: the provider acts for that cluster
// alone (pkg/actuator: a Machine naming another fails, a MachineSet naming
// another is left alone), so the webhooks refuse what names another at
// once. Until it is known (Set), they refuse every object they would
// validate, and Serve's /readyz answers not ready.
type Identity struct {
	v atomic.Pointer[string]
}

// FixedIdentity is an Identity known from the start (--cluster-id).
func FixedIdentity(clusterID string) *Identity {
	i := &Identity{}
	i.Set(clusterID)
	return i
}

// Set makes the identity known.
func (i *Identity) Set(clusterID string) { i.v.Store(&clusterID) }

// Get returns the identity, and whether it is known.
func (i *Identity) Get() (string, bool) {
	if i == nil {
		return "", false
	}
	p := i.v.Load()
	if p == nil || *p == "" {
		return "", false
	}
	return *p, true
}

// readInfrastructure reads the Infrastructure named cluster with cfg until
// it names an infrastructureName, and sets id: the webhook's only request
// to the API server, with the pod's service account, which may get that one
// object (config/webhook). The machine-api-operator's own machine webhooks
// read the same object for the same label (openshift/machine-api-operator,
// pkg/webhooks/machine_webhook.go, which defaults the label from
// infra.Status.InfrastructureName). It never changes for a cluster, so it
// is read once; it is retried every poll until then.
func readInfrastructure(ctx context.Context, cfg *rest.Config, id *Identity, poll time.Duration, log logr.Logger) error {
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("a client to read the Infrastructure: %w", err)
	}
	for {
		infra := &configv1.Infrastructure{}
		err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)
		if err == nil && infra.Status.InfrastructureName != "" {
			id.Set(infra.Status.InfrastructureName)
			log.Info("the cluster's identity", "infrastructureName", infra.Status.InfrastructureName)
			return nil
		}
		if err == nil {
			err = errors.New("it names no status.infrastructureName yet")
		}
		log.Info("reading the Infrastructure cluster for the cluster's identity failed; the webhooks refuse Machines and MachineSets until it is known", "error", err.Error(), "retryIn", poll)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}
