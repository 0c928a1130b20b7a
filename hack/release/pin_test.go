package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPin: pinning config/image names the image by digest in every
// Deployment of every kustomization that is applied, and in the deployer's
// PROVIDER_IMAGE, and keeps the rest of the file; a reference that is not by
// digest is refused, and the file is left alone.
func TestPin(t *testing.T) {
	root := pinnedConfig(t, testImage)
	file := filepath.Join(root, "config", "image", "kustomization.yaml")
	pinned, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "image", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"kind: Component", "# The provider's image, in one place", "config/provider-image-env"} {
		if !strings.Contains(string(pinned), keep) {
			t.Errorf("the pinned file lost %q:\n%s", keep, pinned)
		}
	}
	if strings.Contains(string(pinned), "newTag") {
		t.Errorf("the pinned file keeps a tag:\n%s", pinned)
	}
	if got, want := strings.Count(string(pinned), "\n"), strings.Count(string(orig), "\n"); got != want {
		t.Errorf("the pinned file has %d lines, the original %d", got, want)
	}

	for _, k := range []string{"default", "overlays/cloudscale", "overlays/exoscale"} {
		n, providerImage := 0, 0
		for _, u := range decode(t, kustomize(t, root, k)) {
			if u.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c := c.(map[string]any)
				n++
				if c["image"] != testImage {
					t.Errorf("config/%s: %s runs %v", k, u.GetName(), c["image"])
				}
				env, _, _ := unstructured.NestedSlice(c, "env")
				for _, e := range env {
					if e := e.(map[string]any); e["name"] == "PROVIDER_IMAGE" {
						providerImage++
						if e["value"] != testImage {
							t.Errorf("config/%s: PROVIDER_IMAGE %v", k, e["value"])
						}
					}
				}
			}
		}
		if n == 0 || providerImage != 1 {
			t.Errorf("config/%s: %d containers, %d PROVIDER_IMAGE: want the deployer's", k, n, providerImage)
		}
	}

	for _, bad := range []string{
		"ghcr.io/appuio/machine-api-provider:v1.0.0",
		"ghcr.io/appuio/machine-api-provider@sha256:abc",
		"machine-api-provider@sha256:4d3ea7dbde82459a227f06f211883b3d2571890a6678daaee441d124d127b46c",
		"ghcr.io/appuio/machine-api-provider:v1@sha256:4d3ea7dbde82459a227f06f211883b3d2571890a6678daaee441d124d127b46c",
	} {
		if err := Pin(file, bad); err == nil {
			t.Errorf("Pin(%s) succeeded", bad)
		}
	}
	after, _ := os.ReadFile(file)
	if string(after) != string(pinned) {
		t.Error("a refused pin changed the file")
	}
}
