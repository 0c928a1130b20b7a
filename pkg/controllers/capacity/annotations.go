package capacity

import (
	"slices"
	"strconv"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// The annotations the cluster autoscaler reads to build a node template for
// a MachineSet with no Machines. Keys and value formats are those of the
// upstream clusterapi cloud provider (cluster-autoscaler/cloudprovider/
// clusterapi/clusterapi_utils.go and clusterapi_unstructured.go), which
// OpenShift's fork (cloudprovider/openshift) reads as well.
const (
	// CPUKey is the number of vCPUs, a resource.Quantity ("4").
	CPUKey = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	// MemoryKey is the memory, a resource.Quantity ("16384Mi").
	MemoryKey = "capacity.cluster-autoscaler.kubernetes.io/memory"
	// EphemeralDiskKey is the root disk, a resource.Quantity ("50Gi").
	EphemeralDiskKey = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"
	// GPUCountKey is the number of GPUs, an integer; absent without GPUs.
	GPUCountKey = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	// GPUTypeKey is, despite its name, the extended resource name the GPUs
	// are advertised under ("nvidia.com/gpu"): upstream puts gpu-count
	// GPUs of resource gpu-type into the node template's capacity.
	// Absent without GPUs.
	GPUTypeKey = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	// LabelsKey holds node labels as "k1=v1,k2=v2".
	LabelsKey = "capacity.cluster-autoscaler.kubernetes.io/labels"
	// TaintsKey holds node taints as "k1=v1:NoSchedule,k2:NoExecute".
	TaintsKey = "capacity.cluster-autoscaler.kubernetes.io/taints"
)

// OpenShift's historical keys, still read by its autoscaler when the
// upstream ones are absent, and by other OpenShift tooling.
const (
	// OpenShiftVCPUKey is the number of vCPUs, an integer.
	OpenShiftVCPUKey = "machine.openshift.io/vCPU"
	// OpenShiftMemoryKey is the memory in MiB, an integer.
	OpenShiftMemoryKey = "machine.openshift.io/memoryMb"
	// OpenShiftGPUKey is the number of GPUs, an integer ("0" without).
	OpenShiftGPUKey = "machine.openshift.io/GPU"
)

// This controller's own annotations.
const (
	// GPUModelKey names the GPU model as the cloud does ("NVIDIA RTX PRO
	// 6000 Max-Q"), for people and tools; absent without GPUs. The
	// autoscaler does not read it.
	GPUModelKey = "machine.appuio.io/gpu-model"
	// PublishedLabelsKey lists the keys of the labels in LabelsKey that
	// this controller wrote, comma-separated and sorted. Labels not listed
	// were set by someone else and are left alone.
	PublishedLabelsKey = "machine.appuio.io/published-capacity-labels"
	// PublishedTaintsKey does the same for TaintsKey, listing taints as
	// "key:Effect".
	PublishedTaintsKey = "machine.appuio.io/published-capacity-taints"
)

// ownedKeys are the annotations whose values this controller sets
// outright; LabelsKey and TaintsKey are shared with users.
var ownedKeys = []string{
	CPUKey, MemoryKey, EphemeralDiskKey, GPUCountKey, GPUTypeKey,
	OpenShiftVCPUKey, OpenShiftMemoryKey, OpenShiftGPUKey,
	GPUModelKey,
}

// labelArch is the kubelet's label published besides the template's and
// those of the cloud's CCM.
const labelArch = "kubernetes.io/arch"

// node is what a Node of a MachineSet will look like, as far as capacity
// publishing goes. A nil *node publishes nothing: all owned annotations
// and published labels and taints are removed.
type node struct {
	flavor  *cloud.Flavor
	diskGiB int
	labels  map[string]string
	taints  []corev1.Taint
}

// nodeOf describes the Nodes of ms, whose parsed spec is spec and whose
// flavor is f.
func nodeOf(ms *machinev1.MachineSet, spec cloud.Spec, f *cloud.Flavor) *node {
	labels := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			labels[k] = v
		}
	}
	set(labelArch, f.Arch)
	// The instance type, zone and region as the cloud's CCM labels the
	// Node, not as the spec names them: a template that promised a label
	// the Node will not have made a pending pod selecting it scale a
	// MachineSet whose Node cannot take it (Exoscale's CCM sets no zone
	// label, and names an instance type given by ID as family.size).
	for k, v := range spec.NodeLabels(f) {
		set(k, v)
	}
	// The template's labels are the Node's own; they win over ours.
	for k, v := range ms.Spec.Template.Spec.Labels {
		labels[k] = v
	}
	for k, v := range labels {
		// Nothing that cannot be a node label, and nothing that would break
		// the annotation's k=v,k=v format.
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			delete(labels, k)
		}
	}
	var taints []corev1.Taint
	for _, t := range ms.Spec.Template.Spec.Taints {
		if t.Key == "" || t.Effect == "" || strings.ContainsAny(t.Key+t.Value, ",:=") {
			continue
		}
		taints = append(taints, t)
	}
	return &node{flavor: f, diskGiB: spec.RootVolumeGiB(), labels: labels, taints: taints}
}

