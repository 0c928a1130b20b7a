package deployer

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// InfrastructureName is the name of the cluster's one Infrastructure, whose
// status.infrastructureName is the cluster's identity: the installer
// chooses it, tags the cloud resources it makes with it, and it never
// changes.
const InfrastructureName = "cluster"

// ReasonClusterIdentityUnknown: the Infrastructure names no
// infrastructureName (yet), and no --cluster-id was given. A Deployment
// applied before is left running.
const ReasonClusterIdentityUnknown = "ClusterIdentityUnknown"

// clusterID is the identity the manager is pinned to (--cluster-id): the
// deployer's own Options.ClusterID when set, else the Infrastructure's
// infrastructureName. "" with a message when there is none: the deployer
// then applies nothing, as a manager without an identity would take the
// cluster label of any Machine or MachineSet for its own.
func (r *Reconciler) clusterID(ctx context.Context) (string, string, error) {
	if r.opts.ClusterID != "" {
		return r.opts.ClusterID, "", nil
	}
	if !r.infraServed {
		return "", "the API server serves no config.openshift.io Infrastructure, and the deployer has no --cluster-id: the provider's identity is unknown", nil
	}
	infra := &configv1.Infrastructure{}
	err := r.egress.Get(ctx, types.NamespacedName{Name: InfrastructureName}, infra)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Sprintf("no Infrastructure %s: the provider's identity, its infrastructureName, is unknown", InfrastructureName), nil
	case err != nil:
		return "", "", fmt.Errorf("reading the Infrastructure %s: %w", InfrastructureName, err)
	case infra.Status.InfrastructureName == "":
		return "", fmt.Sprintf("the Infrastructure %s names no status.infrastructureName: the provider's identity is unknown", InfrastructureName), nil
	}
	return infra.Status.InfrastructureName, "", nil
}
