package adopt

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// TestPlanWarnsOfStorageNodes: a group of storage nodes (by its role, or
// by the storage labels of its Nodes) is planned like any other, but the
// plan warns that deleting its Machines destroys the storage cluster's
// disks; other groups get no such warning.
func TestPlanWarnsOfStorageNodes(t *testing.T) {
	member := func(name string, labels map[string]string) *Member {
		return &Member{Found: &cloud.Found{Server: cloud.Server{ID: name + "-id", Name: name}}, MachineName: name, Action: ActAdopt,
			Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}}
	}
	groups := []*Group{
		{Name: "c1-storage-gva2", Role: "storage", Members: []*Member{member("storage-1a2b", nil)}},
		{Name: "c1-worker-gva2", Role: "worker", Members: []*Member{member("worker-3c4d", map[string]string{"cluster.ocs.openshift.io/openshift-storage": ""})}},
		{Name: "c1-infra-gva2", Role: "infra", Members: []*Member{member("infra-5e6f", map[string]string{nodeRolePrefix + "infra": ""})}},
	}
	for _, g := range groups {
		warnStorage(g)
	}
	var out bytes.Buffer
	(&Plan{Cloud: "exoscale", ClusterID: "c1", Groups: groups}).Print(&out, false)
	text := out.String()
	if n := strings.Count(text, "WARNING: storage nodes"); n != 2 {
		t.Errorf("%d storage warnings, want 2 (the storage role, the ODF label):\n%s", n, text)
	}
	if len(groups[2].Warnings) != 0 {
		t.Errorf("the infra group is warned: %v", groups[2].Warnings)
	}
	for _, want := range []string{"Ceph OSDs", "MachineHealthCheck", "MachineAutoscaler", "docs/adopt.md#storage-nodes"} {
		if !strings.Contains(text, want) {
			t.Errorf("the warning does not name %q:\n%s", want, text)
		}
	}
}
