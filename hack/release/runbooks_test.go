package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPinRunbooks: after the release's pin, every alert of the overlays'
// PrometheusRule links the runbook of the release's tag, which exists in
// docs/runbooks; config/default (no PrometheusRule) still renders; pinning
// again replaces the block; a rule file that no longer has the URLs the
// block replaces fails the render (the patches test them). On main every
// runbook_url pointed at main's page, whatever release ran (finding F19).
func TestPinRunbooks(t *testing.T) {
	const tag = "v1.2.3"
	root := pinnedConfig(t, testImage)
	file := filepath.Join(root, "config", "image", "kustomization.yaml")
	rules := filepath.Join(root, "config", "prometheus", "prometheusrule.yaml")
	for range 2 { // the second replaces the first's block
		if err := PinRunbooks(file, rules, tag); err != nil {
			t.Fatal(err)
		}
	}
	if data, _ := os.ReadFile(file); strings.Count(string(data), runbooksMarker) != 1 {
		t.Errorf("pinned twice, the file has %d blocks:\n%s", strings.Count(string(data), runbooksMarker), data)
	}
	for _, k := range []string{"overlays/cloudscale", "overlays/exoscale"} {
		n := 0
		for _, u := range decode(t, kustomize(t, root, k)) {
			if u.GetKind() != "PrometheusRule" {
				continue
			}
			groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
			for _, g := range groups {
				rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rs {
					url, _, _ := unstructured.NestedString(r.(map[string]any), "annotations", "runbook_url")
					alert, _, _ := unstructured.NestedString(r.(map[string]any), "alert")
					page, ok := strings.CutPrefix(url, "https://github.com/appuio/machine-api-provider/blob/"+tag+"/docs/runbooks/")
					if !ok {
						t.Errorf("config/%s: %s links %q, not the runbook of %s", k, alert, url, tag)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot(t), "docs", "runbooks", page)); err != nil {
						t.Errorf("config/%s: %s links %s: %v", k, alert, page, err)
					}
					n++
				}
			}
		}
		if n < 10 {
			t.Errorf("config/%s: %d alerts link a runbook", k, n)
		}
	}
	kustomize(t, root, "default")

	// A rule file changed since the pin: the patch's test fails the render.
	data, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, []byte(strings.Replace(string(data), "/blob/main/docs/runbooks/MachineAPIProviderCloudErrors.md", "/blob/main/docs/runbooks/Renamed.md", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kustomizeErr(root, "overlays/cloudscale"); err == nil {
		t.Errorf("a changed rule file rendered with the stale pin:\n%s", out)
	}
	if err := PinRunbooks(file, rules, "main branch"); err == nil {
		t.Error("a ref with a space was taken")
	}
}
