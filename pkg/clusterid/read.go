package clusterid

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Read reads the identity from the cluster's Infrastructure (its reader's
// scheme must know config.openshift.io). An Infrastructure that is missing,
// or names no infrastructureName, gives an empty Own and no error: a
// cluster that is not OpenShift, where the caller's own --cluster-id holds.
func Read(ctx context.Context, r client.Reader) (IDs, error) {
	var infra configv1.Infrastructure
	if err := r.Get(ctx, client.ObjectKey{Name: InfrastructureName}, &infra); err != nil {
		if client.IgnoreNotFound(err) == nil || isNoKind(err) {
			return IDs{}, nil
		}
		return IDs{}, fmt.Errorf("reading the Infrastructure %s: %w", InfrastructureName, err)
	}
	return FromInfrastructure(&infra)
}

// isNoKind says the API server does not serve Infrastructures.
func isNoKind(err error) bool { return meta.IsNoMatchError(err) || runtime.IsNotRegisteredError(err) }
