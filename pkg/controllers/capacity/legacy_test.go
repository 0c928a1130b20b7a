package capacity_test

import (
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// A MachineSet labelled with a declared legacy cluster ID (a fleet
// cluster's Syn ID, which its Terraform-made MachineSets carry) is the
// cluster's: its capacity is published, so the autoscaler scales it from
// zero. One labelled with an ID not declared is still left alone, and the
// event says how to declare it.
func TestDeclaredLegacyMachineSetIsPublished(t *testing.T) {
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t))
	e := start(t, cfg, capacity.Options{ClusterID: "c-green-1234-x7k2p", LegacyClusterIDs: []string{"c-green-1234"}})
	label := func(id string) func(*machinev1.MachineSet) {
		return func(ms *machinev1.MachineSet) {
			ms.Labels = map[string]string{clusterid.Label: id}
			ms.Spec.Template.Labels[clusterid.Label] = id
		}
	}
	e.waitPublished(e.create(machineSet("fleet-worker", spec("flex-16-4", 80), label("c-green-1234"))))
	copied := e.create(machineSet("copied", spec("flex-16-4", 80), label("c-blue-5678")))
	e.waitEvent(copied, corev1.EventTypeWarning, capacity.ReasonOtherCluster,
		clusterid.DeclareCommand("c-blue-5678", "c-green-1234"))
}
