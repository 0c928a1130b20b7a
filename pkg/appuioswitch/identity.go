package appuioswitch

import (
	"context"
	"fmt"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// checkIdentity holds the Machines' cluster ID to the cluster's identity
// (pkg/clusterid). On appuio's fleet clusters the Machines and MachineSets
// carry the Terraform module's cluster_id, the Project Syn ID, and appuio's
// provider tagged their servers with it; the Infrastructure's
// infrastructureName, which this provider is pinned to, is that ID plus
// five random characters. Switched as it is, this provider would hold every
// Machine, fail every new one, the webhook would refuse every MachineSet
// change carrying the ID (an Argo CD sync), and no deletion could delete a
// server. So an ID that is neither the infrastructureName nor declared as
// the cluster's legacy ID is a blocker, which names the one command that
// resolves it: declaring the ID. That changes nothing on the Machines,
// MachineSets or servers (nothing is relabelled or retagged), so appuio's
// provider finds everything as it left it after a rollback; this provider
// then acts on them under that ID, and tags the servers it makes with it,
// as appuio's does.
func (w *Switch) checkIdentity(ctx context.Context, s *Survey) error {
	ids, err := clusterid.Read(ctx, w.kube)
	if err != nil {
		s.Blockers = append(s.Blockers, err.Error())
		return nil
	}
	s.Identity = ids
	switch {
	case ids.Own == "" || s.ClusterID == "" || s.ClusterID == ids.Own:
	case ids.IsLegacy(s.ClusterID):
		s.Notes = append(s.Notes, fmt.Sprintf("the Machines' cluster ID %s (label %s, which tags their servers) is declared as this cluster's legacy ID (annotation %s of the Infrastructure %s): this provider acts on them and their servers as they are, and tags the servers it makes with %s, as appuio's provider does",
			s.ClusterID, clusterLabel, clusterid.LegacyAnnotation, clusterid.InfrastructureName, s.ClusterID))
	default:
		s.Blockers = append(s.Blockers, fmt.Sprintf("the Machines' cluster ID %s (label %s, which tags their servers) is not the Infrastructure's infrastructureName %s, which this provider is pinned to: it would hold every Machine, fail every new one, refuse every MachineSet change carrying %s, and delete no server. Declare %s as this cluster's legacy ID (nothing is relabelled or retagged; appuio's provider does not read it): %s",
			s.ClusterID, clusterLabel, ids.Own, s.ClusterID, s.ClusterID, ids.DeclareCommand(s.ClusterID)))
	}
	return nil
}
