package adopt

import (
	"bytes"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// A cluster that declares the module's cluster_id as its legacy ID
// (pkg/clusterid) owns the servers the module tagged with it: adopt adopts
// them as they are tagged, their Machines and MachineSet carry that ID,
// and nothing is retagged (Terraform, appuio's provider and Argo CD keep
// finding what they wrote). --take-over-cluster-id of a declared ID, or
// --cluster-id naming it, is refused, saying why.
func TestDeclaredLegacyIDIsAdoptedAsItIsTagged(t *testing.T) {
	e := startPlanEnv(t, "worker-0a1b", "worker-2c3d")
	e.node("worker-0a1b")
	e.node("worker-2c3d")
	var infra configv1.Infrastructure
	e.must(e.kube.Get(e.ctx, client.ObjectKey{Name: clusterid.InfrastructureName}, &infra))
	infra.Annotations = map[string]string{clusterid.LegacyAnnotation: idModuleID}
	e.must(e.kube.Update(e.ctx, &infra))

	if _, err := e.adopter(Options{TakeOverClusterID: idModuleID}); err == nil || !strings.Contains(err.Error(), "is declared as this cluster's legacy ID") {
		t.Errorf("--take-over-cluster-id of the declared ID: %v, want a refusal saying it is declared", err)
	}
	if _, err := e.adopter(Options{ClusterID: idModuleID}); err == nil || !strings.Contains(err.Error(), "leave --cluster-id out") {
		t.Errorf("--cluster-id of the declared ID: %v, want a refusal", err)
	}
	a, err := e.adopter(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Plan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Print(&out, false)
	if !strings.Contains(out.String(), "Servers tagged as cluster "+idModuleID+"'s are this cluster's (a declared legacy ID)") {
		t.Errorf("the plan does not say the declared ID's servers are the cluster's:\n%s", out.String())
	}
	if len(p.Groups) != 1 {
		t.Fatalf("%d groups:\n%s", len(p.Groups), out.String())
	}
	g := p.Groups[0]
	if g.ClusterID != idModuleID || g.MachineSet == nil || !strings.HasPrefix(g.Name, idInfraName) {
		t.Fatalf("group %s of cluster %q, MachineSet %v:\n%s", g.Name, g.ClusterID, g.MachineSet != nil, out.String())
	}
	ms := g.MachineSet
	if ms.Labels[clusterLabel] != idModuleID || ms.Spec.Selector.MatchLabels[clusterLabel] != idModuleID || ms.Spec.Template.Labels[clusterLabel] != idModuleID {
		t.Errorf("MachineSet labels %v, selector %v, template %v: want the declared %s", ms.Labels, ms.Spec.Selector.MatchLabels, ms.Spec.Template.Labels, idModuleID)
	}
	r := &Report{}
	for _, m := range g.Members {
		if m.Action != ActAdopt || m.Machine == nil || m.Machine.Labels[clusterLabel] != idModuleID {
			t.Fatalf("%s: %q %v, want it adopted by a Machine labelled %s", m.Found.Name, m.Action, m.Misfits, idModuleID)
		}
		if err := a.adoptMember(e.ctx, g, m, r); err != nil {
			t.Fatal(err)
		}
		srv, err := a.c.GetServer(e.ctx, m.Found.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := cloud.CheckOwned(cloud.MachineRef{Name: m.MachineName, ClusterID: idModuleID}, srv); err != nil {
			t.Errorf("%s after adopting: %v", m.Found.Name, err)
		}
	}
	if r.IdentitiesSet != 0 || r.MachinesCreated != 2 {
		t.Errorf("report %+v: want 2 Machines, no server retagged", r)
	}
}
