package installmanifests

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

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
		got, err := Overlay(cloud)
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
