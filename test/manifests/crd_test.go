package manifests_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestCRDsMatchOpenShiftAPI: config/crd holds exactly the machine.openshift.io
// CRDs of the openshift/api module version in go.mod, byte for byte, and
// its kustomization lists them. A go.mod bump without `make sync-crds`
// fails here.
func TestCRDsMatchOpenShiftAPI(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "config", "crd")
	var want []string
	for _, src := range testenv.MachineAPICRDs(t) {
		name := filepath.Base(src)
		want = append(want, name)
		upstream, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("config/crd/%s: %v: run `make sync-crds`", name, err)
			continue
		}
		if !bytes.Equal(ours, upstream) {
			t.Errorf("config/crd/%s differs from %s (the openshift/api version in go.mod): run `make sync-crds`, never edit it", name, src)
		}
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".crd.yaml") && !slices.Contains(want, e.Name()) {
			t.Errorf("config/crd/%s is not one of the synced CRDs %v: remove it", e.Name(), want)
		}
	}

	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(k.Resources)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("config/crd/kustomization.yaml lists %v, want %v", k.Resources, want)
	}
}
