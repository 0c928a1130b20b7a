package deployer_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// testClusterID is the identity the tests' deployers hand the manager when
// their control plane serves no Infrastructure.
const testClusterID = "deployer-test-x7k2p"

func managerArgs(d *appsv1.Deployment) []string {
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == deployer.MachineContainer })
	if i < 0 {
		return nil
	}
	return d.Spec.Template.Spec.Containers[i].Args
}

// The manager is pinned to the cluster's identity, the Infrastructure's
// infrastructureName: the deployer reads it and hands it over as
// --cluster-id, which a ConfigMap cannot change. Without one the deployer
// applies nothing: a manager without an identity would take any Machine's
// or MachineSet's cluster label for its own.
func TestManagerIsPinnedToTheInfrastructureName(t *testing.T) {
	cfg, cc := startOpenShift(t, testenv.InfrastructureCRD(t))
	e := start(t, cfg, func(o *deployer.Options) { o.ClusterID = "" })
	e.createImages(maoImg1, proxyImg1)
	c := e.waitCondition(metav1.ConditionFalse, deployer.ReasonClusterIdentityUnknown)
	if !strings.Contains(c.Message, "no Infrastructure cluster") {
		t.Errorf("condition %q, want it to say the Infrastructure is missing", c.Message)
	}
	e.consistentlyNoDeployment(time.Second)

	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: deployer.InfrastructureName}}
	e.must(cc.Create(e.ctx, infra))
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "c-green-x7k2p",
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	e.must(cc.Status().Update(e.ctx, infra))
	e.waitDeployment(func(d *appsv1.Deployment) bool { return slices.Contains(managerArgs(d), "--cluster-id=c-green-x7k2p") })
	e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)

	// The manager's ConfigMap cannot move it to another cluster.
	e.must(e.c.Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: e.ns},
		Data:       map[string]string{"cluster-id": "c-blue-1234"},
	}))
	e.waitConditionOf(deployer.ConditionManagerConfigValid, metav1.ConditionFalse, deployer.ReasonConfigInvalid, "cluster-id")
	if got := managerArgs(e.getDeployment()); slices.Contains(got, "--cluster-id=c-blue-1234") || !slices.Contains(got, "--cluster-id=c-green-x7k2p") {
		t.Errorf("manager args %v", got)
	}
}
