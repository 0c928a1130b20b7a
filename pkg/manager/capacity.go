package manager

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
)

// addCapacityPublisher runs the MachineSet controller that publishes what a
// node of each MachineSet will have, for scaling from zero.
func addCapacityPublisher(mgr ctrl.Manager, accounts *cloud.Accounts, ids clusterid.IDs) error {
	r := capacity.New(mgr.GetClient(), accounts, mgr.GetEventRecorderFor("machineset-capacity"),
		capacity.Options{SpecKind: accounts.Cloud().SpecKind(), ClusterID: ids.Own, LegacyClusterIDs: ids.Legacy})
	return r.SetupWithManager(mgr)
}
