package adopt

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// The templates adopt writes are rendered in the provider's sandbox, which
// is this test binary started again.
func TestMain(m *testing.M) {
	userdata.Main()
	os.Exit(m.Run())
}

// A node's Ignition, as appuio's Exoscale module writes it: the pointer,
// the private network's interface file, the hostname.
const moduleIgnition = `{"ignition":{"version":"3.1.0","config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]}},
"storage":{"files":[{"path":"/etc/sysconfig/network-scripts/ifcfg-ens4","mode":420,"contents":{"source":"data:,DEVICE%3Dens4"}},
{"path":"/etc/hostname","mode":420,"overwrite":true,"contents":{"source":"data:,worker-1a2b"}}]}}`

// A MachineSet's Machines get the Ignition the group's nodes share, with
// their own name as the hostname, as the module gave each node its own.
func TestUserDataTemplateGivesEachMachineItsHostname(t *testing.T) {
	base, err := withoutHostname([]byte(moduleIgnition))
	if err != nil {
		t.Fatal(err)
	}
	machine := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "c1-worker-gva2-x7k2p"}}
	out, err := userdata.Default.Render(context.Background(), []byte(hostnameTemplate), machine,
		map[string][]byte{baseIgnitionKey: base, userDataKey: []byte(hostnameTemplate)})
	if err != nil {
		t.Fatal(err)
	}
	var ign struct {
		Ignition struct {
			Config struct {
				Merge []struct{ Source string } `json:"merge"`
			} `json:"config"`
		} `json:"ignition"`
		Storage struct {
			Files []struct {
				Path     string                  `json:"path"`
				Contents struct{ Source string } `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(out, &ign); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(ign.Ignition.Config.Merge) != 1 || ign.Ignition.Config.Merge[0].Source != "https://api-int.c1.example.com:22623/config/worker" {
		t.Errorf("pointer lost: %s", out)
	}
	hostnames, ifcfg := 0, false
	for _, f := range ign.Storage.Files {
		switch f.Path {
		case "/etc/hostname":
			hostnames++
			if f.Contents.Source != "data:,c1-worker-gva2-x7k2p" {
				t.Errorf("hostname %q, want the Machine's name", f.Contents.Source)
			}
		case "/etc/sysconfig/network-scripts/ifcfg-ens4":
			ifcfg = true
		}
	}
	if hostnames != 1 || !ifcfg {
		t.Errorf("%d hostname files (want 1, the Machine's), interface file kept: %v: %s", hostnames, ifcfg, out)
	}
	// Without files of its own (an instance pool's user data) it gets one.
	base, err = withoutHostname([]byte(`{"ignition":{"version":"3.1.0"}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err = userdata.Default.Render(context.Background(), []byte(hostnameTemplate), machine, map[string][]byte{baseIgnitionKey: base})
	if err != nil || !json.Valid(out) || !strings.Contains(string(out), "data:,c1-worker-gva2-x7k2p") {
		t.Fatalf("%s, %v", out, err)
	}
	if _, err := withoutHostname([]byte(`#cloud-config`)); err == nil {
		t.Errorf("cloud-config taken for Ignition")
	}
}

// A server's role is the Terraform module's name prefix, master for the
// control plane, the pool's role for its members, and for nodes the
// modules did not name the Node's role other than worker.
func TestRoleOf(t *testing.T) {
	node := func(roles ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		for _, r := range roles {
			n.Labels[nodeRolePrefix+r] = ""
		}
		return n
	}
	for _, tc := range []struct {
		name string
		m    *Member
		want string
	}{
		{"module worker", &Member{MachineName: "worker-0a1b", Node: node("worker", "app"), Found: &cloud.Found{}}, "worker"},
		{"additional group", &Member{MachineName: "gpu-a100-0a1b", Node: node("worker"), Found: &cloud.Found{}}, "gpu-a100"},
		{"master", &Member{MachineName: "etcd-0", Node: node("control-plane"), Found: &cloud.Found{}}, "master"},
		{"pool member", &Member{MachineName: "worker-8c6a5-2dd24", Node: node("worker"), Found: &cloud.Found{Pool: &cloud.FoundPool{Name: "c1_storage-0"}}}, "storage"},
		{"other node", &Member{MachineName: "node7", Node: node("worker", "infra", "app"), Found: &cloud.Found{}}, "app"},
		{"plain", &Member{MachineName: "node7", Node: node("worker"), Found: &cloud.Found{}}, "worker"},
	} {
		if got := roleOf(tc.m, "c1"); got != tc.want {
			t.Errorf("%s: role %q, want %q", tc.name, got, tc.want)
		}
	}
}
