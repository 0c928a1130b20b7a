package appuioswitch

import (
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
)

// The specs the switch takes for cloudscale.ch's: appuio's writes neither
// apiVersion nor kind (config/samples of v0.4.0), this provider's both.
func TestCloudscaleSpec(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"zone":"rma1","flavor":"flex-16-4","image":"custom:rhcos-4.15"}`:                                             true,
		`{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"x"}`: true,
		`{"kind":"CloudscaleMachineProviderSpec"}`:                                                                     true,
		`{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2"}`:            false,
		`{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig"}`:                              false,
		`{"zone":"rma1"}`: false,
		`not json`:        false,
	} {
		ps := machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(raw)}}
		if got := cloudscaleSpec(ps); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
	if cloudscaleSpec(machinev1.ProviderSpec{}) {
		t.Error("no spec taken for cloudscale.ch's")
	}
}

func TestLive(t *testing.T) {
	now := time.Now()
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		r := metav1.NewMicroTime(now.Add(-renewed))
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &r}}
	}
	for name, tc := range map[string]struct {
		l    *coordinationv1.Lease
		want bool
	}{
		"renewed just now": {lease("pod_1", time.Second), true},
		"expired":          {lease("pod_1", time.Minute), false},
		"released":         {lease("", time.Second), false},
		"none":             {nil, false},
	} {
		if got := live(tc.l, now); got != tc.want {
			t.Errorf("%s: live %v, want %v", name, got, tc.want)
		}
	}
}

// A group is handed over only when every server in it is the cluster's.
func TestGroupNotTheClusters(t *testing.T) {
	ours := map[string]bool{"s1": true, "s2": true}
	for name, tc := range map[string]struct {
		g      cscloud.AntiAffinityGroup
		handed bool
	}{
		"all the cluster's":     {cscloud.AntiAffinityGroup{Key: "worker", Members: []string{"s1", "s2"}}, true},
		"one of another":        {cscloud.AntiAffinityGroup{Key: "worker", Members: []string{"s1", "x9"}}, false},
		"empty":                 {cscloud.AntiAffinityGroup{Key: "worker"}, false},
		"another cluster's tag": {cscloud.AntiAffinityGroup{Key: "worker", ClusterID: "c-other", Members: []string{"s1"}}, false},
	} {
		why := cscloud.GroupNotTheClusters(tc.g, "c-1", ours)
		if (why == "") != tc.handed {
			t.Errorf("%s: %q, want handed over %v", name, why, tc.handed)
		}
	}
}
