package deployer

import (
	"context"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// InfrastructureName is the name of the cluster's one Infrastructure, whose
// status.infrastructureName is the cluster's identity: the installer
// chooses it, tags the cloud resources it makes with it, and it never
// changes.
const InfrastructureName = clusterid.InfrastructureName

// ReasonClusterIdentityUnknown: the Infrastructure names no
// infrastructureName (yet), and no --cluster-id was given. A Deployment
// applied before is left running.
const ReasonClusterIdentityUnknown = "ClusterIdentityUnknown"

// ReasonLegacyClusterIDsInvalid: the Infrastructure's annotation of legacy
// cluster IDs (pkg/clusterid) does not parse. A Deployment applied before
// is left running, with the legacy IDs it had.
const ReasonLegacyClusterIDsInvalid = "LegacyClusterIDsInvalid"

// clusterID is the identity the manager is pinned to (--cluster-id) and the
// legacy IDs it also owns (--legacy-cluster-ids): the deployer's own
// Options.ClusterID and LegacyClusterIDs when set, else the
// Infrastructure's infrastructureName and its annotation
// (clusterid.LegacyAnnotation), which only cluster admins may write. An
// empty Own with a reason and a message when there is none, or the
// annotation does not parse: the deployer then applies nothing, as a
// manager without an identity would take the cluster label of any Machine
// or MachineSet for its own.
func (r *Reconciler) clusterID(ctx context.Context) (clusterid.IDs, string, string, error) {
	if r.opts.ClusterID != "" {
		legacy, err := clusterid.ParseLegacy(strings.Join(r.opts.LegacyClusterIDs, ","), r.opts.ClusterID)
		if err != nil {
			return clusterid.IDs{}, ReasonLegacyClusterIDsInvalid, "--legacy-cluster-ids: " + err.Error(), nil
		}
		return clusterid.IDs{Own: r.opts.ClusterID, Legacy: legacy}, "", "", nil
	}
	if !r.infraServed {
		return clusterid.IDs{}, ReasonClusterIdentityUnknown, "the API server serves no config.openshift.io Infrastructure, and the deployer has no --cluster-id: the provider's identity is unknown", nil
	}
	infra := &configv1.Infrastructure{}
	err := r.egress.Get(ctx, types.NamespacedName{Name: InfrastructureName}, infra)
	switch {
	case apierrors.IsNotFound(err):
		return clusterid.IDs{}, ReasonClusterIdentityUnknown, fmt.Sprintf("no Infrastructure %s: the provider's identity, its infrastructureName, is unknown", InfrastructureName), nil
	case err != nil:
		return clusterid.IDs{}, "", "", fmt.Errorf("reading the Infrastructure %s: %w", InfrastructureName, err)
	case infra.Status.InfrastructureName == "":
		return clusterid.IDs{}, ReasonClusterIdentityUnknown, fmt.Sprintf("the Infrastructure %s names no status.infrastructureName: the provider's identity is unknown", InfrastructureName), nil
	}
	ids, err := clusterid.FromInfrastructure(infra)
	if err != nil {
		return clusterid.IDs{}, ReasonLegacyClusterIDsInvalid, err.Error(), nil
	}
	return ids, "", "", nil
}
