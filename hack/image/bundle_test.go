package main

import (
	"archive/tar"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBundleImage: the bundle image holds the bundle's manifests/ and
// metadata/ at the root, owned by root, dated created, with the
// annotations as labels; two builds have one digest; a directory that is no
// registry+v1 bundle is refused.
func TestBundleImage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("manifests/x.clusterserviceversion.yaml", "kind: ClusterServiceVersion\n")
	write("metadata/annotations.yaml", "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.package.v1: x\n")
	write("bundle.Dockerfile", "not in the image\n")
	created := time.Unix(1700000000, 0).UTC()

	img, err := BuildBundle(dir, created, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	again, err := BuildBundle(dir, created, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s, %s", d1, d2)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.Labels["operators.operatorframework.io.bundle.package.v1"] != "x" || cf.Config.Labels["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" {
		t.Errorf("labels %v", cf.Config.Labels)
	}
	headers, files := flatten(t, img)
	for _, h := range headers {
		mode := int64(0o644)
		if h.Typeflag == tar.TypeDir {
			mode = 0o755
		}
		if !h.ModTime.Equal(created) || h.Uid != 0 || h.Gid != 0 || h.Mode != mode {
			t.Errorf("%s: mtime %v, owner %d:%d, mode %o; want %o whatever the disk says (0600)", h.Name, h.ModTime, h.Uid, h.Gid, h.Mode, mode)
		}
	}
	names := slices.Sorted(maps.Keys(files))
	if want := []string{"manifests", "manifests/x.clusterserviceversion.yaml", "metadata", "metadata/annotations.yaml"}; !slices.Equal(names, want) {
		t.Errorf("the layer holds %v, want %v", names, want)
	}
	if string(files["manifests/x.clusterserviceversion.yaml"]) != "kind: ClusterServiceVersion\n" || len(files["metadata/annotations.yaml"]) == 0 {
		t.Errorf("files %v", files)
	}
	if _, ok := files["bundle.Dockerfile"]; ok {
		t.Error("the image holds bundle.Dockerfile")
	}

	write("metadata/annotations.yaml", "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: plain+v0\n")
	if _, err := BuildBundle(dir, created, "amd64"); err == nil {
		t.Error("a plain+v0 bundle was built")
	}
}
