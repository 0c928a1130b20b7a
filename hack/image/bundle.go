package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

// BundleDirs are the directories of an OLM registry+v1 bundle that go into
// its image, at the root, as operator-sdk's bundle.Dockerfile copies them.
var BundleDirs = []string{"manifests", "metadata"}

// BuildBundle returns the OLM bundle image of the bundle directory dir
// (make bundle writes it): from scratch, one layer with dir's manifests/ and
// metadata/, and the annotations of metadata/annotations.yaml as labels, as
// OLM's tools expect them on a bundle image. Reproducible like Build: every
// timestamp is created, every file is root's, entries are sorted.
func BuildBundle(dir string, created time.Time, arch string) (v1.Image, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(raw, &meta); err != nil {
		return nil, fmt.Errorf("bundle %s: metadata/annotations.yaml: %w", dir, err)
	}
	if meta.Annotations["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" {
		return nil, fmt.Errorf("bundle %s: metadata/annotations.yaml is not a registry+v1 bundle's", dir)
	}
	var entries []entry
	for _, sub := range BundleDirs {
		e, err := dirEntries(dir, filepath.Join(dir, sub))
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		entries = append(entries, e...)
	}
	l, err := layer(created, entries)
	if err != nil {
		return nil, err
	}
	return assemble(arch, created, []layerOf{{l, "machine-api-provider hack/image --bundle: /manifests, /metadata", "bundle"}},
		v1.Config{Labels: meta.Annotations})
}
