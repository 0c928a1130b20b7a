package capacity

import (
	"maps"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

func TestMergeList(t *testing.T) {
	ours := entries{"a": "a=1", "b": "b=2"}
	for _, tc := range []struct {
		name, current, published string
		ours                     entries
		wantValue, wantTracking  string
	}{
		{name: "empty", ours: entries{}, wantValue: "", wantTracking: ""},
		{name: "first publish", ours: ours, wantValue: "a=1,b=2", wantTracking: "a,b"},
		{name: "steady", current: "a=1,b=2", published: "a,b", ours: ours, wantValue: "a=1,b=2", wantTracking: "a,b"},
		{name: "theirs kept and sorted", current: "z=9, a=1,b=2", published: "a,b", ours: ours, wantValue: "a=1,b=2,z=9", wantTracking: "a,b"},
		{name: "theirs win", current: "b=mine", ours: ours, wantValue: "a=1,b=mine", wantTracking: "a"},
		{name: "theirs keep winning", current: "a=1,b=mine", published: "a", ours: ours, wantValue: "a=1,b=mine", wantTracking: "a"},
		{name: "stale ours removed", current: "a=1,c=3,z=9", published: "a,c", ours: ours, wantValue: "a=1,b=2,z=9", wantTracking: "a,b"},
		{name: "ours replaced", current: "a=0,b=0", published: "a,b", ours: ours, wantValue: "a=1,b=2", wantTracking: "a,b"},
		{name: "withdraw keeps theirs", current: "a=1,z=9", published: "a", ours: entries{}, wantValue: "z=9", wantTracking: ""},
		{name: "malformed theirs kept", current: "odd", ours: entries{}, wantValue: "odd", wantTracking: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, tr := mergeList(tc.current, tc.published, tc.ours, labelID)
			if v != tc.wantValue || tr != tc.wantTracking {
				t.Errorf("mergeList(%q, %q) = %q, %q; want %q, %q", tc.current, tc.published, v, tr, tc.wantValue, tc.wantTracking)
			}
		})
	}
}

func TestTaintID(t *testing.T) {
	for text, want := range map[string]string{
		"k=v:NoSchedule": "k:NoSchedule",
		"k:NoExecute":    "k:NoExecute",
		"k":              "k",
		"k=v":            "k",
	} {
		if got := taintID(text); got != want {
			t.Errorf("taintID(%q) = %q, want %q", text, got, want)
		}
	}
}

type fakeSpec struct{}

func (fakeSpec) CredentialsSecretName() string                 { return "" }
func (fakeSpec) CredentialsSecretField() string                { return "tokenSecret" }
func (fakeSpec) ServerName(m string) string                    { return m }
func (fakeSpec) AntiAffinityKey() string                       { return "" }
func (fakeSpec) MaxUserDataBytes() int                         { return 0 }
func (fakeSpec) UserDataSecretName() string                    { return "" }
func (fakeSpec) UserDataSecretSelector() *metav1.LabelSelector { return nil }
func (fakeSpec) InstanceType() string                          { return "gpu-1" }
func (fakeSpec) Region() string                                { return "rma" }
func (fakeSpec) Zone() string                                  { return "rma1" }
func (fakeSpec) RootVolumeGiB() int                            { return 100 }
func (fakeSpec) NodeLabels(*cloud.Flavor) map[string]string {
	return cloud.NodeLabels("gpu-1", "rma1", "rma")
}

func TestDesiredAnnotations(t *testing.T) {
	ms := &machinev1.MachineSet{}
	ms.Spec.Template.Spec.ObjectMeta = machinev1.ObjectMeta{Labels: map[string]string{
		"node-role.kubernetes.io/worker": "",
		"bad,key":                        "x",
	}}
	ms.Spec.Template.Spec.Taints = []corev1.Taint{
		{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{}},
	}
	f := &cloud.Flavor{Name: "gpu-1", VCPUs: 16, MemoryMiB: 131072, GPUs: 2, GPUType: "NVIDIA L40S", Arch: "amd64"}
	n := nodeOf(ms, fakeSpec{}, f)

	got := desiredAnnotations(map[string]string{LabelsKey: "team=ml"}, n, "nvidia.com/gpu")
	want := map[string]string{
		CPUKey:             "16",
		MemoryKey:          "131072Mi",
		EphemeralDiskKey:   "100Gi",
		GPUCountKey:        "2",
		GPUTypeKey:         "nvidia.com/gpu",
		GPUModelKey:        "NVIDIA L40S",
		OpenShiftVCPUKey:   "16",
		OpenShiftMemoryKey: "131072",
		OpenShiftGPUKey:    "2",
		LabelsKey:          "kubernetes.io/arch=amd64,node-role.kubernetes.io/worker=,node.kubernetes.io/instance-type=gpu-1,team=ml,topology.kubernetes.io/region=rma,topology.kubernetes.io/zone=rma1",
		PublishedLabelsKey: "kubernetes.io/arch,node-role.kubernetes.io/worker,node.kubernetes.io/instance-type,topology.kubernetes.io/region,topology.kubernetes.io/zone",
		TaintsKey:          "dedicated:NoExecute,gpu=true:NoSchedule",
		PublishedTaintsKey: "dedicated:NoExecute,gpu:NoSchedule",
	}
	if !maps.Equal(got, want) {
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("%s = %q, want %q", k, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s = %q", k, got[k])
			}
		}
	}

	// Applied, the same node changes nothing.
	current := map[string]string{"unrelated": "x"}
	maps.Copy(current, got)
	if p := annotationPatch(current, desiredAnnotations(current, n, "nvidia.com/gpu")); len(p) != 0 {
		t.Errorf("second publish patches %v, want nothing", p)
	}

	// Without GPUs the GPU keys go, except OpenShift's count, which is 0.
	f.GPUs, f.GPUType = 0, ""
	p := annotationPatch(current, desiredAnnotations(current, nodeOf(ms, fakeSpec{}, f), "nvidia.com/gpu"))
	for _, k := range []string{GPUCountKey, GPUTypeKey, GPUModelKey} {
		if v, ok := p[k]; !ok || v != nil {
			t.Errorf("patch of %s = %v, want removal", k, v)
		}
	}
	if v := p[OpenShiftGPUKey]; v == nil || *v != "0" {
		t.Errorf("patch of %s = %v, want 0", OpenShiftGPUKey, v)
	}

	// Withdrawing removes everything ours and keeps the hand-set label.
	p = annotationPatch(current, desiredAnnotations(current, nil, "nvidia.com/gpu"))
	if v := p[LabelsKey]; v == nil || *v != "team=ml" {
		t.Errorf("withdrawn labels = %v, want team=ml", v)
	}
	for _, k := range append(ownedKeys[:len(ownedKeys):len(ownedKeys)], PublishedLabelsKey, TaintsKey, PublishedTaintsKey) {
		if v, ok := p[k]; !ok || v != nil {
			t.Errorf("withdrawn %s = %v, want removal", k, v)
		}
	}
	if _, ok := p["unrelated"]; ok {
		t.Error("unrelated annotation touched")
	}
}
