package exoscale

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"k8s.io/utils/ptr"

	v1beta1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

const otherCluster = "other-cluster-9q8w"

// TestSpecNamingAnotherClustersResourceIsRefused: the resources a spec
// names are checked before an instance joins them, on create and on every
// sync that attaches one. Another cluster's anti-affinity group (its
// provider made it), a private network labelled as another cluster's, and
// a security group and a template whose description marks them as another
// cluster's are refused, naming the field: no instance, no group, no
// attach. The cluster's Terraform security group and network, which carry
// no cluster's identity, are joined as named.
func TestSpecNamingAnotherClustersResourceIsRefused(t *testing.T) {
	// the template's file, which the emulator downloads at registration
	x := newEnv(t, emu.Config{ImageClient: &http.Client{Transport: imagefetch.Mirror{"https://images.example/rhcos.qcow2": imageFile}}})
	mark := groupMarker + " cluster=" + otherCluster
	theirSG := x.describedSecurityGroup("other_worker", mark+" (their workers)")
	tfSG := x.describedSecurityGroup("c1_worker", "c1 worker nodes")
	theirGroup := string(x.wait(x.raw.CreateAntiAffinityGroup(x.ctx, v3.CreateAntiAffinityGroupRequest{
		Name: cloud.GroupName(groupKey(otherCluster, "workers"), 1), Description: groupDescription(groupKey(otherCluster, "workers"), time.Now())})).Reference.ID)
	theirNet := x.labelledNetwork("other_clusternet", v3.Labels{v1beta1.LabelClusterID: otherCluster})
	tfNet := x.network("ch-gva-2", "c1_clusternet")
	x.wait(x.raw.RegisterTemplate(x.ctx, v3.RegisterTemplateRequest{
		Name: "rhcos-other", URL: "https://images.example/rhcos.qcow2", Checksum: imageSource("").MD5,
		SSHKeyEnabled: ptr.To(true), PasswordEnabled: ptr.To(false), Description: mark,
	}))

	for _, tc := range []struct {
		name, field string
		extra       map[string]any
	}{
		{"another cluster's security group", "securityGroups[1]", map[string]any{"securityGroups": []any{map[string]string{"id": tfSG}, map[string]string{"name": "other_worker"}}}},
		{"another cluster's anti-affinity group", "antiAffinityGroups[0]", map[string]any{"antiAffinityGroups": []any{map[string]string{"id": theirGroup}}, "antiAffinityKey": "workers"}},
		{"another cluster's private network", "privateNetworks[1]", map[string]any{"privateNetworks": []any{map[string]string{"id": tfNet}, map[string]string{"name": "other_clusternet"}}}},
		{"another cluster's template", "template", map[string]any{"template": map[string]string{"name": "rhcos-other"}}},
	} {
		x.emu.Harness().ResetRequests()
		_, _, err := x.c.CreateServer(x.ctx, ref("worker-refused"), x.spec(specJSON(tc.extra)), nil)
		wantForeign(t, tc.name, tc.field, err)
		if n := x.writes(); n != 0 {
			t.Errorf("%s: %d writes before the refusal: %v", tc.name, n, x.emu.Harness().Requests())
		}
	}
	if n := len(x.emu.Instances()); n != 0 {
		t.Errorf("%d instances made for specs naming another cluster's resources", n)
	}

	// An instance of the cluster, made with the Terraform group and
	// network; its spec then names another cluster's group and network
	// too (a copied MachineSet, an edit): the sync attaches neither.
	s, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(map[string]any{
		"securityGroups": []any{map[string]string{"id": tfSG}}, "privateNetworks": []any{map[string]string{"id": tfNet}},
	})), nil)
	if err != nil {
		t.Fatal(err)
	}
	edited := x.spec(specJSON(map[string]any{
		"securityGroups":  []any{map[string]string{"id": tfSG}, map[string]string{"id": theirSG}},
		"privateNetworks": []any{map[string]string{"id": tfNet}, map[string]string{"id": theirNet}},
	}))
	fresh, err := x.c.GetServer(x.ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	x.emu.Harness().ResetRequests()
	_, err = x.c.SyncServer(x.ctx, ref("worker-a"), edited, fresh)
	wantForeign(t, "sync: another cluster's security group", "securityGroups[1]", err)
	wantForeign(t, "sync: another cluster's private network", "privateNetworks[1]", err)
	for route, n := range x.emu.Harness().Requests() {
		if strings.Contains(route, ":attach") {
			t.Errorf("sync: %d × %s to another cluster's resources", n, route)
		}
	}
	inst, _ := x.emu.Instance(s.ID)
	if slices.Contains(inst.SecurityGroups, theirSG) || slices.Contains(inst.PrivateNetworks, theirNet) {
		t.Errorf("instance in groups %v, on networks %v: another cluster's joined", inst.SecurityGroups, inst.PrivateNetworks)
	}
	if !slices.Contains(inst.SecurityGroups, tfSG) || !slices.Contains(inst.PrivateNetworks, tfNet) {
		t.Errorf("instance in groups %v, on networks %v: want the Terraform group and network", inst.SecurityGroups, inst.PrivateNetworks)
	}
}

// wantForeign fails unless err is (or joins) a *cloud.ForeignResourceError
// naming field and the other cluster.
func wantForeign(t *testing.T, what, field string, err error) {
	t.Helper()
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var foreign *cloud.ForeignResourceError
		if errors.As(e, &foreign) && foreign.Field == field && foreign.Cluster == otherCluster && foreign.Want == clusterID {
			var inv *cloud.InvalidConfigError
			if !errors.As(e, &inv) || inv.Field != field {
				t.Errorf("%s: %v is no spec error naming %s", what, e, field)
			}
			return
		}
	}
	t.Errorf("%s: %v (%T), want it refused naming %s and cluster %s", what, err, err, field, otherCluster)
}

func (x *env) describedSecurityGroup(name, description string) string {
	x.t.Helper()
	op := x.wait(x.raw.CreateSecurityGroup(x.ctx, v3.CreateSecurityGroupRequest{Name: name, Description: description}))
	return string(op.Reference.ID)
}

// labelledNetwork makes a managed private network in ch-gva-2 with labels.
func (x *env) labelledNetwork(name string, labels v3.Labels) string {
	x.t.Helper()
	op := x.wait(x.raw.CreatePrivateNetwork(x.ctx, v3.CreatePrivateNetworkRequest{
		Name: name, StartIP: []byte{172, 18, 201, 10}, EndIP: []byte{172, 18, 201, 250}, Netmask: []byte{255, 255, 255, 0}, Labels: labels,
	}))
	return string(op.Reference.ID)
}
