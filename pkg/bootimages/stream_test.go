package bootimages_test

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
)

func fakeRelease(t *testing.T, streams map[string]string, arches ...string) (*corev1.ConfigMap, map[string][]byte) {
	t.Helper()
	cm, files, err := bootimages.FakeRelease{Version: "5.0.1", RHCOS: streams, Arches: arches}.Build("https://rhcos.example/art")
	if err != nil {
		t.Fatal(err)
	}
	return cm, files
}

// The release's image per OS stream and architecture, from the streams key
// (5.0) or the stream key alone (4.x): the OpenStack qcow2, its file name
// without .gz, its uncompressed-sha256 the checksum of the mirror's file.
func TestReleaseImages(t *testing.T) {
	cm, files := fakeRelease(t, map[string]string{"rhel-9": "9.6.20250523-0", "rhel-10": "10.1.20260110-0"}, "amd64", "arm64")
	rel, err := bootimages.ParseConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != "5.0.1" || strings.Join(rel.Streams(), ",") != "rhel-10,rhel-9" {
		t.Fatalf("release %q, streams %v", rel.Version, rel.Streams())
	}
	for _, tc := range []struct{ stream, arch, rhcos, file string }{
		{"", "", "9.6.20250523-0", "rhcos-9.6.20250523-0-openstack.x86_64.qcow2"},
		{"rhel-10", "arm64", "10.1.20260110-0", "rhcos-10.1.20260110-0-openstack.aarch64.qcow2"},
	} {
		img, err := rel.Image(tc.stream, tc.arch)
		if err != nil {
			t.Fatal(err)
		}
		if img.RHCOS != tc.rhcos || img.File != tc.file || img.UncompressedSHA256 != fmt.Sprintf("%x", sha256.Sum256(files["/"+tc.file])) ||
			img.Location != "https://rhcos.example/art/"+tc.file+".gz" || img.Release != "5.0.1" {
			t.Errorf("%s/%s: %+v", tc.stream, tc.arch, img)
		}
	}
	if img, _ := rel.Image("rhel-9", "amd64"); img.Name("c-1") != "rhcos-9.6.20250523-0-rhel-9-amd64-c-1" {
		t.Errorf("name %q", img.Name("c-1"))
	}
	if _, err := rel.Image("rhel-11", ""); err == nil || !strings.Contains(err.Error(), "no OS stream \"rhel-11\"") {
		t.Errorf("unknown stream: %v", err)
	}
	if _, err := rel.Image("", "s390x"); err == nil || !strings.Contains(err.Error(), "no architecture s390x") {
		t.Errorf("unknown arch: %v", err)
	}

	// A 4.x ConfigMap: stream alone, the default stream's.
	old := cm.DeepCopy()
	delete(old.Data, bootimages.KeyStreams)
	rel, err = bootimages.ParseConfigMap(old)
	if err != nil {
		t.Fatal(err)
	}
	if img, err := rel.Image("", ""); err != nil || img.RHCOS != "9.6.20250523-0" {
		t.Fatalf("4.x stream: %+v, %v", img, err)
	}
	if _, err := bootimages.ParseConfigMap(&corev1.ConfigMap{}); err == nil {
		t.Error("an empty ConfigMap parsed")
	}
	bad := cm.DeepCopy()
	bad.Data[bootimages.KeyStreams] = "{"
	if _, err := bootimages.ParseConfigMap(bad); err == nil {
		t.Error("broken streams parsed")
	}
}

// Builds order RHCOS versions across both schemes.
func TestOlderRHCOS(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		older bool
	}{
		{"9.6.20250523-0", "9.6.20250601-0", true},
		{"9.6.20250523-1", "9.6.20250523-0", false},
		{"418.94.202410090804-0", "9.6.20250523-0", true},
		{"10.1.20260110-0", "9.6.20250523-0", false},
	} {
		if got := bootimages.OlderRHCOS(tc.a, tc.b); got != tc.older {
			t.Errorf("OlderRHCOS(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}
