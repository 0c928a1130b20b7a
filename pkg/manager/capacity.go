package manager

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
)

// addCapacityPublisher runs the MachineSet controller that publishes what a
// node of each MachineSet will have, for scaling from zero.
func addCapacityPublisher(mgr ctrl.Manager, o Options) error {
	r := capacity.New(mgr.GetClient(), o.Cloud, mgr.GetEventRecorderFor("machineset-capacity"), capacity.Options{SpecKind: o.Cloud.SpecKind()})
	return r.SetupWithManager(mgr)
}
