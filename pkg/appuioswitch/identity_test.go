package appuioswitch_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/appuioswitch"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// On a fleet cluster appuio's Machines and MachineSets carry the Terraform
// module's cluster_id (the Project Syn ID), and the infrastructureName is
// that ID plus five characters. Until the ID is declared as the cluster's
// legacy ID, the switch refuses to start, naming the command that declares
// it; once declared, it says what this provider does with the ID.
func TestSwitchBlocksOnAnUndeclaredClusterID(t *testing.T) {
	const syn, infraName = "c-green-1234", "c-green-1234-x7k2p"
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(testenv.InfrastructureCRD(t)))
	scheme, err := appuioswitch.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-machine-api"}}))
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: clusterid.InfrastructureName}}
	must(kube.Create(ctx, infra))
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: infraName,
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	must(kube.Status().Update(ctx, infra))
	// appuio's spec: neither apiVersion nor kind.
	spec := &runtime.RawExtension{Raw: []byte(`{"zone":"rma1","flavor":"flex-16-4","image":"custom:rhcos-4.19","interfaces":[{"type":"Private","networkUUID":"2db69ba3-1864-4608-853a-0771b6885a3a"}],"tokenSecret":{"name":"cloudscale-rw-token"}}`)}
	labels := map[string]string{clusterid.Label: syn, "machine.openshift.io/cluster-api-machineset": "worker"}
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-7ws9q", Namespace: "openshift-machine-api", Labels: labels}}
	m.Spec.ProviderSpec.Value = spec
	must(kube.Create(ctx, m))
	ms := &machinev1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "openshift-machine-api", Labels: map[string]string{clusterid.Label: syn}}}
	ms.Spec.Selector.MatchLabels = labels
	ms.Spec.Template.ObjectMeta.Labels = labels
	ms.Spec.Template.Spec.ProviderSpec.Value = spec
	must(kube.Create(ctx, ms))

	var out bytes.Buffer
	sw := appuioswitch.New(kube, cscloud.New(cscloud.Options{BaseURL: "http://127.0.0.1:1/"}), appuioswitch.Options{Out: &out})
	s, err := sw.Plan(ctx)
	must(err)
	declare := clusterid.DeclareCommand(syn)
	if len(s.Blockers) != 1 || !strings.Contains(s.Blockers[0], declare) || !strings.Contains(s.Blockers[0], infraName) {
		t.Errorf("blockers %q, want one naming %s and the command %q", s.Blockers, infraName, declare)
	}
	if !strings.Contains(out.String(), "BLOCKER: ") || !strings.Contains(out.String(), declare) {
		t.Errorf("the plan does not print the blocker and the command:\n%s", out.String())
	}
	if err := sw.Prepare(ctx); err == nil {
		t.Error("--prepare went on with an undeclared cluster ID")
	}
	if err := sw.Apply(ctx); err == nil {
		t.Error("--apply went on with an undeclared cluster ID")
	}

	// The command, as the blocker gives it: oc annotate.
	must(kube.Get(ctx, client.ObjectKey{Name: clusterid.InfrastructureName}, infra))
	infra.Annotations = map[string]string{clusterid.LegacyAnnotation: syn}
	must(kube.Update(ctx, infra))
	out.Reset()
	s, err = sw.Plan(ctx)
	must(err)
	if len(s.Blockers) != 0 || s.ClusterID != syn || !s.Identity.IsLegacy(syn) {
		t.Errorf("after the declaration: blockers %q, cluster %s, identity %+v", s.Blockers, s.ClusterID, s.Identity)
	}
	if !strings.Contains(out.String(), "is declared as this cluster's legacy ID") {
		t.Errorf("the plan does not say the ID is declared:\n%s", out.String())
	}
}
