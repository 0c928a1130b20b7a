package demo

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// docs/install.md's autoscaling example has the objects test/e2e applies,
// with a cluster's timings and bounds instead of the e2e's 10 s delays and
// 0 to 4 workers: the same kinds, names and target, every field the e2e
// sets (the values of the timings and bounds aside), and the MachineSet it
// names is the workers' (after adopt the infra one comes first by name).
func TestInstallDocShowsWhatE2EApplies(t *testing.T) {
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	i := regexp.MustCompile(`(?m)^## (\d+\. )?Autoscaling( and health checks)?$`).FindStringIndex(section)
	if i == nil {
		t.Fatal("docs/install.md has no section '## <n>. Autoscaling'")
	}
	section = section[i[0]:]
	const open, end = "cat <<YAML | oc apply -f -\n", "\nYAML\n"
	k := strings.Index(section, open)
	j := strings.Index(section, end)
	if k < 0 || j < k {
		t.Fatal("the autoscaling section has no `cat <<YAML | oc apply -f -` block")
	}
	// the doc's MachineSet is the e2e's cloudscale.ch one
	block := strings.ReplaceAll(section[k+len(open):j], "${MACHINESET}", ClusterID+"-worker-rma1")
	var got []*unstructured.Unstructured
	for _, doc := range strings.Split(block, "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		got = append(got, o)
	}
	want := []*unstructured.Unstructured{
		ClusterAutoscaler(Options{ScaleDownUnneeded: 10 * time.Second, ScaleDownDelayAfterAdd: 10 * time.Second}),
		MachineAutoscaler(ClusterID+"-worker-rma1", 0, 4),
	}
	if len(got) != len(want) {
		t.Fatalf("the example has %d objects, want %d", len(got), len(want))
	}
	// The values a cluster sets otherwise than the e2e: the delays, the
	// bounds, and what the e2e leaves to the operator's defaults.
	tuned := map[string]bool{"scaleDown": true, "resourceLimits": true, "maxNodeProvisionTime": true,
		"podPriorityThreshold": true, "logVerbosity": true, "minReplicas": true, "maxReplicas": true}
	for i := range want {
		// Through JSON, as the API server would see both.
		var w, g map[string]any
		for _, c := range []struct {
			from *unstructured.Unstructured
			to   *map[string]any
		}{{want[i], &w}, {got[i], &g}} {
			data, err := yaml.Marshal(c.from.Object)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(data, c.to); err != nil {
				t.Fatal(err)
			}
		}
		ws, _ := w["spec"].(map[string]any)
		gs, _ := g["spec"].(map[string]any)
		for k := range ws {
			if _, ok := gs[k]; !ok {
				t.Errorf("docs/install.md's %s has no spec.%s, which the e2e sets", want[i].GetKind(), k)
			}
		}
		for k := range tuned {
			delete(ws, k)
			delete(gs, k)
		}
		delete(w, "status")
		delete(g, "status")
		if !equality.Semantic.DeepEqual(w, g) {
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			t.Errorf("docs/install.md's %s differs from what the e2e applies (timings and bounds aside);\ndoc:\n%s\ne2e:\n%s", want[i].GetKind(), gy, wy)
		}
	}
	if !regexp.MustCompile(`(?m)^MACHINESET=\$\{INFRA\}-worker-`).MatchString(section) {
		t.Error("the autoscaling example does not name the workers' MachineSet")
	}
}
