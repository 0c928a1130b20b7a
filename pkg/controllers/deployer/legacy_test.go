package deployer_test

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// The legacy cluster IDs a cluster admin declares on the Infrastructure
// (its annotation, pkg/clusterid) reach the manager as
// --legacy-cluster-ids, rendered like --cluster-id: the manager ConfigMap,
// which a namespace writer may edit, cannot set or change them. An
// annotation that does not parse leaves the Deployment as it was, saying
// what to fix.
func TestLegacyClusterIDsAreRenderedFromTheInfrastructure(t *testing.T) {
	cfg, cc := startOpenShift(t, testenv.InfrastructureCRD(t))
	e := start(t, cfg, func(o *deployer.Options) { o.ClusterID = "" })
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: deployer.InfrastructureName}}
	e.must(cc.Create(e.ctx, infra))
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "c-green-1234-x7k2p",
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	e.must(cc.Status().Update(e.ctx, infra))
	e.createImages(maoImg1, proxyImg1)
	e.waitDeployment(func(d *appsv1.Deployment) bool {
		return slices.Contains(managerArgs(d), "--cluster-id=c-green-1234-x7k2p")
	})
	if got := managerArgs(e.getDeployment()); slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--legacy-cluster-ids") }) {
		t.Errorf("manager args %v: legacy IDs none declared", got)
	}

	// A namespace writer cannot declare one.
	e.must(e.c.Create(e.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: e.ns},
		Data:       map[string]string{"legacy-cluster-ids": "c-blue-5678"},
	}))
	e.waitConditionOf(deployer.ConditionManagerConfigValid, metav1.ConditionFalse, deployer.ReasonConfigInvalid, "legacy-cluster-ids")

	// The admin declares the Syn ID on the Infrastructure.
	e.must(cc.Get(e.ctx, client.ObjectKey{Name: deployer.InfrastructureName}, infra))
	infra.Annotations = map[string]string{clusterid.LegacyAnnotation: "c-green-1234"}
	e.must(cc.Update(e.ctx, infra))
	e.waitDeployment(func(d *appsv1.Deployment) bool {
		return slices.Contains(managerArgs(d), "--legacy-cluster-ids=c-green-1234")
	})
	if got := managerArgs(e.getDeployment()); slices.Contains(got, "--legacy-cluster-ids=c-blue-5678") {
		t.Errorf("manager args %v: the ConfigMap's legacy ID got through", got)
	}

	// A declaration that does not parse: the Deployment stays as it was.
	e.must(cc.Get(e.ctx, client.ObjectKey{Name: deployer.InfrastructureName}, infra))
	infra.Annotations[clusterid.LegacyAnnotation] = "c-green-1234,c-green-1234-x7k2p"
	e.must(cc.Update(e.ctx, infra))
	c := e.waitCondition(metav1.ConditionFalse, deployer.ReasonLegacyClusterIDsInvalid)
	if !strings.Contains(c.Message, "the cluster's own ID") || !strings.Contains(c.Message, clusterid.LegacyAnnotation) {
		t.Errorf("condition %q, want it to say what is wrong with the annotation", c.Message)
	}
	if got := managerArgs(e.getDeployment()); !slices.Contains(got, "--legacy-cluster-ids=c-green-1234") {
		t.Errorf("manager args %v, want those applied before", got)
	}
}
