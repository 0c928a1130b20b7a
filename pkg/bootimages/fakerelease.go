package bootimages

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coreos/stream-metadata-go/arch"
	"github.com/coreos/stream-metadata-go/stream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

// FakeRelease is a release with small fake images, for the local cluster,
// the tests and the benchmark: the ConfigMap coreos-bootimages the
// installer would write, and the files a mirror serves for both clouds.
type FakeRelease struct {
	// Version is the OpenShift release.
	Version string
	// RHCOS is each OS stream's RHCOS version (rhel-9: 9.6.20250523-0).
	RHCOS map[string]string
	// Arches are the architectures, as in kubernetes.io/arch; default
	// amd64.
	Arches []string
	// VirtualSize of the images (a qcow2 header's); default 16 GiB.
	VirtualSize int64
	// Padding makes each image file this many bytes longer (the
	// benchmark's downloads).
	Padding int
}

// Build returns the ConfigMap and the mirror's files by path ("/<file>"):
// the decompressed OpenStack qcow2 (cloudscale.ch's), the image prepared
// for Exoscale and its MD5 file. The stream's artifacts are located under
// artifacts (a URL nothing needs to serve).
func (f FakeRelease) Build(artifacts string) (*corev1.ConfigMap, map[string][]byte, error) {
	arches := f.Arches
	if len(arches) == 0 {
		arches = []string{DefaultArch}
	}
	size := f.VirtualSize
	if size == 0 {
		size = 16 << 30
	}
	files := map[string][]byte{}
	streams := map[string]json.RawMessage{}
	for name, rhcos := range f.RHCOS {
		s := stream.Stream{Stream: name, Metadata: stream.Metadata{LastModified: "2026-01-01T00:00:00Z"}, Architectures: map[string]stream.Arch{}}
		for _, a := range arches {
			rpm := arch.RpmArch(a)
			file := fmt.Sprintf("rhcos-%s-openstack.%s.qcow2", rhcos, rpm)
			pad := string(make([]byte, f.Padding))
			image := imagefetch.FakeQCOW2(size, "openstack "+name+" "+rhcos+" "+rpm+pad)
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			if _, err := w.Write(image); err != nil {
				return nil, nil, err
			}
			if err := w.Close(); err != nil {
				return nil, nil, err
			}
			// what `images prepare` makes of it: another file
			prepared := imagefetch.FakeQCOW2(size, "exoscale "+name+" "+rhcos+" "+rpm+pad)
			exo := strings.Replace(file, "-openstack.", "-exoscale.", 1)
			files["/"+file] = image
			files["/"+exo] = prepared
			files["/"+exo+".md5"] = []byte(fmt.Sprintf("%x  %s\n", md5.Sum(prepared), exo))
			files["/"+file+".gz"] = gz.Bytes()
			s.Architectures[rpm] = stream.Arch{Artifacts: map[string]stream.PlatformArtifacts{
				Artifact: {Release: rhcos, Formats: map[string]stream.ImageFormat{Format: {Disk: &stream.Artifact{
					Location:           strings.TrimSuffix(artifacts, "/") + "/" + file + ".gz",
					Sha256:             fmt.Sprintf("%x", sha256.Sum256(gz.Bytes())),
					UncompressedSha256: fmt.Sprintf("%x", sha256.Sum256(image)),
				}}}},
			}}
		}
		b, err := json.Marshal(s)
		if err != nil {
			return nil, nil, err
		}
		streams[name] = b
	}
	all, err := json.Marshal(streams)
	if err != nil {
		return nil, nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ConfigMapName},
		Data:       map[string]string{KeyRelease: f.Version, KeyStreams: string(all)},
	}
	if def, ok := streams[DefaultStream]; ok {
		cm.Data[KeyStream] = string(def)
	}
	return cm, files, nil
}
