package installmanifests

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// The binary renders config/ itself: its rendering of each overlay is
// what the pinned kustomize makes of config/ in the repository, object
// for object. There is no second copy of a manifest to keep in step.
func TestOverlayIsKustomizeBuild(t *testing.T) {
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, cloud := range []string{"cloudscale", "exoscale"} {
		var out, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join("..", "..", "config", "overlays", cloud))
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kustomize build: %v\n%s", err, stderr.String())
		}
		want, err := Decode(out.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		got, err := Overlay(cloud, "machine-api-provider:latest") // config/image's placeholder
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(got) < 10 {
			t.Fatalf("%s: %d objects rendered, kustomize renders %d", cloud, len(got), len(want))
		}
		// The order is kustomize's business (its versions differ in it);
		// the installer's is none.
		byKey := map[string]map[string]any{}
		for _, o := range got {
			byKey[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
		}
		for _, w := range want {
			key := w.GetKind() + "/" + w.GetNamespace() + "/" + w.GetName()
			if g, ok := byKey[key]; !ok {
				t.Errorf("%s: %s is not rendered", cloud, key)
			} else if !reflect.DeepEqual(g, w.Object) {
				t.Errorf("%s: %s differs from kustomize's:\n%v\n%v", cloud, key, g, w.Object)
			}
		}
	}
}

// The image given reaches every container of ours and the deployer's
// PROVIDER_IMAGE, by tag or by digest, and nothing else is an image
// reference.
func TestOverlayImage(t *testing.T) {
	for _, image := range []string{
		"registry.example.com/appuio/machine-api-provider:v1.2.3",
		"ghcr.io/appuio/machine-api-provider@sha256:" + strings.Repeat("ab", 32),
	} {
		objs, err := Overlay("exoscale", image)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, o := range objs {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				m := c.(map[string]any)
				if m["image"] != image {
					t.Errorf("%s %s: container %s has image %v, want %s", o.GetKind(), o.GetName(), m["name"], m["image"], image)
				}
				seen++
				env, _ := m["env"].([]any)
				for _, e := range env {
					if em := e.(map[string]any); em["name"] == "PROVIDER_IMAGE" && em["value"] != image {
						t.Errorf("%s: PROVIDER_IMAGE %v, want %s", o.GetName(), em["value"], image)
					}
				}
			}
		}
		if seen < 2 {
			t.Errorf("%d containers rendered, want the deployer's and the webhooks'", seen)
		}
	}
	for _, bad := range []string{"", "a b", "x@md5:00"} {
		if _, err := Overlay("cloudscale", bad); err == nil {
			t.Errorf("image %q accepted", bad)
		}
	}
}