// owned returns the values of the owned annotations; a key absent from the
// map is to be absent from the MachineSet.
func (n *node) owned(gpuResource string) map[string]string {
	out := map[string]string{}
	if n == nil {
		return out
	}
	f := n.flavor
	out[CPUKey] = strconv.Itoa(f.VCPUs)
	out[MemoryKey] = strconv.FormatInt(f.MemoryMiB, 10) + "Mi"
	if n.diskGiB > 0 {
		out[EphemeralDiskKey] = strconv.Itoa(n.diskGiB) + "Gi"
	}
	out[OpenShiftVCPUKey] = strconv.Itoa(f.VCPUs)
	out[OpenShiftMemoryKey] = strconv.FormatInt(f.MemoryMiB, 10)
	out[OpenShiftGPUKey] = strconv.Itoa(max(f.GPUs, 0))
	if f.GPUs > 0 {
		out[GPUCountKey] = strconv.Itoa(f.GPUs)
		out[GPUTypeKey] = gpuResource
		if f.GPUType != "" {
			out[GPUModelKey] = f.GPUType
		}
	}
	return out
}

// entries are the labels (k=v, identified by k) or taints (k=v:Effect,
// identified by k:Effect) of one list annotation, by identity.
type entries map[string]string

func (n *node) labelEntries() entries {
	out := entries{}
	if n == nil {
		return out
	}
	for k, v := range n.labels {
		out[k] = k + "=" + v
	}
	return out
}

func (n *node) taintEntries() entries {
	out := entries{}
	if n == nil {
		return out
	}
	for _, t := range n.taints {
		text := t.Key
		if t.Value != "" {
			text += "=" + t.Value
		}
		out[t.Key+":"+string(t.Effect)] = text + ":" + string(t.Effect)
	}
	return out
}

// labelID identifies a label entry "k=v" by its key.
func labelID(text string) string {
	k, _, _ := strings.Cut(text, "=")
	return k
}

// taintID identifies a taint entry "k=v:Effect" by key and effect, as the
// autoscaler does when it merges taints.
func taintID(text string) string {
	kv, effect, _ := strings.Cut(text, ":")
	k, _, _ := strings.Cut(kv, "=")
	if effect == "" {
		return k
	}
	return k + ":" + effect
}

// mergeList merges our entries into a list annotation's current value.
// published is what we wrote last time (the tracking annotation's value):
// current entries not listed there are someone else's, kept as they are,
// and they win over ours with the same identity. Ours replace what we
// wrote before, so entries we no longer publish disappear. It returns the
// new value and the new tracking value, both sorted and "" when empty.
func mergeList(current, published string, ours entries, id func(string) string) (value, tracking string) {
	prev := map[string]bool{}
	for _, i := range splitList(published) {
		prev[i] = true
	}
	theirs := entries{}
	for _, text := range splitList(current) {
		if i := id(text); !prev[i] {
			theirs[i] = text
		}
	}
	merged := entries{}
	var mine []string
	for i, text := range ours {
		if _, taken := theirs[i]; !taken {
			merged[i] = text
			mine = append(mine, i)
		}
	}
	for i, text := range theirs {
		merged[i] = text
	}
	ids := make([]string, 0, len(merged))
	for i := range merged {
		ids = append(ids, i)
	}
	slices.Sort(ids)
	texts := make([]string, len(ids))
	for j, i := range ids {
		texts[j] = merged[i]
	}
	slices.Sort(mine)
	return strings.Join(texts, ","), strings.Join(mine, ",")
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// desiredAnnotations returns what the annotations this controller manages
// should be for n, given the current annotations; "" means absent.
func desiredAnnotations(current map[string]string, n *node, gpuResource string) map[string]string {
	want := map[string]string{}
	owned := n.owned(gpuResource)
	for _, k := range ownedKeys {
		want[k] = owned[k]
	}
	want[LabelsKey], want[PublishedLabelsKey] = mergeList(current[LabelsKey], current[PublishedLabelsKey], n.labelEntries(), labelID)
	want[TaintsKey], want[PublishedTaintsKey] = mergeList(current[TaintsKey], current[PublishedTaintsKey], n.taintEntries(), taintID)
	return want
}

// annotationPatch returns the changes that turn current into want, for a
// JSON merge patch of metadata.annotations: a value to set, or nil to
// remove. It is empty when nothing changes.
func annotationPatch(current, want map[string]string) map[string]*string {
	patch := map[string]*string{}
	for k, v := range want {
		cur, present := current[k]
		switch {
		case v == "" && present:
			patch[k] = nil
		case v != "" && (!present || cur != v):
			patch[k] = &v
		}
	}
	return patch
}
