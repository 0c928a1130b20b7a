package adopt

import (
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
)

// TestTerraformKeeps: a role adopt is told to leave is left alone, and so
// are masters that do not carry the provider's identity (Terraform would
// take back whatever adopt wrote on them); masters Terraform tagged itself
// are adopted.
func TestTerraformKeeps(t *testing.T) {
	a := &Adopter{o: Options{ClusterID: "c1", LeaveRoles: []string{"infra"}}, cloud: cscloud.New(cscloud.Options{DefaultToken: "x"})}
	infra := &Group{Role: "infra"}
	a.leaveToTerraform(infra)
	if !strings.Contains(infra.Blocked, "left to Terraform (--leave-role infra)") {
		t.Errorf("infra: %q", infra.Blocked)
	}
	worker := &Group{Role: "worker"}
	a.leaveToTerraform(worker)
	if worker.Blocked != "" {
		t.Errorf("worker: %q", worker.Blocked)
	}
	master := func(tagged bool) *Member {
		f := &cloud.Found{}
		if tagged {
			f.ClusterID, f.Machine = "c1", "master-1a2b"
		}
		return &Member{Found: f, MachineName: "master-1a2b", Action: ActAdopt}
	}
	untagged := &Group{Master: true, Members: []*Member{master(true), master(false)}}
	a.keepTerraformMasters(untagged)
	if !strings.Contains(untagged.Blocked, `where the module's cluster_id is "c1" already, set make_master_adoptable_by_provider = true`) || untagged.Members[1].Action != ActMisfit {
		t.Errorf("masters, one untagged: %q, %v", untagged.Blocked, untagged.Members[1].Action)
	}
	// The module tagged them with its cluster_id, another than the
	// cluster's identity (adopt --take-over-cluster-id): they stay
	// Terraform's, and the plan names the cluster_id the module must have.
	a.o.TakeOverClusterID = "c0"
	other := master(true)
	other.Found.ClusterID = "c0"
	takenOver := &Group{Master: true, Members: []*Member{other}}
	a.keepTerraformMasters(takenOver)
	if !strings.Contains(takenOver.Blocked, `its cluster_id "c0"`) || !strings.Contains(takenOver.Blocked, `cluster_id = "c1"`) || takenOver.Members[0].Action != ActMisfit {
		t.Errorf("masters the module tagged with its cluster_id c0: %q, %v", takenOver.Blocked, takenOver.Members[0].Action)
	}
	// Changing cluster_id on a running cluster replaces the module's
	// network and load balancers: the plan says not to, not "check".
	if !strings.Contains(takenOver.Blocked, "never change it on a running cluster") || strings.Contains(takenOver.Blocked, "and terraform apply") {
		t.Errorf("the hint may lead to a new cluster_id on a running cluster: %q", takenOver.Blocked)
	}
	tagged := &Group{Master: true, Members: []*Member{master(true)}}
	a.keepTerraformMasters(tagged)
	if tagged.Blocked != "" || tagged.Members[0].Action != ActAdopt {
		t.Errorf("masters Terraform tagged: %q, %v", tagged.Blocked, tagged.Members[0].Action)
	}
}
