// Package bootimages knows a release's RHCOS boot images and what the
// provider does with them, on every cloud: it reads the release's stream
// metadata from the cluster (the ConfigMap coreos-bootimages), tells which
// image each MachineSet should boot (its architecture and OS stream), plans
// the imports into the zones the MachineSets use, the MachineSets that
// follow, the images no one uses any more and the boot-image skew record,
// and carries the plan out through the cloud's cloud.ImageClient. The
// controller (pkg/controllers/bootimages) and the CLI (machine-api-provider
// images) both run it.
package bootimages

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/coreos/stream-metadata-go/arch"
	"github.com/coreos/stream-metadata-go/stream"
	corev1 "k8s.io/api/core/v1"
)

// Where a release's boot images are named, and how.
const (
	// Namespace and ConfigMapName: the release's stream metadata, which
	// the installer's hack/build-coreos-manifest.go writes into the
	// release payload and the CVO keeps current across upgrades.
	Namespace     = "openshift-machine-config-operator"
	ConfigMapName = "coreos-bootimages"
	// KeyStream holds the default stream's metadata; KeyStreams (OpenShift
	// 5.0 on, with several OS streams) a JSON object of every stream's by
	// name; KeyRelease the release version (installer, main branch,
	// hack/build-coreos-manifest.go).
	KeyStream  = "stream"
	KeyStreams = "streams"
	KeyRelease = "releaseVersion"

	// LabelOSStream on a MachineSet names its OS stream (the
	// machine-config-operator's boot image controller, main branch,
	// pkg/controller/bootimage/boot_image_controller.go): rhel-9 when
	// absent, as the MCO reads a MachineSet from before the dual streams.
	LabelOSStream = "machineconfiguration.openshift.io/osstream"
	DefaultStream = "rhel-9"

	// CapacityLabelsAnnotation carries the labels a MachineSet's Nodes will
	// have (the capacity publisher writes it), kubernetes.io/arch among
	// them; amd64 without.
	CapacityLabelsAnnotation = "capacity.cluster-autoscaler.kubernetes.io/labels"
	DefaultArch              = "amd64"

	// Artifact and Format are the stream's image both clouds import: the
	// OpenStack qcow2, gzip-compressed in the stream (the install guides
	// of both clouds start from it).
	Artifact = "openstack"
	Format   = "qcow2.gz"
)

// Release is a release's boot images, as the cluster's ConfigMap lists them.
type Release struct {
	// Version is the OpenShift release ("" when the ConfigMap says none).
	Version string
	streams map[string]*stream.Stream
}

// ParseConfigMap reads the ConfigMap coreos-bootimages.
func ParseConfigMap(cm *corev1.ConfigMap) (*Release, error) {
	r := &Release{Version: cm.Data[KeyRelease], streams: map[string]*stream.Stream{}}
	if raw := cm.Data[KeyStreams]; raw != "" {
		var all map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &all); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, KeyStreams, err)
		}
		for name, b := range all {
			var s stream.Stream
			if err := json.Unmarshal(b, &s); err != nil {
				return nil, fmt.Errorf("ConfigMap %s/%s key %s, stream %q: %w", cm.Namespace, cm.Name, KeyStreams, name, err)
			}
			r.streams[name] = &s
		}
	}
	if raw := cm.Data[KeyStream]; raw != "" {
		var s stream.Stream
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, KeyStream, err)
		}
		// the default stream, unless the streams name it apart
		if _, ok := r.streams[DefaultStream]; !ok {
			r.streams[DefaultStream] = &s
		}
	}
	if len(r.streams) == 0 {
		return nil, fmt.Errorf("ConfigMap %s/%s has neither %s nor %s", cm.Namespace, cm.Name, KeyStream, KeyStreams)
	}
	return r, nil
}

// Streams are the OS streams of the release.
func (r *Release) Streams() []string { return slices.Sorted(maps.Keys(r.streams)) }

// Image is a release's boot image of one OS stream and architecture.
type Image struct {
	Release string
	Stream  string
	// Arch as in kubernetes.io/arch (amd64, arm64).
	Arch string
	// RHCOS is the artifact's release, the RHCOS version.
	RHCOS string
	// Location and SHA256 are the stream's compressed artifact;
	// UncompressedSHA256 is the checksum of the qcow2 inside.
	Location, SHA256, UncompressedSHA256 string
	// File is the artifact's file name without the compression suffix
	// (rhcos-9.6.20250523-0-openstack.x86_64.qcow2): the file a mirror
	// holds.
	File string
}

// Image returns the release's image of osStream ("": rhel-9) and
// kubeArch ("": amd64).
func (r *Release) Image(osStream, kubeArch string) (*Image, error) {
	if osStream == "" {
		osStream = DefaultStream
	}
	if kubeArch == "" {
		kubeArch = DefaultArch
	}
	s := r.streams[osStream]
	if s == nil {
		return nil, fmt.Errorf("the release has no OS stream %q (it has %s)", osStream, strings.Join(r.Streams(), ", "))
	}
	rpm := arch.RpmArch(kubeArch)
	a, ok := s.Architectures[rpm]
	if !ok {
		return nil, fmt.Errorf("OS stream %s has no architecture %s (%s)", osStream, kubeArch, rpm)
	}
	disk, err := s.QueryDisk(rpm, Artifact, Format)
	if err != nil {
		return nil, fmt.Errorf("OS stream %s: %w", osStream, err)
	}
	if disk.UncompressedSha256 == "" {
		return nil, fmt.Errorf("OS stream %s, %s: the %s %s artifact has no uncompressed-sha256", osStream, kubeArch, Artifact, Format)
	}
	file := strings.TrimSuffix(path.Base(disk.Location), ".gz")
	return &Image{
		Release: r.Version, Stream: osStream, Arch: kubeArch, RHCOS: a.Artifacts[Artifact].Release,
		Location: disk.Location, SHA256: disk.Sha256, UncompressedSHA256: disk.UncompressedSha256, File: file,
	}, nil
}

// Name is the image's name in a cloud for the cluster: the RHCOS version,
// stream and architecture, and the cluster's ID (clusters sharing an
// account each import their own, and prune only their own).
func (i *Image) Name(clusterID string) string {
	return BootImageName(i.RHCOS, i.Stream, i.Arch, clusterID)
}

// BootImageName names an image: rhcos-9.6.20250523-0-rhel-9-amd64-<cluster>.
func BootImageName(rhcos, osStream, kubeArch, clusterID string) string {
	return strings.Join([]string{"rhcos", rhcos, osStream, kubeArch, clusterID}, "-")
}
